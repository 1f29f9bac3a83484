//! Kafka's records of `__consumer_offsets`, byte for byte, and which partition holds a group.
//!
//! Every record's key and value start with an int16 schema version, followed by the fields of
//! Kafka's generated schemas (`OffsetCommitKey`, `OffsetCommitValue`, `GroupMetadataKey`,
//! `GroupMetadataValue` in apache/kafka's group-coordinator resources), in their
//! non-flexible encoding: strings as int16 length + UTF-8 (-1 for null), bytes as int32 length,
//! arrays as int32 count. What Kafka 2.x-3.x writes, and so what this coordinator writes:
//!
//! | record | key | value |
//! | --- | --- | --- |
//! | committed offset | v1: group, topic, partition | v3: offset, leader epoch, metadata, commit timestamp (v1 with an expire timestamp) |
//! | classic group | v2: group | v3: protocol type, generation, protocol, leader, state timestamp, members |
//! | deletion | same key | none (a tombstone) |
//!
//! Keys of versions 3-8 are the KIP-848 records of Kafka 3.7+ (consumer group metadata,
//! member subscriptions, assignments), encoded and decoded by [`crate::consumer_records`];
//! [`decode`] reports them (and any later type) as [`LogRecord::Unsupported`].
//!
//! Pure: no I/O. The broker wraps these keys and values in record batches.

use bytes::Bytes;

/// The internal topic holding committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// The partition of `__consumer_offsets` that holds `group_id`: Kafka's
/// `Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount`, with Java's
/// `String.hashCode` over UTF-16 code units and `Utils.abs` mapping `Integer.MIN_VALUE` to 0.
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    let hash = group_id.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions.max(1)
}

/// One member of a classic group, as `GroupMetadataValue` v3 stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSnapshot {
    /// The member id.
    pub member_id: String,
    /// `group.instance.id` of a static member.
    pub group_instance_id: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client host (`/127.0.0.1`).
    pub client_host: String,
    /// The rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// The session timeout.
    pub session_timeout_ms: i32,
    /// The member's metadata for the group's protocol.
    pub subscription: Bytes,
    /// The member's assignment.
    pub assignment: Bytes,
}

/// A classic group as `GroupMetadataValue` stores it: enough to resume it on another
/// coordinator with its generation, members and assignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadataSnapshot {
    /// The protocol type (`consumer`, `connect`, ...).
    pub protocol_type: String,
    /// The generation.
    pub generation: i32,
    /// The selected protocol (none for an empty group).
    pub protocol: Option<String>,
    /// The leader's member id (none for an empty group).
    pub leader: Option<String>,
    /// When the group entered its state (ms), or -1.
    pub current_state_timestamp_ms: i64,
    /// The members.
    pub members: Vec<MemberSnapshot>,
}

/// A committed offset as `OffsetCommitValue` stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetValue {
    /// The committed offset.
    pub offset: i64,
    /// The leader epoch (-1: unknown; not in v0-v2).
    pub leader_epoch: i32,
    /// Client metadata.
    pub metadata: String,
    /// When the coordinator accepted the commit.
    pub commit_timestamp_ms: i64,
    /// v1's explicit expiry (OffsetCommit v1's retention), else `None`.
    pub expire_timestamp_ms: Option<i64>,
}

/// One record of `__consumer_offsets`, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogRecord {
    /// A committed offset; `None` is a tombstone (offset deleted).
    Offset {
        /// The group.
        group: String,
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The value, or `None` for a tombstone.
        value: Option<OffsetValue>,
    },
    /// A classic group's metadata; `None` is a tombstone (group deleted).
    Group {
        /// The group.
        group: String,
        /// The value, or `None` for a tombstone.
        value: Option<GroupMetadataSnapshot>,
    },
    /// A record type this coordinator does not read (KIP-848's, key version 3+).
    Unsupported {
        /// The key's version.
        key_version: i16,
    },
}

/// A key or value that does not follow Kafka's schemas.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed __consumer_offsets record: {0}")]
pub struct LogRecordError(pub String);

/// The offset commit key (version 1).
pub fn offset_key(group: &str, topic: &str, partition: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + group.len() + topic.len());
    put_i16(&mut out, 1);
    put_str(&mut out, group);
    put_str(&mut out, topic);
    put_i32(&mut out, partition);
    out
}

