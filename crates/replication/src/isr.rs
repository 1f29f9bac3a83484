//! The leader's view of its followers, as pure functions of their fetches and the clock
//! (Kafka 2.8's `Replica` and the ISR half of `Partition`).
//!
//! - Each follower's fetch position (its log end offset) and *last caught-up time*: the
//!   latest time at which its fetch offset reached the leader's log end (or the log end the
//!   leader had at its previous fetch, so a follower of a busy partition is never "behind"
//!   only because records keep arriving).
//! - The ISR: committed (the controller accepted it) or pending (an AlterPartition is in
//!   flight). One change is in flight at a time. While an expansion is pending, the high
//!   watermark is computed over the *maximal* ISR, the committed one plus the new member: a
//!   larger ISR only makes the high watermark more careful. A pending shrink keeps the old ISR
//!   until the controller accepts it.
//! - A follower leaves the ISR when it has not been caught up for `replica.lag.time.max.ms`;
//!   one outside joins when its log end reaches the high watermark and the start of the
//!   leader's current epoch.
//! - The high watermark is the smallest log end over the maximal ISR and the followers caught
//!   up within the lag time (Kafka includes those, so that a follower catching up is not
//!   outrun forever); a follower that never fetched has no log end and holds it until the lag
//!   rule removes it. It never moves backwards.

use std::collections::BTreeMap;

/// "Not known yet": a follower that has not fetched since this broker became leader.
pub const UNKNOWN_OFFSET: i64 = -1;
/// A last caught-up time that is older than any lag: "never caught up". (Kafka uses 0, the
/// Unix epoch; this keeps the rules independent of where the clock starts.)
pub const NEVER_MS: i64 = i64::MIN / 4;

/// The ISR as the leader uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IsrState {
    /// The controller's ISR.
    Committed {
        /// The in-sync replicas.
        isr: Vec<i32>,
    },
    /// An AlterPartition adding `adding` is in flight.
    PendingExpand {
        /// The committed ISR.
        isr: Vec<i32>,
        /// The follower being added.
        adding: i32,
        /// Identifies this proposal (responses to older ones are ignored).
        proposal: u64,
    },
    /// An AlterPartition removing `removing` is in flight.
    PendingShrink {
        /// The committed ISR.
        isr: Vec<i32>,
        /// The followers being removed.
        removing: Vec<i32>,
        /// Identifies this proposal.
        proposal: u64,
    },
}

impl IsrState {
    /// The committed ISR.
    pub fn isr(&self) -> &[i32] {
        match self {
            IsrState::Committed { isr }
            | IsrState::PendingExpand { isr, .. }
            | IsrState::PendingShrink { isr, .. } => isr,
        }
    }

    /// The ISR the high watermark and acks=all wait for: the committed one, plus a follower
    /// being added.
    pub fn maximal(&self) -> Vec<i32> {
        let mut isr = self.isr().to_vec();
        if let IsrState::PendingExpand { adding, .. } = self {
            if !isr.contains(adding) {
                isr.push(*adding);
            }
        }
        isr
    }

    /// Whether an AlterPartition is in flight.
    pub fn is_inflight(&self) -> bool {
        !matches!(self, IsrState::Committed { .. })
    }

    /// The proposal id of the change in flight.
    pub fn proposal(&self) -> Option<u64> {
        match self {
            IsrState::Committed { .. } => None,
            IsrState::PendingExpand { proposal, .. } | IsrState::PendingShrink { proposal, .. } => {
                Some(*proposal)
            }
        }
    }

    /// The ISR this state asks the controller for.
    pub fn proposed_isr(&self) -> Vec<i32> {
        match self {
            IsrState::Committed { isr } => isr.clone(),
            IsrState::PendingExpand { .. } => self.maximal(),
            IsrState::PendingShrink { isr, removing, .. } => isr
                .iter()
                .copied()
                .filter(|r| !removing.contains(r))
                .collect(),
        }
    }
}

/// What the leader knows of one follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteReplica {
    /// The follower's log end offset: the offset of its last fetch.
    pub log_end_offset: i64,
    /// See the module docs.
    pub last_caught_up_ms: i64,
    /// The leader's log end when the previous fetch arrived.
    pub last_fetch_leader_log_end_offset: i64,
    /// When the previous fetch arrived.
    pub last_fetch_ms: i64,
    /// No expansion is proposed for this follower before this time: the controller refused
    /// it as not eligible (not live, or in controlled shutdown).
    pub expand_not_before_ms: i64,
}

impl RemoteReplica {
    /// A follower the leader has heard nothing from.
    pub fn unknown() -> RemoteReplica {
        RemoteReplica {
            log_end_offset: UNKNOWN_OFFSET,
            last_caught_up_ms: NEVER_MS,
            last_fetch_leader_log_end_offset: 0,
            last_fetch_ms: NEVER_MS,
            expand_not_before_ms: NEVER_MS,
        }
    }

