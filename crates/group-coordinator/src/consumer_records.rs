//! The records of KIP-848 consumer groups in `__consumer_offsets`, byte for byte as Kafka 4.x
//! writes them (the `ConsumerGroup*` coordinator records of apache/kafka's group-coordinator
//! resources; their first versions appeared in Kafka 3.7):
//!
//! | record type (key version) | key | value (version 0, flexible) |
//! | --- | --- | --- |
//! | 3 `ConsumerGroupMetadata` | group | group epoch |
//! | 4 `ConsumerGroupPartitionMetadata` | group | subscribed topics: id, name, partition count, racks |
//! | 5 `ConsumerGroupMemberMetadata` | group, member | instance, rack, client id and host, subscribed topics, regex, rebalance timeout, server assignor |
//! | 6 `ConsumerGroupTargetAssignmentMetadata` | group | assignment epoch |
//! | 7 `ConsumerGroupTargetAssignmentMember` | group, member | target partitions by topic id |
//! | 8 `ConsumerGroupCurrentMemberAssignment` | group, member | member epoch, previous epoch, state, assigned and revoking partitions |
//!
//! Keys are non-flexible (int16 type, int16-length strings); values are flexible (compact
//! strings and arrays, uuid as 16 bytes, an empty tagged-field section after every struct).
//! A deleted member or group is a tombstone of its keys.
//!
//! The coordinator describes a group as the set of its records ([`GroupRecords`], key ->
//! value), writes what changed since the last write (new values, tombstones for keys gone),
//! and a coordinator taking the partition over rebuilds the group from the replayed set.
//!
//! Pure: no I/O.

use std::collections::BTreeMap;

use uuid::Uuid;

use crate::log_records::LogRecordError;

/// Every record of one group: key bytes -> value bytes.
pub type GroupRecords = BTreeMap<Vec<u8>, Vec<u8>>;

/// One write: key and value (`None`: a tombstone).
pub type RecordWrite = (Vec<u8>, Option<Vec<u8>>);

/// Record type ids (the key's leading int16).
pub const GROUP_METADATA: i16 = 3;
/// See the module table.
pub const PARTITION_METADATA: i16 = 4;
/// See the module table.
pub const MEMBER_METADATA: i16 = 5;
/// See the module table.
pub const TARGET_ASSIGNMENT_METADATA: i16 = 6;
/// See the module table.
pub const TARGET_ASSIGNMENT_MEMBER: i16 = 7;
/// See the module table.
pub const CURRENT_MEMBER_ASSIGNMENT: i16 = 8;

/// Kafka's `MemberState` ids.
pub const MEMBER_STATE_STABLE: i8 = 0;
/// See [`MEMBER_STATE_STABLE`].
pub const MEMBER_STATE_UNREVOKED_PARTITIONS: i8 = 1;
/// See [`MEMBER_STATE_STABLE`].
pub const MEMBER_STATE_UNRELEASED_PARTITIONS: i8 = 2;

/// A subscribed topic, as `ConsumerGroupPartitionMetadataValue` stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMeta {
    /// The topic id.
    pub id: Uuid,
    /// The name.
    pub name: String,
    /// The partition count.
    pub partitions: i32,
}

/// A member's subscription, as `ConsumerGroupMemberMetadataValue` stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberMeta {
    /// `group.instance.id`.
    pub instance_id: Option<String>,
    /// `client.rack`.
    pub rack_id: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client host (`/127.0.0.1`).
    pub client_host: String,
    /// Subscribed topic names.
    pub subscribed_topics: Vec<String>,
    /// The subscribed regex (not used by this coordinator; kept as read).
    pub subscribed_regex: Option<String>,
    /// The rebalance timeout.
    pub rebalance_timeout_ms: i32,
    /// The server assignor the member asked for.
    pub server_assignor: Option<String>,
}

/// Partitions by topic id.
pub type IdAssignment = Vec<(Uuid, Vec<i32>)>;

