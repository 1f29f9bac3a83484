//! Kafka's security protocols (`listener.security.protocol.map` values) and listener names.

use std::fmt;
use std::str::FromStr;

/// How a listener's connections are secured (Kafka's `SecurityProtocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SecurityProtocol {
    /// No encryption, no authentication.
    Plaintext,
    /// TLS; the client is authenticated only with `ssl.client.auth`.
    Ssl,
    /// SASL authentication without encryption.
    SaslPlaintext,
    /// SASL authentication over TLS.
    SaslSsl,
}

/// A name that is not one of the four protocols.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown security protocol '{0}' (expected PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)")]
pub struct UnknownProtocol(pub String);

impl SecurityProtocol {
    /// Every protocol, in Kafka's id order.
    pub const ALL: [SecurityProtocol; 4] = [
        SecurityProtocol::Plaintext,
        SecurityProtocol::Ssl,
        SecurityProtocol::SaslPlaintext,
        SecurityProtocol::SaslSsl,
    ];

    /// The name Kafka uses (`SASL_SSL`).
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// The id on the wire (UpdateMetadata endpoints' `security_protocol`).
    pub fn id(self) -> i16 {
        match self {
            SecurityProtocol::Plaintext => 0,
            SecurityProtocol::Ssl => 1,
            SecurityProtocol::SaslPlaintext => 2,
            SecurityProtocol::SaslSsl => 3,
        }
    }

    /// The protocol with wire id `id`.
    pub fn from_id(id: i16) -> Option<SecurityProtocol> {
        SecurityProtocol::ALL.into_iter().find(|p| p.id() == id)
    }

    /// Whether connections run over TLS.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether clients authenticate with SASL.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SecurityProtocol {
    type Err = UnknownProtocol;

    /// Case-insensitive, as Kafka's `SecurityProtocol.forName`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SecurityProtocol::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownProtocol(s.to_owned()))
    }
}

/// Kafka's default `listener.security.protocol.map`: each protocol's name maps to itself.
pub fn default_protocol_map() -> Vec<(String, SecurityProtocol)> {
    SecurityProtocol::ALL
        .into_iter()
        .map(|p| (p.name().to_owned(), p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids_round_trip() {
        for p in SecurityProtocol::ALL {
            assert_eq!(p.name().parse::<SecurityProtocol>(), Ok(p));
            assert_eq!(SecurityProtocol::from_id(p.id()), Some(p));
        }
        assert_eq!("sasl_ssl".parse(), Ok(SecurityProtocol::SaslSsl));
        assert!("TLS".parse::<SecurityProtocol>().is_err());
        assert!(SecurityProtocol::SaslSsl.uses_tls() && SecurityProtocol::SaslSsl.uses_sasl());
        assert!(!SecurityProtocol::Plaintext.uses_tls());
    }
}
