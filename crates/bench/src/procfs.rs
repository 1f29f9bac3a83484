//! Watching the broker process through `/proc`: CPU time and resident memory.

use std::fs;

use crate::BenchError;

/// Linux reports utime/stime in `/proc/<pid>/stat` in USER_HZ ticks, which is 100 on every
/// architecture Linux supports for user space (the kernel converts from its internal HZ).
const USER_HZ: f64 = 100.0;

/// The broker's usage over a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BrokerUsage {
    /// utime + stime consumed during the run, in seconds.
    pub cpu_seconds: f64,
    /// The largest `VmRSS` seen while sampling, in KiB.
    pub peak_rss_sampled_kib: u64,
    /// `VmHWM` at the end of the run (the process's peak RSS since it started), in KiB.
    pub hwm_rss_kib: u64,
}

/// Observes one process: takes the CPU counters at creation, samples RSS on demand.
#[derive(Debug)]
pub struct BrokerProbe {
    pid: u32,
    start_ticks: u64,
    peak_rss_kib: u64,
}

impl BrokerProbe {
    /// Starts watching `pid`: reads its CPU time now.
    pub fn start(pid: u32) -> Result<BrokerProbe, BenchError> {
        let start_ticks = cpu_ticks(pid)?;
        let mut probe = BrokerProbe {
            pid,
            start_ticks,
            peak_rss_kib: 0,
        };
        probe.sample()?;
        Ok(probe)
    }

    /// Samples `VmRSS`; returns it in KiB.
    pub fn sample(&mut self) -> Result<u64, BenchError> {
        let rss = status_field(self.pid, "VmRSS:")?;
        self.peak_rss_kib = self.peak_rss_kib.max(rss);
        Ok(rss)
    }

    /// Ends the observation: CPU since [`BrokerProbe::start`], peak RSS.
    pub fn finish(mut self) -> Result<BrokerUsage, BenchError> {
        self.sample()?;
        let end = cpu_ticks(self.pid)?;
        Ok(BrokerUsage {
            cpu_seconds: end.saturating_sub(self.start_ticks) as f64 / USER_HZ,
            peak_rss_sampled_kib: self.peak_rss_kib,
            hwm_rss_kib: status_field(self.pid, "VmHWM:")?,
        })
    }
}

fn cpu_ticks(pid: u32) -> Result<u64, BenchError> {
    let stat =
        fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|source| BenchError::Proc {
            pid,
            file: "stat",
            source,
        })?;
    parse_cpu_ticks(&stat).ok_or_else(|| BenchError::Proc {
        pid,
        file: "stat",
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, "unexpected format"),
    })
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line. The command name (field
/// 2) is in parentheses and may contain spaces, so fields are counted after the last `)`.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // `rest` starts at field 3 (state): utime is field 14, i.e. the 12th here.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

fn status_field(pid: u32, key: &str) -> Result<u64, BenchError> {
    let status =
        fs::read_to_string(format!("/proc/{pid}/status")).map_err(|source| BenchError::Proc {
            pid,
            file: "status",
            source,
        })?;
    Ok(parse_status_kib(&status, key).unwrap_or(0))
}

/// The value in KiB of a `Key:   123 kB` line of `/proc/<pid>/status`.
fn parse_status_kib(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_spaces_in_the_name() {
        let stat =
            "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 37 0 0 20 0 8 0 5 0 0";
        assert_eq!(parse_cpu_ticks(stat), Some(287));
    }

    #[test]
    fn parses_status_fields() {
        let status = "Name:\tgregor\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n";
        assert_eq!(parse_status_kib(status, "VmHWM:"), Some(204_800));
        assert_eq!(parse_status_kib(status, "VmRSS:"), Some(102_400));
        assert_eq!(parse_status_kib(status, "VmSwap:"), None);
    }

    #[test]
    fn watches_this_process() {
        let probe = BrokerProbe::start(std::process::id()).expect("own /proc");
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let usage = probe.finish().expect("own /proc");
        assert!(usage.hwm_rss_kib > 0);
        assert!(usage.peak_rss_sampled_kib > 0);
        assert!(usage.cpu_seconds >= 0.0);
    }

    #[test]
    fn a_missing_process_is_an_error() {
        assert!(BrokerProbe::start(u32::MAX).is_err());
    }
}
