//! Incremental fetch sessions (KIP-227; Kafka's `FetchSession.scala`), both ends.
//!
//! The leader's [`FetchSessionCache`] remembers, per session, the partitions a fetcher asked
//! for and what it last told it about each. A fetch with session epoch 0 is a full fetch
//! that creates a session (answered with its id); one with a later epoch names only the
//! partitions whose fetch position changed, plus the ones to forget, and the answer carries
//! only the partitions with something new (records, an error, a moved high watermark or log
//! start). An idle follower's fetch and its answer are then a few bytes whatever the number
//! of partitions. Epoch -1 fetches without a session. Unknown sessions get
//! FETCH_SESSION_ID_NOT_FOUND and a wrong epoch INVALID_FETCH_SESSION_EPOCH; both make the
//! fetcher start over with a full fetch. The cache holds `max.incremental.fetch.session.cache.
//! slots` sessions; a full cache evicts a session unused for 2 minutes, or a consumer's for a
//! follower's, else answers without a session.
//!
//! Quiet partitions (better than Kafka, which reads every session partition on every fetch):
//! a partition whose last read left its fetcher at the end (a follower in the ISR at the
//! log end, a consumer at the high watermark) with nothing new to say is not read again
//! until something touches it. Whatever changes what a read would answer (an append, a
//! moved high watermark, a leader change) is written to the cache's change journal
//! ([`FetchSessionCache::changed`]); an incremental fetch reads its active partitions,
//! those it names, and those the journal names since its last fetch. A change the journal
//! cannot name ([`FetchSessionCache::changed_everything`]) or a journal that overflowed makes
//! the next fetch read everything, and every session is read whole at least once every
//! [`FULL_READ_MS`] anyway. An idle
//! follower's fetch then costs in proportion to what changed, not to the partitions it
//! follows: the acks=all round trip no longer grows with the partition count.
//!
//! The follower's [`FetchSessionHandler`] (Kafka's `FetchSessionHandler`) builds those
//! requests from the partitions it wants to fetch.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Mutex;

use kafka_protocol::error::ResponseError;

/// Kafka's `INITIAL_EPOCH`: a full fetch that creates a session.
pub const INITIAL_EPOCH: i32 = 0;
/// Kafka's `FINAL_EPOCH`: a fetch without a session (and closing the one named).
pub const FINAL_EPOCH: i32 = -1;
/// Kafka's `min.incremental.fetch.session.eviction.ms`.
const EVICTION_MS: i64 = 120_000;
/// Every incremental session is read whole at least this often: a safety net (every change
/// a read would answer is journaled), and a whole read of a 10,000-partition session costs
/// about 30 ms.
pub const FULL_READ_MS: i64 = 5_000;
/// Changes the journal keeps; a session further behind reads everything.
const JOURNAL_CAPACITY: usize = 16_384;

/// A partition as a fetch request names it (topic names are kept as sent).
pub type SessionKey = (String, i32);

/// `tp`'s session key.
pub fn session_key(tp: &model::TopicPartition) -> SessionKey {
    (tp.topic.as_str().to_owned(), tp.partition)
}

/// What a fetch asks about one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchPosition {
    /// Where to read from.
    pub fetch_offset: i64,
    /// `partition_max_bytes`.
    pub max_bytes: i32,
    /// The leader epoch the fetcher believes in (-1: not checked).
    pub current_leader_epoch: i32,
    /// The fetcher's own log start offset (followers).
    pub log_start_offset: i64,
}

/// What one partition's read produced, as the session compares it with what was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionOutcome {
    /// The error answered (0: none).
    pub error_code: i16,
    /// Whether records were returned.
    pub has_records: bool,
    /// The high watermark answered.
    pub high_watermark: i64,
    /// The log start offset answered.
    pub log_start_offset: i64,
    /// Whether the fetcher is at the end (a follower in the ISR at the log end, a consumer
    /// at the high watermark): with nothing answered, the partition is then quiet until a
    /// change touches it.
    pub at_end: bool,
}

impl PartitionOutcome {
    fn is_quiet(&self) -> bool {
        self.at_end && self.error_code == 0 && !self.has_records
    }
}

#[derive(Debug, Clone)]
struct CachedPartition {
    position: FetchPosition,
    sent_high_watermark: i64,
    sent_log_start_offset: i64,
    /// Place in the session's round-robin order.
    order: u64,
    /// Not read until a change touches it (see the module's documentation).
    quiet: bool,
}

