//! The bounds on what clients can make the broker hold (ARCHITECTURE.md invariant 8), with
//! Kafka's keys: connections per address (`max.connections.per.ip`, with overrides), requests
//! being handled at once (`queued.max.requests`) and the memory pool for request bytes
//! (`queued.max.request.bytes`). `max.connections` is the socket server's accept semaphore.
//!
//! A request holds a [`RequestSlot`] (its place among `queued.max.requests`) and a
//! [`PoolPermit`] (its frame's bytes in the pool) from the moment its frame is read until its
//! response is written, except that a handler that parks (a long-polling Fetch, an acks=-1
//! Produce waiting for the ISR, a JoinGroup waiting for the rebalance) gives both back first,
//! through [`parked`]: in Kafka those requests wait in purgatory, not in the request queue,
//! and their buffers are released once the handler ran.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::RequestLimits;

/// The request queue and the request-bytes pool of one broker.
#[derive(Debug)]
pub(crate) struct RequestLimiter {
    queue: Arc<Semaphore>,
    pool: Option<Arc<Semaphore>>,
}

/// A frame's bytes in the pool; given back when dropped.
#[derive(Debug)]
pub(crate) struct PoolPermit(#[allow(dead_code)] Option<OwnedSemaphorePermit>);

/// A request's place among `queued.max.requests`; given back when dropped.
#[derive(Debug)]
pub(crate) struct RequestSlot(#[allow(dead_code)] OwnedSemaphorePermit);

impl RequestLimiter {
    pub(crate) fn new(limits: &RequestLimits) -> RequestLimiter {
        RequestLimiter {
            queue: Arc::new(Semaphore::new(
                limits.queued_max_requests.min(Semaphore::MAX_PERMITS),
            )),
            pool: limits
                .queued_max_request_bytes
                .map(|bytes| Arc::new(Semaphore::new(bytes.min(Semaphore::MAX_PERMITS)))),
        }
    }

    /// Waits until the pool has room for a frame of `size` bytes and takes it.
    pub(crate) async fn reserve_bytes(&self, size: usize) -> PoolPermit {
        let Some(pool) = &self.pool else {
            return PoolPermit(None);
        };
        // Config validation keeps every frame (<= socket.request.max.bytes) within the pool,
        // and frames are far below 4 GiB.
        let size = u32::try_from(size).unwrap_or(u32::MAX);
        PoolPermit(Arc::clone(pool).acquire_many_owned(size).await.ok())
    }

    /// Waits for a place among the requests being handled.
    pub(crate) async fn request_slot(&self) -> RequestSlot {
        RequestSlot(
            Arc::clone(&self.queue)
                .acquire_owned()
                .await
                .expect("the request queue semaphore is never closed"),
        )
    }

    /// Bytes free in the pool (`None` without a pool), for tests and metrics.
    #[allow(dead_code)]
    pub(crate) fn pool_available(&self) -> Option<usize> {
        self.pool.as_ref().map(|p| p.available_permits())
    }
}

/// What the request being handled on this task holds, given back by [`parked`].
type Held = RefCell<Option<(RequestSlot, PoolPermit)>>;

tokio::task_local! {
    static HELD: Held;
}

/// Runs a request's handler holding `slot` and `permit`; returns them when the handler did
/// not give them back by parking.
pub(crate) async fn holding<F: Future>(
    slot: RequestSlot,
    permit: PoolPermit,
    handler: F,
) -> (F::Output, Option<(RequestSlot, PoolPermit)>) {
    let held: Held = RefCell::new(Some((slot, permit)));
    HELD.scope(held, async {
        let output = handler.await;
        let left = HELD.with(|h| h.borrow_mut().take());
        (output, left)
    })
    .await
}

/// Awaits `wait` after giving back the current request's place in the queue and its bytes
/// in the pool: a parked request must not keep others from being read.
pub(crate) async fn parked<F: Future>(wait: F) -> F::Output {
    release_held();
    wait.await
}

/// Gives back the current request's place in the queue and its bytes in the pool now (the
/// handler is about to wait).
pub(crate) fn release_held() {
    let _ = HELD.try_with(|h| h.borrow_mut().take());
    // A parked request's remote time starts here (`RequestMetrics.RemoteTimeMs`).
    crate::metrics::parked();
}

/// The broker-wide connection limits, shared by every listener.
#[derive(Debug)]
pub(crate) struct ConnectionLimits {
    /// `max.connections`: a listener waits for a permit before accepting.
    pub(crate) max_connections: Arc<Semaphore>,
    /// `max.connections.per.ip` and its overrides.
    pub(crate) per_ip: Arc<ConnectionQuotas>,
}

impl ConnectionLimits {
    pub(crate) fn new(limits: &RequestLimits) -> ConnectionLimits {
        ConnectionLimits {
            max_connections: Arc::new(Semaphore::new(
                limits.max_connections.min(Semaphore::MAX_PERMITS),
            )),
            per_ip: Arc::new(ConnectionQuotas::new(limits)),
        }
    }
}

/// Per-address connection counts against `max.connections.per.ip` and its overrides.
#[derive(Debug)]
pub(crate) struct ConnectionQuotas {
    default_limit: usize,
    overrides: BTreeMap<IpAddr, usize>,
    open: Mutex<HashMap<IpAddr, usize>>,
}

/// One counted connection; uncounted when dropped.
#[derive(Debug)]
pub(crate) struct ConnectionSlot {
    quotas: Arc<ConnectionQuotas>,
    ip: IpAddr,
}

impl ConnectionQuotas {
    pub(crate) fn new(limits: &RequestLimits) -> ConnectionQuotas {
        ConnectionQuotas {
            default_limit: limits.max_connections_per_ip,
            overrides: limits.max_connections_per_ip_overrides.clone(),
            open: Mutex::new(HashMap::new()),
        }
    }

    /// Counts a new connection from `ip`, or `Err(limit)` when `ip` has as many as allowed.
    pub(crate) fn try_open(self: &Arc<Self>, ip: IpAddr) -> Result<ConnectionSlot, usize> {
        let limit = self
            .overrides
            .get(&ip)
            .copied()
            .unwrap_or(self.default_limit);
        let mut open = self.lock();
        let count = open.entry(ip).or_default();
        if *count >= limit {
            return Err(limit);
        }
        *count += 1;
        Ok(ConnectionSlot {
            quotas: Arc::clone(self),
            ip,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        // Every change is one increment or decrement: a poisoned map is still right.
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut open = self.quotas.lock();
        if let Some(count) = open.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}
