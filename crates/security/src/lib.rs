//! Authentication and authorization decided in pure code: the control-plane proof between
//! controller and brokers, SASL mechanisms (PLAIN, SCRAM-SHA-256/512), principals and ACLs.
//!
//! Owns the rules, not the I/O: sockets, TLS sessions and the store belong to `broker` and
//! `client`, which call into this crate. Every cryptographic primitive comes from a well-kept
//! crate (`hmac`, `sha2`, `pbkdf2`); this crate only composes them as the RFCs and Kafka do.

pub mod acl;
pub mod control_plane;
pub mod jaas;
pub mod pem;
pub mod plain;
pub mod principal;
pub mod protocol;
pub mod scram;

pub use protocol::SecurityProtocol;
