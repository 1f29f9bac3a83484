//! SASL on SASL_PLAINTEXT and SASL_SSL listeners (SaslHandshake v0-1, SaslAuthenticate v0-2)
//! with the mechanisms PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, as Kafka's broker offers them:
//!
//! - `sasl.enabled.mechanisms` (or `listener.name.<l>.sasl.enabled.mechanisms`): which ones
//!   the listener offers. Kafka's default, GSSAPI, is not supported, so the key is required.
//! - PLAIN checks the `user_<name>="<password>"` options of the listener's
//!   `listener.name.<l>.plain.sasl.jaas.config` (Kafka's `PlainLoginModule` line; Gregor also
//!   reads a broker-wide `sasl.jaas.config`).
//! - SCRAM checks the credential in `/config/users/<user>` (Kafka's format, written by
//!   AlterUserScramCredentials or `gregor configs`), read from the store at each
//!   authentication, so a changed or deleted credential holds for the next connection on
//!   every broker.
//! - `connection.failed.authentication.delay.ms` (KIP-306, default 100): how long a refused
//!   connection stays open (its answer sent) before it closes.
//! - `connections.max.reauth.ms` (KIP-152, per listener and mechanism as in Kafka): the
//!   session lifetime told to the client; the connection closes once it has passed unless the
//!   client authenticated again.
//!
//! The exchange itself runs in [`crate::connection`]; this module keeps the settings and
//! steps one mechanism.

use std::collections::BTreeMap;
use std::time::Duration;

use rand::distr::{Alphanumeric, SampleString as _};
use security::scram::{ScramCredential, ScramMechanism, ScramServer, ServerStep};
use security::{jaas, plain};

use crate::auth::tls::listener_prop;
use crate::config::ConfigError;
use crate::context::BrokerContext;

/// A mechanism a listener can offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mechanism {
    /// `PLAIN`.
    Plain,
    /// `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    Scram(ScramMechanism),
}

impl Mechanism {
    /// The SASL name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Scram(m) => m.name(),
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Mechanism> {
        match name {
            "PLAIN" => Some(Mechanism::Plain),
            other => ScramMechanism::from_name(other).map(Mechanism::Scram),
        }
    }
}

/// The JAAS line for `mechanism` on `listener`: `listener.name.<l>.<mechanism>.sasl.jaas.config`
/// (Kafka's broker-side key), else `sasl.jaas.config`. Returns (key, value).
pub(crate) fn jaas_config<'a>(
    props: &'a BTreeMap<String, String>,
    listener: &str,
    mechanism: &str,
) -> Option<(String, &'a str)> {
    let key = format!(
        "listener.name.{}.{}.sasl.jaas.config",
        listener.to_ascii_lowercase(),
        mechanism.to_ascii_lowercase()
    );
    if let Some(v) = props.get(&key) {
        return Some((key, v.as_str()));
    }
    props
        .get("sasl.jaas.config")
        .map(|v| ("sasl.jaas.config".to_owned(), v.as_str()))
}

/// One SASL listener's settings, read at start.
#[derive(Debug)]
pub(crate) struct SaslConfig {
    /// The offered mechanisms, in `sasl.enabled.mechanisms` order.
    pub mechanisms: Vec<Mechanism>,
    plain_users: BTreeMap<String, String>,
    /// `connections.max.reauth.ms` per mechanism (`None`: sessions do not expire).
    reauth: BTreeMap<&'static str, Duration>,
    /// `connection.failed.authentication.delay.ms` (Kafka's default 100).
    pub failed_authentication_delay: Duration,
}