#[derive(Debug)]
struct Session {
    /// The epoch the next request must carry.
    epoch: i32,
    privileged: bool,
    last_used_ms: i64,
    partitions: HashMap<SessionKey, CachedPartition>,
    /// Round-robin order: partitions that returned data move to the back, so a response
    /// capped by `max_bytes` does not starve the same partitions every time.
    order: BTreeMap<u64, SessionKey>,
    next_order: u64,
    /// The orders of the partitions that are not quiet.
    active: BTreeSet<u64>,
    /// The journal position folded into the quiet flags.
    seen: u64,
    /// When the session was last read whole.
    last_full_ms: i64,
}

impl Session {
    fn insert(&mut self, key: SessionKey, position: FetchPosition) {
        match self.partitions.get_mut(&key) {
            Some(cached) => cached.position = position,
            None => {
                let order = self.next_order;
                self.next_order += 1;
                self.order.insert(order, key.clone());
                self.active.insert(order);
                self.partitions.insert(
                    key,
                    CachedPartition {
                        position,
                        sent_high_watermark: -1,
                        sent_log_start_offset: -1,
                        order,
                        quiet: false,
                    },
                );
                return;
            }
        }
        self.wake(&key);
    }

    fn remove(&mut self, key: &SessionKey) {
        if let Some(cached) = self.partitions.remove(key) {
            self.order.remove(&cached.order);
            self.active.remove(&cached.order);
        }
    }

    fn move_to_end(&mut self, key: &SessionKey) {
        if let Some(cached) = self.partitions.get_mut(key) {
            self.order.remove(&cached.order);
            let was_active = self.active.remove(&cached.order);
            cached.order = self.next_order;
            self.next_order += 1;
            self.order.insert(cached.order, key.clone());
            if was_active {
                self.active.insert(cached.order);
            }
        }
    }

    /// Makes `key` active again; true when it was quiet.
    fn wake(&mut self, key: &SessionKey) -> bool {
        match self.partitions.get_mut(key) {
            Some(cached) if cached.quiet => {
                cached.quiet = false;
                self.active.insert(cached.order);
                true
            }
            _ => false,
        }
    }

    fn wake_all(&mut self) {
        for cached in self.partitions.values_mut() {
            cached.quiet = false;
        }
        self.active = self.order.keys().copied().collect();
    }

    fn set_quiet(&mut self, key: &SessionKey, quiet: bool) {
        if let Some(cached) = self.partitions.get_mut(key) {
            cached.quiet = quiet;
            if quiet {
                self.active.remove(&cached.order);
            } else {
                self.active.insert(cached.order);
            }
        }
    }

    /// Folds the journal's changes since the last fold in: the partitions that were quiet
    /// and are active again (all the quiet ones when the journal cannot name the changes).
    fn fold(&mut self, journal: &Journal) -> Vec<SessionKey> {
        let (end, changes) = journal.since(self.seen);
        self.seen = end;
        match changes {
            Some(keys) => keys.into_iter().filter(|k| self.wake(k)).collect(),
            None => {
                let quiet: Vec<SessionKey> = self
                    .partitions
                    .iter()
                    .filter(|(_, c)| c.quiet)
                    .map(|(k, _)| k.clone())
                    .collect();
                self.wake_all();
                quiet
            }
        }
    }
}

/// What changed the answers of reads, in order: a partition, or (`None`) anything.
#[derive(Debug, Default)]
struct Journal {
    /// The position of `entries[0]`.
    start: u64,
    entries: VecDeque<Option<SessionKey>>,
}

impl Journal {
    fn end(&self) -> u64 {
        self.start + self.entries.len() as u64
    }

    fn push(&mut self, entry: Option<SessionKey>) {
        if self.entries.len() == JOURNAL_CAPACITY {
            self.entries.pop_front();
            self.start += 1;
        }
        self.entries.push_back(entry);
    }

    /// The end, and the partitions changed from `seen` on (`None`: anything may have).
    fn since(&self, seen: u64) -> (u64, Option<Vec<SessionKey>>) {
        let end = self.end();
        if seen < self.start {
            return (end, None);
        }
        let skip = usize::try_from(seen - self.start).unwrap_or(usize::MAX);
        let mut keys = Vec::new();
        for entry in self.entries.iter().skip(skip) {
            match entry {
                Some(key) => keys.push(key.clone()),
                None => return (end, None),
            }
        }
        (end, Some(keys))
    }
}

