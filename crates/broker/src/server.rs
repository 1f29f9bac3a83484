//! Starting and stopping one broker: store session, cluster id, log directories, listener,
//! registration, controller, then serving until shutdown.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use metastore::{Client, EmbeddedStore, Events, SessionOptions, SessionState};
use model::BrokerId;
use storage::{LogManager, LogManagerConfig};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};
use znodes::zk_client::KafkaZkClient;

use security::control_plane::{ControlPlaneKey, SECRET_LEN};

use crate::auth::control_plane::ControlPlaneGuard;
use crate::config::BrokerConfig;
use crate::context::{BrokerContext, Session};
use crate::error::BrokerError;
use crate::groups::{self, Groups};
use crate::metadata_cache::MetadataCache;
use crate::metrics::Metrics;
use crate::{admin_http, lifecycle, socket_server};

/// At shutdown, how long a broker whose store session is disconnected waits for it to come
/// back before it skips controlled shutdown (a ZooKeeper server restarting moves the session
/// within a second or two; a whole ensemble down does not come back in time).
const SHUTDOWN_STORE_GRACE: Duration = Duration::from_secs(3);
/// At shutdown, the longest wait for each step that needs the store (resigning as
/// controller, closing the session): with the store unreachable they would wait forever.
const SHUTDOWN_STORE_STEP: Duration = Duration::from_secs(3);

/// Where the broker keeps its metadata: the embedded store (shared by every broker of one
/// process) or a ZooKeeper ensemble. Both are driven through the same `metastore::Client`.
#[derive(Debug, Clone)]
pub enum MetadataStore {
    /// The embedded store.
    Embedded(EmbeddedStore),
    /// A ZooKeeper ensemble (`zookeeper.connect`).
    ZooKeeper(String),
}

impl MetadataStore {
    /// The store `config` asks for: ZooKeeper when `zookeeper.connect` is set, else the
    /// embedded store in `metadata.log.dir`.
    pub fn from_config(config: &BrokerConfig) -> Result<MetadataStore, BrokerError> {
        match &config.zookeeper_connect {
            Some(connect) => Ok(MetadataStore::ZooKeeper(connect.clone())),
            None => {
                let path = config.metadata_log_dir.clone();
                info!(dir = %path.display(), "metadata store (embedded) in metadata.log.dir");
                std::fs::create_dir_all(&path).map_err(|e| BrokerError::OpenStore {
                    path: path.clone(),
                    source: metastore::Error::Backend(e.to_string()),
                })?;
                let store =
                    EmbeddedStore::open_with_cache(&path, config.metadata_store_cache_bytes)
                        .map_err(|source| BrokerError::OpenStore { path, source })?;
                Ok(MetadataStore::Embedded(store))
            }
        }
    }

    /// Releases the store: the embedded store commits and unlocks its file (every broker on
    /// it must be shut down first); a ZooKeeper store has nothing shared to release.
    pub async fn close(&self) {
        if let MetadataStore::Embedded(store) = self {
            store.close().await;
        }
    }

    /// Opens a new session.
    pub(crate) async fn connect(
        &self,
        opts: SessionOptions,
    ) -> Result<(Client, Events), BrokerError> {
        match self {
            MetadataStore::Embedded(store) => Ok(store.connect(opts)),
            MetadataStore::ZooKeeper(connect) => metastore::connect_zookeeper(connect, opts)
                .await
                .map_err(|source| BrokerError::ConnectZooKeeper {
                    connect: connect.clone(),
                    source,
                }),
        }
    }
}

/// A running broker.
#[derive(Debug)]
pub struct Broker {
    ctx: Arc<BrokerContext>,
    /// Each listener's name and bound address, in `listeners` order.
    local_addrs: Vec<(String, SocketAddr)>,
    shutdown: watch::Sender<bool>,
    socket_servers: Vec<JoinHandle<()>>,
    lifecycle: JoinHandle<()>,
    cleaner: crate::log_cleaner::LogCleaner,
}

