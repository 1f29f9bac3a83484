//! Counters and latency histograms on atomics: what the crates below the broker count and
//! time for `/metrics` (the broker renders them in Prometheus' text format).
//!
//! Recording is a couple of relaxed atomic adds and never takes a lock, so it can sit on the
//! request path. Knows nothing of Kafka, Prometheus or any other crate of the workspace.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The upper bounds of the histogram buckets, in microseconds: 0.1 ms to 30 s, roughly
/// 1-2.5-5 per decade, plus the implicit `+Inf` bucket. Fixed for every histogram, so every
/// latency series of `/metrics` has the same `le` labels.
pub const BUCKET_BOUNDS_MICROS: [u64; 18] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000, 30_000_000, 60_000_000,
];

/// Buckets including `+Inf`.
const BUCKETS: usize = BUCKET_BOUNDS_MICROS.len() + 1;

/// A monotonic counter.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// A counter at zero (usable in a `static`).
    pub const fn new() -> Counter {
        Counter(AtomicU64::new(0))
    }

    /// Adds one.
    pub fn inc(&self) {
        self.add(1);
    }

    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    /// The count so far.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A latency histogram with the buckets of [`BUCKET_BOUNDS_MICROS`].
#[derive(Debug)]
pub struct Histogram {
    /// Observations per bucket (not cumulative); the last is `+Inf`.
    buckets: [AtomicU64; BUCKETS],
    sum_micros: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

/// A histogram's counts at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// Observations per bucket, not cumulative; index `i` counts values up to
    /// `BUCKET_BOUNDS_MICROS[i]` (and above the bound before it), the last one the rest.
    pub buckets: [u64; BUCKETS],
    /// Sum of every observation, in microseconds.
    pub sum_micros: u64,
}

impl HistogramSnapshot {
    /// Observations in all.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// Cumulative counts: `(upper bound in microseconds, observations up to it)`, with
    /// `None` for `+Inf` last.
    pub fn cumulative(&self) -> impl Iterator<Item = (Option<u64>, u64)> + '_ {
        let mut total = 0;
        self.buckets.iter().enumerate().map(move |(i, &n)| {
            total += n;
            (BUCKET_BOUNDS_MICROS.get(i).copied(), total)
        })
    }

    /// Adds `other`'s observations to these.
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        for (mine, theirs) in self.buckets.iter_mut().zip(other.buckets) {
            *mine += theirs;
        }
        self.sum_micros += other.sum_micros;
    }

    /// An estimate of the `q` quantile (0..=1) in microseconds: the upper bound of the
    /// bucket it falls in (`None` without observations; the largest bound for `+Inf`).
    pub fn quantile_upper_bound_micros(&self, q: f64) -> Option<u64> {
        let count = self.count();
        if count == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * count as f64).ceil() as u64).max(1);
        let last = BUCKET_BOUNDS_MICROS[BUCKET_BOUNDS_MICROS.len() - 1];
        self.cumulative()
            .find(|&(_, total)| total >= rank)
            .map(|(bound, _)| bound.unwrap_or(last))
    }
}

impl Default for HistogramSnapshot {
    fn default() -> Self {
        HistogramSnapshot {
            buckets: [0; BUCKETS],
            sum_micros: 0,
        }
    }
}

impl Histogram {
    /// An empty histogram (usable in a `static`).
    pub const fn new() -> Histogram {
        Histogram {
            buckets: [const { AtomicU64::new(0) }; BUCKETS],
            sum_micros: AtomicU64::new(0),
        }
    }

    /// Records one observation.
    pub fn observe(&self, elapsed: Duration) {
        self.observe_micros(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX));
    }

    /// Records one observation of `micros` microseconds.
    pub fn observe_micros(&self, micros: u64) {
        let bucket = BUCKET_BOUNDS_MICROS.partition_point(|&bound| bound < micros);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// The counts now. Taken bucket by bucket without a lock: a concurrent observation may
    /// be in the buckets and not yet in the sum, which Prometheus tolerates.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut snapshot = HistogramSnapshot {
            sum_micros: self.sum_micros.load(Ordering::Relaxed),
            ..HistogramSnapshot::default()
        };
        for (out, bucket) in snapshot.buckets.iter_mut().zip(&self.buckets) {
            *out = bucket.load(Ordering::Relaxed);
        }
        snapshot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_bucket_of_their_upper_bound() {
        let h = Histogram::new();
        h.observe_micros(0);
        h.observe_micros(100); // on the first bound: first bucket
        h.observe_micros(101);
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(3600)); // +Inf
        let s = h.snapshot();
        assert_eq!(s.count(), 5);
        assert_eq!(s.buckets[0], 2);
        assert_eq!(s.buckets[1], 1);
        assert_eq!(s.buckets[5], 1, "3 ms is in the 5 ms bucket");
        assert_eq!(s.buckets[BUCKETS - 1], 1);
        assert_eq!(s.sum_micros, 100 + 101 + 3_000 + 3_600_000_000);
        let cumulative: Vec<_> = s.cumulative().collect();
        assert_eq!(cumulative[0], (Some(100), 2));
        assert_eq!(cumulative[BUCKETS - 1], (None, 5));
        assert!(cumulative.windows(2).all(|w| w[0].1 <= w[1].1));
    }

    #[test]
    fn quantiles_are_bucket_upper_bounds() {
        let h = Histogram::new();
        assert_eq!(h.snapshot().quantile_upper_bound_micros(0.5), None);
        for _ in 0..99 {
            h.observe_micros(200);
        }
        h.observe_micros(40_000);
        let s = h.snapshot();
        assert_eq!(s.quantile_upper_bound_micros(0.5), Some(250));
        assert_eq!(s.quantile_upper_bound_micros(0.99), Some(250));
        assert_eq!(s.quantile_upper_bound_micros(1.0), Some(50_000));
        let mut merged = s;
        merged.merge(&s);
        assert_eq!(merged.count(), 200);
    }

    #[test]
    fn counters_add_up() {
        static C: Counter = Counter::new();
        C.inc();
        C.add(41);
        assert_eq!(C.get(), 42);
    }
}
