//! Latency samples and their percentiles.

/// Percentiles of a set of latency samples, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencySummary {
    /// Number of samples.
    pub samples: u64,
    /// Median.
    pub p50_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest sample.
    pub max_us: u64,
}

impl LatencySummary {
    /// Summarises `samples` (microseconds); `None` when there are none. Sorts in place.
    pub fn from_samples(samples: &mut [u32]) -> Option<LatencySummary> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        // Nearest-rank percentile: the smallest sample with at least q of the samples <= it.
        let rank = |q: f64| {
            let n = samples.len();
            let idx = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
            u64::from(samples[idx])
        };
        Some(LatencySummary {
            samples: samples.len() as u64,
            p50_us: rank(0.50),
            p99_us: rank(0.99),
            p999_us: rank(0.999),
            max_us: u64::from(samples[samples.len() - 1]),
        })
    }

    /// Median in milliseconds.
    pub fn p50_ms(&self) -> f64 {
        self.p50_us as f64 / 1000.0
    }
    /// 99th percentile in milliseconds.
    pub fn p99_ms(&self) -> f64 {
        self.p99_us as f64 / 1000.0
    }
    /// 99.9th percentile in milliseconds.
    pub fn p999_ms(&self) -> f64 {
        self.p999_us as f64 / 1000.0
    }
    /// Largest sample in milliseconds.
    pub fn max_ms(&self) -> f64 {
        self.max_us as f64 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_has_no_summary() {
        assert_eq!(LatencySummary::from_samples(&mut []), None);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let mut v: Vec<u32> = (1..=1000).rev().collect();
        let s = LatencySummary::from_samples(&mut v).expect("samples");
        assert_eq!(s.samples, 1000);
        assert_eq!(s.p50_us, 500);
        assert_eq!(s.p99_us, 990);
        assert_eq!(s.p999_us, 999);
        assert_eq!(s.max_us, 1000);
    }

    #[test]
    fn one_sample_is_every_percentile() {
        let s = LatencySummary::from_samples(&mut [7]).expect("samples");
        assert_eq!((s.p50_us, s.p99_us, s.p999_us, s.max_us), (7, 7, 7, 7));
    }
}