impl Broker {
    /// Starts a broker on `store`. With `listener` the broker serves its first listener on it
    /// (tests bind port 0); every other listener is bound as configured. Returns once the
    /// broker is registered and accepting connections.
    pub async fn start(
        config: BrokerConfig,
        store: MetadataStore,
        listener: Option<TcpListener>,
    ) -> Result<Broker, BrokerError> {
        crate::open_files::configure();
        crate::allocator::start_trimming();
        let (client, events) = store.connect(session_options(&config)).await?;
        let zk = KafkaZkClient::new(client, events);
        match Broker::start_on_session(config, store, listener, zk.clone()).await {
            Ok(broker) => Ok(broker),
            Err(err) => {
                // Release the session so nothing of a broker that never served stays behind.
                zk.close().await;
                Err(err)
            }
        }
    }

    async fn start_on_session(
        config: BrokerConfig,
        store: MetadataStore,
        listener: Option<TcpListener>,
        zk: KafkaZkClient,
    ) -> Result<Broker, BrokerError> {
        let broker_id = config.broker_id;
        zk.ensure_persistent_paths().await?;
        let cluster_id = zk.get_or_create_cluster_id(&new_cluster_id()).await?;
        let control_plane_key = control_plane_key(&zk).await?;
        check_log_dirs(&config, &zk, &cluster_id).await?;
        let log_manager = LogManager::open(LogManagerConfig {
            log_dirs: config.log_dirs.clone(),
            file_delete_delay: config.file_delete_delay,
        })?;
        let replica_manager = replication::ReplicaManager::new(
            &config.log_dirs,
            config.replication.clone(),
        )
        .unwrap_or_else(|err| {
            // Without the checkpoints every log is recovered from its start: slower, safe.
            warn!(error = %err, "cannot read log checkpoints; logs will be fully recovered");
            replication::ReplicaManager::new(&[], config.replication.clone())
                .expect("no checkpoint files to read")
        });
        // TLS settings are read (and refused) before anything is bound or registered.
        let securities = config
            .listeners
            .iter()
            .map(|l| crate::auth::ListenerSecurity::new(l, &config.originals).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        let mut given = listener;
        let mut bound = Vec::new();
        for listener_config in &config.listeners {
            let listener = match given.take() {
                Some(listener) => listener,
                None => {
                    let addr = listener_config.bind_addr();
                    TcpListener::bind(&addr)
                        .await
                        .map_err(|source| BrokerError::Bind {
                            what: "Kafka",
                            addr,
                            source,
                        })?
                }
            };
            let local_addr = listener.local_addr().map_err(|source| BrokerError::Bind {
                what: "Kafka",
                addr: listener_config.bind_addr(),
                source,
            })?;
            bound.push((listener_config.clone(), listener, local_addr));
        }
        let local_addrs: Vec<(String, SocketAddr)> = bound
            .iter()
            .map(|(l, _, addr)| (l.name.clone(), *addr))
            .collect();
        let port_of = |name: &str| {
            local_addrs
                .iter()
                .find(|(n, _)| n == name)
                .map_or(0, |(_, addr)| addr.port())
        };
        let advertised = config.advertised_endpoints(port_of);
        // ACLs are loaded before the broker registers, so it never serves without them.
        let authorizer = match &config.authorizer {
            Some(settings) => {
                let authorizer = crate::auth::authorizer::Authorizer::new(settings.clone());
                authorizer.load(&zk).await?;
                Some(Arc::new(authorizer))
            }
            None => None,
        };
        let broker_epoch = lifecycle::register(&zk, &config, &advertised).await?;
        let groups = Arc::new(Groups::default());
        let metrics = Arc::new(Metrics::default());
        let controller = controller::start(
            zk.clone(),
            controller_config(&config, &control_plane_key, &metrics),
        )
        .await;
        let shown: Vec<String> = advertised
            .iter()
            .map(|e| format!("{}://{}:{}", e.name, e.host, e.port))
            .collect();
        info!(broker_id, %cluster_id, listeners = ?local_addrs, advertised = ?shown, "broker started");
        let request_limiter = crate::limits::RequestLimiter::new(&config.limits);
        let connection_limits = crate::limits::ConnectionLimits::new(&config.limits);
        let quotas = crate::quotas::Quotas::new(
            config.limits.quota_window_size,
            config.limits.quota_window_num,
        );
        let ctx = Arc::new(BrokerContext {
            quotas,
            request_limiter,
            connection_limits,
            config,
            broker_id,
            cluster_id,
            advertised,
            session: RwLock::new(Session { zk, controller }),
            metadata_cache: MetadataCache::default(),
            log_manager,
            replica_manager,
            producer_ids: Default::default(),
            replicas: Mutex::new(Default::default()),
            metrics,
            controller_epoch: AtomicI32::new(0),
            broker_epoch: AtomicI64::new(broker_epoch),
            groups,
            transactions: Default::default(),
            stray_scan: tokio::sync::Notify::new(),
            stray_scan_epoch: AtomicI64::new(-1),
            control_plane: ControlPlaneGuard::new(control_plane_key),
            authorizer,
            stopped: std::sync::atomic::AtomicBool::new(false),
            replica_state_change: tokio::sync::Mutex::new(()),
        });
        ctx.replica_manager
            .start(Arc::new(crate::data_plane::ControllerFromMetadata(
                Arc::downgrade(&ctx),
            )));
        Groups::start(&ctx);
        crate::txn::Transactions::start(&ctx);
        ctx.quotas.load(&ctx.zk()).await;
        crate::data_plane::load_replication_rates(&ctx).await;
        let cleaner = crate::log_cleaner::LogCleaner::start(
            crate::log_cleaner::cleaner_config(&ctx.config.originals),
            ctx.replica_manager.clone(),
            ctx.config.log_dirs.clone(),
        );
        let (shutdown, shutdown_rx) = watch::channel(false);
        tokio::spawn(crate::data_plane::background(
            Arc::clone(&ctx),
            shutdown_rx.clone(),
        ));
        tokio::spawn(crate::stray_logs::run(
            Arc::clone(&ctx),
            shutdown_rx.clone(),
        ));
        tokio::spawn(crate::config_changes::listen(
            Arc::clone(&ctx),
            shutdown_rx.clone(),
        ));
        tokio::spawn(crate::auth::authorizer::listen(
            Arc::clone(&ctx),
            shutdown_rx.clone(),
        ));
        for security in &securities {
            if let Some(tls) = &security.tls {
                tokio::spawn(
                    Arc::clone(tls).watch_files(Arc::clone(&security.name), shutdown_rx.clone()),
                );
            }
        }
        let socket_servers = bound
            .into_iter()
            .zip(securities)
            .map(|((_, listener, _), security)| {
                tokio::spawn(socket_server::serve(
                    Arc::clone(&ctx),
                    listener,
                    security,
                    shutdown_rx.clone(),
                ))
            })
            .collect();
        let lifecycle = tokio::spawn(lifecycle::keep_registered(
            Arc::clone(&ctx),
            store,
            shutdown_rx,
        ));
        Ok(Broker {
            ctx,
            local_addrs,
            shutdown,
            socket_servers,
            lifecycle,
            cleaner,
        })
    }

    /// The address the first listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addrs[0].1
    }

