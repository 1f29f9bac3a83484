//! Producer state of one partition (Kafka's `ProducerStateManager`): per producer id, its
//! epoch and the last five batches it wrote, so a retried batch is answered with its original
//! offsets instead of being appended twice; and, for transactional producers, the first
//! offset of the transaction each has open here (a transactional batch opens one, a COMMIT or
//! ABORT marker closes it) and the coordinator epoch of its last marker. The earliest open
//! transaction bounds the last stable offset.

use std::collections::{BTreeMap, HashMap, VecDeque};

use records::control::EndTxnMarker;
use records::BatchHeader;

/// How many recent batches are remembered per producer (Kafka's
/// `NumBatchesToRetain`, which is also librdkafka's and the Java client's in-flight limit).
pub const BATCHES_TO_RETAIN: usize = 5;

/// One remembered batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BatchMetadata {
    first_seq: i32,
    last_seq: i32,
    first_offset: i64,
    last_offset: i64,
}

#[derive(Debug, Clone)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchMetadata>,
    /// The max timestamp of the producer's last batch (Kafka's `lastTimestamp`).
    last_timestamp: i64,
    /// The coordinator epoch of the producer's last marker (-1 before any).
    coordinator_epoch: i32,
    /// The first offset of the transaction the producer has open here.
    current_txn_first_offset: Option<i64>,
    /// The offset of the producer's last batch or marker (what retention compares).
    last_offset: i64,
}

impl Default for ProducerEntry {
    fn default() -> Self {
        ProducerEntry {
            epoch: 0,
            batches: VecDeque::new(),
            last_timestamp: -1,
            coordinator_epoch: -1,
            current_txn_first_offset: None,
            last_offset: -1,
        }
    }
}

/// A transaction a marker ended (Kafka's `CompletedTxn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletedTxn {
    /// The producer.
    pub producer_id: i64,
    /// The offset of its first batch in the transaction.
    pub first_offset: i64,
    /// The offset of the marker.
    pub last_offset: i64,
    /// ABORT (true) or COMMIT (false).
    pub aborted: bool,
    /// The last stable offset once it ended: the first offset of the earliest transaction
    /// still open, else the offset after the marker.
    pub last_stable_offset: i64,
}

/// One idempotent producer as DescribeProducers shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActiveProducer {
    /// The producer id.
    pub producer_id: i64,
    /// Its current epoch.
    pub producer_epoch: i16,
    /// The sequence of the last record it wrote.
    pub last_sequence: i32,
    /// The max timestamp of its last batch.
    pub last_timestamp: i64,
    /// The coordinator epoch of its last marker (-1: none).
    pub coordinator_epoch: i32,
    /// The first offset of its open transaction (-1: none).
    pub current_txn_start_offset: i64,
}

impl ProducerEntry {
    fn last_seq(&self) -> Option<i32> {
        self.batches.back().map(|b| b.last_seq)
    }
}

/// Why a batch of an idempotent producer was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SequenceError {
    /// The batch's epoch is older than the producer's current one (INVALID_PRODUCER_EPOCH).
    #[error(
        "producer {producer_id} has epoch {current}, the batch carries the older epoch {batch}"
    )]
    InvalidProducerEpoch {
        producer_id: i64,
        current: i16,
        batch: i16,
    },
    /// The batch does not follow the last one written (OUT_OF_ORDER_SEQUENCE_NUMBER).
    #[error("producer {producer_id}: expected sequence {expected}, the batch starts at {found}")]
    OutOfOrderSequence {
        producer_id: i64,
        expected: i32,
        found: i32,
    },
    /// A non-transactional batch from a producer with an open transaction (INVALID_TXN_STATE).
    #[error("expected a transactional write from producer {producer_id}: its transaction opened at offset {first_offset} is still open")]
    InvalidTxnState { producer_id: i64, first_offset: i64 },
    /// A marker from an older transaction coordinator (TRANSACTION_COORDINATOR_FENCED).
    #[error("invalid coordinator epoch for producer {producer_id}: {marker} (zombie), {current} (current)")]
    CoordinatorFenced {
        producer_id: i64,
        current: i32,
        marker: i32,
    },
}

/// What [`ProducerStateMap::check`] decided about a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SequenceCheck {
    /// Append it (also for batches without a producer id).
    Append,
    /// A retry of a batch already in the log at these offsets (first, last).
    Duplicate { first_offset: i64, last_offset: i64 },
}

