//! Domain nouns shared by every crate: broker ids, topic names, topic-partitions.
//!
//! Pure data and validation; no I/O, no tokio.