/// The offset commit value: version 3, or version 1 when an expire timestamp is given (as
/// Kafka's `GroupMetadataManager.offsetCommitValue`).
pub fn offset_value(value: &OffsetValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + value.metadata.len());
    match value.expire_timestamp_ms {
        Some(expire) => {
            put_i16(&mut out, 1);
            put_i64(&mut out, value.offset);
            put_str(&mut out, &value.metadata);
            put_i64(&mut out, value.commit_timestamp_ms);
            put_i64(&mut out, expire);
        }
        None => {
            put_i16(&mut out, 3);
            put_i64(&mut out, value.offset);
            put_i32(&mut out, value.leader_epoch);
            put_str(&mut out, &value.metadata);
            put_i64(&mut out, value.commit_timestamp_ms);
        }
    }
    out
}

/// The group metadata key (version 2).
pub fn group_key(group: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + group.len());
    put_i16(&mut out, 2);
    put_str(&mut out, group);
    out
}

/// The group metadata value (version 3).
pub fn group_value(group: &GroupMetadataSnapshot) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    put_i16(&mut out, 3);
    put_str(&mut out, &group.protocol_type);
    put_i32(&mut out, group.generation);
    put_nullable_str(&mut out, group.protocol.as_deref());
    put_nullable_str(&mut out, group.leader.as_deref());
    put_i64(&mut out, group.current_state_timestamp_ms);
    put_i32(
        &mut out,
        i32::try_from(group.members.len()).unwrap_or(i32::MAX),
    );
    for member in &group.members {
        put_str(&mut out, &member.member_id);
        put_nullable_str(&mut out, member.group_instance_id.as_deref());
        put_str(&mut out, &member.client_id);
        put_str(&mut out, &member.client_host);
        put_i32(&mut out, member.rebalance_timeout_ms);
        put_i32(&mut out, member.session_timeout_ms);
        put_bytes(&mut out, &member.subscription);
        put_bytes(&mut out, &member.assignment);
    }
    out
}

/// Decodes one record (Kafka's `GroupMetadataManager.readMessageKey` / `readOffsetMessageValue`
/// / `readGroupMessageValue`): offset values v0-v3, group values v0-v3.
pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<LogRecord, LogRecordError> {
    let mut k = Reader::new(key);
    let key_version = k.i16()?;
    match key_version {
        0 | 1 => {
            let group = k.string()?;
            let topic = k.string()?;
            let partition = k.i32()?;
            let value = value.map(decode_offset_value).transpose()?;
            Ok(LogRecord::Offset {
                group,
                topic,
                partition,
                value,
            })
        }
        2 => {
            let group = k.string()?;
            let value = value.map(decode_group_value).transpose()?;
            Ok(LogRecord::Group { group, value })
        }
        v if v > 2 => Ok(LogRecord::Unsupported { key_version: v }),
        v => Err(LogRecordError(format!("negative key version {v}"))),
    }
}

fn decode_offset_value(bytes: &[u8]) -> Result<OffsetValue, LogRecordError> {
    let mut r = Reader::new(bytes);
    let version = r.i16()?;
    match version {
        0 | 2 => Ok(OffsetValue {
            offset: r.i64()?,
            leader_epoch: -1,
            metadata: r.string()?,
            commit_timestamp_ms: r.i64()?,
            expire_timestamp_ms: None,
        }),
        1 => Ok(OffsetValue {
            offset: r.i64()?,
            leader_epoch: -1,
            metadata: r.string()?,
            commit_timestamp_ms: r.i64()?,
            expire_timestamp_ms: Some(r.i64()?),
        }),
        3 => Ok(OffsetValue {
            offset: r.i64()?,
            leader_epoch: r.i32()?,
            metadata: r.string()?,
            commit_timestamp_ms: r.i64()?,
            expire_timestamp_ms: None,
        }),
        v => Err(LogRecordError(format!(
            "offset commit value version {v} (this broker reads 0-3)"
        ))),
    }
}

