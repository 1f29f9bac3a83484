//! Replication throttles (Kafka's `ReplicationQuotaManager`, KIP-73): a byte rate for the
//! leader side (`leader.replication.throttled.rate`, what this broker sends to followers that
//! are not in sync) and one for the follower side (`follower.replication.throttled.rate`,
//! what this broker fetches while it is not in sync), each applying only to the replicas the
//! topic configs `leader.replication.throttled.replicas` /
//! `follower.replication.throttled.replicas` name for this broker ("partition:broker,..." or
//! "*").
//!
//! - Leader: a follower fetch of a throttled partition from a replica outside the ISR gets
//!   no records (its position still counts) while the leader quota is exceeded; the bytes
//!   sent for throttled partitions are counted.
//! - Follower: a throttled partition that is not caught up (its log end below the leader's
//!   high watermark) is left out of the fetch while the follower quota is exceeded; the bytes
//!   fetched for throttled partitions are counted.
//!
//! The rate is a token bucket refilled at the quota, holding at most [`BURST`] of it and
//! starting empty: over any interval at most `rate * (seconds + 0.1)` bytes plus one fetch
//! pass. (Kafka measures with its sampled `Rate`, whose 11-second window lets a new quota be
//! exceeded for the first seconds; the bucket holds from the start.)

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, RwLock};
use std::time::Instant;

use model::TopicPartition;

/// The most credit a quota keeps (as time at its rate): a replica that was idle may send
/// this much at once before the rate applies.
pub const BURST: std::time::Duration = std::time::Duration::from_millis(100);

/// Which partitions of a topic are throttled on this broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThrottledPartitions {
    /// `*`: every partition.
    All,
    /// The partitions whose entry names this broker.
    Some(BTreeSet<i32>),
}

impl ThrottledPartitions {
    fn contains(&self, partition: i32) -> bool {
        match self {
            ThrottledPartitions::All => true,
            ThrottledPartitions::Some(set) => set.contains(&partition),
        }
    }
}

/// Kafka's `parseThrottledPartitions`: `*`, or `partition:broker` pairs of which those naming
/// `broker_id` count. `None` for an empty value (no throttle); `Err` for a malformed one.
pub fn parse_throttled_replicas(
    value: &str,
    broker_id: i32,
) -> Result<Option<ThrottledPartitions>, String> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    if value == "*" {
        return Ok(Some(ThrottledPartitions::All));
    }
    let mut partitions = BTreeSet::new();
    for entry in value.split(',').map(str::trim) {
        let parsed = entry.split_once(':').and_then(|(p, b)| {
            Some((p.trim().parse::<i32>().ok()?, b.trim().parse::<i32>().ok()?))
        });
        let Some((partition, broker)) = parsed else {
            return Err(format!(
                "'{entry}' is not partition:broker (the value must be a list of partition:broker pairs or the literal '*')"
            ));
        };
        if broker == broker_id {
            partitions.insert(partition);
        }
    }
    Ok(Some(ThrottledPartitions::Some(partitions)))
}

/// One byte-rate quota (see the module docs).
#[derive(Debug)]
pub struct ByteRateQuota {
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// Bytes per second; `None`: unlimited.
    rate: Option<f64>,
    /// Bytes that may still go before the quota is exceeded (negative: in debt).
    tokens: f64,
    refilled: Instant,
}

impl Default for ByteRateQuota {
    fn default() -> Self {
        ByteRateQuota {
            bucket: Mutex::new(Bucket {
                rate: None,
                tokens: 0.0,
                refilled: Instant::now(),
            }),
        }
    }
}

impl ByteRateQuota {
    fn lock(&self) -> std::sync::MutexGuard<'_, Bucket> {
        self.bucket.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the rate (bytes/s; `None` or 0 or less: unlimited). A changed rate starts from
    /// an empty bucket.
    pub fn set_rate(&self, rate: Option<f64>) {
        let rate = rate.filter(|r| *r > 0.0);
        let mut bucket = self.lock();
        if bucket.rate != rate {
            bucket.rate = rate;
            bucket.tokens = 0.0;
            bucket.refilled = Instant::now();
        }
    }

    /// The rate, when limited.
    pub fn rate(&self) -> Option<f64> {
        self.lock().rate
    }

    fn refill(bucket: &mut Bucket, now: Instant) {
        if let Some(rate) = bucket.rate {
            let elapsed = now.saturating_duration_since(bucket.refilled).as_secs_f64();
            bucket.tokens = (bucket.tokens + elapsed * rate).min(rate * BURST.as_secs_f64());
        }
        bucket.refilled = now;
    }

