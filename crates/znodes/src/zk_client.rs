//! `KafkaZkClient`: one broker's session with the store, shared by every part of the broker,
//! and the typed operations on Kafka's znodes (Kafka's `KafkaZkClient`).
//!
//! The session's ordered event stream is read by one dispatcher task that hands every watch
//! event to every subscriber ([`KafkaZkClient::subscribe_watches`], each subscriber keeps
//! what it registered for, classified by [`KafkaWatch::classify`]) and publishes the session
//! state ([`KafkaZkClient::subscribe_session_state`]). Subscriber queues are bounded; a full
//! queue makes the dispatcher wait, which keeps every subscriber's events in store order.
//!
//! Controller writes take `epoch_zk_version`, the version of `/controller_epoch` when this
//! controller was elected, and run inside a multi whose first op checks it: a deposed
//! controller's writes fail with [`ZkClientError::ControllerMoved`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use metastore::{Client, CreateMode, Event, Events, Op, OpResult, SessionState, WatchedEvent};
use model::{BrokerId, TopicName, TopicPartition};
use tokio::sync::{mpsc, watch};

use crate::json::{
    BrokerRegistration, ClusterIdZNode, ConfigChangeNotification, ControllerEpochZNode,
    ControllerZNode, PartitionStateZNode, ReassignPartitions, TopicAssignment, TopicConfigZNode,
    ZnodeJson,
};
use crate::paths;

mod batch;

pub use batch::{Outcomes, MAX_IN_FLIGHT, MULTI_MAX_BYTES, MULTI_MAX_OPS};

/// How many watch events may wait for one subscriber.
pub const WATCH_QUEUE_CAPACITY: usize = 1024;

/// Errors of the typed operations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZkClientError {
    /// The epoch check of a controller write failed: another controller was elected.
    #[error(
        "controller moved: /controller_epoch is no longer at version {expected_epoch_zk_version}"
    )]
    ControllerMoved {
        /// The version this controller was elected at.
        expected_epoch_zk_version: i32,
    },
    /// The node to create exists already.
    #[error("node {0} already exists")]
    NodeExists(String),
    /// A znode holds data this version of Gregor cannot read.
    #[error("cannot decode {path}: {reason}")]
    Decode {
        /// The znode.
        path: String,
        /// Why.
        reason: String,
    },
    /// Any other store failure.
    #[error(transparent)]
    Store(metastore::Error),
}

impl From<metastore::Error> for ZkClientError {
    fn from(err: metastore::Error) -> Self {
        match err {
            metastore::Error::NodeExists(path) => ZkClientError::NodeExists(path),
            other => ZkClientError::Store(other),
        }
    }
}

/// The result type of the typed operations.
pub type Result<T> = std::result::Result<T, ZkClientError>;

/// Which Kafka znode a watch event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KafkaWatch {
    /// `/controller` was created, changed or deleted.
    Controller,
    /// The children of `/brokers/ids` changed.
    BrokerIds,
    /// The children of `/brokers/topics` changed.
    Topics,
    /// `/brokers/topics/<t>` changed (partitions added) or was deleted.
    Topic(String),
    /// The children of `/admin/delete_topics` changed.
    DeleteTopics,
    /// The children of `/config/changes` changed.
    ConfigChanges,
    /// `/admin/preferred_replica_election` was created, changed or deleted.
    PreferredReplicaElection,
    /// `/admin/reassign_partitions` was created, changed or deleted.
    ReassignPartitions,
    /// Anything else, with its path.
    Other(String),
}

impl KafkaWatch {
    /// Classifies a fired watch by its path.
    pub fn classify(event: &WatchedEvent) -> KafkaWatch {
        let path = event.path.as_str();
        if path == paths::controller() {
            KafkaWatch::Controller
        } else if path == paths::broker_ids() {
            KafkaWatch::BrokerIds
        } else if path == paths::topics() {
            KafkaWatch::Topics
        } else if path == paths::delete_topics() {
            KafkaWatch::DeleteTopics
        } else if path == paths::config_changes() {
            KafkaWatch::ConfigChanges
        } else if path == paths::preferred_replica_election() {
            KafkaWatch::PreferredReplicaElection
        } else if path == paths::reassign_partitions() {
            KafkaWatch::ReassignPartitions
        } else if let Some(topic) = topic_of_assignment_path(path) {
            KafkaWatch::Topic(topic.to_owned())
        } else {
            KafkaWatch::Other(path.to_owned())
        }
    }
}

