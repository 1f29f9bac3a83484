//! Kafka's layout in the metadata store: every znode path ([`paths`]) and the Kafka 2.8 JSON
//! written at each one ([`json`]).
//!
//! This is the only crate that contains znode path strings or their JSON: grepping for
//! `"/brokers"` finds it and nothing else. It knows nothing about how the store is reached
//! (that is `metastore`) nor what the controller does with the data.
//!
//! Formats follow Kafka 2.8 byte for byte where the SPEC gives an example, so that tools that
//! know Kafka's layout (zookeeper-shell, kafka-topics.sh with `--zookeeper`) read ours, and
//! reading is lenient the way Kafka's is: unknown fields are ignored and older versions of a
//! znode (without `topic_id`, `adding_replicas`, ...) still parse.

pub mod acls;
pub mod consumers;
#[doc(hidden)]
pub mod fuzzing;
pub mod json;
pub mod paths;
pub mod security;
pub mod zk_client;

pub use json::FormatError;
pub use zk_client::{KafkaZkClient, ZkClientError};