/// Producer state of one partition.
#[derive(Debug, Clone, Default)]
pub struct ProducerStateMap {
    producers: HashMap<i64, ProducerEntry>,
    /// The open transactions: first offset -> producer id.
    ongoing: BTreeMap<i64, i64>,
}

impl ProducerStateMap {
    /// How many producers are tracked.
    pub fn len(&self) -> usize {
        self.producers.len()
    }

    /// Whether no producer is tracked.
    pub fn is_empty(&self) -> bool {
        self.producers.is_empty()
    }

    /// Checks a batch against the producer's state, as Kafka's `ProducerAppendInfo`:
    /// an older epoch is refused; a new epoch must start at sequence 0 unless the producer is
    /// unknown here; within an epoch the batch must follow the last sequence, or repeat one of
    /// the last five batches exactly (a duplicate).
    pub fn check(&self, header: &BatchHeader) -> Result<SequenceCheck, SequenceError> {
        if header.producer_id < 0 {
            return Ok(SequenceCheck::Append);
        }
        let Some(entry) = self.producers.get(&header.producer_id) else {
            // Unknown producer (new, or its batches were removed by retention): any sequence.
            return Ok(SequenceCheck::Append);
        };
        if header.producer_epoch < entry.epoch {
            return Err(SequenceError::InvalidProducerEpoch {
                producer_id: header.producer_id,
                current: entry.epoch,
                batch: header.producer_epoch,
            });
        }
        if header.producer_epoch > entry.epoch {
            if header.base_sequence != 0 {
                return Err(SequenceError::OutOfOrderSequence {
                    producer_id: header.producer_id,
                    expected: 0,
                    found: header.base_sequence,
                });
            }
            return check_txn(header, entry);
        }
        let last_seq = header.last_sequence();
        if let Some(dup) = entry
            .batches
            .iter()
            .find(|b| b.first_seq == header.base_sequence && b.last_seq == last_seq)
        {
            return Ok(SequenceCheck::Duplicate {
                first_offset: dup.first_offset,
                last_offset: dup.last_offset,
            });
        }
        match entry.last_seq() {
            Some(last) if !in_sequence(last, header.base_sequence) => {
                Err(SequenceError::OutOfOrderSequence {
                    producer_id: header.producer_id,
                    expected: next_sequence(last),
                    found: header.base_sequence,
                })
            }
            _ => check_txn(header, entry),
        }
    }

