//! The leader-epoch cache of one partition (Kafka's `LeaderEpochFileCache`): which leader
//! epoch each stretch of the log was written in, as `(epoch, start offset)` pairs, kept in the
//! partition directory's `leader-epoch-checkpoint` (Kafka's format, rewritten atomically on
//! every change).
//!
//! A leader adds its epoch at its log end when it takes over; every append (leader or
//! follower) adds the epoch of a batch that starts a new one, so a follower's cache mirrors
//! the leader's. Truncating the log drops the entries past the new end; moving the log start
//! rewrites the first entry. [`LeaderEpochCache::end_offset_for`] answers OffsetsForLeaderEpoch.
//!
//! A partition with no file yet (created just now, or never written to) does not make one
//! when it becomes leader: the epoch it starts is kept in memory
//! ([`LeaderEpochCache::assign_at_log_end`]) and the file is written, as every other change
//! is, before the log's first append ([`LeaderEpochCache::write_pending`]). So creating
//! thousands of partitions costs no checkpoint file each, and the file is on disk before any
//! record it describes. A crash before that append loses only an entry at the end of an
//! empty log, which the next leader's entry at the same offset would replace anyway; a
//! missing file reads as no epochs.

use std::path::{Path, PathBuf};

use storage::checkpoint::{
    read_leader_epochs_if_present, write_leader_epochs, LEADER_EPOCH_CHECKPOINT,
};
use tracing::warn;

use crate::ReplicationError;

/// Kafka's `UNDEFINED_EPOCH`.
pub const UNDEFINED_EPOCH: i32 = -1;
/// Kafka's `UNDEFINED_EPOCH_OFFSET`.
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

/// The epochs of one partition's log, in increasing epoch and start offset.
#[derive(Debug)]
pub struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<(i32, i64)>,
    /// Whether the file exists (read at open, or written since).
    on_disk: bool,
    /// The entries changed without the file (no file existed): written before the next append.
    pending: bool,
}

impl LeaderEpochCache {
    /// The cache of a log created just now, in a directory known to hold no checkpoint:
    /// nothing to read.
    pub fn new_empty(dir: &Path) -> LeaderEpochCache {
        LeaderEpochCache {
            path: dir.join(LEADER_EPOCH_CHECKPOINT),
            entries: Vec::new(),
            on_disk: false,
            pending: false,
        }
    }

    /// Reads `dir/leader-epoch-checkpoint` (missing: empty). Entries that break the order
    /// (a hand-edited or older file) are dropped from the first offending one on.
    pub fn open(dir: &Path) -> Result<LeaderEpochCache, ReplicationError> {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT);
        let read = read_leader_epochs_if_present(&path)?;
        let on_disk = read.is_some();
        let read = read.unwrap_or_default();
        let mut entries: Vec<(i32, i64)> = Vec::with_capacity(read.len());
        for (epoch, start) in read {
            if epoch < 0
                || start < 0
                || entries
                    .last()
                    .is_some_and(|&(e, s)| epoch <= e || start < s)
            {
                warn!(path = %path.display(), epoch, start, "dropping out-of-order leader epoch entries");
                break;
            }
            entries.push((epoch, start));
        }
        Ok(LeaderEpochCache {
            path,
            entries,
            on_disk,
            pending: false,
        })
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> &[(i32, i64)] {
        &self.entries
    }

