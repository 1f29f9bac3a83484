//! SASL PLAIN (RFC 4616) as Kafka's `PlainSaslServer` checks it, and the client's message.

/// Why a PLAIN exchange failed; the messages are Kafka's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlainError {
    /// Not `[authzid] NUL authcid NUL passwd`.
    #[error("Invalid SASL/PLAIN response: expected 3 tokens, got {0}")]
    Malformed(usize),
    /// Empty user name.
    #[error("Authentication failed: username not specified")]
    NoUsername,
    /// Empty password.
    #[error("Authentication failed: password not specified")]
    NoPassword,
    /// An authorization id other than the user.
    #[error("Authentication failed: Client requested an authorization id that is different from username")]
    AuthorizationId,
    /// Unknown user or wrong password.
    #[error("Authentication failed: Invalid username or password")]
    InvalidCredentials,
}

/// Checks one PLAIN response against `password_of` (the configured users); returns the user.
pub fn authenticate(
    response: &[u8],
    password_of: impl FnOnce(&str) -> Option<String>,
) -> Result<String, PlainError> {
    // Kafka splits at most four tokens off.
    let tokens: Vec<&[u8]> = response.splitn(4, |b| *b == 0).collect();
    if tokens.len() != 3 {
        return Err(PlainError::Malformed(tokens.len()));
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let (authzid, username, password) = (text(tokens[0]), text(tokens[1]), tokens[2]);
    if username.is_empty() {
        return Err(PlainError::NoUsername);
    }
    if password.is_empty() {
        return Err(PlainError::NoPassword);
    }
    // Kafka's order: the password first, then the authorization id.
    match password_of(&username) {
        Some(expected) if constant_time_eq(expected.as_bytes(), password) => {}
        _ => return Err(PlainError::InvalidCredentials),
    }
    if !authzid.is_empty() && authzid != username {
        return Err(PlainError::AuthorizationId);
    }
    Ok(username)
}

/// The client's PLAIN message (no authorization id).
pub fn client_message(username: &str, password: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(username.len() + password.len() + 2);
    out.push(0);
    out.extend_from_slice(username.as_bytes());
    out.push(0);
    out.extend_from_slice(password.as_bytes());
    out
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq as _;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users(name: &str) -> Option<String> {
        (name == "alice").then(|| "alice-secret".to_owned())
    }

    #[test]
    fn checks_like_kafka() {
        assert_eq!(
            authenticate(&client_message("alice", "alice-secret"), users),
            Ok("alice".into())
        );
        assert_eq!(
            authenticate(b"alice\0alice\0alice-secret", users),
            Ok("alice".into())
        );
        for (message, err) in [
            (
                client_message("alice", "nope"),
                PlainError::InvalidCredentials,
            ),
            (
                client_message("bob", "alice-secret"),
                PlainError::InvalidCredentials,
            ),
            (client_message("", "x"), PlainError::NoUsername),
            (client_message("alice", ""), PlainError::NoPassword),
            (
                b"bob\0alice\0alice-secret".to_vec(),
                PlainError::AuthorizationId,
            ),
            (b"bob\0alice\0nope".to_vec(), PlainError::InvalidCredentials),
            (b"a\0b\0c\0d".to_vec(), PlainError::Malformed(4)),
            (b"a\0b\0c\0d\0e".to_vec(), PlainError::Malformed(4)),
            (b"alice".to_vec(), PlainError::Malformed(1)),
        ] {
            assert_eq!(authenticate(&message, users), Err(err));
        }
    }
}
