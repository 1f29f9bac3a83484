//! Disk work off the async workers.
//!
//! The runtime has one worker per core (two on the machines this runs on): a handler that
//! reads or writes a log on a worker stalls every connection that worker serves, for as long
//! as the disk takes (and a partition lock held across a slow write stalls every worker that
//! touches that partition). Handlers run log appends, reads, offset lookups, flushes and
//! deletions through [`run`], on tokio's blocking pool, instead. io_uring would save the
//! hop, but needs unsafe code or a runtime of its own; the pool is what tokio offers.

/// Runs `work` on the blocking pool and waits for it. A panic in `work` is resumed here.
pub(crate) async fn run<T, F>(work: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    // The time the work ran counts against the request's `request_percentage` quota.
    let timed = move || {
        let start = std::time::Instant::now();
        let value = work();
        (value, start.elapsed())
    };
    match tokio::task::spawn_blocking(timed).await {
        Ok((value, spent)) => {
            crate::quotas::add_request_time(spent);
            value
        }
        Err(err) => match err.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            // Only a runtime shutting down cancels a blocking task; so is this task.
            Err(err) => panic!("blocking task cancelled by the runtime shutting down: {err}"),
        },
    }
}