    /// The address the listener named `name` is bound to.
    pub fn listener_addr(&self, name: &str) -> Option<SocketAddr> {
        self.local_addrs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, addr)| *addr)
    }

    /// `broker.id`.
    pub fn broker_id(&self) -> BrokerId {
        self.ctx.broker_id
    }

    /// The cluster id from `/cluster/id`.
    pub fn cluster_id(&self) -> &str {
        &self.ctx.cluster_id
    }

    /// The id of the broker's current store session (it changes after an expiry).
    pub fn session_id(&self) -> i64 {
        self.ctx.zk().session_id()
    }

    /// The broker epoch of the current registration (the zxid that created `/brokers/ids/<id>`).
    pub fn broker_epoch(&self) -> i64 {
        self.ctx.broker_epoch.load(Ordering::SeqCst)
    }

    /// Whether this broker is the active controller.
    pub fn is_controller(&self) -> bool {
        self.ctx.controller().is_active()
    }

    /// What the admin listener shows about this broker.
    pub fn admin_view(&self) -> admin_http::BrokerView {
        admin_http::BrokerView::new(Arc::clone(&self.ctx))
    }

    /// Asks the controller to move this broker's leaderships to other in-sync replicas and to
    /// drop it from every ISR, retrying as `controlled.shutdown.*` says; the broker keeps
    /// serving. Returns whether nothing movable is left led here. [`Broker::shutdown`] runs
    /// this first.
    pub async fn controlled_shutdown(&self) -> bool {
        crate::controlled_shutdown::run(&self.ctx).await
    }

    /// With `controlled.shutdown.enable` (the default), first asks the controller to move
    /// this broker's leaderships away while it still serves; then resigns as controller
    /// (after delivering its queued control requests), stops accepting requests, lets
    /// in-flight requests finish and closes the store session
    /// (so `/brokers/ids/<id>` disappears at once).
    ///
    /// Bounded when the store is unreachable (every ZooKeeper server down): controlled
    /// shutdown needs the store to find the controller, so it is skipped, with a warning, if
    /// the session does not come back within a few seconds; the steps that write the store
    /// are each given a few seconds, then the broker stops anyway.
    pub async fn shutdown(self) {
        info!(broker_id = self.ctx.broker_id, "shutting down");
        if self.ctx.config.controlled_shutdown_enable {
            match self.store_reachable().await {
                Ok(()) => {
                    self.controlled_shutdown().await;
                }
                Err(state) => warn!(
                    broker_id = self.ctx.broker_id,
                    session = ?state,
                    "controlled shutdown skipped: the metadata store is unreachable, so the \
                     controller cannot be found; it moves this broker's leaderships when the \
                     broker's session ends"
                ),
            }
        }
        // Resign while still serving: a controller delivers its queued control requests
        // first, the LeaderAndIsr that makes this broker a follower of what it just gave up
        // among them, and it cannot deliver that one to a closed listener.
        if tokio::time::timeout(SHUTDOWN_STORE_STEP, self.ctx.controller().shutdown())
            .await
            .is_err()
        {
            warn!(
                broker_id = self.ctx.broker_id,
                "the controller did not resign within {} s (the store is unreachable?); stopping anyway",
                SHUTDOWN_STORE_STEP.as_secs()
            );
        }
        self.stop().await;
    }

    /// Waits (up to [`SHUTDOWN_STORE_GRACE`]) for the store session to be connected; the
    /// state it was left in otherwise.
    async fn store_reachable(&self) -> Result<(), SessionState> {
        let mut state = self.ctx.zk().subscribe_session_state();
        let connected = tokio::time::timeout(
            SHUTDOWN_STORE_GRACE,
            state.wait_for(|s| !matches!(s, SessionState::Disconnected)),
        )
        .await;
        match connected {
            Ok(Ok(s)) if matches!(*s, SessionState::Connected) => Ok(()),
            Ok(Ok(s)) => Err(*s),
            Ok(Err(_)) => Err(SessionState::Closed),
            Err(_) => Err(SessionState::Disconnected),
        }
    }

    /// Stops at once, without asking the controller to move leaderships first (what a
    /// crash looks like to the rest of the cluster, except that the store session ends
    /// now instead of timing out). `gregor dev-cluster` stops one broker this way.
    pub async fn stop(self) {
        self.ctx
            .stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = self.shutdown.send(true);
        self.ctx.replica_manager.stop_serving();
        self.lifecycle.abort();
        let _ = self.lifecycle.await;
        self.ctx.groups.stop("the broker is shutting down");
        self.ctx.transactions.stop();
        for server in self.socket_servers {
            if let Err(err) = server.await {
                warn!(error = %err, "listener task failed");
            }
        }
        self.cleaner.stop();
        let (rm, dirs) = (
            self.ctx.replica_manager.clone(),
            self.ctx.config.log_dirs.clone(),
        );
        match tokio::task::spawn_blocking(move || rm.shutdown(&dirs)).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => warn!(error = %err, "cannot flush logs at shutdown"),
            Err(err) => warn!(error = %err, "log flush task failed"),
        }
        // Closing tells the store to end the session now; with the store unreachable the
        // session times out by itself instead.
        if tokio::time::timeout(SHUTDOWN_STORE_STEP, self.ctx.zk().close())
            .await
            .is_err()
        {
            warn!(
                broker_id = self.ctx.broker_id,
                "could not close the store session within {} s; it ends when it times out",
                SHUTDOWN_STORE_STEP.as_secs()
            );
        }
        info!(broker_id = self.ctx.broker_id, "shut down");
    }
}