/// A live broker's registration with its epoch (the czxid of its znode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredBroker {
    /// The registration.
    pub registration: BrokerRegistration,
    /// The broker epoch.
    pub epoch: i64,
}

/// A partition state with its znode version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedPartitionState {
    /// The state.
    pub state: PartitionStateZNode,
    /// The znode's version.
    pub zk_version: i32,
}

/// A topic's assignment znode with its version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionedTopicAssignment {
    /// The assignment.
    pub assignment: TopicAssignment,
    /// The znode's version.
    pub zk_version: i32,
}

/// One broker's session and the typed operations on it. Cheap to clone.
#[derive(Debug, Clone)]
pub struct KafkaZkClient {
    client: Client,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// `None` once the session's events ended: a subscription made then ends at once.
    subscribers: Mutex<Option<Vec<mpsc::Sender<WatchedEvent>>>>,
    session_state: watch::Sender<SessionState>,
}

impl KafkaZkClient {
    /// Takes ownership of a session and starts its event dispatcher (needs a tokio runtime).
    pub fn new(client: Client, events: Events) -> KafkaZkClient {
        let (session_state, _) = watch::channel(SessionState::Connected);
        let shared = Arc::new(Shared {
            subscribers: Mutex::new(Some(Vec::new())),
            session_state,
        });
        tokio::spawn(dispatch(events, Arc::clone(&shared)));
        KafkaZkClient { client, shared }
    }

    /// The raw session, for reads this client has no typed operation for.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The session id.
    pub fn session_id(&self) -> i64 {
        self.client.session_id()
    }

    /// Every watch event of this session from now on, in store order. The stream ends when
    /// the session does (at once if it already has).
    pub fn subscribe_watches(&self) -> mpsc::Receiver<WatchedEvent> {
        let (tx, rx) = mpsc::channel(WATCH_QUEUE_CAPACITY);
        if let Some(subscribers) = self
            .shared
            .subscribers
            .lock()
            // Pushes and retains cannot leave the list half-changed: a poisoned one is fine.
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_mut()
        {
            subscribers.push(tx);
        }
        rx
    }

    /// The session's state; changes to Expired or Closed when the session ends.
    pub fn subscribe_session_state(&self) -> watch::Receiver<SessionState> {
        self.shared.session_state.subscribe()
    }

    /// Ends the session (ephemeral nodes vanish).
    pub async fn close(&self) {
        self.client.close().await;
    }