    /// Checks a marker the transaction coordinator asks to write (Kafka's
    /// `ProducerAppendInfo.appendEndTxnMarker`): an older producer epoch is
    /// INVALID_PRODUCER_EPOCH, an older coordinator epoch TRANSACTION_COORDINATOR_FENCED.
    pub fn check_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        marker: &EndTxnMarker,
    ) -> Result<(), SequenceError> {
        let Some(entry) = self.producers.get(&producer_id) else {
            return Ok(());
        };
        if producer_epoch < entry.epoch {
            return Err(SequenceError::InvalidProducerEpoch {
                producer_id,
                current: entry.epoch,
                batch: producer_epoch,
            });
        }
        if entry.coordinator_epoch > marker.coordinator_epoch {
            return Err(SequenceError::CoordinatorFenced {
                producer_id,
                current: entry.coordinator_epoch,
                marker: marker.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Records one whole batch as stored (a follower's fetch, the scan at open): a data
    /// batch as [`ProducerStateMap::record`], a marker as [`ProducerStateMap::record_marker`].
    /// Nothing is checked: the leader did.
    pub fn record_batch(&mut self, header: &BatchHeader, batch: &[u8]) -> Option<CompletedTxn> {
        if header.producer_id < 0 {
            return None;
        }
        if header.is_control() {
            let marker = EndTxnMarker::of_batch(batch)?;
            return self.record_marker(header, &marker);
        }
        self.record(header, header.base_offset, header.last_offset());
        None
    }

    /// Records a marker written at `header.base_offset`: the producer's open transaction (if
    /// any) ends, the producer takes the marker's epochs.
    pub fn record_marker(
        &mut self,
        header: &BatchHeader,
        marker: &EndTxnMarker,
    ) -> Option<CompletedTxn> {
        let offset = header.base_offset;
        let entry = self.producers.entry(header.producer_id).or_default();
        let first = entry.current_txn_first_offset.take();
        if header.producer_epoch != entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        entry.coordinator_epoch = marker.coordinator_epoch;
        entry.last_timestamp = header.max_timestamp;
        entry.last_offset = offset;
        let first_offset = first?;
        self.ongoing.remove(&first_offset);
        Some(CompletedTxn {
            producer_id: header.producer_id,
            first_offset,
            last_offset: offset,
            aborted: !marker.commit,
            last_stable_offset: self.first_unstable_offset().unwrap_or(offset + 1),
        })
    }

    /// The first offset of the earliest open transaction: the last stable offset is never
    /// past it.
    pub fn first_unstable_offset(&self) -> Option<i64> {
        self.ongoing.keys().next().copied()
    }

    /// The open transactions as (first offset, producer id), earliest first.
    pub fn ongoing(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.ongoing.iter().map(|(&first, &pid)| (first, pid))
    }

    /// Records a batch written at `first_offset..=last_offset` (after the append, or while
    /// rebuilding the state from the log at open).
    pub fn record(&mut self, header: &BatchHeader, first_offset: i64, last_offset: i64) {
        if header.producer_id < 0 {
            return;
        }
        let entry = self.producers.entry(header.producer_id).or_default();
        if header.producer_epoch != entry.epoch {
            entry.epoch = header.producer_epoch;
            entry.batches.clear();
        }
        entry.last_timestamp = header.max_timestamp;
        entry.last_offset = last_offset;
        if header.is_transactional() && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(first_offset);
            self.ongoing.insert(first_offset, header.producer_id);
        }
        entry.batches.push_back(BatchMetadata {
            first_seq: header.base_sequence,
            last_seq: header.last_sequence(),
            first_offset,
            last_offset,
        });
        while entry.batches.len() > BATCHES_TO_RETAIN {
            entry.batches.pop_front();
        }
    }

    /// Every producer with a batch or marker in the log, by producer id.
    pub fn active(&self) -> Vec<ActiveProducer> {
        let mut active: Vec<ActiveProducer> = self
            .producers
            .iter()
            .map(|(&producer_id, entry)| ActiveProducer {
                producer_id,
                producer_epoch: entry.epoch,
                last_sequence: entry.last_seq().unwrap_or(-1),
                last_timestamp: entry.last_timestamp,
                coordinator_epoch: entry.coordinator_epoch,
                current_txn_start_offset: entry.current_txn_first_offset.unwrap_or(-1),
            })
            .collect();
        active.sort_by_key(|p| p.producer_id);
        active
    }

    /// Forgets producers whose every remembered batch lies below `log_start_offset` (their
    /// data was deleted), so they may start again at any sequence, as Kafka does.
    /// A producer with an open transaction is kept (its transaction still bounds the last
    /// stable offset until its marker comes).
    pub fn truncate_head(&mut self, log_start_offset: i64) {
        self.producers.retain(|_, e| {
            e.last_offset >= log_start_offset || e.current_txn_first_offset.is_some()
        });
    }
}

/// The transactional part of a data batch's check (Kafka's `appendDataBatch`): a producer
/// with an open transaction may only write transactional batches.
fn check_txn(header: &BatchHeader, entry: &ProducerEntry) -> Result<SequenceCheck, SequenceError> {
    match entry.current_txn_first_offset {
        Some(first_offset) if !header.is_transactional() => Err(SequenceError::InvalidTxnState {
            producer_id: header.producer_id,
            first_offset,
        }),
        _ => Ok(SequenceCheck::Append),
    }
}

fn next_sequence(last: i32) -> i32 {
    if last == i32::MAX {
        0
    } else {
        last + 1
    }
}

fn in_sequence(last: i32, next: i32) -> bool {
    next == next_sequence(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(pid: i64, epoch: i16, seq: i32, count: i32) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            batch_length: 100,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: count - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            records_count: count,
        }
    }

    #[test]
    fn in_order_batches_are_appended_and_retries_are_duplicates() {
        let mut state = ProducerStateMap::default();
        let b0 = header(7, 0, 0, 3);
        assert_eq!(state.check(&b0), Ok(SequenceCheck::Append));
        state.record(&b0, 10, 12);
        let b1 = header(7, 0, 3, 2);
        assert_eq!(state.check(&b1), Ok(SequenceCheck::Append));
        state.record(&b1, 13, 14);
        assert_eq!(
            state.check(&b0),
            Ok(SequenceCheck::Duplicate {
                first_offset: 10,
                last_offset: 12
            })
        );
        assert_eq!(
            state.check(&b1),
            Ok(SequenceCheck::Duplicate {
                first_offset: 13,
                last_offset: 14
            })
        );
    }

    #[test]
    fn active_producers_show_epoch_last_sequence_and_last_timestamp() {
        let mut state = ProducerStateMap::default();
        assert!(state.active().is_empty());
        let mut b = header(9, 1, 0, 4);
        b.max_timestamp = 1_700_000_000_123;
        state.record(&b, 0, 3);
        state.record(&header(-1, -1, -1, 2), 4, 5);
        let mut b = header(3, 0, 10, 2);
        b.max_timestamp = 5;
        state.record(&b, 6, 7);
        assert_eq!(
            state.active(),
            vec![
                ActiveProducer {
                    producer_id: 3,
                    producer_epoch: 0,
                    last_sequence: 11,
                    last_timestamp: 5,
                    coordinator_epoch: -1,
                    current_txn_start_offset: -1,
                },
                ActiveProducer {
                    producer_id: 9,
                    producer_epoch: 1,
                    last_sequence: 3,
                    last_timestamp: 1_700_000_000_123,
                    coordinator_epoch: -1,
                    current_txn_start_offset: -1,
                },
            ]
        );
        state.truncate_head(7);
        assert_eq!(state.active().len(), 1);
    }

    #[test]
    fn gaps_and_stale_epochs_are_refused() {
        let mut state = ProducerStateMap::default();
        let b0 = header(7, 3, 0, 1);
        state.record(&b0, 0, 0);
        assert_eq!(
            state.check(&header(7, 3, 5, 1)),
            Err(SequenceError::OutOfOrderSequence {
                producer_id: 7,
                expected: 1,
                found: 5
            })
        );
        assert_eq!(
            state.check(&header(7, 2, 1, 1)),
            Err(SequenceError::InvalidProducerEpoch {
                producer_id: 7,
                current: 3,
                batch: 2
            })
        );
        // A bumped epoch must restart at 0.
        assert!(state.check(&header(7, 4, 1, 1)).is_err());
        assert_eq!(state.check(&header(7, 4, 0, 1)), Ok(SequenceCheck::Append));
        // Unknown producers and plain batches are accepted at any sequence.
        assert_eq!(state.check(&header(8, 0, 42, 1)), Ok(SequenceCheck::Append));
        assert_eq!(
            state.check(&header(-1, -1, -1, 1)),
            Ok(SequenceCheck::Append)
        );
    }

    #[test]
    fn only_five_batches_are_remembered_and_sequences_wrap() {
        let mut state = ProducerStateMap::default();
        for i in 0..7 {
            state.record(&header(1, 0, i, 1), i64::from(i), i64::from(i));
        }
        // Batch 0 and 1 are forgotten: a retry of them is now out of order.
        assert!(state.check(&header(1, 0, 0, 1)).is_err());
        assert!(matches!(
            state.check(&header(1, 0, 2, 1)),
            Ok(SequenceCheck::Duplicate { .. })
        ));
        let mut wrap = ProducerStateMap::default();
        wrap.record(&header(2, 0, i32::MAX, 1), 0, 0);
        assert_eq!(wrap.check(&header(2, 0, 0, 1)), Ok(SequenceCheck::Append));
    }

    #[test]
    fn truncate_head_forgets_producers_with_deleted_data() {
        let mut state = ProducerStateMap::default();
        state.record(&header(1, 0, 0, 1), 0, 0);
        state.record(&header(2, 0, 0, 1), 5, 5);
        state.truncate_head(3);
        assert_eq!(state.len(), 1);
        assert_eq!(state.check(&header(1, 0, 9, 1)), Ok(SequenceCheck::Append));
    }

    fn txn(pid: i64, epoch: i16, seq: i32, count: i32, base_offset: i64) -> BatchHeader {
        let mut h = header(pid, epoch, seq, count);
        h.attributes = records::TRANSACTIONAL_BIT;
        h.base_offset = base_offset;
        h
    }

    fn marker_header(pid: i64, epoch: i16, offset: i64) -> BatchHeader {
        let mut h = header(pid, epoch, -1, 1);
        h.attributes = records::TRANSACTIONAL_BIT | records::CONTROL_BIT;
        h.base_offset = offset;
        h
    }

    fn end(commit: bool, coordinator_epoch: i32) -> EndTxnMarker {
        EndTxnMarker {
            commit,
            coordinator_epoch,
        }
    }

    #[test]
    fn transactional_batches_open_a_transaction_that_a_marker_ends() {
        let mut state = ProducerStateMap::default();
        assert_eq!(state.first_unstable_offset(), None);
        // Producer 1 opens at 10, producer 2 at 12; a second batch of 1 keeps 10.
        let b = txn(1, 0, 0, 2, 10);
        assert_eq!(state.check(&b), Ok(SequenceCheck::Append));
        state.record(&b, 10, 11);
        state.record(&txn(2, 0, 0, 1, 12), 12, 12);
        state.record(&txn(1, 0, 2, 1, 13), 13, 13);
        assert_eq!(state.first_unstable_offset(), Some(10));
        assert_eq!(state.ongoing().collect::<Vec<_>>(), vec![(10, 1), (12, 2)]);
        let p1 = state
            .active()
            .into_iter()
            .find(|p| p.producer_id == 1)
            .unwrap();
        assert_eq!(p1.current_txn_start_offset, 10);
        // A plain batch from a producer inside a transaction is INVALID_TXN_STATE.
        assert_eq!(
            state.check(&header(1, 0, 3, 1)),
            Err(SequenceError::InvalidTxnState {
                producer_id: 1,
                first_offset: 10
            })
        );
        // Producer 1 aborts at 14: the LSO moves to producer 2's first offset.
        assert_eq!(state.check_marker(1, 0, &end(false, 5)), Ok(()));
        let done = state.record_marker(&marker_header(1, 0, 14), &end(false, 5));
        assert_eq!(
            done,
            Some(CompletedTxn {
                producer_id: 1,
                first_offset: 10,
                last_offset: 14,
                aborted: true,
                last_stable_offset: 12
            })
        );
        assert_eq!(state.first_unstable_offset(), Some(12));
        // Producer 2 commits: nothing open; the completed LSO is past the marker.
        let done = state.record_marker(&marker_header(2, 0, 15), &end(true, 5));
        assert_eq!(
            done.map(|t| (t.aborted, t.last_stable_offset)),
            Some((false, 16))
        );
        assert_eq!(state.first_unstable_offset(), None);
        // A marker with no open transaction completes nothing.
        assert_eq!(
            state.record_marker(&marker_header(2, 0, 16), &end(true, 5)),
            None
        );
        let p1 = state
            .active()
            .into_iter()
            .find(|p| p.producer_id == 1)
            .unwrap();
        assert_eq!((p1.coordinator_epoch, p1.current_txn_start_offset), (5, -1));
        // The producer goes on after its marker, in sequence.
        assert_eq!(state.check(&txn(1, 0, 3, 1, 17)), Ok(SequenceCheck::Append));
    }

    #[test]
    fn stale_markers_are_fenced_by_producer_and_coordinator_epochs() {
        let mut state = ProducerStateMap::default();
        state.record(&txn(1, 3, 0, 1, 0), 0, 0);
        state.record_marker(&marker_header(1, 3, 1), &end(true, 4));
        assert_eq!(
            state.check_marker(1, 2, &end(false, 4)),
            Err(SequenceError::InvalidProducerEpoch {
                producer_id: 1,
                current: 3,
                batch: 2
            })
        );
        assert_eq!(
            state.check_marker(1, 3, &end(false, 3)),
            Err(SequenceError::CoordinatorFenced {
                producer_id: 1,
                current: 4,
                marker: 3
            })
        );
        assert_eq!(state.check_marker(1, 4, &end(false, 4)), Ok(()));
        assert_eq!(state.check_marker(99, 0, &end(false, 0)), Ok(()));
        // A marker at a bumped epoch (the coordinator fencing the producer) takes it over.
        state.record(&txn(1, 3, 1, 1, 2), 2, 2);
        let done = state.record_marker(&marker_header(1, 4, 3), &end(false, 4));
        assert_eq!(done.map(|t| t.first_offset), Some(2));
        assert!(matches!(
            state.check(&txn(1, 3, 2, 1, 4)),
            Err(SequenceError::InvalidProducerEpoch { .. })
        ));
        assert_eq!(state.check(&txn(1, 4, 0, 1, 4)), Ok(SequenceCheck::Append));
    }

    #[test]
    fn record_batch_reads_the_marker_of_a_stored_control_batch() {
        let mut state = ProducerStateMap::default();
        state.record(&txn(7, 0, 0, 1, 0), 0, 0);
        let mut batch = end(false, 2).batch(7, 0, 0);
        batch[..8].copy_from_slice(&1i64.to_be_bytes());
        let h = BatchHeader::read(&batch).unwrap();
        let done = state.record_batch(&h, &batch).unwrap();
        assert_eq!(
            (done.first_offset, done.last_offset, done.aborted),
            (0, 1, true)
        );
        // An open transaction survives retention of its producer's older data.
        state.record(&txn(7, 0, 1, 1, 5), 5, 5);
        state.truncate_head(100);
        assert_eq!(state.first_unstable_offset(), Some(5));
    }
}