/// Runs one broker with the store its config names, plus the admin listener, until
/// `shutdown` resolves; then stops gracefully. `on_ready` is called with the Kafka and admin
/// addresses once both serve.
pub async fn run(
    config: BrokerConfig,
    shutdown: impl Future<Output = ()>,
    on_ready: impl FnOnce(SocketAddr, Option<SocketAddr>),
) -> Result<(), BrokerError> {
    let store = MetadataStore::from_config(&config)?;
    let admin_addr = config.admin_listener;
    let broker = Broker::start(config, store.clone(), None).await?;
    let admin = match admin_addr {
        Some(addr) => match admin_http::AdminServer::bind(addr, vec![broker.admin_view()]).await {
            Ok(admin) => Some(admin),
            Err(err) => {
                broker.shutdown().await;
                store.close().await;
                return Err(err);
            }
        },
        None => None,
    };
    on_ready(broker.local_addr(), admin.as_ref().map(|a| a.local_addr()));
    shutdown.await;
    if let Some(admin) = admin {
        admin.shutdown().await;
    }
    broker.shutdown().await;
    store.close().await;
    Ok(())
}

pub(crate) fn session_options(config: &BrokerConfig) -> SessionOptions {
    SessionOptions {
        session_timeout: config.zookeeper_session_timeout,
    }
}

