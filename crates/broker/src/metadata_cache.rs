//! The broker's view of the cluster, as the controller's UpdateMetadata requests describe it
//! (Kafka's `MetadataCache`): live brokers with endpoints and racks, the controller id, and
//! every partition's leader, ISR and replicas with its topic id. Metadata and
//! DescribeCluster answer from here.
//!
//! The cache is an immutable [`Snapshot`] behind an `Arc`: a reader takes the current `Arc`
//! (a pointer copy under a lock held for nothing else) and never copies the maps or waits for
//! an update being built. UpdateMetadata builds the next snapshot beside the current one and
//! swaps it in. Topics are shared between snapshots (`Arc<TopicInfo>`), so an update copies
//! only the topics it changes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use kafka_protocol::messages::update_metadata_request::UpdateMetadataPartitionState;
use kafka_protocol::messages::UpdateMetadataRequest;
use model::BrokerId;
use uuid::Uuid;

/// Leader id the controller sends for a partition whose topic is being deleted.
pub const LEADER_DURING_DELETE: BrokerId = -2;

/// A live broker as UpdateMetadata lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveBroker {
    /// `broker.id`.
    pub id: BrokerId,
    /// Advertised host of the PLAINTEXT listener.
    pub host: String,
    /// Advertised port.
    pub port: i32,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// Every listener's endpoint: listener name -> (host, port).
    pub endpoints: BTreeMap<String, (String, i32)>,
}

impl LiveBroker {
    /// This broker as seen by clients of `listener`: its host and port there, or `None`
    /// when it has no such listener (Kafka leaves such brokers out of Metadata).
    pub fn on_listener(&self, listener: &str) -> Option<LiveBroker> {
        let (host, port) = self.endpoints.get(listener)?;
        Some(LiveBroker {
            host: host.clone(),
            port: *port,
            ..self.clone()
        })
    }
}

/// One partition's leadership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Leader broker id (-1 when offline).
    pub leader: BrokerId,
    /// Leader epoch.
    pub leader_epoch: i32,
    /// In-sync replicas.
    pub isr: Vec<BrokerId>,
    /// All replicas, preferred leader first.
    pub replicas: Vec<BrokerId>,
    /// Replicas on offline log dirs or brokers.
    pub offline_replicas: Vec<BrokerId>,
}

/// One topic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicInfo {
    /// Topic id (nil when the controller sent none).
    pub topic_id: Uuid,
    /// Partitions by index.
    pub partitions: BTreeMap<i32, PartitionInfo>,
}

/// One consistent state of the cache. Never changed once published.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The controller's id, or -1 before the first UpdateMetadata.
    pub controller_id: BrokerId,
    /// Live brokers by id.
    pub brokers: BTreeMap<BrokerId, LiveBroker>,
    /// Topics by name, shared with the snapshots before and after this one.
    pub topics: BTreeMap<String, Arc<TopicInfo>>,
    /// Topic names by topic id (topics with a nil id are not in it), kept with `topics`.
    topic_names: HashMap<Uuid, String>,
}

impl Snapshot {
    /// The name of the topic with id `topic_id`; `None` for the nil id and for ids this
    /// snapshot does not know. A map lookup: Fetch v13+, Metadata v10+ and DeleteTopics v6+
    /// resolve every id they are sent here.
    pub fn topic_name(&self, topic_id: Uuid) -> Option<&str> {
        if topic_id.is_nil() {
            return None;
        }
        self.topic_names.get(&topic_id).map(String::as_str)
    }
}

/// The cache: written by UpdateMetadata, read by every request.
#[derive(Debug)]
pub struct MetadataCache {
    current: RwLock<Arc<Snapshot>>,
    /// Serializes updates, so two never build on the same snapshot.
    writer: Mutex<()>,
    /// Turns true with the controller's first UpdateMetadata.
    initialized: tokio::sync::watch::Sender<bool>,
}

impl Default for MetadataCache {
    fn default() -> Self {
        MetadataCache {
            current: RwLock::new(Arc::new(Snapshot {
                controller_id: -1,
                ..Snapshot::default()
            })),
            writer: Mutex::new(()),
            initialized: tokio::sync::watch::channel(false).0,
        }
    }
}

