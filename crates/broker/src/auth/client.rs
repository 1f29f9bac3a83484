//! The broker's own side of its connections to other brokers (replica fetchers, the
//! controller's channel, AlterPartition, controlled shutdown, forwarded auto-creation), as
//! Kafka 2.8's `ChannelBuilders.clientChannelBuilder` with `JaasContext.Type.SERVER` builds it:
//!
//! - TLS (SSL, SASL_SSL): trust the listener's truststore (`ssl.truststore.location` or
//!   `ssl.truststore.certificates`, PEM), present the listener's keystore when the peer asks
//!   for a client certificate (mTLS listeners), check the peer's host name unless
//!   `ssl.endpoint.identification.algorithm` is empty. All `listener.name.<l>.`-prefixable.
//! - SASL (SASL_PLAINTEXT, SASL_SSL): the mechanism is `sasl.mechanism.inter.broker.protocol`
//!   (Kafka's default GSSAPI is refused: Gregor has no Kerberos), which the listener must
//!   enable; the broker logs in with the `username` and `password` options of the listener's
//!   JAAS line for that mechanism (`listener.name.<l>.<mechanism>.sasl.jaas.config`, else
//!   Gregor's broker-wide `sasl.jaas.config`), as Kafka's PlainLoginModule/ScramLoginModule
//!   do.
//!
//! Everything is checked at start, so a broker that could not reach its peers refuses to
//! start with a message naming the key.

use std::collections::BTreeMap;
use std::path::PathBuf;

use client::{PemSource, SaslCredentials, Security, TlsSettings};
use security::jaas;

use crate::auth::sasl::{jaas_config, Mechanism};
use crate::auth::tls::listener_prop;
use crate::config::{ConfigError, Listener};

/// Kafka's `sasl.mechanism.inter.broker.protocol` default.
const DEFAULT_MECHANISM: &str = "GSSAPI";

/// How this broker connects to `listener` of another broker (`role` names why, for the
/// messages: "inter-broker", "control-plane").
pub(crate) fn client_security(
    props: &BTreeMap<String, String>,
    listener: &Listener,
    role: &str,
) -> Result<Security, ConfigError> {
    let name = listener.name.as_str();
    let protocol = listener.protocol;
    let bad = |key: &str, value: &str, reason: &str| ConfigError::InvalidValue {
        key: key.to_owned(),
        value: value.to_owned(),
        reason: format!("listener {name} ({protocol}) is the {role} listener: {reason}"),
    };
    let tls = if protocol.uses_tls() {
        Some(tls_settings(props, name, &bad)?)
    } else {
        None
    };
    let sasl = if protocol.uses_sasl() {
        Some(sasl_login(props, name, &bad)?)
    } else {
        None
    };
    Ok(Security { tls, sasl })
}

fn tls_settings(
    props: &BTreeMap<String, String>,
    listener: &str,
    bad: &dyn Fn(&str, &str, &str) -> ConfigError,
) -> Result<TlsSettings, ConfigError> {
    let get = |key: &str| listener_prop(props, listener, key);
    if let Some(kind) = get("ssl.truststore.type") {
        if !kind.eq_ignore_ascii_case("PEM") {
            return Err(bad(
                "ssl.truststore.type",
                kind,
                "only PEM truststores are supported",
            ));
        }
    }
    let trust = match (
        get("ssl.truststore.location"),
        get("ssl.truststore.certificates"),
    ) {
        (Some(path), _) => PemSource::File(PathBuf::from(path)),
        (None, Some(text)) => PemSource::Text(text.to_owned()),
        (None, None) => {
            return Err(bad(
                "ssl.truststore.location",
                "",
                "the broker's own TLS connections to the other brokers need the CA that signed their certificates, in ssl.truststore.location or ssl.truststore.certificates (PEM); Gregor has no default trust store",
            ))
        }
    };
    let identity = match (
        get("ssl.keystore.location"),
        get("ssl.keystore.certificate.chain"),
        get("ssl.keystore.key"),
    ) {
        (Some(path), _, _) => Some(PemSource::File(PathBuf::from(path))),
        (None, Some(chain), Some(key)) => Some(PemSource::Text(format!("{chain}\n{key}"))),
        _ => None,
    };
    let key = "ssl.endpoint.identification.algorithm";
    let verify_hostname = match get(key).map(str::trim) {
        None => true,
        Some(a) if a.eq_ignore_ascii_case("https") => true,
        Some("") => false,
        Some(other) => {
            return Err(bad(
                key,
                other,
                "expected https (check the peer's host name, the default) or empty (do not)",
            ))
        }
    };
    let settings = TlsSettings {
        trust,
        verify_hostname,
        identity,
    };
    settings.check().map_err(|e| {
        bad(
            "ssl.truststore.location",
            get("ssl.truststore.location").unwrap_or("(inline)"),
            &e.to_string(),
        )
    })?;
    Ok(settings)
}

fn sasl_login(
    props: &BTreeMap<String, String>,
    listener: &str,
    bad: &dyn Fn(&str, &str, &str) -> ConfigError,
) -> Result<SaslCredentials, ConfigError> {
    let key = "sasl.mechanism.inter.broker.protocol";
    let mechanism = props
        .get(key)
        .map(|m| m.trim())
        .unwrap_or(DEFAULT_MECHANISM);
    let Some(parsed) = Mechanism::from_name(mechanism) else {
        return Err(bad(
            key,
            mechanism,
            &format!(
                "brokers authenticate to each other with {key}, and {mechanism} is not supported{} (set {key} to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)",
                if props.contains_key(key) { "" } else { " (Kafka's default; Gregor has no Kerberos)" }
            ),
        ));
    };
    let enabled = listener_prop(props, listener, "sasl.enabled.mechanisms").unwrap_or("");
    if !enabled.split(',').map(str::trim).any(|m| m == mechanism) {
        return Err(bad(
            key,
            mechanism,
            "sasl.mechanism.inter.broker.protocol must be included in sasl.enabled.mechanisms when SASL is used for inter-broker communication",
        ));
    }
    let jaas_key = format!(
        "listener.name.{}.{}.sasl.jaas.config",
        listener.to_ascii_lowercase(),
        mechanism.to_ascii_lowercase()
    );
    let module = match parsed {
        Mechanism::Plain => "org.apache.kafka.common.security.plain.PlainLoginModule",
        Mechanism::Scram(_) => "org.apache.kafka.common.security.scram.ScramLoginModule",
    };
    let need = format!(
        "the broker's own login for {mechanism}: a JAAS line `{module} required username=\"<broker user>\" password=\"<its password>\";`"
    );
    let Some((found_key, text)) = jaas_config(props, listener, mechanism) else {
        return Err(bad(&jaas_key, "", &need));
    };
    let entry = jaas::parse(text).map_err(|e| bad(&found_key, "(hidden)", &e.to_string()))?;
    let Some((username, password)) = entry.credentials() else {
        return Err(bad(
            &found_key,
            "(hidden)",
            &format!("no username and password options: {need}"),
        ));
    };
    Ok(SaslCredentials {
        mechanism: parsed.name().to_owned(),
        username: username.to_owned(),
        password: password.to_owned(),
    })
}