/// The controller config of this broker: the control-plane secret and the event timings
/// for `/metrics`.
pub(crate) fn controller_config(
    config: &BrokerConfig,
    key: &ControlPlaneKey,
    metrics: &Arc<Metrics>,
) -> controller::ControllerConfig {
    let metrics = Arc::clone(metrics);
    controller::ControllerConfig {
        control_plane_key: Some(key.clone()),
        inter_broker_listener: config.inter_broker_listener_name().to_owned(),
        control_plane_listener: config.control_plane_listener_name().to_owned(),
        control_plane_security: config.control_plane_security.clone(),
        on_event: controller::EventObserver::new(move |state, elapsed| {
            metrics.controller_events.observe(state, elapsed)
        }),
        ..groups::controller_config(config)
    }
}

/// The cluster's control-plane secret from the store, created by the first broker.
async fn control_plane_key(zk: &KafkaZkClient) -> Result<ControlPlaneKey, BrokerError> {
    use base64::Engine as _;
    let engine = base64::engine::general_purpose::STANDARD;
    let fresh: [u8; SECRET_LEN] = rand::random();
    let text = zk
        .get_or_create_control_plane_secret(&engine.encode(fresh))
        .await?;
    let secret = engine
        .decode(text.as_bytes())
        .ok()
        .and_then(|bytes| <[u8; SECRET_LEN]>::try_from(bytes).ok())
        .ok_or_else(|| {
            BrokerError::Store(znodes::ZkClientError::Decode {
                path: znodes::security::control_plane_secret().to_owned(),
                reason: format!("not {SECRET_LEN} bytes of base64"),
            })
        })?;
    Ok(ControlPlaneKey::new(secret))
}

