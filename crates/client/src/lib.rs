//! The Kafka-protocol client: one TCP [`Connection`] per broker (size-prefixed frames,
//! correlation ids, ApiVersions negotiation, timeouts) and an [`AdminClient`] on top that
//! bootstraps from a server list, reads Metadata and sends topic admin requests to the
//! controller, retrying on `NOT_CONTROLLER`.
//!
//! Owns only "send a request, await its response". Message types and their encodings come from
//! the `kafka-protocol` crate; what a broker does with a request is the `broker` crate's
//! business, and output formatting belongs to the `cli` crate. TLS (rustls, with a client
//! certificate when one is configured) and SASL (PLAIN, SCRAM) on connect, for the CLI's
//! `--command-config` and for a broker's own connections to other brokers ([`Security`]).

mod admin;
mod command_config;
mod connection;
mod error;
pub mod properties;
mod tls;
pub mod versions;

pub use admin::{
    AdminClient, AdminOptions, AlterConfigOp, ConfigEntry, ConfigResourceKind, ConfigSource,
    ConfigSynonym, ItemResults, LogDirDescription, NewPartitions, NewTopic, OngoingReassignment,
    PartitionInfo, QuotaEntity, QuotaMatch, ReplicaInfo, TopicListing, TopicMetadata,
};
pub use command_config::{parse_command_config, CommandConfig};
pub use connection::{Connection, ConnectionOptions, SaslCredentials, Security};
pub use error::{error_message, ClientError};
pub use properties::{parse_properties, PropertiesError};
pub use tls::{PemSource, TlsSettings};