    /// Records a fetch at `fetch_offset` received at `now_ms`, when the leader's log ended at
    /// `leader_log_end_offset` (Kafka's `Replica.updateFetchState`).
    pub fn on_fetch(&mut self, fetch_offset: i64, now_ms: i64, leader_log_end_offset: i64) {
        if fetch_offset >= leader_log_end_offset {
            self.last_caught_up_ms = self.last_caught_up_ms.max(now_ms);
        } else if fetch_offset >= self.last_fetch_leader_log_end_offset {
            self.last_caught_up_ms = self.last_caught_up_ms.max(self.last_fetch_ms);
        }
        self.log_end_offset = fetch_offset;
        self.last_fetch_leader_log_end_offset = leader_log_end_offset;
        self.last_fetch_ms = now_ms;
    }

    /// Restarts the lag clock when this broker becomes (or stays) leader: an in-sync follower
    /// counts as caught up now, any other as never.
    pub fn reset(&mut self, leader_log_end_offset: i64, now_ms: i64, in_sync: bool) {
        self.last_fetch_leader_log_end_offset = leader_log_end_offset;
        self.last_fetch_ms = now_ms;
        self.last_caught_up_ms = if in_sync { now_ms } else { NEVER_MS };
    }
}

/// The followers out of sync at `now_ms` (Kafka's `getOutOfSyncReplicas`): ISR members (not
/// the leader) whose log end differs from the leader's and that have not been caught up for
/// more than `lag_time_max_ms`. Empty while a change is in flight.
pub fn out_of_sync_replicas(
    isr: &IsrState,
    local_id: i32,
    remotes: &BTreeMap<i32, RemoteReplica>,
    leader_log_end_offset: i64,
    now_ms: i64,
    lag_time_max_ms: i64,
) -> Vec<i32> {
    if isr.is_inflight() {
        return Vec::new();
    }
    isr.isr()
        .iter()
        .copied()
        .filter(|&r| r != local_id)
        .filter(|r| {
            let remote = remotes
                .get(r)
                .copied()
                .unwrap_or_else(RemoteReplica::unknown);
            remote.log_end_offset != leader_log_end_offset
                && now_ms - remote.last_caught_up_ms > lag_time_max_ms
        })
        .collect()
}

/// Whether follower `replica` may join the ISR (Kafka's `needsExpandIsr`): nothing in flight,
/// an assigned replica not in the ISR, with a log end at the high watermark or past it and
/// inside the leader's current epoch.
pub fn can_join_isr(
    isr: &IsrState,
    replicas: &[i32],
    replica: i32,
    follower_log_end_offset: i64,
    high_watermark: i64,
    leader_epoch_start_offset: i64,
) -> bool {
    !isr.is_inflight()
        && replicas.contains(&replica)
        && !isr.isr().contains(&replica)
        && follower_log_end_offset >= high_watermark
        && follower_log_end_offset >= leader_epoch_start_offset
}