/// A member's current assignment, as `ConsumerGroupCurrentMemberAssignmentValue` stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentAssignment {
    /// The member epoch.
    pub member_epoch: i32,
    /// The previous member epoch.
    pub previous_member_epoch: i32,
    /// Kafka's `MemberState` id.
    pub state: i8,
    /// Owned partitions.
    pub assigned: IdAssignment,
    /// Partitions the member must still revoke.
    pub pending_revocation: IdAssignment,
}

/// A whole consumer group as its records describe it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsumerGroupState {
    /// The group epoch.
    pub epoch: i32,
    /// The subscribed topics' metadata.
    pub topics: Vec<TopicMeta>,
    /// Members' subscriptions, by member id.
    pub members: BTreeMap<String, MemberMeta>,
    /// The assignment epoch.
    pub assignment_epoch: i32,
    /// Target assignment, by member id.
    pub target: BTreeMap<String, IdAssignment>,
    /// Current assignments, by member id.
    pub current: BTreeMap<String, CurrentAssignment>,
}

/// The group of a KIP-848 record key (types 3-8), or `None` for any other key.
pub fn group_of_key(key: &[u8]) -> Option<String> {
    let mut r = Reader::new(key);
    let kind = r.i16().ok()?;
    if !(GROUP_METADATA..=CURRENT_MEMBER_ASSIGNMENT).contains(&kind) {
        return None;
    }
    r.string().ok()
}

fn key(kind: i16, group: &str, member: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + group.len());
    out.extend_from_slice(&kind.to_be_bytes());
    put_key_str(&mut out, group);
    if let Some(member) = member {
        put_key_str(&mut out, member);
    }
    out
}

/// The records describing `state` (every key with its value).
pub fn encode(group: &str, state: &ConsumerGroupState) -> GroupRecords {
    let mut out = GroupRecords::new();
    let mut v = value();
    put_i32(&mut v, state.epoch);
    tags(&mut v);
    out.insert(key(GROUP_METADATA, group, None), v);

    let mut v = value();
    put_len(&mut v, state.topics.len());
    for t in &state.topics {
        v.extend_from_slice(t.id.as_bytes());
        put_str(&mut v, &t.name);
        put_i32(&mut v, t.partitions);
        put_len(&mut v, 0); // partition racks: not tracked
        tags(&mut v);
    }
    tags(&mut v);
    out.insert(key(PARTITION_METADATA, group, None), v);

    for (member, m) in &state.members {
        let mut v = value();
        put_nullable_str(&mut v, m.instance_id.as_deref());
        put_nullable_str(&mut v, m.rack_id.as_deref());
        put_str(&mut v, &m.client_id);
        put_str(&mut v, &m.client_host);
        put_len(&mut v, m.subscribed_topics.len());
        for t in &m.subscribed_topics {
            put_str(&mut v, t);
        }
        put_nullable_str(&mut v, m.subscribed_regex.as_deref());
        put_i32(&mut v, m.rebalance_timeout_ms);
        put_nullable_str(&mut v, m.server_assignor.as_deref());
        tags(&mut v);
        out.insert(key(MEMBER_METADATA, group, Some(member)), v);
    }

    let mut v = value();
    put_i32(&mut v, state.assignment_epoch);
    tags(&mut v);
    out.insert(key(TARGET_ASSIGNMENT_METADATA, group, None), v);

    for (member, assignment) in &state.target {
        let mut v = value();
        put_assignment(&mut v, assignment);
        tags(&mut v);
        out.insert(key(TARGET_ASSIGNMENT_MEMBER, group, Some(member)), v);
    }

    for (member, c) in &state.current {
        let mut v = value();
        put_i32(&mut v, c.member_epoch);
        put_i32(&mut v, c.previous_member_epoch);
        v.push(c.state as u8);
        put_assignment(&mut v, &c.assigned);
        put_assignment(&mut v, &c.pending_revocation);
        tags(&mut v);
        out.insert(key(CURRENT_MEMBER_ASSIGNMENT, group, Some(member)), v);
    }
    out
}

