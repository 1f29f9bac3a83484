//! `--command-config FILE`: the admin client properties a kafka-*.sh user passes, parsed into
//! the settings this client can honour.

use std::time::Duration;

use crate::error::ClientError;

/// Client settings read from a properties file. Unset fields keep the client's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandConfig {
    /// `bootstrap.servers` (the command line's `--bootstrap-server` wins over it).
    pub bootstrap_servers: Option<String>,
    /// `client.id`.
    pub client_id: Option<String>,
    /// `request.timeout.ms`.
    pub request_timeout: Option<Duration>,
    /// `socket.connection.setup.timeout.ms`.
    pub connect_timeout: Option<Duration>,
    /// `retries`: how many times a request refused with `NOT_CONTROLLER` is retried.
    pub retries: Option<usize>,
    /// `retry.backoff.ms`.
    pub retry_backoff: Option<Duration>,
    /// SASL credentials (`security.protocol=SASL_PLAINTEXT` with `sasl.mechanism` and
    /// `sasl.jaas.config` or librdkafka's `sasl.username`/`sasl.password`).
    pub sasl: Option<crate::connection::SaslCredentials>,
    /// TLS (`security.protocol=SSL` or `SASL_SSL` with a PEM CA file).
    pub tls: Option<crate::tls::TlsSettings>,
    /// Keys that were understood as Kafka client settings but have no effect here, with a
    /// note for the user (Kafka's AdminClient logs the same for unknown keys).
    pub ignored: Vec<String>,
}

/// Parses the text of a Java-style properties file (`key=value`, `key: value` or `key value`
/// lines, `#`/`!` comments, `\` line continuations) into a [`CommandConfig`].
///
/// `security.protocol=SASL_PLAINTEXT` or `SASL_SSL` is honoured with `sasl.mechanism` (PLAIN,
/// SCRAM-SHA-256, SCRAM-SHA-512; Kafka's default GSSAPI is not supported) and the credentials
/// of `sasl.jaas.config` (`username`/`password` options) or `sasl.username`/`sasl.password`.
/// `SSL` and `SASL_SSL` need a PEM file of CA certificates: `ssl.ca.location` (librdkafka) or
/// `ssl.truststore.location` with `ssl.truststore.type=PEM` (Java); the broker's name is
/// checked unless `ssl.endpoint.identification.algorithm` is empty (or librdkafka's `none`).
/// What this client cannot honour is refused rather than ignored, since silently connecting
/// with less protection than asked would be worse than failing: JKS/PKCS12 stores, inline
/// certificates, and client certificates (mTLS).
pub fn parse_command_config(text: &str) -> Result<CommandConfig, ClientError> {
    let mut config = CommandConfig::default();
    let mut sasl = SaslSettings::default();
    let mut tls = TlsConfig::default();
    let pairs = crate::properties::parse_properties(text)
        .map_err(|e| ClientError::Config(format!("not a valid properties file: {e}")))?;
    for (key, value) in pairs {
        // Kafka's ConfigDef trims a value before it parses it.
        apply(&mut config, &mut sasl, &mut tls, &key, value.trim())?;
    }
    config.sasl = sasl.credentials()?;
    config.tls = tls.settings(&mut config.ignored)?;
    Ok(config)
}

#[derive(Default)]
struct TlsConfig {
    protocol_ssl: bool,
    ca_location: Option<String>,
    truststore_location: Option<String>,
    truststore_type: Option<String>,
    identification: Option<String>,
}

