//! The broker process, Gregor's composition root: configuration, the Kafka listener and its
//! connections, one handler per API, the metadata cache, registration in the metadata store,
//! the controller, the partition logs and the HTTP admin listener.
//!
//! This is the only crate that sees every other one. It decides nothing about placement,
//! topic validation or state transitions (the `controller` does) and writes no bytes of a
//! log itself (`storage` does); it wires them to the network and to each other.
//!
//! Entry points: [`run`] (one broker until a shutdown future resolves), [`Broker::start`]
//! (one broker, controlled by the caller; tests bind port 0) and [`dev_cluster`].

pub mod admin_http;
mod allocator;
mod auth;
mod blocking;
pub mod config;
mod config_changes;
mod connection;
mod context;
mod control_batch;
mod controlled_shutdown;
mod data_plane;
pub mod dev_cluster;
mod error;
mod groups;
mod handlers;
mod led_partitions;
mod lifecycle;
mod limits;
mod log_cleaner;
pub mod metadata_cache;
mod metrics;
mod offsets_mirror;
mod open_files;
mod quotas;
mod server;
mod socket_server;
mod stray_logs;
mod txn;
mod zero_copy;

pub use config::BrokerConfig;
pub use error::BrokerError;
pub use metrics::Metrics;
pub use server::{run, Broker, MetadataStore};