/// What to append to go from `before` to `after`: tombstones for keys gone (current
/// assignments first and the group's metadata last, the order Kafka deletes them in), then
/// new or changed values by record type.
pub fn diff(before: &GroupRecords, after: &GroupRecords) -> Vec<RecordWrite> {
    let mut gone: Vec<&Vec<u8>> = before.keys().filter(|k| !after.contains_key(*k)).collect();
    gone.sort_by_key(|k| std::cmp::Reverse(kind_of(k)));
    let mut changed: Vec<(&Vec<u8>, &Vec<u8>)> = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(*v))
        .collect();
    changed.sort_by_key(|(k, _)| kind_of(k));
    gone.into_iter()
        .map(|k| (k.clone(), None))
        .chain(
            changed
                .into_iter()
                .map(|(k, v)| (k.clone(), Some(v.clone()))),
        )
        .collect()
}

fn kind_of(key: &[u8]) -> i16 {
    key.get(..2).map_or(0, |b| i16::from_be_bytes([b[0], b[1]]))
}

/// Rebuilds a group from its records (the live records of a replayed partition). A group
/// without its `ConsumerGroupMetadata` record is an error (a partial group is not resumed).
pub fn decode(records: &GroupRecords) -> Result<ConsumerGroupState, LogRecordError> {
    let mut state = ConsumerGroupState::default();
    let mut has_metadata = false;
    for (k, v) in records {
        let mut kr = Reader::new(k);
        let kind = kr.i16()?;
        let _group = kr.string()?;
        let mut r = Reader::new(v);
        let version = r.i16()?;
        if version != 0 {
            return Err(LogRecordError(format!(
                "record type {kind} value version {version} (this broker reads 0)"
            )));
        }
        match kind {
            GROUP_METADATA => {
                state.epoch = r.i32()?;
                r.skip_tags()?;
                has_metadata = true;
            }
            PARTITION_METADATA => {
                for _ in 0..r.len()? {
                    let id = r.uuid()?;
                    let name = r.compact_string()?;
                    let partitions = r.i32()?;
                    for _ in 0..r.len()? {
                        r.i32()?;
                        for _ in 0..r.len()? {
                            r.compact_string()?;
                        }
                        r.skip_tags()?;
                    }
                    r.skip_tags()?;
                    state.topics.push(TopicMeta {
                        id,
                        name,
                        partitions,
                    });
                }
                r.skip_tags()?;
            }
            MEMBER_METADATA => {
                let member = kr.string()?;
                let instance_id = r.compact_nullable_string()?;
                let rack_id = r.compact_nullable_string()?;
                let client_id = r.compact_string()?;
                let client_host = r.compact_string()?;
                let mut subscribed_topics = Vec::new();
                for _ in 0..r.len()? {
                    subscribed_topics.push(r.compact_string()?);
                }
                let subscribed_regex = r.compact_nullable_string()?;
                let rebalance_timeout_ms = r.i32()?;
                let server_assignor = r.compact_nullable_string()?;
                r.skip_tags()?;
                state.members.insert(
                    member,
                    MemberMeta {
                        instance_id,
                        rack_id,
                        client_id,
                        client_host,
                        subscribed_topics,
                        subscribed_regex,
                        rebalance_timeout_ms,
                        server_assignor,
                    },
                );
            }
            TARGET_ASSIGNMENT_METADATA => {
                state.assignment_epoch = r.i32()?;
                r.skip_tags()?;
            }
            TARGET_ASSIGNMENT_MEMBER => {
                let member = kr.string()?;
                let assignment = r.assignment()?;
                r.skip_tags()?;
                state.target.insert(member, assignment);
            }
            CURRENT_MEMBER_ASSIGNMENT => {
                let member = kr.string()?;
                let member_epoch = r.i32()?;
                let previous_member_epoch = r.i32()?;
                let member_state = r.take(1)?[0] as i8;
                let assigned = r.assignment()?;
                let pending_revocation = r.assignment()?;
                r.skip_tags()?;
                state.current.insert(
                    member,
                    CurrentAssignment {
                        member_epoch,
                        previous_member_epoch,
                        state: member_state,
                        assigned,
                        pending_revocation,
                    },
                );
            }
            other => return Err(LogRecordError(format!("record type {other}"))),
        }
    }
    if !has_metadata {
        return Err(LogRecordError(
            "consumer group records without ConsumerGroupMetadata".to_owned(),
        ));
    }
    Ok(state)
}