impl TlsConfig {
    fn settings(
        self,
        ignored: &mut Vec<String>,
    ) -> Result<Option<crate::tls::TlsSettings>, ClientError> {
        if !self.protocol_ssl {
            if self.ca_location.is_some() || self.truststore_location.is_some() {
                ignored.push(
                    "The ssl.* settings have no effect: security.protocol is not SSL or SASL_SSL."
                        .to_owned(),
                );
            }
            return Ok(None);
        }
        if let Some(kind) = &self.truststore_type {
            if !kind.eq_ignore_ascii_case("PEM") {
                return Err(ClientError::Config(format!(
                    "ssl.truststore.type={kind} is not supported: gregor's client reads PEM files (ssl.truststore.type=PEM, or ssl.ca.location)"
                )));
            }
        }
        let ca_file = match (self.ca_location, self.truststore_location) {
            (Some(ca), _) => ca,
            (None, Some(store)) if self.truststore_type.is_some() => store,
            (None, Some(_)) => {
                return Err(ClientError::Config(
                    "ssl.truststore.location needs ssl.truststore.type=PEM: gregor's client reads PEM files, not JKS".to_owned(),
                ))
            }
            (None, None) => {
                return Err(ClientError::Config(
                    "SSL needs the CA that signed the broker's certificate: ssl.ca.location=<PEM file> (or ssl.truststore.location with ssl.truststore.type=PEM); gregor's client has no default trust store".to_owned(),
                ))
            }
        };
        let verify_hostname = match self.identification.as_deref().map(str::trim) {
            None => true,
            Some(a) if a.eq_ignore_ascii_case("https") => true,
            Some("") => false,
            Some(a) if a.eq_ignore_ascii_case("none") => false,
            Some(other) => {
                return Err(ClientError::Config(format!(
                    "ssl.endpoint.identification.algorithm={other} is not supported (https, or empty to turn the host name check off)"
                )))
            }
        };
        Ok(Some(crate::tls::TlsSettings {
            verify_hostname,
            ..crate::tls::TlsSettings::with_ca_file(ca_file)
        }))
    }
}

#[derive(Default)]
struct SaslSettings {
    protocol_sasl: bool,
    mechanism: Option<String>,
    username: Option<String>,
    password: Option<String>,
    jaas: Option<(String, String)>,
}

impl SaslSettings {
    fn credentials(self) -> Result<Option<crate::connection::SaslCredentials>, ClientError> {
        let configured = self.mechanism.is_some()
            || self.username.is_some()
            || self.password.is_some()
            || self.jaas.is_some();
        if !self.protocol_sasl {
            if configured {
                return Err(ClientError::Config(
                    "sasl.* settings need security.protocol=SASL_PLAINTEXT or SASL_SSL".to_owned(),
                ));
            }
            return Ok(None);
        }
        let mechanism = self.mechanism.unwrap_or_else(|| "GSSAPI".to_owned());
        if !["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"].contains(&mechanism.as_str()) {
            return Err(ClientError::Config(format!(
                "sasl.mechanism={mechanism} is not supported (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"
            )));
        }
        let (username, password) = match (self.jaas, self.username, self.password) {
            (Some(pair), _, _) => pair,
            (None, Some(u), Some(p)) => (u, p),
            _ => {
                return Err(ClientError::Config(
                    "SASL needs sasl.jaas.config (with username and password) or sasl.username and sasl.password".to_owned(),
                ))
            }
        };
        Ok(Some(crate::connection::SaslCredentials {
            mechanism,
            username,
            password,
        }))
    }
}

