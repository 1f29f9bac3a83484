//! Kafka's `__transaction_state` records, byte for byte (`TransactionLogKey` v0 and
//! `TransactionLogValue` v0/v1 of Kafka 3.9's schemas; Kafka 3.9 writes value v1, flexible,
//! with no tagged fields): a key names the transactional id, a value carries the id's whole
//! state after one transition, a tombstone (null value) forgets the id.

use super::state::{TxnMetadata, TxnState};
use std::collections::BTreeSet;

/// The key: version 0, then the transactional id (INT16 length, UTF-8).
pub(crate) fn key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + transactional_id.len());
    out.extend_from_slice(&0i16.to_be_bytes());
    out.extend_from_slice(&(transactional_id.len() as i16).to_be_bytes());
    out.extend_from_slice(transactional_id.as_bytes());
    out
}

/// The value Kafka 3.9 writes (version 1): the producer id and epoch, timeout, state, the
/// partitions grouped by topic (null for Empty, as Kafka), last update and start times.
pub(crate) fn value(meta: &TxnMetadata) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&1i16.to_be_bytes());
    out.extend_from_slice(&meta.producer_id.to_be_bytes());
    out.extend_from_slice(&meta.producer_epoch.to_be_bytes());
    out.extend_from_slice(&meta.timeout_ms.to_be_bytes());
    out.push(meta.state.id() as u8);
    if meta.state == TxnState::Empty {
        put_uvarint(&mut out, 0);
    } else {
        let topics = by_topic(&meta.partitions);
        put_uvarint(&mut out, topics.len() as u64 + 1);
        for (topic, partitions) in topics {
            put_uvarint(&mut out, topic.len() as u64 + 1);
            out.extend_from_slice(topic.as_bytes());
            put_uvarint(&mut out, partitions.len() as u64 + 1);
            for p in partitions {
                out.extend_from_slice(&p.to_be_bytes());
            }
            put_uvarint(&mut out, 0); // tagged fields
        }
    }
    out.extend_from_slice(&meta.last_update_ms.to_be_bytes());
    out.extend_from_slice(&meta.start_ms.to_be_bytes());
    put_uvarint(&mut out, 0); // tagged fields
    out
}

fn by_topic(partitions: &BTreeSet<(String, i32)>) -> Vec<(&str, Vec<i32>)> {
    let mut out: Vec<(&str, Vec<i32>)> = Vec::new();
    for (topic, p) in partitions {
        match out.last_mut() {
            Some((t, ps)) if *t == topic.as_str() => ps.push(*p),
            _ => out.push((topic.as_str(), vec![*p])),
        }
    }
    out
}

