//! Who is asking, on the admin listener. Without an authorizer (`authorizer.class.name`
//! unset) everyone is `User:ANONYMOUS`, as on a PLAINTEXT Kafka listener. With one, every
//! path but `/v1/health` needs HTTP Basic authentication: the user name and password are
//! checked against the user's SCRAM credentials in `/config/users/<user>` (the ones
//! SASL/SCRAM clients log in with, set with `gregor configs --entity-type users`), and the
//! user becomes the principal that the console's and the scraper's Kafka requests carry into
//! the handlers, so pages and actions are authorized exactly as that user's Kafka client would
//! be. A refusal is a 401 with a `WWW-Authenticate` challenge and a broker log line; it says
//! nothing about which part was wrong.

use std::sync::Arc;

use base64::Engine as _;
use security::scram::ScramMechanism;
use tracing::warn;

use super::{HttpRequest, HttpResponse};
use crate::context::BrokerContext;

/// Whether `ctx`'s broker authorizes requests (an `authorizer.class.name` is set).
pub(crate) fn authorizer_configured(ctx: &BrokerContext) -> bool {
    ctx.config.authorizer.is_some()
}

/// The `(user, password)` of an `Authorization: Basic ...` header.
fn credentials(request: &HttpRequest) -> Option<(String, String)> {
    let value = request.header("authorization")?.trim();
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    (!user.is_empty()).then(|| (user.to_owned(), password.to_owned()))
}

/// Equal without an early exit (the comparison's time says nothing of where they differ).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `password` is `user`'s, by any of the SCRAM credentials stored for the user.
async fn password_matches(ctx: &BrokerContext, user: &str, password: &str) -> Result<bool, String> {
    for mechanism in [ScramMechanism::Sha512, ScramMechanism::Sha256] {
        if let Some(stored) = crate::auth::sasl::scram_credential(ctx, mechanism, user).await? {
            let offered = mechanism.credential(password, &stored.salt, stored.iterations);
            if same(&offered.stored_key, &stored.stored_key) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

fn challenge(message: &str) -> HttpResponse {
    let mut response = HttpResponse::text(401, message);
    response.www_authenticate = Some("Basic realm=\"Gregor\", charset=\"UTF-8\"");
    response
}

/// The principal of `request` on the admin listener of `ctx`'s broker, or the 401 to answer.
pub(crate) async fn principal(
    ctx: &BrokerContext,
    request: &HttpRequest,
    peer: std::net::SocketAddr,
) -> Result<Arc<str>, HttpResponse> {
    if !authorizer_configured(ctx) {
        return Ok(Arc::from(crate::auth::ANONYMOUS));
    }
    let Some((user, password)) = credentials(request) else {
        return Err(challenge(
            "authentication required: log in with a user's SCRAM credentials\n",
        ));
    };
    match password_matches(ctx, &user, &password).await {
        Ok(true) => Ok(Arc::from(user.as_str())),
        Ok(false) => {
            warn!(%peer, user = %user, "admin listener: failed authentication (wrong password or no SCRAM credential)");
            Err(challenge(
                "authentication failed: invalid user name or password\n",
            ))
        }
        Err(err) => {
            warn!(%peer, user = %user, error = %err, "admin listener: credentials could not be read");
            Err(challenge(
                "authentication failed: credentials could not be read; try again\n",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(authorization: Option<&str>) -> HttpRequest {
        HttpRequest {
            method: "GET".into(),
            path: "/".into(),
            query: String::new(),
            headers: authorization
                .map(|a| vec![("authorization".to_owned(), a.to_owned())])
                .unwrap_or_default(),
            body: Vec::new(),
        }
    }

    #[test]
    fn reads_a_basic_header() {
        let encoded = base64::engine::general_purpose::STANDARD.encode("alice:pa:ss");
        assert_eq!(
            credentials(&request(Some(&format!("Basic {encoded}")))),
            Some(("alice".into(), "pa:ss".into()))
        );
        assert_eq!(
            credentials(&request(Some(&format!("basic  {encoded}")))),
            Some(("alice".into(), "pa:ss".into()))
        );
        assert_eq!(credentials(&request(None)), None);
        assert_eq!(credentials(&request(Some("Bearer abc"))), None);
        assert_eq!(credentials(&request(Some("Basic not-base64!"))), None);
        let no_user = base64::engine::general_purpose::STANDARD.encode(":pw");
        assert_eq!(
            credentials(&request(Some(&format!("Basic {no_user}")))),
            None
        );
    }

    #[test]
    fn compares_whole_keys() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
    }
}