impl SaslConfig {
    /// Reads the listener's `sasl.*` settings.
    pub(crate) fn from_config(
        props: &BTreeMap<String, String>,
        listener: &str,
    ) -> Result<SaslConfig, ConfigError> {
        let bad = |key: &str, value: &str, reason: &str| ConfigError::InvalidValue {
            key: key.to_owned(),
            value: value.to_owned(),
            reason: format!("listener {listener}: {reason}"),
        };
        let key = "sasl.enabled.mechanisms";
        let Some(enabled) = listener_prop(props, listener, key) else {
            return Err(bad(
                key,
                "",
                "a SASL listener needs sasl.enabled.mechanisms (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; Kafka's default GSSAPI is not supported)",
            ));
        };
        let mut mechanisms = Vec::new();
        for name in enabled.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let mechanism = Mechanism::from_name(name).ok_or_else(|| {
                bad(
                    key,
                    enabled,
                    &format!(
                        "mechanism {name} is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"
                    ),
                )
            })?;
            if !mechanisms.contains(&mechanism) {
                mechanisms.push(mechanism);
            }
        }
        if mechanisms.is_empty() {
            return Err(bad(key, enabled, "no mechanism enabled"));
        }
        let mut plain_users = BTreeMap::new();
        if mechanisms.contains(&Mechanism::Plain) {
            let Some((jaas_key, text)) = jaas_config(props, listener, "PLAIN") else {
                return Err(bad(
                    &format!("listener.name.{}.plain.sasl.jaas.config", listener.to_ascii_lowercase()),
                    "",
                    "PLAIN needs its users: a PlainLoginModule line with user_<name>=\"<password>\" options",
                ));
            };
            let entry =
                jaas::parse(text).map_err(|e| bad(&jaas_key, "(hidden)", &e.to_string()))?;
            if !entry.module.ends_with("PlainLoginModule") {
                return Err(bad(
                    &jaas_key,
                    "(hidden)",
                    &format!(
                        "PLAIN needs org.apache.kafka.common.security.plain.PlainLoginModule, not {}",
                        entry.module
                    ),
                ));
            }
            plain_users = entry.plain_users();
            if plain_users.is_empty() {
                return Err(bad(
                    &jaas_key,
                    "(hidden)",
                    "no user_<name>=\"<password>\" option: no user could log in with PLAIN",
                ));
            }
        }
        let mut reauth = BTreeMap::new();
        for mechanism in &mechanisms {
            let key = "connections.max.reauth.ms";
            let per_mechanism = format!("{}.{key}", mechanism.name().to_ascii_lowercase());
            let value = listener_prop(props, listener, &per_mechanism)
                .or_else(|| listener_prop(props, listener, key));
            if let Some(value) = value {
                let ms: u64 = value
                    .trim()
                    .parse()
                    .map_err(|_| bad(key, value, "expected milliseconds (0: never)"))?;
                if ms > 0 {
                    reauth.insert(mechanism.name(), Duration::from_millis(ms));
                }
            }
        }
        let key = "connection.failed.authentication.delay.ms";
        let failed_authentication_delay = match listener_prop(props, listener, key) {
            None => Duration::from_millis(100),
            Some(value) => Duration::from_millis(
                value
                    .trim()
                    .parse()
                    .map_err(|_| bad(key, value, "expected milliseconds"))?,
            ),
        };
        Ok(SaslConfig {
            mechanisms,
            plain_users,
            reauth,
            failed_authentication_delay,
        })
    }

    /// The offered mechanisms' names (the SaslHandshake response's list).
    pub(crate) fn mechanism_names(&self) -> Vec<&'static str> {
        self.mechanisms.iter().map(|m| m.name()).collect()
    }

    /// The offered mechanism called `name`.
    pub(crate) fn mechanism(&self, name: &str) -> Option<Mechanism> {
        Mechanism::from_name(name).filter(|m| self.mechanisms.contains(m))
    }

    /// How long a session of `mechanism` lasts before the client must authenticate again.
    pub(crate) fn session_lifetime(&self, mechanism: Mechanism) -> Option<Duration> {
        self.reauth.get(mechanism.name()).copied()
    }
}

/// One authentication in progress on a connection.
#[derive(Debug)]
pub(crate) enum Exchange {
    /// PLAIN: one message.
    Plain,
    /// SCRAM: two rounds.
    Scram(ScramServer),
}

/// What to answer a client's token with.
#[derive(Debug)]
pub(crate) enum Step {
    /// Send this challenge and wait for the next token.
    Challenge(Vec<u8>),
    /// Send this (possibly empty) last message: `user` is authenticated.
    Done {
        /// The last server message.
        message: Vec<u8>,
        /// The authenticated user name.
        user: String,
    },
}

/// A failed exchange: what the client is told (Kafka's text) and what the broker logs.
#[derive(Debug)]
pub(crate) struct Failure {
    /// SaslAuthenticate's `error_message`.
    pub client: String,
    /// The reason, for the broker's log.
    pub detail: String,
}

impl Exchange {
    /// A new exchange of `mechanism`.
    pub(crate) fn new(mechanism: Mechanism) -> Exchange {
        match mechanism {
            Mechanism::Plain => Exchange::Plain,
            Mechanism::Scram(m) => Exchange::Scram(ScramServer::new(m)),
        }
    }

