//! Gives the system back the memory glibc's allocator keeps after the broker freed it.
//!
//! glibc's malloc returns freed memory to the system only from the top of each arena. A
//! broker frees and allocates small buffers on many threads (each request, each fetch, each
//! connection), so freed pages sit below live ones and stay resident: in the soak (issue 14)
//! the live heap stayed at 18-26 MiB while RSS grew a few MiB a minute, and one
//! `malloc_trim(0)` took the process from 106.7 to 40.4 MiB (BENCHMARKS.md, "What grows in
//! the soak"). So a thread asks for the free pages back every [`TRIM_INTERVAL`]:
//! `malloc_trim` walks each arena and `madvise`s whole free pages away; live allocations are
//! untouched.
//!
//! This is the only `unsafe` in the workspace (the lint is `deny`, and `xtask tidy` allows
//! `allow(unsafe_code)` in this file only).

use std::sync::Once;
use std::time::Duration;

use tracing::{debug, info};

/// How often the broker's free memory goes back to the system.
pub const TRIM_INTERVAL: Duration = Duration::from_secs(10);

/// Asks the allocator to return its free pages to the system; returns whether it did.
/// Elsewhere than glibc it does nothing and returns false (those allocators return memory
/// themselves, or have no such call).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub fn release_free_memory() -> bool {
    // SAFETY: `malloc_trim` takes no pointer and touches only memory the allocator owns and
    // has marked free; glibc serialises it with every other allocator call (MT-Safe).
    unsafe { libc::malloc_trim(0) == 1 }
}

/// Asks the allocator to return its free pages to the system; returns whether it did.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_free_memory() -> bool {
    false
}

/// Starts the trimming thread, once per process (a dev-cluster's brokers share it).
pub fn start_trimming() {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("malloc-trim".into())
            .spawn(|| loop {
                std::thread::sleep(TRIM_INTERVAL);
                let released = release_free_memory();
                debug!(
                    released,
                    "returned the allocator's free pages to the system"
                );
            });
        match spawned {
            Ok(_) => info!(
                interval_ms = TRIM_INTERVAL.as_millis() as u64,
                "the allocator's free pages go back to the system periodically"
            ),
            Err(err) => tracing::warn!(error = %err, "cannot start the allocator trimming thread"),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::release_free_memory;

    /// `RssAnon` of this process, in KiB.
    fn rss_anon_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// What the soak showed, in small: 64 MiB of 1 KiB blocks freed except one in 64 (so no
    /// free memory is at the top of the heap, and glibc keeps it all) stays resident until
    /// the trim gives it back. Fails without the trim (the pages stay).
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn freed_pages_below_live_ones_go_back_to_the_system() {
        // On its own thread, with its own arena, so other tests' allocations do not mix in.
        std::thread::spawn(|| {
            let blocks: Vec<Vec<u8>> = (0..65_536).map(|i| vec![i as u8; 1024]).collect();
            let kept: Vec<Vec<u8>> = blocks
                .into_iter()
                .enumerate()
                .filter_map(|(i, b)| (i % 64 == 63).then_some(b))
                .collect();
            let before = rss_anon_kib();
            assert!(
                release_free_memory(),
                "the allocator had free pages to return"
            );
            let after = rss_anon_kib();
            assert!(
                before.saturating_sub(after) >= 16 * 1024,
                "RssAnon {before} KiB -> {after} KiB: the freed 63 MiB were not returned"
            );
            drop(kept);
        })
        .join()
        .unwrap();
    }
}
