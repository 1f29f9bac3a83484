//! The broker's view of the cluster, as the controller's UpdateMetadata requests describe it
//! (Kafka's `MetadataCache`): live brokers with endpoints and racks, the controller id, and
//! every partition's leader, ISR and replicas with its topic id. Metadata and
//! DescribeCluster answer from here.

use std::collections::BTreeMap;
use std::sync::RwLock;

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

/// A consistent copy of the cache.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// The controller's id, or -1 before the first UpdateMetadata.
    pub controller_id: BrokerId,
    /// Live brokers by id.
    pub brokers: BTreeMap<BrokerId, LiveBroker>,
    /// Topics by name.
    pub topics: BTreeMap<String, TopicInfo>,
}

/// The cache: written by UpdateMetadata, read by every request.
#[derive(Debug)]
pub struct MetadataCache {
    inner: RwLock<Snapshot>,
}

impl Default for MetadataCache {
    fn default() -> Self {
        MetadataCache {
            inner: RwLock::new(Snapshot {
                controller_id: -1,
                ..Snapshot::default()
            }),
        }
    }
}

impl MetadataCache {
    /// A copy of the current state.
    pub fn snapshot(&self) -> Snapshot {
        self.read().clone()
    }

    /// Whether `topic` is known.
    pub fn contains_topic(&self, topic: &str) -> bool {
        self.read().topics.contains_key(topic)
    }

    /// Applies an UpdateMetadata request (any version): replaces the live brokers and the
    /// controller id, and upserts the partitions it names. A partition whose leader is
    /// [`LEADER_DURING_DELETE`] is removed, and its topic with it once it has none left.
    /// Returns the partitions removed this way.
    pub fn update(&self, request: &UpdateMetadataRequest) -> Vec<(String, i32)> {
        let mut cache = self.inner.write().unwrap_or_else(|p| p.into_inner());
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
                let broker = LiveBroker {
                    id: b.id.0,
                    host,
                    port,
                    rack: b.rack.as_ref().map(|r| r.to_string()),
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
                    info.partitions.remove(&partition);
                    if info.partitions.is_empty() {
                        cache.topics.remove(&topic);
                    }
                }
                removed.push((topic, partition));
                continue;
            }
            let info = cache.topics.entry(topic).or_default();
            if !topic_id.is_nil() {
                info.topic_id = topic_id;
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
        removed
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Snapshot> {
        // Every write replaces whole values, so a poisoned lock still guards a usable map.
        self.inner.read().unwrap_or_else(|p| p.into_inner())
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
            snap.brokers[&1],
            LiveBroker {
                id: 1,
                host: "h".into(),
                port: 9092,
                rack: Some("r1".into())
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
}