fn apply(
    config: &mut CommandConfig,
    sasl: &mut SaslSettings,
    tls: &mut TlsConfig,
    key: &str,
    value: &str,
) -> Result<(), ClientError> {
    let millis = |key: &str| -> Result<Duration, ClientError> {
        value
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| {
                ClientError::Config(format!(
                    "Invalid value {value} for configuration {key}: Not a number of type INT"
                ))
            })
    };
    match key {
        "bootstrap.servers" => config.bootstrap_servers = Some(value.to_string()),
        "client.id" => config.client_id = Some(value.to_string()),
        "request.timeout.ms" => config.request_timeout = Some(millis(key)?),
        "socket.connection.setup.timeout.ms" => config.connect_timeout = Some(millis(key)?),
        "retry.backoff.ms" => config.retry_backoff = Some(millis(key)?),
        "retries" => {
            config.retries = Some(value.parse().map_err(|_| {
                ClientError::Config(format!(
                    "Invalid value {value} for configuration retries: Not a number of type INT"
                ))
            })?)
        }
        "security.protocol" if value.eq_ignore_ascii_case("PLAINTEXT") => {}
        "security.protocol" if value.eq_ignore_ascii_case("SASL_PLAINTEXT") => {
            sasl.protocol_sasl = true
        }
        "security.protocol" if value.eq_ignore_ascii_case("SSL") => tls.protocol_ssl = true,
        "security.protocol" if value.eq_ignore_ascii_case("SASL_SSL") => {
            sasl.protocol_sasl = true;
            tls.protocol_ssl = true;
        }
        "security.protocol" => {
            return Err(ClientError::Config(format!(
            "security.protocol={value} is not supported: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"
        )))
        }
        "sasl.mechanism" => sasl.mechanism = Some(value.to_string()),
        "sasl.username" => sasl.username = Some(value.to_string()),
        "sasl.password" => sasl.password = Some(value.to_string()),
        "sasl.jaas.config" => {
            let entry = security::jaas::parse(value).map_err(|e| {
                ClientError::Config(format!("Invalid value for configuration sasl.jaas.config: {e}"))
            })?;
            let (u, p) = entry.credentials().ok_or_else(|| {
                ClientError::Config(
                    "sasl.jaas.config needs username=\"...\" and password=\"...\" options".to_owned(),
                )
            })?;
            sasl.jaas = Some((u.to_owned(), p.to_owned()));
        }
        "ssl.ca.location" => tls.ca_location = Some(value.to_string()),
        "ssl.truststore.location" => tls.truststore_location = Some(value.to_string()),
        "ssl.truststore.type" => tls.truststore_type = Some(value.to_string()),
        "ssl.endpoint.identification.algorithm" => tls.identification = Some(value.to_string()),
        "ssl.truststore.password" => config.ignored.push(
            "ssl.truststore.password has no effect: a PEM truststore has no password.".to_owned(),
        ),
        "ssl.protocol" | "ssl.enabled.protocols" | "ssl.cipher.suites" => config.ignored.push(
            format!("{key} has no effect: gregor's client negotiates TLS 1.2 or 1.3 with rustls' safe defaults."),
        ),
        _ if key.starts_with("ssl.keystore.")
            || key.starts_with("ssl.certificate.")
            || key.starts_with("ssl.key.") =>
        {
            return Err(ClientError::Config(format!(
                "{key} is not supported yet: gregor's client does not offer a client certificate (mTLS)"
            )))
        }
        _ if key.starts_with("ssl.") => {
            return Err(ClientError::Config(format!(
                "{key} is not supported yet by gregor's client (it honours ssl.ca.location, ssl.truststore.location/type=PEM and ssl.endpoint.identification.algorithm)"
            )))
        }
        _ => config.ignored.push(format!(
            "The configuration '{key}' was supplied but isn't a known config."
        )),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_settings_it_honours() {
        let config = parse_command_config(
            "# admin settings\nrequest.timeout.ms=1500\nclient.id : ops-tool\n\
             bootstrap.servers localhost:9092\nretries=3\nretry.backoff.ms=\\\n  250\n",
        )
        .unwrap();
        assert_eq!(config.request_timeout, Some(Duration::from_millis(1500)));
        assert_eq!(config.client_id.as_deref(), Some("ops-tool"));
        assert_eq!(config.bootstrap_servers.as_deref(), Some("localhost:9092"));
        assert_eq!(config.retries, Some(3));
        assert_eq!(config.retry_backoff, Some(Duration::from_millis(250)));
        assert!(config.ignored.is_empty());
    }

    #[test]
    fn reads_tls_settings_and_refuses_what_it_cannot_honour() {
        let rdkafka =
            parse_command_config("security.protocol=SSL\nssl.ca.location=/etc/ca.pem\n").unwrap();
        assert_eq!(
            rdkafka.tls,
            Some(crate::tls::TlsSettings::with_ca_file("/etc/ca.pem"))
        );
        assert!(rdkafka.sasl.is_none());
        let java = parse_command_config(
            "security.protocol=SASL_SSL\nssl.truststore.type=PEM\nssl.truststore.location=/etc/ts.pem\n\
             ssl.endpoint.identification.algorithm=\nsasl.mechanism=PLAIN\nsasl.username=a\nsasl.password=b\n",
        )
        .unwrap();
        assert_eq!(
            java.tls,
            Some(crate::tls::TlsSettings {
                verify_hostname: false,
                ..crate::tls::TlsSettings::with_ca_file("/etc/ts.pem")
            })
        );
        assert_eq!(java.sasl.unwrap().username, "a");
        for (text, message) in [
            ("security.protocol=SSL", "ssl.ca.location=<PEM file>"),
            (
                "security.protocol=SSL\nssl.truststore.location=/etc/ts.jks",
                "not JKS",
            ),
            (
                "security.protocol=SSL\nssl.truststore.type=JKS\nssl.truststore.location=/etc/ts.jks",
                "ssl.truststore.type=JKS is not supported",
            ),
            (
                "security.protocol=SSL\nssl.ca.location=/ca\nssl.keystore.location=/k",
                "mTLS",
            ),
            (
                "security.protocol=SSL\nssl.ca.location=/ca\nssl.endpoint.identification.algorithm=dns",
                "not supported",
            ),
            ("security.protocol=SSL\nssl.truststore.certificates=x", "not supported yet"),
            ("security.protocol=TLS", "not supported"),
        ] {
            let err = parse_command_config(text).unwrap_err().to_string();
            assert!(err.contains(message), "{text}: {err}");
        }
        let plain =
            parse_command_config("security.protocol=PLAINTEXT\nssl.ca.location=/ca").unwrap();
        assert!(plain.tls.is_none());
        assert_eq!(plain.ignored.len(), 1);
    }

    #[test]
    fn reads_sasl_credentials_as_java_and_librdkafka_clients_write_them() {
        let java = parse_command_config(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username=\"admin\" password=\"s3cret\";\n",
        )
        .unwrap();
        let sasl = java.sasl.unwrap();
        assert_eq!(
            (
                sasl.mechanism.as_str(),
                sasl.username.as_str(),
                sasl.password.as_str()
            ),
            ("SCRAM-SHA-512", "admin", "s3cret")
        );
        let rdkafka = parse_command_config(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=alice\nsasl.password=pw\n",
        )
        .unwrap();
        assert_eq!(rdkafka.sasl.unwrap().username, "alice");
        for (text, message) in [
            (
                "sasl.mechanism=PLAIN",
                "need security.protocol=SASL_PLAINTEXT or SASL_SSL",
            ),
            (
                "security.protocol=SASL_PLAINTEXT\nsasl.username=a\nsasl.password=b",
                "GSSAPI is not supported",
            ),
            (
                "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN",
                "sasl.username and sasl.password",
            ),
        ] {
            let err = parse_command_config(text).unwrap_err().to_string();
            assert!(err.contains(message), "{text}: {err}");
        }
    }

    #[test]
    fn bad_numbers_and_unknown_keys() {
        let err = parse_command_config("request.timeout.ms=soon").unwrap_err();
        assert_eq!(
            err.to_string(),
            "Invalid value soon for configuration request.timeout.ms: Not a number of type INT"
        );
        let config = parse_command_config("linger.ms=5").unwrap();
        assert_eq!(
            config.ignored,
            ["The configuration 'linger.ms' was supplied but isn't a known config."]
        );
    }
}
