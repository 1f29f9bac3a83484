//! The process's open-file limit: raised to the hard limit at start, and split between
//! connections (sockets, the store) and log files (`storage::open_files`, an LRU of open
//! segment and index files).

use std::sync::Once;

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
use tracing::{info, warn};

/// Descriptors kept for everything but log files: a quarter of the limit, at least 256 and
/// at most 4,096 (client and replica connections, the store, sockets of control requests).
fn reserved_for_connections(limit: usize) -> usize {
    (limit / 4).clamp(256, 4096).min(limit / 2)
}

/// How many log files may stay open under a soft limit of `limit` descriptors.
pub(crate) fn log_file_capacity(limit: usize) -> usize {
    limit
        .saturating_sub(reserved_for_connections(limit))
        .max(64)
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, logs both, and sizes the set of open
/// log files from it. Once per process (every broker of a dev cluster shares it).
pub(crate) fn configure() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let before = getrlimit(Resource::Nofile);
        let (soft, hard) = (before.current, before.maximum);
        let target = match hard {
            Some(hard) if soft != Some(hard) => {
                match setrlimit(
                    Resource::Nofile,
                    Rlimit {
                        current: Some(hard),
                        maximum: Some(hard),
                    },
                ) {
                    Ok(()) => Some(hard),
                    Err(err) => {
                        warn!(error = %err, soft = ?soft, hard, "cannot raise the open-file limit");
                        soft
                    }
                }
            }
            _ => soft,
        };
        // An unlimited soft limit still leaves the system's own limits: keep a generous cap.
        let limit = target.map_or(1 << 20, |n| usize::try_from(n).unwrap_or(usize::MAX));
        let capacity = log_file_capacity(limit);
        storage::open_files::set_capacity(capacity);
        info!(
            soft_limit_at_start = ?soft,
            hard_limit = ?hard,
            soft_limit = ?target,
            log_files_open_at_most = capacity,
            "open-file limit"
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_files_get_what_connections_leave() {
        assert_eq!(log_file_capacity(20_000), 15_904);
        assert_eq!(log_file_capacity(1024), 768);
        assert_eq!(log_file_capacity(256), 128);
        assert_eq!(log_file_capacity(1 << 20), (1 << 20) - 4096);
    }
}