/// Kafka's `meta.properties` checks before any log is opened: every log directory's file
/// must name this cluster and this broker. Directories without one get one, except when none
/// of them has one and none holds a partition while the store already places replicas on
/// this broker: those logs are elsewhere (a `gregor server` and a `gregor dev-cluster` in the
/// same data directory share the store but not the log directories), and starting would
/// serve every such partition as empty. Kafka's KRaft brokers refuse an unformatted log
/// directory always; a ZooKeeper-mode broker formats it, as this one does when the store
/// knows nothing of it.
async fn check_log_dirs(
    config: &BrokerConfig,
    zk: &KafkaZkClient,
    cluster_id: &str,
) -> Result<(), BrokerError> {
    let broker_id = config.broker_id;
    let state = storage::check_log_dirs(&config.log_dirs, broker_id, cluster_id)?;
    if state.fresh {
        if let Some(example) = partition_on_broker(zk, broker_id).await? {
            let shown = |p: &std::path::Path| p.display().to_string();
            let mut elsewhere = Vec::new();
            if let Some(data_dir) = config.metadata_log_dir.parent() {
                for candidate in [
                    data_dir.join("logs"),
                    data_dir.join(format!("broker-{broker_id}")).join("logs"),
                ] {
                    let holds_logs = std::fs::read_dir(&candidate).is_ok_and(|mut entries| {
                        entries.any(|e| e.is_ok_and(|e| e.path().is_dir()))
                    });
                    if holds_logs && !config.log_dirs.contains(&candidate) {
                        elsewhere.push(shown(&candidate));
                    }
                }
            }
            let hint = if elsewhere.is_empty() {
                "Check log.dirs, or use another data directory for a new cluster. ".to_owned()
            } else {
                format!(
                    "Partition logs are in {} (another command's layout: `gregor server` \
                     keeps them in <data-dir>/logs, `gregor dev-cluster` in \
                     <data-dir>/broker-<id>/logs): run the command that wrote them, or use \
                     another --data-dir for a new cluster. ",
                    elsewhere.join(", ")
                )
            };
            let store = match &config.zookeeper_connect {
                Some(connect) => format!("ZooKeeper at {connect}"),
                None => format!("embedded, in {}", shown(&config.metadata_log_dir)),
            };
            let log_dirs = config
                .log_dirs
                .iter()
                .map(|d| shown(d))
                .collect::<Vec<_>>()
                .join(",");
            let first_dir = config
                .log_dirs
                .first()
                .map(|d| shown(d))
                .unwrap_or_default();
            return Err(BrokerError::LogsElsewhere(format!(
                "broker {broker_id}'s log directories ({log_dirs}) are new (no meta.properties, \
                 no partitions), but the metadata store ({store}, cluster id {cluster_id}) \
                 already places replicas on broker {broker_id} (for example {example}); starting \
                 here would serve them as empty. {hint}To start with empty logs on purpose (a \
                 replaced disk: each partition is copied back from its other replicas, one \
                 without another replica stays empty), create {first_dir}/meta.properties with \
                 the lines version=0, broker.id={broker_id} and cluster.id={cluster_id}."
            )));
        }
    }
    storage::write_meta_properties(&state.unformatted, broker_id, cluster_id)?;
    Ok(())
}

/// A partition (`topic-partition`) the store assigns a replica of to `broker_id`, if any.
async fn partition_on_broker(
    zk: &KafkaZkClient,
    broker_id: BrokerId,
) -> Result<Option<String>, BrokerError> {
    for topic in zk.get_all_topics(false).await? {
        if let Some(found) = zk.get_topic_assignment(&topic, false).await? {
            let on_broker = found
                .assignment
                .partitions
                .iter()
                .find(|(_, replicas)| replicas.contains(&broker_id));
            if let Some((partition, _)) = on_broker {
                return Ok(Some(format!("{}-{partition}", topic.as_str())));
            }
        }
    }
    Ok(None)
}

/// A new cluster id in Kafka's format: a random UUID as 22 characters of URL-safe base64.
fn new_cluster_id() -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(uuid::Uuid::new_v4().as_bytes())
}
