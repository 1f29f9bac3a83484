//! Topic ids: Kafka's 128-bit `Uuid`, written as 22 characters of URL-safe base64.

use std::fmt;
use std::str::FromStr;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;

/// Why a string is not a topic id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicIdError {
    /// Not URL-safe base64 without padding, or not 16 bytes once decoded.
    #[error("invalid topic id '{0}': expected 22 characters of URL-safe base64 as Kafka prints it (e.g. 'v6Ke6e4oQNOCtpNaXMKQMw'), or the same id as a UUID with dashes ('bfa29ee9-ee28-40d3-82b6-935a5cc29033')")]
    Invalid(String),
}

/// A topic's unique id (Kafka 2.8's `topic_id`): 16 bytes, displayed as 22 characters of
/// URL-safe base64 without padding (Kafka's `Uuid.toString`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicId([u8; 16]);

impl TopicId {
    /// Kafka's all-zero id, meaning "no id".
    pub const ZERO: TopicId = TopicId([0; 16]);

    /// An id from its 16 bytes (big-endian, most significant bits first).
    pub const fn from_bytes(bytes: [u8; 16]) -> Self {
        TopicId(bytes)
    }

    /// The 16 bytes.
    pub const fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }

    /// A fresh random (version 4) id. Like Kafka's `Uuid.randomUuid`, it never returns the
    /// zero id, id 1 (reserved for metadata), or one whose text starts with `-` (which command
    /// lines would read as a flag).
    pub fn random() -> Self {
        Self::random_with(&mut rand::rng())
    }

    /// [`TopicId::random`] with a caller-supplied generator (for reproducible tests).
    pub fn random_with(rng: &mut impl rand::Rng) -> Self {
        loop {
            let mut bytes: [u8; 16] = rng.random();
            bytes[6] = (bytes[6] & 0x0f) | 0x40; // version 4
            bytes[8] = (bytes[8] & 0x3f) | 0x80; // IETF variant
            let id = TopicId(bytes);
            if id != Self::ZERO
                && u128::from_be_bytes(bytes) != 1
                && !id.to_string().starts_with('-')
            {
                return id;
            }
        }
    }
}

impl fmt::Display for TopicId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&URL_SAFE_NO_PAD.encode(self.0))
    }
}

/// Reads Kafka's form (22 characters of URL-safe base64, `Uuid.fromString`) and also the
/// same 16 bytes as a UUID with dashes (`bfa29ee9-ee28-40d3-82b6-935a5cc29033`), the form
/// other tools and older consoles show; both name the same topic.
impl FromStr for TopicId {
    type Err = TopicIdError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || TopicIdError::Invalid(s.to_owned());
        if let Some(id) = from_dashed(s) {
            return Ok(id);
        }
        let bytes = URL_SAFE_NO_PAD.decode(s).map_err(|_| invalid())?;
        let bytes: [u8; 16] = bytes.try_into().map_err(|_| invalid())?;
        Ok(TopicId(bytes))
    }
}

/// `8-4-4-4-12` hex digits with dashes (either case), else `None`.
fn from_dashed(s: &str) -> Option<TopicId> {
    let groups: Vec<&str> = s.split('-').collect();
    let lengths: Vec<usize> = groups.iter().map(|g| g.len()).collect();
    if lengths != [8, 4, 4, 4, 12] {
        return None;
    }
    let hex: String = groups.concat();
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u128::from_str_radix(&hex, 16)
        .ok()
        .map(|n| TopicId(n.to_be_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_kafkas_form_and_the_dashed_uuid() {
        let kafka: TopicId = "v6Ke6e4oQNOCtpNaXMKQMw".parse().unwrap();
        for dashed in [
            "bfa29ee9-ee28-40d3-82b6-935a5cc29033",
            "BFA29EE9-EE28-40D3-82B6-935A5CC29033",
        ] {
            assert_eq!(dashed.parse::<TopicId>().unwrap(), kafka, "{dashed}");
        }
        assert_eq!(kafka.to_string(), "v6Ke6e4oQNOCtpNaXMKQMw");
        for bad in [
            "bfa29ee9-ee28-40d3-82b6-935a5cc2903",
            "bfa29ee9ee2840d382b6935a5cc29033",
            "bfa29ee9-ee28-40d3-82b6-935a5cc2903g",
            "+fa29ee9-ee28-40d3-82b6-935a5cc29033",
            "v6Ke6e4oQNOCtpNaXMKQM",
            "",
        ] {
            let err = bad.parse::<TopicId>().unwrap_err().to_string();
            assert!(
                err.contains("URL-safe base64") && err.contains("UUID"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn display_is_22_chars_and_round_trips() {
        for _ in 0..100 {
            let id = TopicId::random();
            let text = id.to_string();
            assert_eq!(text.len(), 22);
            assert!(!text.starts_with('-'));
            assert_eq!(text.parse::<TopicId>().unwrap(), id);
        }
    }

    #[test]
    fn known_value() {
        // Kafka prints the zero id as 22 'A's.
        assert_eq!(TopicId::ZERO.to_string(), "AAAAAAAAAAAAAAAAAAAAAA");
        let id: TopicId = "p2LFWddWSZqKRRB44d1UgA".parse().unwrap();
        assert_eq!(id.to_string(), "p2LFWddWSZqKRRB44d1UgA");
    }

    #[test]
    fn rejects_bad_text() {
        for bad in [
            "",
            "short",
            "p2LFWddWSZqKRRB44d1UgA==",
            "p2LFWddWSZqKRRB44d1Ug+",
            "p2LFWddWSZqKRRB44d1UgAAA",
        ] {
            assert!(bad.parse::<TopicId>().is_err(), "{bad}");
        }
    }
}