    /// Creates Kafka's persistent top-level paths if missing.
    pub async fn ensure_persistent_paths(&self) -> Result<()> {
        for path in paths::persistent_paths() {
            match self
                .client
                .create_recursive(path, &[], CreateMode::Persistent)
                .await
            {
                Ok(_) | Err(metastore::Error::NodeExists(_)) => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok(())
    }

    /// Reads `/cluster/id`, creating it with `new_id` when missing.
    pub async fn get_or_create_cluster_id(&self, new_id: &str) -> Result<String> {
        loop {
            match self.client.get_data(paths::cluster_id(), false).await {
                Ok((data, _)) => {
                    return decode(paths::cluster_id(), &data, ClusterIdZNode::from_json_bytes)
                        .map(|c| c.id)
                }
                Err(metastore::Error::NoNode(_)) => {}
                Err(err) => return Err(err.into()),
            }
            let data = ClusterIdZNode::new(new_id).to_json_bytes();
            match self
                .client
                .create_recursive(paths::cluster_id(), &data, CreateMode::Persistent)
                .await
            {
                Ok(_) => return Ok(new_id.to_owned()),
                Err(metastore::Error::NodeExists(_)) => continue,
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// Registers this broker (ephemeral `/brokers/ids/<id>`); returns the broker epoch.
    pub async fn register_broker(
        &self,
        id: BrokerId,
        registration: &BrokerRegistration,
    ) -> Result<i64> {
        let path = paths::broker_id(id);
        let data = registration.to_json_bytes();
        self.client
            .create(&path, &data, CreateMode::Ephemeral)
            .await?;
        let stat = self.client.exists(&path, false).await?;
        Ok(stat.map(|s| s.czxid).unwrap_or_default())
    }

    /// The ids under `/brokers/ids`, ascending.
    pub async fn get_broker_ids(&self, watch: bool) -> Result<Vec<BrokerId>> {
        let children = self.client.get_children(paths::broker_ids(), watch).await?;
        let mut ids: Vec<BrokerId> = children.iter().filter_map(|c| c.parse().ok()).collect();
        ids.sort_unstable();
        Ok(ids)
    }

    /// One broker's registration, if it is registered.
    pub async fn get_broker(&self, id: BrokerId) -> Result<Option<RegisteredBroker>> {
        let path = paths::broker_id(id);
        match self.client.get_data(&path, false).await {
            Ok((data, stat)) => {
                let registration = decode(&path, &data, BrokerRegistration::from_json_bytes)?;
                Ok(Some(RegisteredBroker {
                    registration,
                    epoch: stat.czxid,
                }))
            }
            Err(metastore::Error::NoNode(_)) => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    /// Every registered broker, by id.
    pub async fn get_all_brokers(
        &self,
        watch: bool,
    ) -> Result<BTreeMap<BrokerId, RegisteredBroker>> {
        let mut brokers = BTreeMap::new();
        for id in self.get_broker_ids(watch).await? {
            if let Some(broker) = self.get_broker(id).await? {
                brokers.insert(id, broker);
            }
        }
        Ok(brokers)
    }

    /// The active controller's id, if any. With `watch`, the next create, change or delete
    /// of `/controller` fires a [`KafkaWatch::Controller`] event.
    pub async fn get_controller_id(&self, watch: bool) -> Result<Option<BrokerId>> {
        if self
            .client
            .exists(paths::controller(), watch)
            .await?
            .is_none()
        {
            return Ok(None);
        }
        match self.client.get_data(paths::controller(), false).await {
            Ok((data, _)) => {
                let id =
                    decode(paths::controller(), &data, ControllerZNode::from_json_bytes)?.brokerid;
                Ok((id >= 0).then_some(id))
            }
            Err(metastore::Error::NoNode(_)) => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    /// `/controller_epoch` as (epoch, znode version), if it exists.
    pub async fn get_controller_epoch(&self) -> Result<Option<(i32, i32)>> {
        match self.client.get_data(paths::controller_epoch(), false).await {
            Ok((data, stat)) => Ok(Some((
                decode(
                    paths::controller_epoch(),
                    &data,
                    ControllerEpochZNode::from_bytes,
                )?
                .0,
                stat.version,
            ))),
            Err(metastore::Error::NoNode(_)) => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    /// Kafka's `registerControllerAndIncrementControllerEpoch`: in one multi, creates the
    /// ephemeral `/controller` and increments `/controller_epoch` at the version just read
    /// (creating the epoch node with 0 first when missing). Returns the new (epoch, version);
    /// [`ZkClientError::NodeExists`] when another broker is controller.
    pub async fn register_controller_and_increment_epoch(
        &self,
        broker_id: BrokerId,
        timestamp_ms: i64,
    ) -> Result<(i32, i32)> {
        let (epoch, version) = match self.get_controller_epoch().await? {
            Some(current) => current,
            None => {
                let data = ControllerEpochZNode(0).to_bytes();
                match self
                    .client
                    .create(paths::controller_epoch(), &data, CreateMode::Persistent)
                    .await
                {
                    Ok(_) | Err(metastore::Error::NodeExists(_)) => {}
                    Err(err) => return Err(err.into()),
                }
                self.get_controller_epoch().await?.unwrap_or((0, 0))
            }
        };
        let new_epoch = epoch + 1;
        let ops = vec![
            Op::Create {
                path: paths::controller().to_owned(),
                data: ControllerZNode::new(broker_id, timestamp_ms).to_json_bytes(),
                mode: CreateMode::Ephemeral,
            },
            Op::SetData {
                path: paths::controller_epoch().to_owned(),
                data: ControllerEpochZNode(new_epoch).to_bytes(),
                version: Some(version),
            },
        ];
        match self.client.multi(ops).await {
            Ok(results) => {
                let new_version = match results.get(1) {
                    Some(OpResult::SetData(stat)) => stat.version,
                    _ => version + 1,
                };
                Ok((new_epoch, new_version))
            }
            Err(metastore::Error::Multi { source, .. }) => Err((*source).into()),
            Err(err) => Err(err.into()),
        }
    }

    /// Deletes `/controller` if this session owns it (resignation).
    pub async fn delete_controller_if_owned(&self) -> Result<()> {
        if let Some(stat) = self.client.exists(paths::controller(), false).await? {
            if stat.ephemeral_owner == self.client.session_id() {
                match self
                    .client
                    .delete(paths::controller(), Some(stat.version))
                    .await
                {
                    Ok(())
                    | Err(metastore::Error::NoNode(_))
                    | Err(metastore::Error::BadVersion { .. }) => {}
                    Err(err) => return Err(err.into()),
                }
            }
        }
        Ok(())
    }

    /// Every topic under `/brokers/topics`, skipping names that are not legal topic names.
    pub async fn get_all_topics(&self, watch: bool) -> Result<Vec<TopicName>> {
        let children = self.client.get_children(paths::topics(), watch).await?;
        Ok(children
            .into_iter()
            .filter_map(|c| c.parse().ok())
            .collect())
    }

    /// Whether `/brokers/topics/<t>` exists.
    pub async fn topic_exists(&self, topic: &TopicName) -> Result<bool> {
        Ok(self
            .client
            .exists(&paths::topic(topic), false)
            .await?
            .is_some())
    }

    /// A topic's assignment znode, if the topic exists. With `watch`, the next change or
    /// delete fires a [`KafkaWatch::Topic`] event.
    pub async fn get_topic_assignment(
        &self,
        topic: &TopicName,
        watch: bool,
    ) -> Result<Option<VersionedTopicAssignment>> {
        let path = paths::topic(topic);
        match self.client.get_data(&path, watch).await {
            Ok((data, stat)) => {
                let assignment = decode(&path, &data, TopicAssignment::from_json_bytes)?;
                Ok(Some(VersionedTopicAssignment {
                    assignment,
                    zk_version: stat.version,
                }))
            }
            Err(metastore::Error::NoNode(_)) => {
                if watch {
                    // Keep watching for the topic's (re)creation.
                    self.client.exists(&path, true).await?;
                }
                Ok(None)
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Creates a topic in one multi: `/config/topics/<t>` (created, or set when left over)
    /// then `/brokers/topics/<t>`, fenced on the controller epoch when `epoch_zk_version` is
    /// given. [`ZkClientError::NodeExists`] when the topic exists.
    pub async fn create_topic(
        &self,
        topic: &TopicName,
        config: &BTreeMap<String, String>,
        assignment: &TopicAssignment,
        epoch_zk_version: Option<i32>,
    ) -> Result<()> {
        let config_path = paths::config_topic(topic);
        let config_data = TopicConfigZNode::new(config.clone()).to_json_bytes();
        let config_op = if self.client.exists(&config_path, false).await?.is_some() {
            Op::SetData {
                path: config_path,
                data: config_data,
                version: None,
            }
        } else {
            Op::Create {
                path: config_path,
                data: config_data,
                mode: CreateMode::Persistent,
            }
        };
        let topic_op = Op::Create {
            path: paths::topic(topic),
            data: assignment.to_json_bytes(),
            mode: CreateMode::Persistent,
        };
        self.fenced_multi(epoch_zk_version, vec![config_op, topic_op])
            .await
            .map(drop)
    }

    /// Overwrites a topic's assignment (partitions added), fenced on the controller epoch
    /// when `epoch_zk_version` is given.
    pub async fn set_topic_assignment(
        &self,
        topic: &TopicName,
        assignment: &TopicAssignment,
        expected_version: Option<i32>,
        epoch_zk_version: Option<i32>,
    ) -> Result<()> {
        let op = Op::SetData {
            path: paths::topic(topic),
            data: assignment.to_json_bytes(),
            version: expected_version,
        };
        self.fenced_multi(epoch_zk_version, vec![op])
            .await
            .map(drop)
    }

    /// A partition's state znode, if any.
    pub async fn get_partition_state(
        &self,
        tp: &TopicPartition,
    ) -> Result<Option<VersionedPartitionState>> {
        let path = paths::partition_state(&tp.topic, tp.partition);
        match self.client.get_data(&path, false).await {
            Ok((data, stat)) => {
                let state = decode(&path, &data, PartitionStateZNode::from_json_bytes)?;
                Ok(Some(VersionedPartitionState {
                    state,
                    zk_version: stat.version,
                }))
            }
            Err(metastore::Error::NoNode(_)) => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    /// Creates `/brokers/topics/<t>/partitions/<p>/state` (and the empty parents),
    /// fenced on the controller epoch. [`ZkClientError::NodeExists`] when the state exists.
    pub async fn create_partition_state(
        &self,
        tp: &TopicPartition,
        state: &PartitionStateZNode,
        epoch_zk_version: i32,
    ) -> Result<()> {
        let state_path = paths::partition_state(&tp.topic, tp.partition);
        // One fenced multi per partition: the missing empty parents, then the state. A parent
        // created meanwhile by someone else makes the multi fail; the second attempt sees it.
        let mut attempts = 0;
        loop {
            attempts += 1;
            let mut ops = Vec::with_capacity(3);
            for parent in [
                paths::topic_partitions(&tp.topic),
                paths::topic_partition(&tp.topic, tp.partition),
            ] {
                if self.client.exists(&parent, false).await?.is_none() {
                    ops.push(Op::Create {
                        path: parent,
                        data: Vec::new(),
                        mode: CreateMode::Persistent,
                    });
                }
            }
            ops.push(Op::Create {
                path: state_path.clone(),
                data: state.to_json_bytes(),
                mode: CreateMode::Persistent,
            });
            match self.fenced_multi(Some(epoch_zk_version), ops).await {
                Err(ZkClientError::NodeExists(path)) if path != state_path && attempts < 2 => {
                    continue
                }
                other => return other.map(drop),
            }
        }
    }

    /// Overwrites a partition's state at `expected_version`, fenced on the controller epoch;
    /// returns the new version.
    pub async fn set_partition_state(
        &self,
        tp: &TopicPartition,
        state: &PartitionStateZNode,
        expected_version: i32,
        epoch_zk_version: i32,
    ) -> Result<i32> {
        let op = Op::SetData {
            path: paths::partition_state(&tp.topic, tp.partition),
            data: state.to_json_bytes(),
            version: Some(expected_version),
        };
        let results = self.fenced_multi(Some(epoch_zk_version), vec![op]).await?;
        Ok(match results.last() {
            Some(OpResult::SetData(stat)) => stat.version,
            _ => expected_version + 1,
        })
    }

    /// The partitions `/admin/preferred_replica_election` names, watching the path either
    /// way (an existence watch when it is missing, so its creation fires). `Ok(None)` when
    /// it is missing; [`ZkClientError::Decode`] when it is not Kafka's JSON.
    pub async fn get_preferred_replica_election(
        &self,
    ) -> Result<Option<Vec<crate::json::ElectionEntry>>> {
        let path = paths::preferred_replica_election();
        if self.client.exists(path, true).await?.is_none() {
            return Ok(None);
        }
        match self.client.get_data(path, true).await {
            Ok((data, _)) => decode(
                path,
                &data,
                crate::json::PreferredReplicaElection::from_json_bytes,
            )
            .map(|e| Some(e.partitions)),
            Err(metastore::Error::NoNode(_)) => {
                self.client.exists(path, true).await?;
                Ok(None)
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Deletes `/admin/preferred_replica_election` once its elections ran, fenced (a missing
    /// node is fine).
    pub async fn delete_preferred_replica_election(&self, epoch_zk_version: i32) -> Result<()> {
        let op = Op::Delete {
            path: paths::preferred_replica_election().to_owned(),
            version: None,
        };
        match self.fenced_multi(Some(epoch_zk_version), vec![op]).await {
            Ok(_) | Err(ZkClientError::Store(metastore::Error::NoNode(_))) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// The names under `/admin/delete_topics` (not necessarily legal topic names).
    pub async fn get_topic_deletions(&self, watch: bool) -> Result<Vec<String>> {
        Ok(self
            .client
            .get_children(paths::delete_topics(), watch)
            .await?)
    }

    /// Whether `/admin/delete_topics/<t>` exists.
    pub async fn is_topic_marked_for_deletion(&self, topic: &TopicName) -> Result<bool> {
        Ok(self
            .client
            .exists(&paths::delete_topic(topic), false)
            .await?
            .is_some())
    }

    /// Writes the deletion mark `/admin/delete_topics/<t>`. [`ZkClientError::NodeExists`]
    /// when it is already marked.
    /// `epoch_zk_version`: the controller's write is fenced on the controller epoch
    /// (`None`: an operator's or a test's mark, unfenced).
    pub async fn create_delete_topic_path(
        &self,
        topic: &TopicName,
        epoch_zk_version: Option<i32>,
    ) -> Result<()> {
        let op = Op::Create {
            path: paths::delete_topic(topic),
            data: Vec::new(),
            mode: CreateMode::Persistent,
        };
        self.fenced_multi(epoch_zk_version, vec![op])
            .await
            .map(drop)
    }

    /// Deletes deletion marks, fenced.
    pub async fn delete_topic_deletions(
        &self,
        topics: &[TopicName],
        epoch_zk_version: i32,
    ) -> Result<()> {
        for topic in topics {
            let op = Op::Delete {
                path: paths::delete_topic(topic),
                version: None,
            };
            match self.fenced_multi(Some(epoch_zk_version), vec![op]).await {
                Ok(_) => {}
                Err(ZkClientError::Store(metastore::Error::NoNode(_))) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    /// `/admin/reassign_partitions` with its version, if it exists. With `watch`, its next
    /// change, deletion or (when it is missing) creation fires a
    /// [`KafkaWatch::ReassignPartitions`] event.
    pub async fn get_partition_reassignment(
        &self,
        watch: bool,
    ) -> Result<Option<(ReassignPartitions, i32)>> {
        let path = paths::reassign_partitions();
        loop {
            match self.client.get_data(path, watch).await {
                Ok((data, stat)) => {
                    let parsed = decode(path, &data, ReassignPartitions::from_json_bytes)?;
                    return Ok(Some((parsed, stat.version)));
                }
                Err(metastore::Error::NoNode(_)) => {
                    // Watch for its creation; read again if it appeared in between.
                    if !watch || self.client.exists(path, true).await?.is_none() {
                        return Ok(None);
                    }
                }
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// Overwrites (or creates) `/admin/reassign_partitions`, fenced on the controller epoch.
    pub async fn set_partition_reassignment(
        &self,
        reassignment: &ReassignPartitions,
        epoch_zk_version: i32,
    ) -> Result<()> {
        let path = paths::reassign_partitions().to_owned();
        let data = reassignment.to_json_bytes();
        let op = if self.client.exists(&path, false).await?.is_some() {
            Op::SetData {
                path,
                data,
                version: None,
            }
        } else {
            Op::Create {
                path,
                data,
                mode: CreateMode::Persistent,
            }
        };
        self.fenced_multi(Some(epoch_zk_version), vec![op])
            .await
            .map(drop)
    }

    /// Deletes `/admin/reassign_partitions` (a missing node is fine), fenced.
    pub async fn delete_partition_reassignment(&self, epoch_zk_version: i32) -> Result<()> {
        let op = Op::Delete {
            path: paths::reassign_partitions().to_owned(),
            version: None,
        };
        match self.fenced_multi(Some(epoch_zk_version), vec![op]).await {
            Ok(_) | Err(ZkClientError::Store(metastore::Error::NoNode(_))) => Ok(()),
            Err(err) => Err(err),
        }
    }

    /// A topic's config overrides (`/config/topics/<t>`), empty when the node is missing.
    pub async fn get_topic_config(&self, topic: &TopicName) -> Result<BTreeMap<String, String>> {
        self.read_config(&paths::config_topic(topic), false).await
    }

    /// Creates or overwrites a topic's config overrides.
    pub async fn set_topic_config(
        &self,
        topic: &TopicName,
        config: &BTreeMap<String, String>,
    ) -> Result<()> {
        self.write_config(&paths::config_topic(topic), config).await
    }

    /// An entity's config (`/config/<entity_path>`, e.g. `clients/<c>` or
    /// `users/<u>/clients/<c>`: names sanitized as Kafka's `Sanitizer`), empty when missing.
    /// A node without data (the parent `users/<u>` that creating `users/<u>/clients/<c>`
    /// made) has no config either, as Kafka reads it.
    pub async fn get_entity_config(&self, entity_path: &str) -> Result<BTreeMap<String, String>> {
        self.read_config(&paths::config_entity(entity_path), true)
            .await
    }

    /// Creates or overwrites an entity's config (the same JSON as a topic's).
    pub async fn set_entity_config(
        &self,
        entity_path: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<()> {
        self.write_config(&paths::config_entity(entity_path), config)
            .await
    }

    /// A config node's map (Kafka's `{"version":1,"config":{..}}`), empty when the node is
    /// missing (or, with `empty_is_none`, has no data).
    async fn read_config(
        &self,
        path: &str,
        empty_is_none: bool,
    ) -> Result<BTreeMap<String, String>> {
        match self.client.get_data(path, false).await {
            Ok((data, _)) if empty_is_none && data.is_empty() => Ok(BTreeMap::new()),
            Ok((data, _)) => {
                decode(path, &data, TopicConfigZNode::from_json_bytes).map(|c| c.config)
            }
            Err(metastore::Error::NoNode(_)) => Ok(BTreeMap::new()),
            Err(err) => Err(err.into()),
        }
    }

    /// Creates or overwrites a config node.
    async fn write_config(&self, path: &str, config: &BTreeMap<String, String>) -> Result<()> {
        let data = TopicConfigZNode::new(config.clone()).to_json_bytes();
        match self.client.set_data(path, &data, None).await {
            Ok(_) => Ok(()),
            Err(metastore::Error::NoNode(_)) => {
                self.client
                    .create_recursive(path, &data, CreateMode::Persistent)
                    .await?;
                Ok(())
            }
            Err(err) => Err(err.into()),
        }
    }

    /// The children of `/config/<entity_path>` (e.g. `users`, `users/<u>/clients`), empty
    /// when missing.
    pub async fn get_config_entity_children(&self, entity_path: &str) -> Result<Vec<String>> {
        match self
            .client
            .get_children(&paths::config_entity(entity_path), false)
            .await
        {
            Ok(children) => Ok(children),
            Err(metastore::Error::NoNode(_)) => Ok(Vec::new()),
            Err(err) => Err(err.into()),
        }
    }

    /// Writes an entity's config as [`KafkaZkClient::set_entity_config`], then tells every
    /// broker (a `/config/changes` notification naming `entity_path`), as Kafka's
    /// `AdminZkClient.changeConfigs` does.
    pub async fn set_entity_config_and_notify(
        &self,
        entity_path: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<()> {
        self.set_entity_config(entity_path, config).await?;
        self.create_entity_config_change_notification(entity_path.to_owned())
            .await?;
        Ok(())
    }

    /// The notifications under `/config/changes` (optionally watching for new ones), in
    /// sequence order: (sequence number, child name).
    pub async fn get_config_changes(&self, watch: bool) -> Result<Vec<(u64, String)>> {
        let children = match self
            .client
            .get_children(paths::config_changes(), watch)
            .await
        {
            Ok(children) => children,
            Err(metastore::Error::NoNode(_)) => Vec::new(),
            Err(err) => return Err(err.into()),
        };
        let mut changes: Vec<(u64, String)> = children
            .into_iter()
            .filter_map(|c| paths::config_change_sequence(&c).map(|seq| (seq, c)))
            .collect();
        changes.sort();
        Ok(changes)
    }

    /// One notification: the entity it names (`None` when unreadable) and when it was
    /// created (ms since the epoch). `Ok(None)` when it is gone.
    pub async fn get_config_change(&self, child: &str) -> Result<Option<(Option<String>, i64)>> {
        let path = format!("{}/{child}", paths::config_changes());
        match self.client.get_data(&path, false).await {
            Ok((data, stat)) => {
                let entity = ConfigChangeNotification::from_json_bytes(&data)
                    .ok()
                    .and_then(|n| n.changed_entity_path());
                Ok(Some((entity, stat.ctime)))
            }
            Err(metastore::Error::NoNode(_)) => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    /// Deletes the notifications created before `cutoff_ms` (Kafka purges those older than
    /// 15 minutes). Returns how many went.
    pub async fn purge_config_changes_before(&self, cutoff_ms: i64) -> Result<usize> {
        let mut purged = 0;
        for (_, child) in self.get_config_changes(false).await? {
            let Some((_, ctime)) = self.get_config_change(&child).await? else {
                continue;
            };
            if ctime >= cutoff_ms {
                // Sequence order is creation order: the rest are newer.
                break;
            }
            let path = format!("{}/{child}", paths::config_changes());
            match self.client.delete(&path, None).await {
                Ok(()) | Err(metastore::Error::NoNode(_)) => purged += 1,
                Err(err) => return Err(err.into()),
            }
        }
        Ok(purged)
    }

    /// Tells brokers an entity's config changed (`entity_path` = `<type>/<name>...`).
    pub async fn create_entity_config_change_notification(
        &self,
        entity_path: String,
    ) -> Result<String> {
        let data = ConfigChangeNotification::entity(entity_path).to_json_bytes();
        Ok(self
            .client
            .create(
                paths::config_change_prefix(),
                &data,
                CreateMode::PersistentSequential,
            )
            .await?)
    }

    /// Tells brokers a topic's config changed (`/config/changes/config_change_<seq>`).
    pub async fn create_config_change_notification(&self, topic: &TopicName) -> Result<String> {
        let data = ConfigChangeNotification::topic(topic).to_json_bytes();
        Ok(self
            .client
            .create(
                paths::config_change_prefix(),
                &data,
                CreateMode::PersistentSequential,
            )
            .await?)
    }

    /// Runs `ops` in a multi, preceded by a check of `/controller_epoch`'s version when given.
    async fn fenced_multi(
        &self,
        epoch_zk_version: Option<i32>,
        ops: Vec<Op>,
    ) -> Result<Vec<OpResult>> {
        let fenced = epoch_zk_version.is_some();
        let mut all = Vec::with_capacity(ops.len() + 1);
        if let Some(version) = epoch_zk_version {
            all.push(Op::Check {
                path: paths::controller_epoch().to_owned(),
                version,
            });
        }
        all.extend(ops);
        match self.client.multi(all).await {
            Ok(mut results) => {
                if fenced {
                    results.remove(0);
                }
                Ok(results)
            }
            Err(metastore::Error::Multi { index: 0, source }) if fenced => match *source {
                metastore::Error::BadVersion { .. } | metastore::Error::NoNode(_) => {
                    Err(ZkClientError::ControllerMoved {
                        expected_epoch_zk_version: epoch_zk_version.unwrap_or(-1),
                    })
                }
                other => Err(other.into()),
            },
            Err(metastore::Error::Multi { source, .. }) => Err((*source).into()),
            Err(err) => Err(err.into()),
        }
    }
}

/// The topic of a `/brokers/topics/<t>` path (not of deeper paths).
fn topic_of_assignment_path(path: &str) -> Option<&str> {
    let topic = path.strip_prefix(paths::topics())?.strip_prefix('/')?;
    (!topic.is_empty() && !topic.contains('/')).then_some(topic)
}

pub(crate) fn decode<T, E: std::fmt::Display>(
    path: &str,
    data: &[u8],
    f: impl FnOnce(&[u8]) -> std::result::Result<T, E>,
) -> Result<T> {
    f(data).map_err(|err| ZkClientError::Decode {
        path: path.to_owned(),
        reason: err.to_string(),
    })
}

async fn dispatch(mut events: Events, shared: Arc<Shared>) {
    while let Some(event) = events.recv().await {
        match event {
            Event::Watch(watched) => {
                let subscribers: Vec<_> = shared
                    .subscribers
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone()
                    .unwrap_or_default();
                let mut gone = false;
                for subscriber in &subscribers {
                    gone |= subscriber.send(watched.clone()).await.is_err();
                }
                if gone {
                    if let Some(subscribers) = shared
                        .subscribers
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .as_mut()
                    {
                        subscribers.retain(|s| !s.is_closed());
                    }
                }
            }
            Event::Session(state) => {
                shared.session_state.send_replace(state);
            }
        }
    }
    // The stream ends once the session is closed or expired. Every subscription ends with it:
    // a subscriber waits for its stream to end to learn that it must move to the next
    // session (the broker's config and ACL change listeners do), and the senders kept here
    // would otherwise hold its stream open, silent, for as long as anything holds this client.
    *shared
        .subscribers
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    let last = *shared.session_state.borrow();
    if !matches!(last, SessionState::Expired | SessionState::Closed) {
        shared.session_state.send_replace(SessionState::Expired);
    }
}
