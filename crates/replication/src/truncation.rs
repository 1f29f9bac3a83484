//! Where a follower truncates before fetching from a new leader (KIP-101, KIP-279; Kafka's
//! `AbstractFetcherThread.getOffsetTruncationState`), as a pure function.
//!
//! The follower asks the leader (OffsetsForLeaderEpoch) where its own latest epoch ends in
//! the leader's log. The leader answers the largest epoch it has at most that one, and where
//! it ends. If the follower knows that epoch too, the logs agree up to the smaller of the two
//! ends: the follower truncates there and is done. If not, the follower truncates to the end
//! of its largest epoch below the leader's answer and asks again with its new latest epoch;
//! each round removes at least one epoch, so this ends. The high watermark is only the answer
//! when the leader knows nothing (an undefined offset).

use crate::leader_epoch::{UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET};

/// The offset to truncate to, and whether the follower can start fetching afterwards (else it
/// asks the leader again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncation {
    /// Truncate the log to this offset (the new log end; nothing happens at or past it).
    pub offset: i64,
    /// Whether the divergence point is found.
    pub complete: bool,
}

/// The truncation for the leader's answer `(leader_epoch, leader_end_offset)`. `local` is the
/// follower's own `end_offset_for` (see `LeaderEpochCache::end_offset_for`),
/// `local_log_end_offset` its log end and `high_watermark` its high watermark.
pub fn truncation_offset(
    leader_epoch: i32,
    leader_end_offset: i64,
    local: impl Fn(i32) -> (i32, i64),
    local_log_end_offset: i64,
    high_watermark: i64,
) -> Truncation {
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET {
        // The leader knows nothing of the follower's epochs (an empty or old log).
        return Truncation {
            offset: high_watermark.min(local_log_end_offset),
            complete: true,
        };
    }
    if leader_epoch == UNDEFINED_EPOCH {
        return Truncation {
            offset: leader_end_offset.min(local_log_end_offset),
            complete: true,
        };
    }
    match local(leader_epoch) {
        (_, UNDEFINED_EPOCH_OFFSET) => Truncation {
            offset: leader_end_offset.min(local_log_end_offset),
            complete: true,
        },
        (epoch, end) if epoch != leader_epoch => Truncation {
            offset: end.min(local_log_end_offset),
            complete: false,
        },
        (_, end) => Truncation {
            offset: end.min(leader_end_offset).min(local_log_end_offset),
            complete: true,
        },
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A log as the epoch of each offset, and its epoch cache computed from it.
    #[derive(Debug, Clone)]
    struct History {
        epochs_by_offset: Vec<i32>,
        /// A leader's current epoch: in its cache from its log end on, even before it wrote.
        current_epoch: Option<i32>,
    }

    impl History {
        fn of(epochs_by_offset: Vec<i32>) -> History {
            History {
                epochs_by_offset,
                current_epoch: None,
            }
        }

        fn entries(&self) -> Vec<(i32, i64)> {
            let mut out: Vec<(i32, i64)> = Vec::new();
            for (offset, &epoch) in self.epochs_by_offset.iter().enumerate() {
                if out.last().is_none_or(|&(e, _)| e != epoch) {
                    out.push((epoch, offset as i64));
                }
            }
            if let Some(current) = self.current_epoch {
                if out.last().is_none_or(|&(e, _)| e < current) {
                    out.push((current, self.end()));
                }
            }
            out
        }

        fn end(&self) -> i64 {
            self.epochs_by_offset.len() as i64
        }

        /// `LeaderEpochCache::end_offset_for` over these entries.
        fn end_offset_for(&self, requested: i32) -> (i32, i64) {
            let entries = self.entries();
            if requested == UNDEFINED_EPOCH {
                return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
            }
            if entries.last().map(|e| e.0) == Some(requested) {
                return (requested, self.end());
            }
            let Some(&(_, higher)) = entries.iter().find(|e| e.0 > requested) else {
                return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
            };
            match entries.iter().rev().find(|e| e.0 <= requested) {
                Some(&(e, _)) => (e, higher),
                None => (requested, higher),
            }
        }
    }

    /// Runs the follower's rounds against the leader until complete; returns the offset.
    fn converge(leader: &History, follower: &History, high_watermark: i64) -> i64 {
        let mut follower = follower.clone();
        for _ in 0..100 {
            let Some(latest) = follower.entries().last().map(|e| e.0) else {
                return high_watermark.min(follower.end());
            };
            let (epoch, end) = leader.end_offset_for(latest);
            let t = truncation_offset(
                epoch,
                end,
                |e| follower.end_offset_for(e),
                follower.end(),
                high_watermark,
            );
            follower.epochs_by_offset.truncate(t.offset.max(0) as usize);
            if t.complete {
                return t.offset;
            }
        }
        panic!("truncation did not converge");
    }

    /// Two logs that share a prefix and then were written by different leaders: offsets hold
    /// non-decreasing epochs, the leader's suffix and the follower's suffix use disjoint
    /// epochs after the shared part (one leader per epoch).
    fn diverged() -> impl Strategy<Value = (History, History, usize)> {
        (
            proptest::collection::vec(1..4i32, 0..12),
            proptest::collection::vec(1..4i32, 0..12),
            proptest::collection::vec(1..4i32, 0..12),
            any::<bool>(),
        )
            .prop_map(|(common, leader_tail, follower_tail, follower_first)| {
                let mut epoch = 0;
                let mut shared = Vec::new();
                for step in common {
                    epoch += step / 3; // mostly the same epoch, sometimes a new one
                    shared.push(epoch);
                }
                // After the shared prefix both suffixes have their own epochs: one got the
                // odd ones, the other the even ones, both above every shared epoch.
                let (leader_base, follower_base) = if follower_first {
                    (epoch + 2, epoch + 1)
                } else {
                    (epoch + 1, epoch + 2)
                };
                let tail = |base: i32, steps: Vec<i32>| {
                    let mut e = base;
                    steps
                        .into_iter()
                        .map(|s| {
                            if s == 3 {
                                e += 2;
                            }
                            e
                        })
                        .collect::<Vec<_>>()
                };
                let mut leader = shared.clone();
                leader.extend(tail(leader_base, leader_tail));
                let mut follower = shared.clone();
                follower.extend(tail(follower_base, follower_tail));
                // The leader leads at an epoch newer than any written so far.
                let newest = leader.iter().chain(&follower).copied().max().unwrap_or(0);
                let leader = History {
                    epochs_by_offset: leader,
                    current_epoch: Some(newest + 1),
                };
                (leader, History::of(follower), shared.len())
            })
    }

    proptest! {
        /// The follower ends exactly at the end of the shared prefix (or at its own end, if
        /// that is shorter), never below it, whatever its high watermark.
        #[test]
        fn followers_truncate_exactly_at_the_divergence_point(
            (leader, follower, shared) in diverged(),
            hw_fraction in 0.0f64..=1.0,
        ) {
            let hw = (shared as f64 * hw_fraction) as i64;
            let got = converge(&leader, &follower, hw);
            let expected = common_prefix(&leader, &follower);
            prop_assert_eq!(got, expected, "leader {:?} follower {:?}", leader.entries(), follower.entries());
        }
    }

    fn common_prefix(a: &History, b: &History) -> i64 {
        a.epochs_by_offset
            .iter()
            .zip(&b.epochs_by_offset)
            .take_while(|(x, y)| x == y)
            .count() as i64
    }

    #[test]
    fn kip_279_example_takes_two_rounds() {
        // Follower: epoch 1 at 0..10, epoch 3 at 10..20. Leader: epoch 1 at 0..8, epoch 2 at
        // 8..15, epoch 4 at 15..
        let follower = History::of([vec![1; 10], vec![3; 10]].concat());
        let leader = History::of([vec![1; 8], vec![2; 7], vec![4; 5]].concat());
        let (epoch, end) = leader.end_offset_for(3);
        assert_eq!((epoch, end), (2, 15));
        let first = truncation_offset(epoch, end, |e| follower.end_offset_for(e), 20, 0);
        assert_eq!(
            first,
            Truncation {
                offset: 10,
                complete: false
            }
        );
        assert_eq!(converge(&leader, &follower, 0), 8);
    }

    #[test]
    fn an_unknown_answer_falls_back_to_the_high_watermark() {
        let t = truncation_offset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, |_| (0, 0), 30, 12);
        assert_eq!(
            t,
            Truncation {
                offset: 12,
                complete: true
            }
        );
    }

    #[test]
    fn a_follower_that_is_a_prefix_of_the_leader_is_not_truncated() {
        let leader = History::of([vec![1; 10], vec![2; 10]].concat());
        let follower = History::of([vec![1; 10], vec![2; 4]].concat());
        assert_eq!(converge(&leader, &follower, 0), 14);
    }
}
