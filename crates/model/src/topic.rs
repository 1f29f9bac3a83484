//! Topic names and topic-partitions.

use std::fmt;
use std::str::FromStr;

/// The longest legal topic name, in characters (Kafka's `Topic.MAX_NAME_LENGTH`).
///
/// 249 leaves room for a partition suffix and the `.<uuid>-delete` rename inside a 255-byte
/// file name.
pub const MAX_TOPIC_NAME_LENGTH: usize = 249;

/// Kafka's internal topics: group offsets and transaction state.
pub const INTERNAL_TOPICS: [&str; 2] = ["__consumer_offsets", "__transaction_state"];

/// Why a string is not a legal topic name. The messages are Kafka 2.8's (`Topic.validate`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopicError {
    /// The empty string.
    #[error("Topic name is illegal, it can't be empty")]
    Empty,
    /// `.` or `..`, which would be directory names on disk.
    #[error("Topic name cannot be \".\" or \"..\"")]
    DotOrDotDot,
    /// More than [`MAX_TOPIC_NAME_LENGTH`] characters.
    #[error(
        "Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, topic name: {0}"
    )]
    TooLong(String),
    /// A character outside `[a-zA-Z0-9._-]`.
    #[error(
        "Topic name \"{0}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'"
    )]
    IllegalCharacter(String),
}

/// A validated topic name: 1..=249 characters of `[a-zA-Z0-9._-]`, never `.` or `..`.
///
/// The only way to build one is [`FromStr`] / [`TryFrom<String>`], so holding a `TopicName`
/// proves the name is legal.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicName(String);

impl TopicName {
    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Consumes the name, returning the inner string.
    pub fn into_string(self) -> String {
        self.0
    }

    /// Whether the name contains `.` or `_`, the two characters that collide in metric names
    /// (the CLI warns about such names).
    pub fn has_collision_chars(&self) -> bool {
        self.0.contains(['.', '_'])
    }

    /// The name with every `.` replaced by `_`: two topics whose unified names are equal
    /// would have the same metric names.
    pub fn unify_collision_chars(&self) -> String {
        self.0.replace('.', "_")
    }

    /// Whether `other` is a different name that becomes equal to this one once `.` and `_`
    /// are treated as the same character (Kafka refuses to create such a topic).
    pub fn collides_with(&self, other: &TopicName) -> bool {
        self.0 != other.0 && self.unify_collision_chars() == other.unify_collision_chars()
    }

    /// Whether this is one of Kafka's [`INTERNAL_TOPICS`].
    pub fn is_internal(&self) -> bool {
        INTERNAL_TOPICS.contains(&self.0.as_str())
    }
}

/// Checks `name` against Kafka's topic name rules, in Kafka's order.
fn validate(name: &str) -> Result<(), TopicError> {
    if name.is_empty() {
        return Err(TopicError::Empty);
    }
    if name == "." || name == ".." {
        return Err(TopicError::DotOrDotDot);
    }
    // Every legal character is ASCII, so counting chars only matters for illegal names;
    // count chars anyway so the "too long" message matches what a person sees.
    if name.chars().count() > MAX_TOPIC_NAME_LENGTH {
        return Err(TopicError::TooLong(name.to_owned()));
    }
    let legal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if !name.chars().all(legal) {
        return Err(TopicError::IllegalCharacter(name.to_owned()));
    }
    Ok(())
}

impl FromStr for TopicName {
    type Err = TopicError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        validate(s)?;
        Ok(TopicName(s.to_owned()))
    }
}

impl TryFrom<String> for TopicName {
    type Error = TopicError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        validate(&s)?;
        Ok(TopicName(s))
    }
}

impl TryFrom<&str> for TopicName {
    type Error = TopicError;

    fn try_from(s: &str) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl AsRef<str> for TopicName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TopicName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One partition of one topic. Displays as Kafka does, `topic-partition`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartition {
    /// The topic.
    pub topic: TopicName,
    /// The partition index, from 0.
    pub partition: i32,
}

impl TopicPartition {
    /// A topic-partition.
    pub fn new(topic: TopicName, partition: i32) -> Self {
        TopicPartition { topic, partition }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> TopicName {
        s.parse().unwrap()
    }

    #[test]
    fn legal_names() {
        for s in [
            "a",
            "A-b_c.d",
            "__consumer_offsets",
            "...",
            "-",
            &"x".repeat(249),
        ] {
            assert_eq!(name(s).as_str(), s);
        }
    }

    #[test]
    fn illegal_names_carry_kafkas_messages() {
        let cases = [
            ("", "Topic name is illegal, it can't be empty"),
            (".", "Topic name cannot be \".\" or \"..\""),
            ("..", "Topic name cannot be \".\" or \"..\""),
            (
                "a b",
                "Topic name \"a b\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
            ),
            (
                "é",
                "Topic name \"é\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
            ),
        ];
        for (s, msg) in cases {
            assert_eq!(
                s.parse::<TopicName>().unwrap_err().to_string(),
                msg,
                "{s:?}"
            );
        }
        let long = "x".repeat(250);
        assert_eq!(
            long.parse::<TopicName>().unwrap_err().to_string(),
            format!(
                "Topic name is illegal, it can't be longer than 249 characters, topic name: {long}"
            )
        );
        for bad in ["a/b", "a\\b", "a,b", "a\u{0}b", "a:b", "a*"] {
            assert!(
                matches!(
                    bad.parse::<TopicName>(),
                    Err(TopicError::IllegalCharacter(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn try_from_string_matches_from_str() {
        assert_eq!(TopicName::try_from("ok".to_string()).unwrap(), name("ok"));
        assert_eq!(TopicName::try_from(String::new()), Err(TopicError::Empty));
    }

    #[test]
    fn collisions() {
        assert!(name("a.b").has_collision_chars());
        assert!(name("a_b").has_collision_chars());
        assert!(!name("a-b").has_collision_chars());
        assert_eq!(name("a.b_c").unify_collision_chars(), "a_b_c");
        assert!(name("a.b").collides_with(&name("a_b")));
        assert!(name("a_b").collides_with(&name("a.b")));
        assert!(!name("a.b").collides_with(&name("a.b")));
        assert!(!name("a.b").collides_with(&name("a-b")));
    }

    #[test]
    fn internal_topics() {
        assert!(name("__consumer_offsets").is_internal());
        assert!(name("__transaction_state").is_internal());
        assert!(!name("__consumer_offsets2").is_internal());
    }

    #[test]
    fn topic_partition_display() {
        assert_eq!(
            TopicPartition::new(name("orders"), 3).to_string(),
            "orders-3"
        );
    }
}
