//! The crate's one error enum.

use std::io;
use std::time::Duration;

use kafka_protocol::messages::ApiKey;

/// Everything that can go wrong sending a request or running an admin operation.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The socket failed: connection refused, reset, or closed by the peer.
    #[error("I/O error talking to {addr}: {source}")]
    Io {
        /// The peer's `host:port`.
        addr: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// No answer within the configured time (connect or request).
    #[error("timed out after {}ms waiting for {what} from {addr}", after.as_millis())]
    Timeout {
        /// The peer's `host:port`.
        addr: String,
        /// What was being waited for, e.g. "connection" or "CreateTopics response".
        what: String,
        /// How long we waited.
        after: Duration,
    },
    /// The request cannot be sent at any version both this client and the broker support.
    #[error(
        "{api:?} is not supported at a version both sides know: client supports {client}, broker {}",
        broker.map(|(min, max)| format!("supports {min}..{max}")).unwrap_or_else(|| "does not support it".to_string())
    )]
    UnsupportedVersion {
        /// The API that could not be sent.
        api: ApiKey,
        /// The versions this client can send (or the one version that was forced), as "min..max".
        client: String,
        /// The broker's advertised range, `None` if it does not advertise the API at all.
        broker: Option<(i16, i16)>,
    },
    /// A response (or frame) could not be decoded.
    #[error("could not decode {api:?} v{version} response from {addr}: {message}")]
    Decode {
        /// The API of the response.
        api: ApiKey,
        /// The version it was decoded at.
        version: i16,
        /// The peer's `host:port`.
        addr: String,
        /// The decoder's complaint.
        message: String,
    },
    /// The peer broke the protocol (wrong correlation id, oversized frame) or a request could
    /// not be encoded.
    #[error("protocol error with {addr}: {message}")]
    Protocol {
        /// The peer's `host:port`.
        addr: String,
        /// What went wrong.
        message: String,
    },
    /// The broker answered with a Kafka error code.
    #[error("{message}")]
    Server {
        /// The Kafka error code.
        code: i16,
        /// The broker's error message, or the code's standard description when it sent none.
        message: String,
    },
    /// Authentication failed on connecting: the TLS handshake (a certificate refused by
    /// either side) or the SASL exchange (SASL_AUTHENTICATION_FAILED, a mechanism the broker
    /// does not offer, a server proof that does not verify).
    #[error("authentication with {addr} failed: {message}")]
    Authentication {
        /// The peer's `host:port`.
        addr: String,
        /// The Kafka error code the broker answered, if it answered one.
        code: Option<i16>,
        /// What the broker (or the TLS layer) said.
        message: String,
    },
    /// A client setting (`--command-config`, bootstrap list) is invalid or unsupported.
    #[error("{0}")]
    Config(String),
}

impl ClientError {
    /// Builds a [`ClientError::Server`] from a response's error code and optional message,
    /// falling back to the code's standard description (as Kafka's exceptions do).
    pub fn server(code: i16, message: Option<&str>) -> ClientError {
        let message = match message {
            Some(message) if !message.is_empty() => message.to_string(),
            _ => error_message(code).to_string(),
        };
        ClientError::Server { code, message }
    }

    /// The Kafka error code, when the broker sent one.
    pub fn code(&self) -> Option<i16> {
        match self {
            ClientError::Server { code, .. } => Some(*code),
            ClientError::Authentication { code, .. } => *code,
            _ => None,
        }
    }

    /// Whether this is an authentication failure ([`ClientError::Authentication`]): retrying
    /// with the same credentials fails the same way until someone fixes them.
    pub fn is_authentication(&self) -> bool {
        matches!(self, ClientError::Authentication { .. })
    }
}

/// The standard description of a Kafka error code (the default message of Kafka's exception
/// for that code), for responses that carry no message of their own.
pub fn error_message(code: i16) -> &'static str {
    match code {
        -1 => "The server experienced an unexpected error when processing the request.",
        0 => "No error.",
        3 => "This server does not host this topic-partition.",
        5 => "There is no leader for this topic-partition as we are in the middle of a leadership election.",
        7 => "The request timed out.",
        8 => "The broker is not available.",
        17 => "The request attempted to perform an operation on an invalid topic.",
        29 => "Topic authorization failed.",
        33 => "The client is not authorized to access this topic.",
        35 => "The version of API is not supported.",
        36 => "Topic with this name already exists.",
        37 => "Number of partitions is below 1.",
        38 => "Replication factor is below 1 or larger than the number of available brokers.",
        39 => "Replica assignment is invalid.",
        40 => "Configuration is invalid.",
        41 => "This is not the correct controller for this cluster.",
        42 => "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.",
        44 => "The request parameters do not satisfy the configured policy.",
        73 => "Topic deletion is disabled.",
        80 => "The preferred leader was not available.",
        83 => "Eligible topic partition leaders are not available.",
        84 => "Leader election not needed for topic partition.",
        100 => "This server does not host this topic ID.",
        _ => "An error the client does not know (see the broker's logs).",
    }
}
