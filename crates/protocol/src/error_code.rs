//! Kafka error codes. The named codes come from `kafka-protocol`'s `ResponseError`; this
//! module adds the `NONE` code and small helpers used when filling responses.

pub use kafka_protocol::error::ResponseError;

/// A Kafka error code as it goes on the wire (`0` is success).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ErrorCode(pub i16);

impl ErrorCode {
    /// No error.
    pub const NONE: ErrorCode = ErrorCode(0);

    /// The wire value.
    pub fn code(self) -> i16 {
        self.0
    }

    /// Whether this is success.
    pub fn is_none(self) -> bool {
        self.0 == 0
    }

    /// The named error, or `None` for success.
    pub fn error(self) -> Option<ResponseError> {
        ResponseError::try_from_code(self.0)
    }
}

impl From<ResponseError> for ErrorCode {
    fn from(err: ResponseError) -> Self {
        ErrorCode(err.code())
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.error() {
            None => f.write_str("NONE"),
            Some(err) => write!(f, "{err} ({})", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_codes() {
        assert_eq!(
            ErrorCode::from(ResponseError::UnsupportedVersion).code(),
            35
        );
        assert_eq!(ErrorCode::from(ResponseError::NotController).code(), 41);
        assert!(ErrorCode::NONE.is_none());
        assert_eq!(ErrorCode(35).to_string(), "UnsupportedVersion (35)");
    }
}
