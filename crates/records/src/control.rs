//! Transaction markers: the control batches that end a transaction in a partition (Kafka's
//! `ControlRecordType` and `EndTransactionMarker`). A marker batch has the control and
//! transactional attributes, the producer's id and epoch, no sequence, and one record whose
//! key is (version i16 = 0, type i16: 0 ABORT, 1 COMMIT) and whose value is (version i16 = 0,
//! coordinator epoch i32).

use crate::builder::{BatchBuilder, BatchSpec, NewRecord};

/// The control record type of an ABORT marker.
pub const ABORT: i16 = 0;
/// The control record type of a COMMIT marker.
pub const COMMIT: i16 = 1;

/// One end-of-transaction marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTxnMarker {
    /// COMMIT (true) or ABORT (false).
    pub commit: bool,
    /// The epoch of the transaction coordinator that wrote it.
    pub coordinator_epoch: i32,
}

impl EndTxnMarker {
    /// The control record's key.
    pub fn key(&self) -> [u8; 4] {
        let kind = if self.commit { COMMIT } else { ABORT };
        let mut key = [0u8; 4];
        key[2..].copy_from_slice(&kind.to_be_bytes());
        key
    }

    /// The control record's value.
    pub fn value(&self) -> [u8; 6] {
        let mut value = [0u8; 6];
        value[2..].copy_from_slice(&self.coordinator_epoch.to_be_bytes());
        value
    }

    /// The marker batch for `producer_id` at `producer_epoch` (offsets from 0: the log
    /// assigns them), stamped `timestamp`.
    pub fn batch(&self, producer_id: i64, producer_epoch: i16, timestamp: i64) -> Vec<u8> {
        let mut spec = BatchSpec::new(0);
        spec.transactional = true;
        spec.control = true;
        spec.producer_id = producer_id;
        spec.producer_epoch = producer_epoch;
        let mut builder = BatchBuilder::new(spec);
        let (key, value) = (self.key(), self.value());
        builder.push(&NewRecord {
            offset: 0,
            timestamp,
            key: Some(&key),
            value: Some(&value),
            headers: &[],
        });
        builder.build()
    }

    /// The marker of one whole control batch: `None` when the batch is not a control batch,
    /// is empty (the cleaner removed its record) or is not an end-of-transaction marker.
    pub fn of_batch(batch: &[u8]) -> Option<EndTxnMarker> {
        let header = crate::BatchHeader::read(batch)?;
        if !header.is_control() || header.records_count < 1 {
            return None;
        }
        let section = crate::records_section(batch.get(..header.size_in_bytes())?).ok()?;
        let records = crate::record::records(&section, header.records_count).ok()?;
        let record = records.first()?;
        let key = record.key?;
        if key.len() < 4 {
            return None;
        }
        let commit = match i16::from_be_bytes([key[2], key[3]]) {
            ABORT => false,
            COMMIT => true,
            _ => return None,
        };
        // Kafka reads a value shorter than version + epoch as corrupt; treat it as epoch -1.
        let coordinator_epoch = match record.value {
            Some(v) if v.len() >= 6 => i32::from_be_bytes([v[2], v[3], v[4], v[5]]),
            _ => -1,
        };
        Some(EndTxnMarker {
            commit,
            coordinator_epoch,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marker_batch_round_trips_with_kafkas_layout() {
        let marker = EndTxnMarker {
            commit: true,
            coordinator_epoch: 7,
        };
        let batch = marker.batch(42, 3, 1_000);
        let refs = crate::validate_record_set(&batch).unwrap();
        let h = refs[0].header;
        assert!(h.is_control() && h.is_transactional());
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (42, 3, -1)
        );
        assert_eq!(h.records_count, 1);
        assert_eq!(marker.key(), [0, 0, 0, 1]);
        assert_eq!(marker.value(), [0, 0, 0, 0, 0, 7]);
        assert_eq!(EndTxnMarker::of_batch(&batch), Some(marker));
        let abort = EndTxnMarker {
            commit: false,
            coordinator_epoch: 0,
        };
        assert_eq!(EndTxnMarker::of_batch(&abort.batch(1, 0, 5)), Some(abort));
        // A data batch is no marker.
        let mut data = BatchBuilder::new(BatchSpec::new(0));
        data.push(&NewRecord {
            offset: 0,
            timestamp: 0,
            key: None,
            value: Some(b"x"),
            headers: &[],
        });
        assert_eq!(EndTxnMarker::of_batch(&data.build()), None);
    }
}