fn decode_group_value(bytes: &[u8]) -> Result<GroupMetadataSnapshot, LogRecordError> {
    let mut r = Reader::new(bytes);
    let version = r.i16()?;
    if !(0..=3).contains(&version) {
        return Err(LogRecordError(format!(
            "group metadata value version {version} (this broker reads 0-3)"
        )));
    }
    let protocol_type = r.string()?;
    let generation = r.i32()?;
    let protocol = r.nullable_string()?;
    let leader = r.nullable_string()?;
    let current_state_timestamp_ms = if version >= 2 { r.i64()? } else { -1 };
    let count = r.i32()?;
    if count < 0 || count as usize > r.remaining() {
        return Err(LogRecordError(format!("{count} members")));
    }
    let mut members = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let member_id = r.string()?;
        let group_instance_id = if version >= 3 {
            r.nullable_string()?
        } else {
            None
        };
        let client_id = r.string()?;
        let client_host = r.string()?;
        let rebalance_timeout_ms = if version >= 1 { r.i32()? } else { -1 };
        let session_timeout_ms = r.i32()?;
        let subscription = r.bytes()?;
        let assignment = r.bytes()?;
        members.push(MemberSnapshot {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms: if rebalance_timeout_ms < 0 {
                session_timeout_ms
            } else {
                rebalance_timeout_ms
            },
            session_timeout_ms,
            subscription,
            assignment,
        });
    }
    Ok(GroupMetadataSnapshot {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp_ms,
        members,
    })
}

