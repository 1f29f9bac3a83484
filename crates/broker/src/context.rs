//! `BrokerContext`: what every handler can reach. One per broker, shared by its connections.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use controller::ControllerHandle;
use model::{BrokerId, TopicPartition};
use storage::LogManager;
use znodes::zk_client::KafkaZkClient;

use crate::config::BrokerConfig;
use crate::groups::Groups;
use crate::metadata_cache::MetadataCache;
use crate::metrics::Metrics;

/// This broker's role for one partition, as the last LeaderAndIsr said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplicaRole {
    /// This broker leads the partition.
    Leader { leader_epoch: i32 },
    /// This broker follows `leader`.
    Follower { leader: BrokerId, leader_epoch: i32 },
}

/// The store session and the controller running on it. Both are replaced together when the
/// session expires and the broker registers again on a new one.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    pub zk: KafkaZkClient,
    pub controller: ControllerHandle,
}

/// Shared state of one broker.
#[derive(Debug)]
pub(crate) struct BrokerContext {
    pub config: BrokerConfig,
    pub broker_id: BrokerId,
    pub cluster_id: String,
    /// The advertised endpoint of every listener (the bound port when the config says 0).
    pub advertised: Vec<crate::config::AdvertisedEndpoint>,
    pub session: RwLock<Session>,
    pub metadata_cache: MetadataCache,
    pub log_manager: LogManager,
    /// The open partition logs and their leader state (the data plane).
    pub replica_manager: replication::ReplicaManager,
    /// The producer-id block InitProducerId hands ids out of.
    pub producer_ids: tokio::sync::Mutex<crate::handlers::init_producer_id::ProducerIdBlock>,
    pub replicas: Mutex<BTreeMap<TopicPartition, ReplicaRole>>,
    pub metrics: Arc<Metrics>,
    /// The highest controller epoch seen in a control request.
    pub controller_epoch: AtomicI32,
    /// This broker's epoch: the zxid that created its current registration.
    pub broker_epoch: AtomicI64,
    /// Consumer groups (coordinated here while this broker is the controller).
    pub groups: Arc<Groups>,
    /// The transaction coordinator (the `__transaction_state` partitions led here).
    pub transactions: crate::txn::Transactions,
    /// Wakes the stray-log scan (`stray_logs`).
    pub stray_scan: tokio::sync::Notify,
    /// The broker epoch whose first UpdateMetadata started a stray-log scan (-1: none yet).
    pub stray_scan_epoch: AtomicI64,
    /// The ACL authorizer (`authorizer.class.name`); `None`: every request is allowed.
    pub authorizer: Option<Arc<crate::auth::authorizer::Authorizer>>,
    /// Tells the controller's requests from forgeries.
    pub control_plane: crate::auth::control_plane::ControlPlaneGuard,
    /// `queued.max.requests` and the request-bytes pool.
    pub request_limiter: crate::limits::RequestLimiter,
    /// `max.connections` and `max.connections.per.ip`, over every listener.
    pub connection_limits: crate::limits::ConnectionLimits,
    /// Set when the broker starts shutting down: the admin listener stops asking it.
    pub stopped: std::sync::atomic::AtomicBool,
    /// Client byte-rate quotas (`producer_byte_rate`, `consumer_byte_rate`).
    pub quotas: crate::quotas::Quotas,
    /// Held while a LeaderAndIsr or StopReplica changes replicas (Kafka's
    /// replicaStateChangeLock): two control requests never work on the same partitions at
    /// once, e.g. a controller's retry of a request still running here after its timeout.
    pub replica_state_change: tokio::sync::Mutex<()>,
}

impl BrokerContext {
    /// This broker's advertised host and port on `listener`, if it has that listener.
    pub fn advertised_on(&self, listener: &str) -> Option<(String, u16)> {
        self.advertised
            .iter()
            .find(|e| e.name == listener)
            .map(|e| (e.host.clone(), e.port))
    }

    /// The current store session.
    pub fn zk(&self) -> KafkaZkClient {
        self.session
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .zk
            .clone()
    }

    /// The controller running on the current session.
    pub fn controller(&self) -> ControllerHandle {
        self.session
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .controller
            .clone()
    }

    pub fn set_session(&self, session: Session) {
        *self.session.write().unwrap_or_else(|p| p.into_inner()) = session;
    }

    /// Fences control requests from deposed controllers: `false` if `epoch` is older than one
    /// already seen. A newer epoch is not adopted on the sender's word: it must not exceed
    /// the store's `/controller_epoch` (one read per new epoch; a control request cannot
    /// lock this broker out of the real controller by claiming a huge epoch). When the store
    /// cannot be read the epoch is taken, as Kafka takes every newer one.
    pub async fn accept_controller_epoch(&self, epoch: i32) -> bool {
        let known = self.controller_epoch.load(Ordering::SeqCst);
        if epoch < known {
            return false;
        }
        if epoch > known {
            match self.zk().get_controller_epoch().await {
                Ok(Some((current, _))) if epoch <= current => {}
                Ok(current) => {
                    tracing::warn!(
                        request_epoch = epoch,
                        store_epoch = ?current.map(|(e, _)| e),
                        "control request claims a controller epoch the store has not reached; refused"
                    );
                    return false;
                }
                Err(err) => tracing::warn!(
                    request_epoch = epoch,
                    error = %err,
                    "cannot read /controller_epoch; taking the newer controller epoch"
                ),
            }
        }
        self.controller_epoch.fetch_max(epoch, Ordering::SeqCst) <= epoch
    }

    /// Kafka's `isBrokerEpochStale`: a control request addressed to an older registration of
    /// this broker (before a session expiry) must not act on the new one. `-1` means the
    /// sender does not know the epoch.
    pub fn is_broker_epoch_stale(&self, request_epoch: i64) -> bool {
        request_epoch != -1 && request_epoch < self.broker_epoch.load(Ordering::SeqCst)
    }

    pub fn replicas(&self) -> std::sync::MutexGuard<'_, BTreeMap<TopicPartition, ReplicaRole>> {
        // Every update is a single insert or remove, so a poisoned map is still consistent.
        self.replicas.lock().unwrap_or_else(|p| p.into_inner())
    }
}
