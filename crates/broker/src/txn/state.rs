//! Kafka's transaction state machine (`TransactionState`, `TransactionMetadata`): the states
//! a transactional id moves through and the moves that are legal.

use std::collections::BTreeSet;

/// A transactional id's state, with Kafka's ids (the `TransactionStatus` byte of the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum TxnState {
    /// No transaction open (and none ever, or the last one completed and was written over).
    Empty,
    /// A transaction is open: partitions added, EndTxn not yet asked.
    Ongoing,
    /// EndTxn(commit) written; markers being sent.
    PrepareCommit,
    /// EndTxn(abort), a timeout or a fence written; markers being sent.
    PrepareAbort,
    /// Every partition has its COMMIT marker.
    CompleteCommit,
    /// Every partition has its ABORT marker.
    CompleteAbort,
    /// The id expired and is being removed.
    Dead,
    /// The epoch is being bumped to fence a producer before aborting (in memory only).
    PrepareEpochFence,
}

impl TxnState {
    /// Kafka's id of the state.
    pub(crate) fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    /// The state of Kafka's id.
    pub(crate) fn from_id(id: i8) -> Option<TxnState> {
        Some(match id {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            6 => TxnState::Dead,
            7 => TxnState::PrepareEpochFence,
            _ => return None,
        })
    }

    /// The name DescribeTransactions and ListTransactions use (Kafka's `stateName`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// The states this one may be entered from (Kafka's `validPreviousStates`).
    fn valid_previous(self) -> &'static [TxnState] {
        use TxnState::*;
        match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            PrepareAbort => &[Ongoing, PrepareEpochFence],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteAbort, CompleteCommit],
            PrepareEpochFence => &[Ongoing],
        }
    }

    /// Whether `self -> to` is one of Kafka's legal moves.
    pub(crate) fn can_move_to(self, to: TxnState) -> bool {
        to.valid_previous().contains(&self)
    }

    /// Whether markers are being written (Prepare*): requests other than a retry of the same
    /// EndTxn answer CONCURRENT_TRANSACTIONS.
    pub(crate) fn is_preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// One transactional id's state, as the log stores it (plus the previous epoch, which
/// KIP-360 retries of InitProducerId are recognised by).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TxnMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    /// The producer id before the last one was handed out (-1: none).
    pub last_producer_id: i64,
    pub producer_epoch: i16,
    /// The epoch before the last bump (-1: none).
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<(String, i32)>,
    pub start_ms: i64,
    pub last_update_ms: i64,
}

/// An illegal move, with a message for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IllegalMove(pub String);

impl TxnMetadata {
    /// A new id's metadata before its first InitProducerId completes: Empty, epoch -1.
    pub(crate) fn new(id: &str, producer_id: i64, timeout_ms: i32, now_ms: i64) -> TxnMetadata {
        TxnMetadata {
            transactional_id: id.to_owned(),
            producer_id,
            last_producer_id: -1,
            producer_epoch: -1,
            last_producer_epoch: -1,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
        }
    }

