//! Builders for the pure unit tests.

use std::collections::BTreeMap;

use model::{BrokerId, TopicName, TopicPartition};

use crate::context::{ControllerContext, LiveBroker};

/// A topic name that must be legal.
pub(crate) fn name(topic: &str) -> TopicName {
    topic.parse().expect("test topic names are legal")
}

/// A topic-partition.
pub(crate) fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(name(topic), partition)
}

/// A live broker on localhost.
pub(crate) fn broker(id: BrokerId) -> LiveBroker {
    LiveBroker {
        id,
        host: "127.0.0.1".to_owned(),
        port: 9092 + id,
        rack: None,
        epoch: i64::from(id) + 100,
        endpoints: Vec::new(),
    }
}

/// A context at epoch 1 with these live brokers and topic assignments (partition i of a
/// topic gets the i-th replica list).
pub(crate) fn ctx_with(live: &[BrokerId], topics: &[(&str, &[&[BrokerId]])]) -> ControllerContext {
    let mut ctx = ControllerContext {
        epoch: 1,
        epoch_zk_version: 1,
        ..ControllerContext::default()
    };
    for &id in live {
        ctx.live_brokers.insert(id, broker(id));
    }
    for (topic, partitions) in topics {
        let assignment: BTreeMap<i32, Vec<BrokerId>> = partitions
            .iter()
            .enumerate()
            .map(|(p, replicas)| (p as i32, replicas.to_vec()))
            .collect();
        ctx.set_topic_assignment(name(topic), assignment);
    }
    ctx
}