/// How one fetch request relates to the cache, decided by [`FetchSessionCache::open`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchContext {
    /// A full fetch without a session.
    Sessionless,
    /// A full fetch that creates a session once answered (if there is room).
    Full,
    /// An incremental fetch of session `session_id`.
    Incremental {
        /// The session.
        session_id: i32,
    },
}

/// The partitions to read for one fetch, in order.
#[derive(Debug)]
pub struct OpenedFetch {
    /// How to answer.
    pub context: FetchContext,
    /// Every partition to read: the request's for a full fetch, the session's active ones
    /// for an incremental one (see [`FetchSessionCache::extend`]).
    pub partitions: Vec<(SessionKey, FetchPosition)>,
}

/// The leader's session cache.
#[derive(Debug)]
pub struct FetchSessionCache {
    max_slots: usize,
    inner: Mutex<CacheInner>,
    journal: Mutex<Journal>,
}

#[derive(Debug)]
struct CacheInner {
    sessions: HashMap<i32, Session>,
    next_id: u32,
}

impl FetchSessionCache {
    /// A cache of at most `max_slots` sessions.
    pub fn new(max_slots: usize) -> FetchSessionCache {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.subsec_nanos());
        FetchSessionCache {
            max_slots,
            inner: Mutex::new(CacheInner {
                sessions: HashMap::new(),
                next_id: seed,
            }),
            journal: Mutex::new(Journal::default()),
        }
    }

    /// Something changed what a read of `key` answers (records appended, the high watermark
    /// or the leader moved): sessions read it again at their next fetch.
    pub fn changed(&self, key: SessionKey) {
        self.journal().push(Some(key));
    }

    /// Something changed that the journal cannot name: every session reads everything at
    /// its next fetch.
    pub fn changed_everything(&self) {
        self.journal().push(None);
    }

    /// A waiting incremental fetch looks again: adds the session's partitions changed since
    /// [`FetchSessionCache::open`] (or the last call) to `opened`. Other fetches read what
    /// they named.
    pub fn extend(&self, opened: &mut OpenedFetch) {
        let FetchContext::Incremental { session_id } = opened.context else {
            return;
        };
        // Lock order: sessions, then the journal (as `open`).
        let mut inner = self.lock();
        let Some(session) = inner.sessions.get_mut(&session_id) else {
            return;
        };
        for key in session.fold(&self.journal()) {
            let position = session.partitions[&key].position;
            opened.partitions.push((key, position));
        }
    }

    /// How many sessions are cached.
    pub fn len(&self) -> usize {
        self.lock().sessions.len()
    }

    /// Whether no session is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many partitions session `session_id` holds (tests and diagnostics).
    pub fn session_partitions(&self, session_id: i32) -> Option<usize> {
        self.lock()
            .sessions
            .get(&session_id)
            .map(|s| s.partitions.len())
    }

    /// Decides how to serve a fetch (Kafka's `FetchManager.newContext`). `requested` are the
    /// request's partitions in order, `forgotten` its forgotten ones.
    pub fn open(
        &self,
        session_id: i32,
        epoch: i32,
        requested: Vec<(SessionKey, FetchPosition)>,
        forgotten: &[SessionKey],
        now_ms: i64,
    ) -> Result<OpenedFetch, ResponseError> {
        let mut inner = self.lock();
        if epoch == FINAL_EPOCH {
            if session_id != 0 {
                inner.sessions.remove(&session_id);
            }
            return Ok(OpenedFetch {
                context: FetchContext::Sessionless,
                partitions: requested,
            });
        }
        if epoch == INITIAL_EPOCH {
            if session_id != 0 {
                inner.sessions.remove(&session_id);
            }
            return Ok(OpenedFetch {
                context: FetchContext::Full,
                partitions: requested,
            });
        }
        let Some(session) = inner.sessions.get_mut(&session_id) else {
            return Err(ResponseError::FetchSessionIdNotFound);
        };
        if session.epoch != epoch {
            return Err(ResponseError::InvalidFetchSessionEpoch);
        }
        session.epoch = next_epoch(epoch);
        session.last_used_ms = now_ms;
        for (key, position) in requested {
            session.insert(key, position);
        }
        for key in forgotten {
            session.remove(key);
        }
        // What changed since the last fetch, before this one reads: a change during the
        // reads is in the journal past `seen`, for the next fetch.
        session.fold(&self.journal());
        if now_ms - session.last_full_ms >= FULL_READ_MS {
            session.wake_all();
            session.last_full_ms = now_ms;
        }
        let partitions = session
            .active
            .iter()
            .map(|order| {
                let key = &session.order[order];
                (key.clone(), session.partitions[key].position)
            })
            .collect();
        Ok(OpenedFetch {
            context: FetchContext::Incremental { session_id },
            partitions,
        })
    }

    /// After the reads: which of `outcomes` (in the order [`FetchSessionCache::open`] gave)
    /// go into the response, and the session id to answer. A full fetch creates its session
    /// here, remembering what it answered.
    pub fn close(
        &self,
        context: &FetchContext,
        opened: &[(SessionKey, FetchPosition)],
        outcomes: &[PartitionOutcome],
        privileged: bool,
        now_ms: i64,
    ) -> (i32, Vec<bool>) {
        let mut inner = self.lock();
        match context {
            FetchContext::Sessionless => (0, vec![true; outcomes.len()]),
            FetchContext::Full => {
                let id = inner.make_room(self.max_slots, privileged, now_ms);
                let Some(id) = id else {
                    return (0, vec![true; outcomes.len()]);
                };
                let mut session = Session {
                    epoch: next_epoch(INITIAL_EPOCH),
                    privileged,
                    last_used_ms: now_ms,
                    partitions: HashMap::new(),
                    order: BTreeMap::new(),
                    next_order: 0,
                    active: BTreeSet::new(),
                    // The first incremental fetch reads everything (the partitions start
                    // active) and folds in only later changes.
                    seen: self.journal().end(),
                    last_full_ms: now_ms,
                };
                for ((key, position), outcome) in opened.iter().zip(outcomes) {
                    session.insert(key.clone(), *position);
                    if let Some(cached) = session.partitions.get_mut(key) {
                        cached.sent_high_watermark = outcome.high_watermark;
                        cached.sent_log_start_offset = outcome.log_start_offset;
                    }
                }
                inner.sessions.insert(id, session);
                (id, vec![true; outcomes.len()])
            }
            FetchContext::Incremental { session_id } => {
                let Some(session) = inner.sessions.get_mut(session_id) else {
                    // Evicted while the fetch waited: this answer is full, the next fetch
                    // finds the session gone and starts over.
                    return (0, vec![true; outcomes.len()]);
                };
                let mut include = Vec::with_capacity(outcomes.len());
                for ((key, _), outcome) in opened.iter().zip(outcomes) {
                    let Some(cached) = session.partitions.get_mut(key) else {
                        include.push(false);
                        continue;
                    };
                    let changed = outcome.error_code != 0
                        || outcome.has_records
                        || outcome.high_watermark != cached.sent_high_watermark
                        || outcome.log_start_offset != cached.sent_log_start_offset;
                    if changed {
                        cached.sent_high_watermark = outcome.high_watermark;
                        cached.sent_log_start_offset = outcome.log_start_offset;
                    }
                    if outcome.has_records {
                        session.move_to_end(key);
                    }
                    // Only followers' partitions go quiet: a consumer's session is read
                    // whole every time, as Kafka does (its authorization, conversions and
                    // round-robin are per request).
                    session.set_quiet(key, privileged && outcome.is_quiet());
                    include.push(changed);
                }
                (*session_id, include)
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn journal(&self) -> std::sync::MutexGuard<'_, Journal> {
        self.journal.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl CacheInner {
    /// A fresh session id, evicting a session if the cache is full and one may go.
    fn make_room(&mut self, max_slots: usize, privileged: bool, now_ms: i64) -> Option<i32> {
        if max_slots == 0 {
            return None;
        }
        if self.sessions.len() >= max_slots {
            let victim = self
                .sessions
                .iter()
                .min_by_key(|(_, s)| (s.privileged, s.last_used_ms))
                .map(|(&id, s)| (id, s.privileged, s.last_used_ms))?;
            let (id, victim_privileged, last_used) = victim;
            let stale = now_ms - last_used > EVICTION_MS;
            if !(stale || (privileged && !victim_privileged)) {
                return None;
            }
            self.sessions.remove(&id);
        }
        loop {
            self.next_id = self
                .next_id
                .wrapping_mul(1_103_515_245)
                .wrapping_add(12_345);
            let id = (self.next_id >> 1) as i32;
            if id != 0 && !self.sessions.contains_key(&id) {
                return Some(id);
            }
        }
    }
}

/// The epoch after `epoch` (wrapping to 1, never back to 0).
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 {
        INITIAL_EPOCH
    } else if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// The follower's side: which partitions a fetch names. The fetcher says what it wants as it
/// changes ([`FetchSessionHandler::want`], [`FetchSessionHandler::unwant`]); a request then
/// names only what changed since the last answered one (or everything, without a session),
/// so a round where few partitions moved costs in proportion to those, not to the
/// partitions followed.
#[derive(Debug, Default)]
pub struct FetchSessionHandler {
    session_id: i32,
    /// The epoch the next request carries.
    epoch: i32,
    /// What the fetcher wants now.
    desired: BTreeMap<SessionKey, FetchPosition>,
    /// Partitions whose wanted position changed (or that are no longer wanted) since the
    /// request the leader last answered.
    dirty: BTreeSet<SessionKey>,
    /// The request in flight was a full one.
    in_flight_full: bool,
}

/// One fetch request's session fields and partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRequest {
    /// The session id to send.
    pub session_id: i32,
    /// The session epoch to send.
    pub epoch: i32,
    /// The partitions to name (all for a full fetch, the changed ones otherwise).
    pub partitions: Vec<(SessionKey, FetchPosition)>,
    /// The partitions to forget.
    pub forgotten: Vec<SessionKey>,
}

impl FetchSessionHandler {
    /// The session id in use (0: none).
    pub fn session_id(&self) -> i32 {
        self.session_id
    }

    /// How many partitions are wanted.
    pub fn wanted_len(&self) -> usize {
        self.desired.len()
    }

    /// Wants `key` fetched at `position` (from the next request on).
    pub fn want(&mut self, key: SessionKey, position: FetchPosition) {
        if self.desired.get(&key) != Some(&position) {
            self.dirty.insert(key.clone());
            self.desired.insert(key, position);
        }
    }

    /// No longer wants `key`.
    pub fn unwant(&mut self, key: &SessionKey) {
        if self.desired.remove(key).is_some() {
            self.dirty.insert(key.clone());
        }
    }

    /// Keeps only the wanted partitions `keep` says yes to.
    pub fn retain(&mut self, mut keep: impl FnMut(&SessionKey) -> bool) {
        let gone: Vec<SessionKey> = self.desired.keys().filter(|k| !keep(k)).cloned().collect();
        for key in &gone {
            self.unwant(key);
        }
    }

    /// Builds the next request for `wanted` (all the partitions wanted now).
    pub fn build(&mut self, wanted: BTreeMap<SessionKey, FetchPosition>) -> SessionRequest {
        self.retain(|k| wanted.contains_key(k));
        for (key, position) in wanted {
            self.want(key, position);
        }
        self.next_request()
    }

    /// The next request: everything wanted without a session, else what changed.
    pub fn next_request(&mut self) -> SessionRequest {
        if self.session_id == 0 {
            self.in_flight_full = true;
            return SessionRequest {
                session_id: 0,
                epoch: INITIAL_EPOCH,
                partitions: self.desired.iter().map(|(k, p)| (k.clone(), *p)).collect(),
                forgotten: Vec::new(),
            };
        }
        self.in_flight_full = false;
        let mut partitions = Vec::new();
        let mut forgotten = Vec::new();
        for key in std::mem::take(&mut self.dirty) {
            match self.desired.get(&key) {
                Some(position) => partitions.push((key, *position)),
                None => forgotten.push(key),
            }
        }
        SessionRequest {
            session_id: self.session_id,
            epoch: self.epoch,
            partitions,
            forgotten,
        }
    }

    /// Takes the answer's top-level error and session id. Returns false when the session
    /// was lost (the next request is a full one).
    pub fn handle_response(&mut self, error_code: i16, response_session_id: i32) -> bool {
        if error_code != 0 {
            self.reset();
            return false;
        }
        if self.session_id == 0 {
            // A full fetch: the leader created a session, or not.
            self.session_id = response_session_id;
            self.epoch = next_epoch(INITIAL_EPOCH);
            if self.in_flight_full {
                // The session holds what that request named; what changed since is dirty.
                self.in_flight_full = false;
                self.dirty.clear();
            }
        } else if response_session_id != self.session_id {
            self.reset();
            return false;
        } else {
            self.epoch = next_epoch(self.epoch);
        }
        true
    }

    /// Forgets the session (after a connection error): the next request is a full one.
    pub fn reset(&mut self) {
        self.session_id = 0;
        self.epoch = INITIAL_EPOCH;
        self.dirty.clear();
        self.in_flight_full = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(p: i32) -> SessionKey {
        ("t".to_owned(), p)
    }

    fn at(offset: i64) -> FetchPosition {
        FetchPosition {
            fetch_offset: offset,
            max_bytes: 1 << 20,
            current_leader_epoch: 3,
            log_start_offset: 0,
        }
    }

    fn quiet(hw: i64) -> PartitionOutcome {
        PartitionOutcome {
            error_code: 0,
            has_records: false,
            high_watermark: hw,
            log_start_offset: 0,
            at_end: false,
        }
    }

    #[test]
    fn a_full_fetch_creates_a_session_and_increments_carry_only_changes() {
        let cache = FetchSessionCache::new(10);
        let mut follower = FetchSessionHandler::default();
        let wanted: BTreeMap<_, _> = (0..3).map(|p| (key(p), at(5))).collect();

        let first = follower.build(wanted.clone());
        assert_eq!(
            (first.session_id, first.epoch, first.partitions.len()),
            (0, 0, 3)
        );
        let opened = cache
            .open(first.session_id, first.epoch, first.partitions, &[], 0)
            .unwrap();
        assert_eq!(opened.context, FetchContext::Full);
        let outcomes = vec![quiet(5); 3];
        let (id, include) = cache.close(&opened.context, &opened.partitions, &outcomes, true, 0);
        assert_ne!(id, 0);
        assert_eq!(include, vec![true; 3]);
        assert!(follower.handle_response(0, id));

        // Nothing changed: the request names no partition, and nothing comes back.
        let idle = follower.build(wanted.clone());
        assert_eq!((idle.session_id, idle.epoch), (id, 1));
        assert!(idle.partitions.is_empty() && idle.forgotten.is_empty());
        let opened = cache
            .open(
                idle.session_id,
                idle.epoch,
                idle.partitions,
                &idle.forgotten,
                1,
            )
            .unwrap();
        assert_eq!(
            opened.partitions.len(),
            3,
            "the leader reads every session partition"
        );
        let (_, include) = cache.close(&opened.context, &opened.partitions, &outcomes, true, 1);
        assert_eq!(include, vec![false; 3]);
        assert!(follower.handle_response(0, id));

        // Partition 1 moved on and partition 2 is dropped; partition 0's high watermark moved.
        let mut wanted = wanted;
        wanted.insert(key(1), at(9));
        wanted.remove(&key(2));
        let next = follower.build(wanted.clone());
        assert_eq!(next.epoch, 2);
        assert_eq!(next.partitions, vec![(key(1), at(9))]);
        assert_eq!(next.forgotten, vec![key(2)]);
        let opened = cache
            .open(
                next.session_id,
                next.epoch,
                next.partitions,
                &next.forgotten,
                2,
            )
            .unwrap();
        assert_eq!(
            opened
                .partitions
                .iter()
                .map(|(k, p)| (k.1, p.fetch_offset))
                .collect::<Vec<_>>(),
            vec![(0, 5), (1, 9)]
        );
        let outcomes = vec![quiet(7), quiet(5)];
        let (_, include) = cache.close(&opened.context, &opened.partitions, &outcomes, true, 2);
        assert_eq!(include, vec![true, false]);
        assert!(follower.handle_response(0, id));
        assert_eq!(cache.session_partitions(id), Some(2));
    }

    #[test]
    fn unknown_sessions_and_wrong_epochs_start_over() {
        let cache = FetchSessionCache::new(10);
        assert_eq!(
            cache.open(42, 1, vec![], &[], 0).unwrap_err(),
            ResponseError::FetchSessionIdNotFound
        );
        let opened = cache.open(0, 0, vec![(key(0), at(0))], &[], 0).unwrap();
        let (id, _) = cache.close(&opened.context, &opened.partitions, &[quiet(0)], false, 0);
        assert_eq!(
            cache.open(id, 5, vec![], &[], 0).unwrap_err(),
            ResponseError::InvalidFetchSessionEpoch
        );
        cache.open(id, 1, vec![], &[], 0).unwrap();
        // The same epoch again (a duplicate request) is refused too.
        assert_eq!(
            cache.open(id, 1, vec![], &[], 0).unwrap_err(),
            ResponseError::InvalidFetchSessionEpoch
        );
        let mut follower = FetchSessionHandler::default();
        follower.build(BTreeMap::from([(key(0), at(0))]));
        follower.handle_response(0, id);
        follower.build(BTreeMap::from([(key(0), at(0))]));
        assert!(!follower.handle_response(ResponseError::InvalidFetchSessionEpoch.code(), 0));
        assert_eq!(
            follower.build(BTreeMap::from([(key(0), at(0))])).epoch,
            INITIAL_EPOCH
        );
        // Epoch -1 closes the session.
        let opened = cache.open(id, FINAL_EPOCH, vec![], &[], 0).unwrap();
        assert_eq!(opened.context, FetchContext::Sessionless);
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn a_full_cache_evicts_stale_or_unprivileged_sessions_only() {
        let cache = FetchSessionCache::new(1);
        let full = |privileged, now| {
            let opened = cache.open(0, 0, vec![(key(0), at(0))], &[], now).unwrap();
            cache
                .close(
                    &opened.context,
                    &opened.partitions,
                    &[quiet(0)],
                    privileged,
                    now,
                )
                .0
        };
        let consumer = full(false, 0);
        assert_ne!(consumer, 0);
        assert_eq!(
            full(false, 1_000),
            0,
            "a consumer does not evict a fresh consumer"
        );
        let follower = full(true, 2_000);
        assert_ne!(follower, 0, "a follower evicts a consumer");
        assert_eq!(
            full(true, 3_000),
            0,
            "a follower does not evict a fresh follower"
        );
        assert_ne!(
            full(false, 2_000 + EVICTION_MS + 1),
            0,
            "a stale session goes"
        );
    }

    #[test]
    fn partitions_with_data_move_to_the_back() {
        let cache = FetchSessionCache::new(1);
        let opened = cache
            .open(0, 0, (0..3).map(|p| (key(p), at(0))).collect(), &[], 0)
            .unwrap();
        let (id, _) = cache.close(&opened.context, &opened.partitions, &[quiet(0); 3], true, 0);
        let opened = cache.open(id, 1, vec![], &[], 0).unwrap();
        let mut outcomes = [quiet(0); 3];
        outcomes[0].has_records = true;
        cache.close(&opened.context, &opened.partitions, &outcomes, true, 0);
        let opened = cache.open(id, 2, vec![], &[], 0).unwrap();
        assert_eq!(
            opened
                .partitions
                .iter()
                .map(|(k, _)| k.1)
                .collect::<Vec<_>>(),
            vec![1, 2, 0]
        );
    }

    fn at_end(hw: i64) -> PartitionOutcome {
        PartitionOutcome {
            at_end: true,
            ..quiet(hw)
        }
    }

    fn read_keys(opened: &OpenedFetch) -> Vec<i32> {
        opened.partitions.iter().map(|(k, _)| k.1).collect()
    }

    /// A session of partitions 0..n, created by a full fetch and read whole once.
    fn session_at_end(cache: &FetchSessionCache, n: i32, privileged: bool) -> i32 {
        let opened = cache
            .open(0, 0, (0..n).map(|p| (key(p), at(5))).collect(), &[], 0)
            .unwrap();
        let outcomes = vec![at_end(5); n as usize];
        let (id, _) = cache.close(
            &opened.context,
            &opened.partitions,
            &outcomes,
            privileged,
            0,
        );
        let opened = cache.open(id, 1, vec![], &[], 1).unwrap();
        assert_eq!(
            read_keys(&opened).len(),
            n as usize,
            "new partitions are read"
        );
        cache.close(
            &opened.context,
            &opened.partitions,
            &outcomes,
            privileged,
            1,
        );
        id
    }

    #[test]
    fn a_followers_partitions_at_the_end_are_not_read_until_they_change() {
        let cache = FetchSessionCache::new(10);
        let id = session_at_end(&cache, 4, true);
        // Nothing changed: nothing is read.
        let opened = cache.open(id, 2, vec![], &[], 2).unwrap();
        assert!(read_keys(&opened).is_empty());
        cache.close(&opened.context, &opened.partitions, &[], true, 2);
        // An append to partition 2: only it is read; the follower's move of partition 0
        // (named in the request) is read too.
        cache.changed(key(2));
        let opened = cache.open(id, 3, vec![(key(0), at(6))], &[], 3).unwrap();
        assert_eq!(read_keys(&opened), vec![0, 2]);
        // Partition 2 had records: it stays active; partition 0 is at the end again.
        let mut with_records = quiet(5);
        with_records.has_records = true;
        cache.close(
            &opened.context,
            &opened.partitions,
            &[at_end(6), with_records],
            true,
            3,
        );
        let opened = cache.open(id, 4, vec![], &[], 4).unwrap();
        assert_eq!(read_keys(&opened), vec![2]);
        cache.close(&opened.context, &opened.partitions, &[at_end(5)], true, 4);
        // A change nobody can name: everything is read.
        cache.changed_everything();
        let opened = cache.open(id, 5, vec![], &[], 5).unwrap();
        assert_eq!(read_keys(&opened).len(), 4);
        cache.close(
            &opened.context,
            &opened.partitions,
            &[at_end(5); 4],
            true,
            5,
        );
        let opened = cache.open(id, 6, vec![], &[], 6).unwrap();
        assert!(read_keys(&opened).is_empty());
        cache.close(&opened.context, &opened.partitions, &[], true, 6);
        // And at least once every FULL_READ_MS.
        let opened = cache.open(id, 7, vec![], &[], 1 + FULL_READ_MS).unwrap();
        assert_eq!(read_keys(&opened).len(), 4);
    }

    #[test]
    fn a_waiting_fetch_adds_what_changed_and_an_overflowed_journal_reads_all() {
        let cache = FetchSessionCache::new(10);
        let id = session_at_end(&cache, 3, true);
        let mut opened = cache.open(id, 2, vec![], &[], 2).unwrap();
        assert!(read_keys(&opened).is_empty());
        cache.changed(key(1));
        cache.changed(key(7)); // not in the session
        cache.extend(&mut opened);
        assert_eq!(read_keys(&opened), vec![1]);
        cache.extend(&mut opened);
        assert_eq!(read_keys(&opened), vec![1], "a change is added once");
        cache.close(&opened.context, &opened.partitions, &[at_end(5)], true, 2);
        for p in 0..JOURNAL_CAPACITY as i32 + 1 {
            cache.changed(key(100 + p));
        }
        let opened = cache.open(id, 3, vec![], &[], 3).unwrap();
        assert_eq!(read_keys(&opened).len(), 3);
    }

    #[test]
    fn a_consumers_partitions_are_always_read() {
        let cache = FetchSessionCache::new(10);
        let id = session_at_end(&cache, 3, false);
        let opened = cache.open(id, 2, vec![], &[], 2).unwrap();
        assert_eq!(read_keys(&opened).len(), 3);
    }

    #[test]
    fn a_followers_request_names_only_what_it_changed() {
        let mut follower = FetchSessionHandler::default();
        for p in 0..3 {
            follower.want(key(p), at(5));
        }
        let full = follower.next_request();
        assert_eq!((full.epoch, full.partitions.len()), (INITIAL_EPOCH, 3));
        // Changed while the full fetch was out: its answer clears nothing it did not send.
        assert!(follower.handle_response(0, 42));
        follower.want(key(0), at(5));
        assert!(follower.next_request().partitions.is_empty(), "unchanged");
        assert!(follower.handle_response(0, 42));
        follower.want(key(1), at(6));
        follower.unwant(&key(2));
        follower.unwant(&key(9));
        let next = follower.next_request();
        assert_eq!(next.partitions, vec![(key(1), at(6))]);
        assert_eq!(next.forgotten, vec![key(2)]);
        assert_eq!(follower.wanted_len(), 2);
        // A lost session: everything wanted goes in the next (full) request.
        assert!(!follower.handle_response(ResponseError::FetchSessionIdNotFound.code(), 0));
        let again = follower.next_request();
        assert_eq!(again.epoch, INITIAL_EPOCH);
        assert_eq!(again.partitions, vec![(key(0), at(5)), (key(1), at(6))]);
        follower.retain(|k| k.1 == 1);
        assert_eq!(follower.wanted_len(), 1);
    }

    #[test]
    fn the_same_partition_changing_again_after_a_fetch_is_read_again() {
        let cache = FetchSessionCache::new(10);
        let id = session_at_end(&cache, 2, true);
        cache.changed(key(1));
        let opened = cache.open(id, 2, vec![], &[], 2).unwrap();
        assert_eq!(read_keys(&opened), vec![1]);
        cache.close(&opened.context, &opened.partitions, &[at_end(5)], true, 2);
        // The next change of the same partition is not the one this session saw.
        cache.changed(key(1));
        let opened = cache.open(id, 3, vec![], &[], 3).unwrap();
        assert_eq!(read_keys(&opened), vec![1]);
    }
}