/// A decoded record: the id and its state, or `None` for a tombstone.
pub(crate) fn decode(
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<(String, Option<TxnMetadata>), String> {
    let mut k = Reader(key);
    let version = k.i16()?;
    if version != 0 {
        return Err(format!("transaction log key version {version} is unknown"));
    }
    let id = k.string16()?;
    let Some(value) = value else {
        return Ok((id, None));
    };
    let mut v = Reader(value);
    let version = v.i16()?;
    if !(0..=1).contains(&version) {
        return Err(format!(
            "transaction log value version {version} is unknown"
        ));
    }
    let flexible = version >= 1;
    let producer_id = v.i64()?;
    let producer_epoch = v.i16()?;
    let timeout_ms = v.i32()?;
    let status = v.i8()?;
    let state = TxnState::from_id(status)
        .ok_or_else(|| format!("transaction state {status} is unknown"))?;
    let count = if flexible {
        v.uvarint()? as i64 - 1
    } else {
        i64::from(v.i32()?)
    };
    let mut partitions = BTreeSet::new();
    for _ in 0..count.max(0) {
        let topic = if flexible {
            v.compact_string()?
        } else {
            v.string16()?
        };
        let n = if flexible {
            v.uvarint()? as i64 - 1
        } else {
            i64::from(v.i32()?)
        };
        for _ in 0..n.max(0) {
            partitions.insert((topic.clone(), v.i32()?));
        }
        if flexible {
            v.skip_tagged()?;
        }
    }
    let last_update_ms = v.i64()?;
    let start_ms = v.i64()?;
    if flexible {
        v.skip_tagged()?;
    }
    Ok((
        id.clone(),
        Some(TxnMetadata {
            transactional_id: id,
            producer_id,
            last_producer_id: -1,
            producer_epoch,
            last_producer_epoch: -1,
            timeout_ms,
            state,
            partitions,
            start_ms,
            last_update_ms,
        }),
    ))
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        if self.0.len() < n {
            return Err("transaction log record is truncated".to_owned());
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }
    fn i8(&mut self) -> Result<i8, String> {
        Ok(self.take(1)?[0] as i8)
    }
    fn i16(&mut self) -> Result<i16, String> {
        Ok(i16::from_be_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_be_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn uvarint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.take(1)?[0];
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err("transaction log record has a malformed varint".to_owned())
    }
    fn utf8(&mut self, n: usize) -> Result<String, String> {
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "not UTF-8".to_owned())
    }
    fn string16(&mut self) -> Result<String, String> {
        let n = self.i16()?;
        self.utf8(usize::try_from(n).map_err(|_| "null string".to_owned())?)
    }
    fn compact_string(&mut self) -> Result<String, String> {
        let n = self.uvarint()?;
        let n =
            usize::try_from(n.checked_sub(1).ok_or("null string")?).map_err(|e| e.to_string())?;
        self.utf8(n)
    }
    fn skip_tagged(&mut self) -> Result<(), String> {
        for _ in 0..self.uvarint()? {
            let _tag = self.uvarint()?;
            let n = self.uvarint()?;
            self.take(usize::try_from(n).map_err(|e| e.to_string())?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(state: TxnState, partitions: &[(&str, i32)]) -> TxnMetadata {
        TxnMetadata {
            transactional_id: "tx".to_owned(),
            producer_id: 1000,
            last_producer_id: -1,
            producer_epoch: 3,
            last_producer_epoch: -1,
            timeout_ms: 60_000,
            state,
            partitions: partitions
                .iter()
                .map(|(t, p)| (t.to_string(), *p))
                .collect(),
            start_ms: 1_700_000_000_000,
            last_update_ms: 1_700_000_000_500,
        }
    }

    #[test]
    fn key_is_kafka_s_version_0() {
        assert_eq!(key("tx"), [0, 0, 0, 2, b't', b'x']);
    }

    /// The bytes Kafka 3.9's generated TransactionLogValue v1 writes (fields in schema order,
    /// compact arrays and strings, one empty tagged-field section per struct).
    #[test]
    fn value_v1_is_kafka_s_bytes() {
        let m = meta(TxnState::Ongoing, &[("a", 0), ("a", 2), ("b", 1)]);
        let mut want: Vec<u8> = vec![0, 1];
        want.extend_from_slice(&1000i64.to_be_bytes());
        want.extend_from_slice(&3i16.to_be_bytes());
        want.extend_from_slice(&60_000i32.to_be_bytes());
        want.push(1); // Ongoing
        want.push(3); // two topics
        want.extend_from_slice(&[2, b'a', 3, 0, 0, 0, 0, 0, 0, 0, 2, 0]);
        want.extend_from_slice(&[2, b'b', 2, 0, 0, 0, 1, 0]);
        want.extend_from_slice(&1_700_000_000_500i64.to_be_bytes());
        want.extend_from_slice(&1_700_000_000_000i64.to_be_bytes());
        want.push(0);
        assert_eq!(value(&m), want);
        let (id, back) = decode(&key("tx"), Some(&want)).unwrap();
        assert_eq!(id, "tx");
        assert_eq!(back.unwrap(), m);
    }

    #[test]
    fn empty_writes_null_partitions_and_v0_reads() {
        let m = meta(TxnState::Empty, &[]);
        let bytes = value(&m);
        assert_eq!(bytes[2 + 8 + 2 + 4 + 1], 0, "null compact array");
        assert_eq!(decode(&key("tx"), Some(&bytes)).unwrap().1.unwrap(), m);
        // Version 0: INT32 array length, INT16 strings, no tagged fields.
        let mut v0: Vec<u8> = vec![0, 0];
        v0.extend_from_slice(&1000i64.to_be_bytes());
        v0.extend_from_slice(&3i16.to_be_bytes());
        v0.extend_from_slice(&60_000i32.to_be_bytes());
        v0.push(4); // CompleteCommit
        v0.extend_from_slice(&1i32.to_be_bytes());
        v0.extend_from_slice(&[0, 1, b'a']);
        v0.extend_from_slice(&1i32.to_be_bytes());
        v0.extend_from_slice(&7i32.to_be_bytes());
        v0.extend_from_slice(&5i64.to_be_bytes());
        v0.extend_from_slice(&4i64.to_be_bytes());
        let got = decode(&key("tx"), Some(&v0)).unwrap().1.unwrap();
        assert_eq!(got.state, TxnState::CompleteCommit);
        assert_eq!(got.partitions, BTreeSet::from([("a".to_owned(), 7)]));
        assert_eq!((got.last_update_ms, got.start_ms), (5, 4));
        // Tagged fields of a later writer are skipped.
        let mut tagged = value(&meta(TxnState::Ongoing, &[("a", 1)]));
        tagged.pop();
        tagged.extend_from_slice(&[1, 0, 8]);
        tagged.extend_from_slice(&77i64.to_be_bytes());
        assert!(decode(&key("tx"), Some(&tagged)).unwrap().1.is_some());
        assert_eq!(decode(&key("tx"), None).unwrap(), ("tx".to_owned(), None));
        assert!(decode(&key("tx"), Some(&tagged[..10])).is_err());
    }
}