fn put_i16(out: &mut Vec<u8>, v: i16) {
    out.extend_from_slice(&v.to_be_bytes());
}
fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}
fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_be_bytes());
}
fn put_str(out: &mut Vec<u8>, s: &str) {
    // Kafka's strings are at most i16::MAX bytes; longer ones are cut at a char boundary
    // (group ids, topics and metadata are bounded far below that by the broker).
    let mut end = s.len().min(i16::MAX as usize);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    put_i16(out, end as i16);
    out.extend_from_slice(&s.as_bytes()[..end]);
}
fn put_nullable_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_str(out, s),
        None => put_i16(out, -1),
    }
}
fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_i32(out, i32::try_from(b.len()).unwrap_or(i32::MAX));
    out.extend_from_slice(b);
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }
    fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], LogRecordError> {
        if self.remaining() < n {
            return Err(LogRecordError(format!(
                "needs {n} bytes at position {}, {} left",
                self.pos,
                self.remaining()
            )));
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }
    fn i16(&mut self) -> Result<i16, LogRecordError> {
        Ok(i16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn i32(&mut self) -> Result<i32, LogRecordError> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn i64(&mut self) -> Result<i64, LogRecordError> {
        Ok(i64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn nullable_string(&mut self) -> Result<Option<String>, LogRecordError> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let raw = self.take(len as usize)?;
        String::from_utf8(raw.to_vec())
            .map(Some)
            .map_err(|_| LogRecordError("a string is not UTF-8".to_owned()))
    }
    fn string(&mut self) -> Result<String, LogRecordError> {
        self.nullable_string()?
            .ok_or_else(|| LogRecordError("a non-null string is null".to_owned()))
    }
    fn bytes(&mut self) -> Result<Bytes, LogRecordError> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(Bytes::new());
        }
        Ok(Bytes::copy_from_slice(self.take(len as usize)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_for_follows_java_string_hash_code() {
        // Java: "".hashCode() == 0, "a".hashCode() == 97, "group".hashCode() == 98629247.
        assert_eq!(partition_for("", 50), 0);
        assert_eq!(partition_for("a", 50), 97 % 50);
        assert_eq!(partition_for("group", 50), 98_629_247 % 50);
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE: Kafka's Utils.abs makes it 0.
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        // A negative hash: "zzzzzzzzzz".hashCode() == -1580979136 (it overflows).
        assert_eq!(partition_for("zzzzzzzzzz", 50), 1_580_979_136 % 50);
        // UTF-16 code units, not bytes or chars: U+1F600 is two units 0xD83D 0xDE00.
        let expected = (0xD83Di32 * 31 + 0xDE00) % 50;
        assert_eq!(partition_for("\u{1F600}", 50), expected);
    }

    #[test]
    fn offset_records_are_kafkas_bytes() {
        let key = offset_key("g", "t", 7);
        assert_eq!(key, [0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 7]);
        let value = OffsetValue {
            offset: 5,
            leader_epoch: 2,
            metadata: "m".into(),
            commit_timestamp_ms: 1000,
            expire_timestamp_ms: None,
        };
        let bytes = offset_value(&value);
        let mut expected = vec![0, 3];
        expected.extend_from_slice(&5i64.to_be_bytes());
        expected.extend_from_slice(&2i32.to_be_bytes());
        expected.extend_from_slice(&[0, 1, b'm']);
        expected.extend_from_slice(&1000i64.to_be_bytes());
        assert_eq!(bytes, expected);
        assert_eq!(
            decode(&key, Some(&bytes)).unwrap(),
            LogRecord::Offset {
                group: "g".into(),
                topic: "t".into(),
                partition: 7,
                value: Some(value.clone()),
            }
        );
        let v1 = OffsetValue {
            expire_timestamp_ms: Some(2000),
            leader_epoch: -1,
            ..value
        };
        let bytes = offset_value(&v1);
        assert_eq!(&bytes[..2], &[0, 1]);
        assert_eq!(bytes.len(), 2 + 8 + 3 + 8 + 8);
        assert_eq!(
            decode(&key, Some(&bytes)).unwrap(),
            LogRecord::Offset {
                group: "g".into(),
                topic: "t".into(),
                partition: 7,
                value: Some(v1),
            }
        );
        assert_eq!(
            decode(&key, None).unwrap(),
            LogRecord::Offset {
                group: "g".into(),
                topic: "t".into(),
                partition: 7,
                value: None,
            }
        );
    }

    #[test]
    fn group_records_round_trip_and_are_kafkas_bytes() {
        let group = GroupMetadataSnapshot {
            protocol_type: "consumer".into(),
            generation: 3,
            protocol: Some("range".into()),
            leader: Some("m1".into()),
            current_state_timestamp_ms: 42,
            members: vec![MemberSnapshot {
                member_id: "m1".into(),
                group_instance_id: None,
                client_id: "c".into(),
                client_host: "/h".into(),
                rebalance_timeout_ms: 300,
                session_timeout_ms: 100,
                subscription: Bytes::from_static(b"S"),
                assignment: Bytes::from_static(b"AB"),
            }],
        };
        let key = group_key("g");
        assert_eq!(key, [0, 2, 0, 1, b'g']);
        let bytes = group_value(&group);
        let mut expected = vec![0, 3, 0, 8];
        expected.extend_from_slice(b"consumer");
        expected.extend_from_slice(&3i32.to_be_bytes());
        expected.extend_from_slice(&[0, 5]);
        expected.extend_from_slice(b"range");
        expected.extend_from_slice(&[0, 2, b'm', b'1']);
        expected.extend_from_slice(&42i64.to_be_bytes());
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(&[0, 2, b'm', b'1']);
        expected.extend_from_slice(&[0xff, 0xff]); // null group.instance.id
        expected.extend_from_slice(&[0, 1, b'c', 0, 2, b'/', b'h']);
        expected.extend_from_slice(&300i32.to_be_bytes());
        expected.extend_from_slice(&100i32.to_be_bytes());
        expected.extend_from_slice(&[0, 0, 0, 1, b'S', 0, 0, 0, 2, b'A', b'B']);
        assert_eq!(bytes, expected);
        assert_eq!(
            decode(&key, Some(&bytes)).unwrap(),
            LogRecord::Group {
                group: "g".into(),
                value: Some(group),
            }
        );
    }

    #[test]
    fn kip_848_keys_are_skipped_and_garbage_is_an_error() {
        assert_eq!(
            decode(&[0, 3, 0, 1, b'g'], Some(&[0, 0])).unwrap(),
            LogRecord::Unsupported { key_version: 3 }
        );
        assert!(decode(&[0, 1, 0, 9], None).is_err());
        assert!(decode(&[], None).is_err());
        assert!(decode(&[0, 2, 0, 1, b'g'], Some(&[0, 3, 0])).is_err());
        let huge_count = [
            0, 3, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0, 0, 0,
        ];
        assert!(decode(&[0, 2, 0, 1, b'g'], Some(&huge_count)).is_err());
    }
}