fn value() -> Vec<u8> {
    vec![0, 0]
}
fn tags(out: &mut Vec<u8>) {
    out.push(0);
}
fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}
fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}
fn put_len(out: &mut Vec<u8>, n: usize) {
    put_uvarint(out, n as u64 + 1);
}
fn put_str(out: &mut Vec<u8>, s: &str) {
    put_len(out, s.len());
    out.extend_from_slice(s.as_bytes());
}
fn put_nullable_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_str(out, s),
        None => out.push(0),
    }
}
fn put_key_str(out: &mut Vec<u8>, s: &str) {
    let n = s.len().min(i16::MAX as usize);
    out.extend_from_slice(&(n as i16).to_be_bytes());
    out.extend_from_slice(&s.as_bytes()[..n]);
}
fn put_assignment(out: &mut Vec<u8>, assignment: &IdAssignment) {
    put_len(out, assignment.len());
    for (id, partitions) in assignment {
        out.extend_from_slice(id.as_bytes());
        put_len(out, partitions.len());
        for p in partitions {
            put_i32(out, *p);
        }
        tags(out);
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], LogRecordError> {
        if self.bytes.len() - self.pos < n {
            return Err(LogRecordError(format!(
                "needs {n} bytes at position {}, {} left",
                self.pos,
                self.bytes.len() - self.pos
            )));
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }
    fn i16(&mut self) -> Result<i16, LogRecordError> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().expect("2")))
    }
    fn i32(&mut self) -> Result<i32, LogRecordError> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn uuid(&mut self) -> Result<Uuid, LogRecordError> {
        Ok(Uuid::from_bytes(self.take(16)?.try_into().expect("16")))
    }
    fn uvarint(&mut self) -> Result<u64, LogRecordError> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err(LogRecordError("varint longer than 64 bits".to_owned()))
    }
    /// A compact array's length (a null array reads as empty).
    fn len(&mut self) -> Result<usize, LogRecordError> {
        let n = self.uvarint()?;
        let n = usize::try_from(n.saturating_sub(1)).unwrap_or(usize::MAX);
        if n > self.bytes.len() - self.pos {
            return Err(LogRecordError(format!("array of {n} in a shorter value")));
        }
        Ok(n)
    }
    fn compact_nullable_string(&mut self) -> Result<Option<String>, LogRecordError> {
        let n = self.uvarint()?;
        if n == 0 {
            return Ok(None);
        }
        let raw = self.take(usize::try_from(n - 1).unwrap_or(usize::MAX))?;
        String::from_utf8(raw.to_vec())
            .map(Some)
            .map_err(|_| LogRecordError("a string is not UTF-8".to_owned()))
    }
    fn compact_string(&mut self) -> Result<String, LogRecordError> {
        self.compact_nullable_string()?
            .ok_or_else(|| LogRecordError("a non-null string is null".to_owned()))
    }
    fn string(&mut self) -> Result<String, LogRecordError> {
        let n = self.i16()?;
        if n < 0 {
            return Err(LogRecordError("a key string is null".to_owned()));
        }
        let raw = self.take(n as usize)?;
        String::from_utf8(raw.to_vec()).map_err(|_| LogRecordError("not UTF-8".to_owned()))
    }
    fn skip_tags(&mut self) -> Result<(), LogRecordError> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?;
            let size = self.uvarint()?;
            self.take(usize::try_from(size).unwrap_or(usize::MAX))?;
        }
        Ok(())
    }
    fn assignment(&mut self) -> Result<IdAssignment, LogRecordError> {
        let mut out = Vec::new();
        for _ in 0..self.len()? {
            let id = self.uuid()?;
            let mut partitions = Vec::new();
            for _ in 0..self.len()? {
                partitions.push(self.i32()?);
            }
            self.skip_tags()?;
            out.push((id, partitions));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> ConsumerGroupState {
        let t = Uuid::from_u128(0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10);
        ConsumerGroupState {
            epoch: 4,
            topics: vec![TopicMeta {
                id: t,
                name: "t".into(),
                partitions: 2,
            }],
            members: BTreeMap::from([(
                "m".to_owned(),
                MemberMeta {
                    instance_id: None,
                    rack_id: None,
                    client_id: "c".into(),
                    client_host: "/h".into(),
                    subscribed_topics: vec!["t".into()],
                    subscribed_regex: None,
                    rebalance_timeout_ms: 300,
                    server_assignor: Some("uniform".into()),
                },
            )]),
            assignment_epoch: 4,
            target: BTreeMap::from([("m".to_owned(), vec![(t, vec![0, 1])])]),
            current: BTreeMap::from([(
                "m".to_owned(),
                CurrentAssignment {
                    member_epoch: 4,
                    previous_member_epoch: 3,
                    state: MEMBER_STATE_STABLE,
                    assigned: vec![(t, vec![0, 1])],
                    pending_revocation: vec![],
                },
            )]),
        }
    }

    #[test]
    fn records_are_kafkas_bytes_and_round_trip() {
        let records = encode("g", &state());
        assert_eq!(records.len(), 6);
        // ConsumerGroupMetadataKey: type 3, group "g"; value v0: epoch 4, no tags.
        assert_eq!(records[&vec![0, 3, 0, 1, b'g']], [0, 0, 0, 0, 0, 4, 0]);
        // ConsumerGroupCurrentMemberAssignmentKey: type 8, group, member.
        let current = &records[&vec![0, 8, 0, 1, b'g', 0, 1, b'm']];
        let mut expected = vec![0, 0, 0, 0, 0, 4, 0, 0, 0, 3, 0, 2];
        expected.extend_from_slice(&(1..=16).collect::<Vec<u8>>());
        expected.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0]);
        assert_eq!(current, &expected);
        // Member metadata: null instance and rack, "c", "/h", ["t"], null regex, 300, "uniform".
        let member = &records[&vec![0, 5, 0, 1, b'g', 0, 1, b'm']];
        let mut expected = vec![0, 0, 0, 0, 2, b'c', 3, b'/', b'h', 2, 2, b't', 0];
        expected.extend_from_slice(&300i32.to_be_bytes());
        expected.push(8);
        expected.extend_from_slice(b"uniform");
        expected.push(0);
        assert_eq!(member, &expected);
        assert_eq!(decode(&records).unwrap(), state());
        assert_eq!(
            group_of_key(&[0, 7, 0, 1, b'g', 0, 1, b'm']),
            Some("g".into())
        );
        assert_eq!(group_of_key(&[0, 2, 0, 1, b'g']), None);
    }

    #[test]
    fn diff_writes_changes_and_tombstones_in_kafkas_order() {
        let before = encode("g", &state());
        assert!(diff(&before, &before).is_empty());
        let mut next = state();
        next.epoch = 5;
        next.members.clear();
        next.target.clear();
        next.current.clear();
        let after = encode("g", &next);
        let writes = diff(&before, &after);
        let kinds: Vec<(i16, bool)> = writes
            .iter()
            .map(|(k, v)| (kind_of(k), v.is_some()))
            .collect();
        assert_eq!(kinds, [(8, false), (7, false), (5, false), (3, true)]);
        let all_gone = diff(&before, &GroupRecords::new());
        assert_eq!(all_gone.len(), 6);
        assert_eq!(kind_of(&all_gone[5].0), GROUP_METADATA);
        assert!(decode(&GroupRecords::new()).is_err());
    }
}