impl MetadataCache {
    /// The current state (a pointer copy: nothing is cloned).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        // A reader never panics while holding the lock, and a writer only swaps the pointer.
        Arc::clone(&self.current.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Waits, at most `limit`, for the controller's first UpdateMetadata; whether it came.
    /// A broker just started knows neither the controller nor the other brokers until then.
    pub async fn wait_initialized(&self, limit: std::time::Duration) -> bool {
        let mut initialized = self.initialized.subscribe();
        let waited = tokio::time::timeout(limit, initialized.wait_for(|done| *done)).await;
        matches!(waited, Ok(Ok(_)))
    }

    /// `host:port` of the controller on `listener` (else on the one clients use), when
    /// UpdateMetadata named one that is live.
    pub fn controller_endpoint(&self, listener: &str) -> Option<String> {
        let cache = self.snapshot();
        let broker = cache.brokers.get(&cache.controller_id)?;
        let (host, port) = broker
            .endpoints
            .get(listener)
            .map_or((broker.host.as_str(), broker.port), |(h, p)| {
                (h.as_str(), *p)
            });
        Some(format!("{host}:{port}"))
    }

    /// Whether `topic` is known.
    pub fn contains_topic(&self, topic: &str) -> bool {
        self.snapshot().topics.contains_key(topic)
    }

    /// Applies an UpdateMetadata request (any version): replaces the live brokers and the
    /// controller id, and upserts the partitions it names. A partition whose leader is
    /// [`LEADER_DURING_DELETE`] is removed, and its topic with it once it has none left.
    /// Returns the partitions removed this way.
    pub fn update(&self, request: &UpdateMetadataRequest) -> Vec<(String, i32)> {
        let _writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        // A shallow copy: the topic maps are shared until changed below.
        let mut cache = Snapshot::clone(&self.snapshot());
        cache.controller_id = request.controller_id.0;
        cache.brokers = request
            .live_brokers
            .iter()
            .map(|b| {
                let (host, port) = match b
                    .endpoints
                    .iter()
                    .find(|e| e.listener.as_str() == "PLAINTEXT")
                    .or(b.endpoints.first())
                {
                    Some(e) => (e.host.to_string(), e.port),
                    None => (b.v0_host.to_string(), b.v0_port),
                };
                let mut endpoints: BTreeMap<String, (String, i32)> = b
                    .endpoints
                    .iter()
                    .map(|e| (e.listener.to_string(), (e.host.to_string(), e.port)))
                    .collect();
                if endpoints.is_empty() {
                    // v0 names one PLAINTEXT endpoint in the broker itself.
                    endpoints.insert("PLAINTEXT".to_owned(), (host.clone(), port));
                }
                let broker = LiveBroker {
                    id: b.id.0,
                    host,
                    port,
                    rack: b.rack.as_ref().map(|r| r.to_string()),
                    endpoints,
                };
                (b.id.0, broker)
            })
            .collect();
        let mut states: Vec<(String, Uuid, &UpdateMetadataPartitionState)> = Vec::new();
        for state in &request.ungrouped_partition_states {
            states.push((state.topic_name.0.to_string(), Uuid::nil(), state));
        }
        for topic in &request.topic_states {
            for state in &topic.partition_states {
                states.push((topic.topic_name.0.to_string(), topic.topic_id, state));
            }
        }
        let mut removed = Vec::new();
        for (topic, topic_id, state) in states {
            let partition = state.partition_index;
            if state.leader.0 == LEADER_DURING_DELETE {
                if let Some(info) = cache.topics.get_mut(&topic) {
                    let info = Arc::make_mut(info);
                    info.partitions.remove(&partition);
                    if info.partitions.is_empty() {
                        let id = info.topic_id;
                        cache.topics.remove(&topic);
                        if cache.topic_names.get(&id) == Some(&topic) {
                            cache.topic_names.remove(&id);
                        }
                    }
                }
                removed.push((topic, partition));
                continue;
            }
            let info = Arc::make_mut(cache.topics.entry(topic.clone()).or_default());
            if !topic_id.is_nil() && info.topic_id != topic_id {
                if cache.topic_names.get(&info.topic_id) == Some(&topic) {
                    cache.topic_names.remove(&info.topic_id);
                }
                info.topic_id = topic_id;
                cache.topic_names.insert(topic_id, topic);
            }
            info.partitions.insert(
                partition,
                PartitionInfo {
                    leader: state.leader.0,
                    leader_epoch: state.leader_epoch,
                    isr: state.isr.iter().map(|b| b.0).collect(),
                    replicas: state.replicas.iter().map(|b| b.0).collect(),
                    offline_replicas: state.offline_replicas.iter().map(|b| b.0).collect(),
                },
            );
        }
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(cache);
        self.initialized
            .send_if_modified(|done| !std::mem::replace(done, true));
        removed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::update_metadata_request::{
        UpdateMetadataBroker, UpdateMetadataEndpoint, UpdateMetadataTopicState,
    };
    use kafka_protocol::messages::{BrokerId as WireBrokerId, TopicName};
    use kafka_protocol::protocol::StrBytes;

    fn state(partition: i32, leader: i32) -> UpdateMetadataPartitionState {
        UpdateMetadataPartitionState::default()
            .with_partition_index(partition)
            .with_leader(WireBrokerId(leader))
            .with_isr(vec![WireBrokerId(leader)])
            .with_replicas(vec![WireBrokerId(leader)])
    }

    fn request(states: Vec<UpdateMetadataPartitionState>) -> UpdateMetadataRequest {
        UpdateMetadataRequest::default()
            .with_controller_id(WireBrokerId(1))
            .with_live_brokers(vec![UpdateMetadataBroker::default()
                .with_id(WireBrokerId(1))
                .with_rack(Some(StrBytes::from_static_str("r1")))
                .with_endpoints(vec![UpdateMetadataEndpoint::default()
                    .with_host(StrBytes::from_static_str("h"))
                    .with_port(9092)
                    .with_listener(StrBytes::from_static_str("PLAINTEXT"))])])
            .with_topic_states(vec![UpdateMetadataTopicState::default()
                .with_topic_name(TopicName(StrBytes::from_static_str("t")))
                .with_topic_id(Uuid::from_u128(7))
                .with_partition_states(states)])
    }

    #[test]
    fn upserts_then_removes_deleted_partitions() {
        let cache = MetadataCache::default();
        assert_eq!(cache.snapshot().controller_id, -1);
        cache.update(&request(vec![state(0, 1), state(1, 1)]));
        let snap = cache.snapshot();
        assert_eq!(snap.controller_id, 1);
        assert_eq!(
            cache.controller_endpoint("PLAINTEXT").as_deref(),
            Some("h:9092")
        );
        assert_eq!(
            snap.brokers[&1],
            LiveBroker {
                id: 1,
                host: "h".into(),
                port: 9092,
                rack: Some("r1".into()),
                endpoints: BTreeMap::from([("PLAINTEXT".into(), ("h".into(), 9092))]),
            }
        );
        assert_eq!(snap.topics["t"].topic_id, Uuid::from_u128(7));
        assert_eq!(snap.topics["t"].partitions.len(), 2);
        let removed = cache.update(&request(vec![state(0, LEADER_DURING_DELETE)]));
        assert_eq!(removed, vec![("t".to_string(), 0)]);
        assert!(cache.contains_topic("t"));
        cache.update(&request(vec![state(1, LEADER_DURING_DELETE)]));
        assert!(!cache.contains_topic("t"));
    }

    #[test]
    fn a_snapshot_never_changes_and_unchanged_topics_are_shared() {
        let cache = MetadataCache::default();
        cache.update(&request(vec![state(0, 1)]));
        let mut other = request(vec![state(0, 1)]);
        other.topic_states[0].topic_name = TopicName(StrBytes::from_static_str("u"));
        cache.update(&other);
        let before = cache.snapshot();
        cache.update(&request(vec![state(0, 2), state(1, 2)]));
        let after = cache.snapshot();
        assert_eq!(before.topics["t"].partitions.len(), 1);
        assert_eq!(before.topics["t"].partitions[&0].leader, 1);
        assert_eq!(after.topics["t"].partitions.len(), 2);
        assert_eq!(after.topics["t"].partitions[&0].leader, 2);
        // "u" was not in the last update: both snapshots hold the same allocation.
        assert!(Arc::ptr_eq(&before.topics["u"], &after.topics["u"]));
        assert!(!Arc::ptr_eq(&before.topics["t"], &after.topics["t"]));
    }

    #[test]
    fn topics_are_found_by_id_until_deleted_or_recreated() {
        let cache = MetadataCache::default();
        assert_eq!(cache.snapshot().topic_name(Uuid::from_u128(7)), None);
        cache.update(&request(vec![state(0, 1)]));
        let snap = cache.snapshot();
        assert_eq!(snap.topic_name(Uuid::from_u128(7)), Some("t"));
        assert_eq!(snap.topic_name(Uuid::from_u128(8)), None);
        assert_eq!(snap.topic_name(Uuid::nil()), None);
        // The same name under a new id (deleted and created again): only the new id finds it.
        let mut recreated = request(vec![state(0, 1)]);
        recreated.topic_states[0].topic_id = Uuid::from_u128(8);
        cache.update(&recreated);
        let snap = cache.snapshot();
        assert_eq!(snap.topic_name(Uuid::from_u128(7)), None);
        assert_eq!(snap.topic_name(Uuid::from_u128(8)), Some("t"));
        // Its last partition deleted: the id is gone with the topic.
        let mut deleted = request(vec![state(0, LEADER_DURING_DELETE)]);
        deleted.topic_states[0].topic_id = Uuid::from_u128(8);
        cache.update(&deleted);
        assert_eq!(cache.snapshot().topic_name(Uuid::from_u128(8)), None);
    }
}