    /// The exchange's mechanism.
    pub(crate) fn mechanism(&self) -> Mechanism {
        match self {
            Exchange::Plain => Mechanism::Plain,
            Exchange::Scram(server) => Mechanism::Scram(server.mechanism()),
        }
    }

    /// Takes the client's next token.
    pub(crate) async fn step(
        &mut self,
        ctx: &BrokerContext,
        config: &SaslConfig,
        token: &[u8],
    ) -> Result<Step, Failure> {
        match self {
            Exchange::Plain => {
                // PlainSaslServer's messages go to the client as they are.
                let user = plain::authenticate(token, |user| config.plain_users.get(user).cloned())
                    .map_err(|e| Failure {
                        client: e.to_string(),
                        detail: e.to_string(),
                    })?;
                Ok(Step::Done {
                    message: Vec::new(),
                    user,
                })
            }
            Exchange::Scram(server) => {
                let mechanism = server.mechanism();
                // The credential is only needed for the first message (it names the user).
                let credential = match security::scram::client_first_username(token) {
                    Some(user) => scram_credential(ctx, mechanism, &user)
                        .await
                        .map_err(|detail| Failure {
                            client: format!(
                                "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
                                mechanism.name()
                            ),
                            detail,
                        })?,
                    None => None,
                };
                let nonce = Alphanumeric.sample_string(&mut rand::rng(), 32);
                match server
                    .step(token, |_| credential, &nonce)
                    .map_err(|e| Failure {
                        client: e.client_message(mechanism),
                        detail: e.to_string(),
                    })? {
                    ServerStep::Continue(challenge) => Ok(Step::Challenge(challenge)),
                    ServerStep::Done { message, username } => Ok(Step::Done {
                        message,
                        user: username,
                    }),
                }
            }
        }
    }
}

/// `user`'s stored credential for `mechanism`; `None` when it has none. A store failure is
/// an authentication failure (the client may retry), never a pass.
pub(crate) async fn scram_credential(
    ctx: &BrokerContext,
    mechanism: ScramMechanism,
    user: &str,
) -> Result<Option<ScramCredential>, String> {
    let config = ctx
        .zk()
        .get_entity_config(&znodes::paths::user_entity_path(user))
        .await
        .map_err(|e| format!("Authentication failed: Credentials could not be obtained ({e})"))?;
    match config.get(mechanism.name()) {
        None => Ok(None),
        Some(text) => ScramCredential::from_config_string(text)
            .map(Some)
            .map_err(|e| {
                format!(
                    "the stored {} credential of {user} is unreadable: {e}",
                    mechanism.name()
                )
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn reads_kafkas_listener_keys() {
        let p = props(&[
            (
                "listener.name.sasl.sasl.enabled.mechanisms",
                "PLAIN, SCRAM-SHA-512",
            ),
            (
                "listener.name.sasl.plain.sasl.jaas.config",
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a-secret";"#,
            ),
            (
                "listener.name.sasl.scram-sha-512.connections.max.reauth.ms",
                "60000",
            ),
        ]);
        let c = SaslConfig::from_config(&p, "SASL").unwrap();
        assert_eq!(c.mechanism_names(), ["PLAIN", "SCRAM-SHA-512"]);
        assert_eq!(c.plain_users["alice"], "a-secret");
        assert_eq!(c.mechanism("SCRAM-SHA-256"), None);
        assert_eq!(
            c.session_lifetime(Mechanism::Scram(ScramMechanism::Sha512)),
            Some(Duration::from_secs(60))
        );
        assert_eq!(c.session_lifetime(Mechanism::Plain), None);
    }

    #[test]
    fn refuses_what_it_cannot_serve() {
        for (p, message) in [
            (props(&[]), "needs sasl.enabled.mechanisms"),
            (props(&[("sasl.enabled.mechanisms", "GSSAPI")]), "GSSAPI is not supported"),
            (props(&[("sasl.enabled.mechanisms", "PLAIN")]), "PLAIN needs its users"),
            (
                props(&[
                    ("sasl.enabled.mechanisms", "PLAIN"),
                    ("sasl.jaas.config", "org.apache.kafka.common.security.plain.PlainLoginModule required username=a password=b;"),
                ]),
                "no user_<name>",
            ),
            (
                props(&[
                    ("sasl.enabled.mechanisms", "PLAIN"),
                    ("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required user_a=b;"),
                ]),
                "needs org.apache.kafka.common.security.plain.PlainLoginModule",
            ),
        ] {
            let err = SaslConfig::from_config(&p, "SASL").unwrap_err().to_string();
            assert!(err.contains(message), "{err}");
        }
    }
}