    /// The metadata after moving to `to` (checked against Kafka's legal moves), to be written
    /// to the log before it replaces this one.
    pub(crate) fn moved(&self, to: TxnState, now_ms: i64) -> Result<TxnMetadata, IllegalMove> {
        if !self.state.can_move_to(to) {
            return Err(IllegalMove(format!(
                "transactional id {} cannot move from {} to {}",
                self.transactional_id,
                self.state.name(),
                to.name()
            )));
        }
        let mut next = self.clone();
        next.state = to;
        next.last_update_ms = now_ms;
        match to {
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                next.partitions.clear();
            }
            TxnState::Ongoing if self.state != TxnState::Ongoing => {
                next.start_ms = now_ms;
            }
            _ => {}
        }
        Ok(next)
    }

    /// InitProducerId's epoch bump (Kafka's `prepareIncrementProducerEpoch`): Empty with the
    /// next epoch, or a new producer id at epoch 0 when the epoch is exhausted.
    pub(crate) fn bumped(
        &self,
        timeout_ms: i32,
        now_ms: i64,
        new_producer_id: impl FnOnce() -> i64,
    ) -> Result<TxnMetadata, IllegalMove> {
        let mut next = self.moved(TxnState::Empty, now_ms)?;
        next.timeout_ms = timeout_ms;
        next.start_ms = -1;
        if self.producer_epoch >= i16::MAX - 1 {
            next.last_producer_id = self.producer_id;
            next.producer_id = new_producer_id();
            next.producer_epoch = 0;
            next.last_producer_epoch = -1;
        } else {
            next.producer_epoch = self.producer_epoch + 1;
            next.last_producer_epoch = self.producer_epoch;
        }
        Ok(next)
    }

    /// The abort of an ongoing transaction with the epoch bumped (Kafka's
    /// `prepareFenceProducerEpoch` then PrepareAbort): the fenced producer's next request,
    /// including a delayed EndTxn, carries the old epoch and is refused (KAFKA-17754).
    pub(crate) fn fenced_abort(&self, now_ms: i64) -> Result<TxnMetadata, IllegalMove> {
        let mut fence = self.moved(TxnState::PrepareEpochFence, now_ms)?;
        if self.producer_epoch < i16::MAX - 1 {
            fence.producer_epoch = self.producer_epoch + 1;
        }
        fence.last_producer_epoch = -1;
        fence.moved(TxnState::PrepareAbort, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TxnState::*;

    const ALL: [TxnState; 8] = [
        Empty,
        Ongoing,
        PrepareCommit,
        PrepareAbort,
        CompleteCommit,
        CompleteAbort,
        Dead,
        PrepareEpochFence,
    ];

    #[test]
    fn ids_round_trip() {
        for s in ALL {
            assert_eq!(TxnState::from_id(s.id()), Some(s));
        }
        assert_eq!(TxnState::from_id(8), None);
    }

    #[test]
    fn only_kafka_s_moves_are_legal() {
        let legal: BTreeSet<(i8, i8)> = [
            (Empty, Empty),
            (CompleteCommit, Empty),
            (CompleteAbort, Empty),
            (Ongoing, Ongoing),
            (Empty, Ongoing),
            (CompleteCommit, Ongoing),
            (CompleteAbort, Ongoing),
            (Ongoing, PrepareCommit),
            (Ongoing, PrepareAbort),
            (PrepareEpochFence, PrepareAbort),
            (PrepareCommit, CompleteCommit),
            (PrepareAbort, CompleteAbort),
            (Empty, Dead),
            (CompleteAbort, Dead),
            (CompleteCommit, Dead),
            (Ongoing, PrepareEpochFence),
        ]
        .iter()
        .map(|(a, b)| (a.id(), b.id()))
        .collect();
        for from in ALL {
            for to in ALL {
                assert_eq!(
                    from.can_move_to(to),
                    legal.contains(&(from.id(), to.id())),
                    "{from:?} -> {to:?}"
                );
            }
        }
    }

    #[test]
    fn a_transaction_runs_and_completes() {
        let m = TxnMetadata::new("tx", 7, 1000, 1);
        let m = m.bumped(1000, 2, || unreachable!()).unwrap();
        assert_eq!((m.producer_epoch, m.last_producer_epoch), (0, -1));
        let mut ongoing = m.moved(Ongoing, 3).unwrap();
        ongoing.partitions.insert(("t".to_owned(), 0));
        assert_eq!(ongoing.start_ms, 3);
        let again = ongoing.moved(Ongoing, 4).unwrap();
        assert_eq!(again.start_ms, 3, "adding partitions keeps the start");
        let prepare = again.moved(PrepareCommit, 5).unwrap();
        assert_eq!(prepare.partitions.len(), 1, "markers need the partitions");
        let done = prepare.moved(CompleteCommit, 6).unwrap();
        assert!(done.partitions.is_empty());
        assert!(done.moved(PrepareAbort, 7).is_err());
        assert!(m.moved(PrepareCommit, 7).is_err(), "Empty cannot commit");
    }

    #[test]
    fn fencing_bumps_the_epoch_and_aborts() {
        let mut m = TxnMetadata::new("tx", 7, 1000, 1);
        m.producer_epoch = 4;
        let ongoing = m.moved(Ongoing, 2).unwrap();
        let aborting = ongoing.fenced_abort(3).unwrap();
        assert_eq!(aborting.state, PrepareAbort);
        assert_eq!(aborting.producer_epoch, 5);
        assert!(
            m.fenced_abort(3).is_err(),
            "only an ongoing transaction is fenced"
        );
    }

    #[test]
    fn an_exhausted_epoch_takes_a_new_producer_id() {
        let mut m = TxnMetadata::new("tx", 7, 1000, 1);
        m.producer_epoch = i16::MAX - 1;
        let next = m.bumped(1000, 2, || 99).unwrap();
        assert_eq!(
            (next.producer_id, next.producer_epoch, next.last_producer_id),
            (99, 0, 7)
        );
    }
}