/// The high watermark the leader may move to (see the module docs); the caller keeps the
/// larger of this and the current one.
pub fn high_watermark_candidate(
    isr: &IsrState,
    local_id: i32,
    remotes: &BTreeMap<i32, RemoteReplica>,
    leader_log_end_offset: i64,
    now_ms: i64,
    lag_time_max_ms: i64,
) -> i64 {
    let maximal = isr.maximal();
    let mut hw = leader_log_end_offset;
    for (&id, remote) in remotes {
        if id == local_id {
            continue;
        }
        let counts = maximal.contains(&id) || now_ms - remote.last_caught_up_ms <= lag_time_max_ms;
        if counts && remote.log_end_offset < hw {
            hw = remote.log_end_offset;
        }
    }
    // ISR members the leader holds no state for (not in the assignment it knows) never fetched.
    if maximal
        .iter()
        .any(|r| *r != local_id && !remotes.contains_key(r))
    {
        hw = hw.min(UNKNOWN_OFFSET);
    }
    hw
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAG: i64 = 10_000;

    fn committed(isr: &[i32]) -> IsrState {
        IsrState::Committed { isr: isr.to_vec() }
    }

    fn remotes(entries: &[(i32, i64, i64)]) -> BTreeMap<i32, RemoteReplica> {
        entries
            .iter()
            .map(|&(id, leo, caught_up)| {
                (
                    id,
                    RemoteReplica {
                        log_end_offset: leo,
                        last_caught_up_ms: caught_up,
                        last_fetch_leader_log_end_offset: 0,
                        last_fetch_ms: 0,
                        expand_not_before_ms: NEVER_MS,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn caught_up_time_follows_kafkas_two_rules() {
        let mut r = RemoteReplica::unknown();
        // Reaches the leader's end: caught up now.
        r.on_fetch(10, 1_000, 10);
        assert_eq!(r.last_caught_up_ms, 1_000);
        // Behind the leader's current end but past its end at the previous fetch: caught up
        // as of that previous fetch.
        r.on_fetch(10, 2_000, 15);
        assert_eq!(r.last_caught_up_ms, 1_000);
        r.on_fetch(15, 3_000, 20);
        assert_eq!(r.last_caught_up_ms, 2_000);
        // Stuck: the time stays.
        r.on_fetch(15, 9_000, 30);
        assert_eq!(r.last_caught_up_ms, 2_000);
        assert_eq!(r.log_end_offset, 15);
    }

    #[test]
    fn a_follower_behind_for_longer_than_the_lag_time_is_out_of_sync() {
        let isr = committed(&[1, 2, 3]);
        let r = remotes(&[(2, 50, 0), (3, 40, 5_000)]);
        assert_eq!(
            out_of_sync_replicas(&isr, 1, &r, 50, 14_000, LAG),
            Vec::<i32>::new(),
            "2 has the leader's end; 3 was caught up 9 s ago"
        );
        assert_eq!(out_of_sync_replicas(&isr, 1, &r, 50, 15_001, LAG), vec![3]);
        // A follower that never fetched leaves too.
        let r = remotes(&[(2, 50, 0)]);
        assert_eq!(out_of_sync_replicas(&isr, 1, &r, 50, LAG + 1, LAG), vec![3]);
        // Nothing while a change is in flight.
        let pending = IsrState::PendingExpand {
            isr: vec![1, 2, 3],
            adding: 4,
            proposal: 1,
        };
        assert!(out_of_sync_replicas(&pending, 1, &r, 50, 99_999, LAG).is_empty());
    }

    #[test]
    fn joining_needs_the_high_watermark_and_the_current_epoch() {
        let isr = committed(&[1, 2]);
        let replicas = [1, 2, 3];
        assert!(can_join_isr(&isr, &replicas, 3, 20, 20, 15));
        assert!(
            !can_join_isr(&isr, &replicas, 3, 19, 20, 15),
            "below the high watermark"
        );
        assert!(
            !can_join_isr(&isr, &replicas, 3, 20, 10, 25),
            "before the epoch's start"
        );
        assert!(
            !can_join_isr(&isr, &replicas, 4, 20, 20, 15),
            "not a replica"
        );
        assert!(!can_join_isr(&isr, &replicas, 2, 20, 20, 15), "already in");
        let pending = IsrState::PendingShrink {
            isr: vec![1, 2],
            removing: vec![2],
            proposal: 1,
        };
        assert!(
            !can_join_isr(&pending, &replicas, 3, 20, 20, 15),
            "a change is in flight"
        );
    }

    #[test]
    fn the_high_watermark_uses_the_maximal_isr_and_caught_up_followers() {
        // Committed ISR [1, 2]: 3 is outside and has not been caught up.
        let r = remotes(&[(2, 40, 9_000), (3, 10, NEVER_MS)]);
        assert_eq!(
            high_watermark_candidate(&committed(&[1, 2]), 1, &r, 50, 10_000, LAG),
            40
        );
        // 3 is being added: the high watermark waits for it.
        let expanding = IsrState::PendingExpand {
            isr: vec![1, 2],
            adding: 3,
            proposal: 7,
        };
        assert_eq!(expanding.maximal(), vec![1, 2, 3]);
        assert_eq!(expanding.proposed_isr(), vec![1, 2, 3]);
        assert_eq!(
            high_watermark_candidate(&expanding, 1, &r, 50, 10_000, LAG),
            10
        );
        // A pending shrink still waits for the member being removed.
        let shrinking = IsrState::PendingShrink {
            isr: vec![1, 2, 3],
            removing: vec![3],
            proposal: 8,
        };
        assert_eq!(shrinking.proposed_isr(), vec![1, 2]);
        assert_eq!(
            high_watermark_candidate(&shrinking, 1, &r, 50, 99_000, LAG),
            10
        );
        // A follower outside the ISR but caught up within the lag time counts too.
        let r = remotes(&[(2, 40, 9_000), (3, 30, 9_500)]);
        assert_eq!(
            high_watermark_candidate(&committed(&[1, 2]), 1, &r, 50, 10_000, LAG),
            30
        );
        // An ISR member that never fetched holds it.
        let r = remotes(&[(2, UNKNOWN_OFFSET, 9_000)]);
        assert_eq!(
            high_watermark_candidate(&committed(&[1, 2]), 1, &r, 50, 10_000, LAG),
            UNKNOWN_OFFSET
        );
        // Alone in the ISR: the leader's log end.
        assert_eq!(
            high_watermark_candidate(&committed(&[1]), 1, &BTreeMap::new(), 50, 0, LAG),
            50
        );
    }
}
