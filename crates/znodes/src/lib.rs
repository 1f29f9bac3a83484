//! Kafka's layout in the metadata store: every znode path and its Kafka 2.8 JSON format.