    /// The newest epoch, if any.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|&(epoch, _)| epoch)
    }

    /// Whether `leader-epoch-checkpoint` exists (or is about to: written in a pending
    /// [`storage::SyncGroup`]).
    pub fn on_disk(&self) -> bool {
        self.on_disk
    }

    /// Whether entries wait for [`LeaderEpochCache::write_pending`].
    pub fn has_pending(&self) -> bool {
        self.pending
    }

    /// Records that `epoch` starts at `start_offset` (Kafka's `assign`): nothing changes when
    /// `epoch` is already the newest with a start at or before `start_offset`; otherwise the
    /// entries it contradicts (an epoch at least as new, or a start at least as late) go first,
    /// so the cache stays monotonic. Returns whether the entries changed (the file is
    /// rewritten, with any pending change).
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> Result<bool, ReplicationError> {
        let changed = self.assign_in_memory(epoch, start_offset);
        if changed || self.pending {
            self.flush()?;
        }
        Ok(changed)
    }

    /// [`LeaderEpochCache::assign`] for a leader starting `epoch` at its log end
    /// (`start_offset`, where nothing is written yet): when the partition has no file yet, the
    /// entry stays in memory until [`LeaderEpochCache::write_pending`] (before the first
    /// append); otherwise the file is rewritten now. Returns whether the entries changed.
    pub fn assign_at_log_end(
        &mut self,
        epoch: i32,
        start_offset: i64,
    ) -> Result<bool, ReplicationError> {
        if self.on_disk {
            return self.assign(epoch, start_offset);
        }
        let changed = self.assign_in_memory(epoch, start_offset);
        self.pending |= changed;
        Ok(changed)
    }

    /// Writes the file if entries wait for it; called before anything is appended to the log,
    /// so the epochs of every record are on disk before the record.
    pub fn write_pending(&mut self) -> Result<(), ReplicationError> {
        if self.pending {
            self.flush()?;
        }
        Ok(())
    }

    fn assign_in_memory(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 || start_offset < 0 {
            return false;
        }
        let needed = match self.entries.last() {
            Some(&(last_epoch, last_start)) => epoch != last_epoch || start_offset < last_start,
            None => true,
        };
        if !needed {
            return false;
        }
        let before = self.entries.len();
        while self
            .entries
            .last()
            .is_some_and(|&(e, s)| e >= epoch || s >= start_offset)
        {
            self.entries.pop();
        }
        let removed = before - self.entries.len();
        if removed > 1 {
            warn!(path = %self.path.display(), epoch, start_offset, removed,
                "a new leader epoch entry replaced conflicting ones");
        }
        self.entries.push((epoch, start_offset));
        true
    }

    /// Kafka's `endOffsetFor`: the largest epoch at most `requested` and the offset where it
    /// ends (the start of the next epoch, or `log_end_offset` for the newest). `requested`
    /// older than every entry answers `(requested, first start)`; an unknown or undefined
    /// request answers `(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)`.
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> (i32, i64) {
        if requested == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        if self.latest_epoch() == Some(requested) {
            return (requested, log_end_offset);
        }
        let higher = self.entries.iter().find(|&&(e, _)| e > requested);
        let Some(&(_, higher_start)) = higher else {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        };
        match self.entries.iter().rev().find(|&&(e, _)| e <= requested) {
            Some(&(floor_epoch, _)) => (floor_epoch, higher_start),
            None => (requested, higher_start),
        }
    }

    /// Drops the entries that start at or past `end_offset` (the log was truncated there).
    pub fn truncate_from_end(&mut self, end_offset: i64) -> Result<(), ReplicationError> {
        if end_offset < 0 || self.entries.last().is_none_or(|&(_, s)| s < end_offset) {
            return Ok(());
        }
        self.entries.retain(|&(_, s)| s < end_offset);
        self.flush()
    }

    /// The log now starts at `start_offset`: entries wholly before it go, and the one that
    /// covers it starts there (Kafka's `truncateFromStart`).
    pub fn truncate_from_start(&mut self, start_offset: i64) -> Result<(), ReplicationError> {
        let covered = self
            .entries
            .iter()
            .take_while(|&&(_, s)| s <= start_offset)
            .count();
        if covered == 0 || (covered == 1 && self.entries[0].1 == start_offset) {
            return Ok(());
        }
        let (epoch, _) = self.entries[covered - 1];
        self.entries.drain(..covered);
        self.entries.insert(0, (epoch, start_offset));
        self.flush()
    }

    /// Forgets every entry (the log was emptied and restarted).
    pub fn clear(&mut self) -> Result<(), ReplicationError> {
        if self.entries.is_empty() {
            return Ok(());
        }
        self.entries.clear();
        self.flush()
    }

    fn flush(&mut self) -> Result<(), ReplicationError> {
        write_leader_epochs(&self.path, &self.entries)?;
        self.on_disk = true;
        self.pending = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> (tempfile::TempDir, LeaderEpochCache) {
        let dir = tempfile::tempdir().unwrap();
        let mut c = LeaderEpochCache::open(dir.path()).unwrap();
        for &(e, s) in entries {
            c.assign(e, s).unwrap();
        }
        (dir, c)
    }

    #[test]
    fn assign_keeps_the_cache_monotonic_and_writes_kafkas_file() {
        let (dir, mut c) = cache(&[(0, 0), (2, 10), (3, 25)]);
        assert!(
            !c.assign(3, 30).unwrap(),
            "the newest epoch does not move forward"
        );
        assert!(!c.assign(1, -1).unwrap(), "negative offsets are ignored");
        // An entry that contradicts the newest ones replaces them (a leader that truncated).
        assert!(c.assign(3, 20).unwrap());
        assert_eq!(c.entries(), &[(0, 0), (2, 10), (3, 20)]);
        assert!(c.assign(5, 12).unwrap());
        assert_eq!(c.entries(), &[(0, 0), (2, 10), (5, 12)]);
        let text = std::fs::read_to_string(dir.path().join(LEADER_EPOCH_CHECKPOINT)).unwrap();
        assert_eq!(text, "0\n3\n0 0\n2 10\n5 12\n");
        let reopened = LeaderEpochCache::open(dir.path()).unwrap();
        assert_eq!(reopened.entries(), c.entries());
    }

    #[test]
    fn end_offset_for_answers_like_kafka() {
        let (_dir, c) = cache(&[(1, 0), (3, 10), (6, 40)]);
        let leo = 55;
        assert_eq!(
            c.end_offset_for(6, leo),
            (6, 55),
            "the newest epoch ends at the log end"
        );
        assert_eq!(c.end_offset_for(3, leo), (3, 40));
        assert_eq!(
            c.end_offset_for(4, leo),
            (3, 40),
            "an unknown epoch: the one below it"
        );
        assert_eq!(c.end_offset_for(5, leo), (3, 40));
        assert_eq!(c.end_offset_for(1, leo), (1, 10));
        assert_eq!(c.end_offset_for(0, leo), (0, 0), "older than every entry");
        assert_eq!(
            c.end_offset_for(7, leo),
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        );
        assert_eq!(
            c.end_offset_for(UNDEFINED_EPOCH, leo),
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        );
        let (_dir, empty) = cache(&[]);
        assert_eq!(
            empty.end_offset_for(2, 0),
            (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        );
    }

    #[test]
    fn truncation_at_either_end() {
        let (dir, mut c) = cache(&[(1, 0), (3, 10), (6, 40)]);
        c.truncate_from_end(40).unwrap();
        assert_eq!(c.entries(), &[(1, 0), (3, 10)]);
        c.truncate_from_end(100).unwrap();
        assert_eq!(c.entries(), &[(1, 0), (3, 10)]);
        c.truncate_from_start(12).unwrap();
        assert_eq!(c.entries(), &[(3, 12)]);
        c.truncate_from_start(5).unwrap();
        assert_eq!(
            c.entries(),
            &[(3, 12)],
            "a start before the first entry changes nothing"
        );
        assert_eq!(
            LeaderEpochCache::open(dir.path()).unwrap().entries(),
            &[(3, 12)]
        );
        c.clear().unwrap();
        assert!(LeaderEpochCache::open(dir.path())
            .unwrap()
            .entries()
            .is_empty());
    }

    #[test]
    fn an_out_of_order_file_keeps_its_ordered_prefix() {
        let dir = tempfile::tempdir().unwrap();
        write_leader_epochs(
            &dir.path().join(LEADER_EPOCH_CHECKPOINT),
            &[(1, 0), (4, 9), (2, 12)],
        )
        .unwrap();
        let c = LeaderEpochCache::open(dir.path()).unwrap();
        assert_eq!(c.entries(), &[(1, 0), (4, 9)]);
    }

    #[test]
    fn an_epoch_at_the_log_end_waits_for_the_file_only_while_there_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(LEADER_EPOCH_CHECKPOINT);
        let mut c = LeaderEpochCache::new_empty(dir.path());
        assert!(c.assign_at_log_end(2, 0).unwrap());
        assert!(c.has_pending() && !c.on_disk() && !file.exists());
        assert_eq!(c.entries(), &[(2, 0)]);
        // A missing file still opens as no epochs.
        let missing = LeaderEpochCache::open(dir.path()).unwrap();
        assert!(missing.entries().is_empty() && !missing.on_disk());
        c.write_pending().unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "0\n1\n2 0\n");
        assert!(!c.has_pending() && c.on_disk());
        // With the file there, the next one is written at once.
        assert!(c.assign_at_log_end(3, 4).unwrap());
        assert!(!c.has_pending());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "0\n2\n2 0\n3 4\n");
        // An assign that changes nothing still writes what was pending.
        let other = tempfile::tempdir().unwrap();
        let mut d = LeaderEpochCache::open(other.path()).unwrap();
        d.assign_at_log_end(1, 0).unwrap();
        assert!(!d.assign(1, 0).unwrap());
        assert_eq!(
            LeaderEpochCache::open(other.path()).unwrap().entries(),
            &[(1, 0)]
        );
    }
}
