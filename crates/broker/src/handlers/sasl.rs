//! SaslHandshake and SaslAuthenticate that reach the handlers: on a listener without SASL, or
//! on a connection that already authenticated. Kafka's `KafkaApis` answers both with
//! ILLEGAL_SASL_STATE; the exchange itself runs on the connection ([`crate::connection`]).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;

/// SaslHandshake outside an exchange.
pub(crate) fn handshake() -> SaslHandshakeResponse {
    SaslHandshakeResponse::default().with_error_code(ResponseError::IllegalSaslState.code())
}

/// SaslAuthenticate outside an exchange.
pub(crate) fn authenticate() -> SaslAuthenticateResponse {
    SaslAuthenticateResponse::default()
        .with_error_code(ResponseError::IllegalSaslState.code())
        .with_error_message(Some(StrBytes::from_static_str(
            "SaslAuthenticate request received after successful authentication",
        )))
}