    /// Whether the quota is used up now (never when unlimited).
    pub fn is_exceeded(&self) -> bool {
        let mut bucket = self.lock();
        if bucket.rate.is_none() {
            return false;
        }
        Self::refill(&mut bucket, Instant::now());
        bucket.tokens < 0.0
    }

    /// Counts `bytes` against the quota.
    pub fn record(&self, bytes: usize) {
        if bytes == 0 {
            return;
        }
        let mut bucket = self.lock();
        if bucket.rate.is_none() {
            return;
        }
        Self::refill(&mut bucket, Instant::now());
        bucket.tokens -= bytes as f64;
    }
}

/// The leader and follower throttles of one broker.
#[derive(Debug, Default)]
pub struct ReplicationThrottles {
    /// `leader.replication.throttled.rate`.
    pub leader: ByteRateQuota,
    /// `follower.replication.throttled.rate`.
    pub follower: ByteRateQuota,
    leader_topics: RwLock<HashMap<String, ThrottledPartitions>>,
    follower_topics: RwLock<HashMap<String, ThrottledPartitions>>,
}

impl ReplicationThrottles {
    /// Sets (or with `None` clears) a topic's throttled replicas on this broker.
    pub fn set_topic(
        &self,
        topic: &str,
        leader: Option<ThrottledPartitions>,
        follower: Option<ThrottledPartitions>,
    ) {
        for (map, value) in [
            (&self.leader_topics, leader),
            (&self.follower_topics, follower),
        ] {
            let mut map = map.write().unwrap_or_else(|p| p.into_inner());
            match value {
                Some(v) => map.insert(topic.to_owned(), v),
                None => map.remove(topic),
            };
        }
    }

    fn throttled(map: &RwLock<HashMap<String, ThrottledPartitions>>, tp: &TopicPartition) -> bool {
        map.read()
            .unwrap_or_else(|p| p.into_inner())
            .get(tp.topic.as_str())
            .is_some_and(|t| t.contains(tp.partition))
    }

    /// Whether `tp` is in this broker's leader throttle list.
    pub fn is_leader_throttled(&self, tp: &TopicPartition) -> bool {
        Self::throttled(&self.leader_topics, tp)
    }

    /// Whether `tp` is in this broker's follower throttle list.
    pub fn is_follower_throttled(&self, tp: &TopicPartition) -> bool {
        Self::throttled(&self.follower_topics, tp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttled_replicas_parse_as_kafka() {
        assert_eq!(parse_throttled_replicas("", 1), Ok(None));
        assert_eq!(
            parse_throttled_replicas(" * ", 1),
            Ok(Some(ThrottledPartitions::All))
        );
        assert_eq!(
            parse_throttled_replicas("0:1,1:2, 2:1", 1),
            Ok(Some(ThrottledPartitions::Some([0, 2].into())))
        );
        assert!(parse_throttled_replicas("0-1", 1).is_err());
        assert!(parse_throttled_replicas("a:1", 1).is_err());
    }

    #[test]
    fn bucket_starts_empty_and_refills_at_the_rate() {
        let q = ByteRateQuota::default();
        q.record(1 << 30);
        assert!(!q.is_exceeded(), "unlimited");
        q.set_rate(Some(1_000_000.0));
        assert!(!q.is_exceeded());
        q.record(200_000);
        assert!(q.is_exceeded());
        std::thread::sleep(std::time::Duration::from_millis(250));
        assert!(!q.is_exceeded(), "200 kB refilled after 0.2 s at 1 MB/s");
        // Never more than BURST of credit.
        q.set_rate(Some(1_000.0));
        std::thread::sleep(std::time::Duration::from_millis(30));
        q.record(100);
        assert!(q.is_exceeded());
        q.set_rate(None);
        assert!(!q.is_exceeded());
    }

    #[test]
    fn topic_lists_apply_per_partition() {
        let t = ReplicationThrottles::default();
        let tp = |p| TopicPartition::new("t".parse().unwrap(), p);
        t.set_topic(
            "t",
            Some(ThrottledPartitions::Some([1].into())),
            Some(ThrottledPartitions::All),
        );
        assert!(!t.is_leader_throttled(&tp(0)) && t.is_leader_throttled(&tp(1)));
        assert!(t.is_follower_throttled(&tp(7)));
        t.set_topic("t", None, None);
        assert!(!t.is_follower_throttled(&tp(7)));
    }
}
