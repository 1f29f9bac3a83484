//! Idempotent-producer state of one partition (Kafka's `ProducerStateManager`, without
//! transactions): per producer id, its epoch and the last five batches it wrote, so a retried
//! batch is answered with its original offsets instead of being appended twice.

use std::collections::{HashMap, VecDeque};

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

#[derive(Debug, Clone, Default)]
struct ProducerEntry {
    epoch: i16,
    batches: VecDeque<BatchMetadata>,
    /// The max timestamp of the producer's last batch (Kafka's `lastTimestamp`).
    last_timestamp: i64,
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
            return Ok(SequenceCheck::Append);
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
            _ => Ok(SequenceCheck::Append),
        }
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

    /// Every producer with a remembered batch, by producer id.
    pub fn active(&self) -> Vec<ActiveProducer> {
        let mut active: Vec<ActiveProducer> = self
            .producers
            .iter()
            .filter_map(|(&producer_id, entry)| {
                Some(ActiveProducer {
                    producer_id,
                    producer_epoch: entry.epoch,
                    last_sequence: entry.last_seq()?,
                    last_timestamp: entry.last_timestamp,
                })
            })
            .collect();
        active.sort_by_key(|p| p.producer_id);
        active
    }

    /// Forgets producers whose every remembered batch lies below `log_start_offset` (their
    /// data was deleted), so they may start again at any sequence, as Kafka does.
    pub fn truncate_head(&mut self, log_start_offset: i64) {
        self.producers.retain(|_, e| {
            e.batches
                .back()
                .is_some_and(|b| b.last_offset >= log_start_offset)
        });
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
                    last_timestamp: 5
                },
                ActiveProducer {
                    producer_id: 9,
                    producer_epoch: 1,
                    last_sequence: 3,
                    last_timestamp: 1_700_000_000_123
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
}
