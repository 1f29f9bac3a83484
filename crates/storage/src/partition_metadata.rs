//! `partition.metadata`: Kafka 2.8's small text file naming a partition's topic id.
//!
//! ```text
//! version: 0
//! topic_id: <22 characters of base64>
//! ```

use std::path::Path;

use model::TopicId;

use crate::StorageError;

/// The file's name inside a partition directory.
pub const PARTITION_METADATA_FILE: &str = "partition.metadata";

/// Reads the topic id from `<partition_dir>/partition.metadata`, or `None` if the file does
/// not exist.
pub fn read_partition_metadata(partition_dir: &Path) -> Result<Option<TopicId>, StorageError> {
    let path = partition_dir.join(PARTITION_METADATA_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(StorageError::io("read", &path)(err)),
    };
    parse(&text)
        .map(Some)
        .map_err(|reason| StorageError::MalformedPartitionMetadata { path, reason })
}

/// Writes the file atomically: a temporary file, fsync, then rename over the old one (inside
/// a [`crate::SyncGroup`], at the group's commit).
pub(crate) fn write_partition_metadata(
    partition_dir: &Path,
    topic_id: TopicId,
) -> Result<(), StorageError> {
    let path = partition_dir.join(PARTITION_METADATA_FILE);
    let tmp = partition_dir.join(format!("{PARTITION_METADATA_FILE}.tmp"));
    crate::sync_group::replace_file(&path, &tmp, format(topic_id).as_bytes())
}

fn format(topic_id: TopicId) -> String {
    format!("version: 0\ntopic_id: {topic_id}\n")
}

fn parse(text: &str) -> Result<TopicId, String> {
    let mut lines = text.lines();
    let version = lines.next().and_then(|l| l.strip_prefix("version: "));
    if version != Some("0") {
        return Err(format!(
            "expected 'version: 0' on the first line, got {version:?}"
        ));
    }
    let id = lines
        .next()
        .and_then(|l| l.strip_prefix("topic_id: "))
        .ok_or_else(|| "expected 'topic_id: <id>' on the second line".to_string())?;
    id.trim().parse::<TopicId>().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_format_round_trips() {
        let id: TopicId = "AAAAAAAAAAAAAAAAAAAAAQ".parse().unwrap();
        assert_eq!(format(id), "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n");
        assert_eq!(parse(&format(id)), Ok(id));
        assert!(parse("version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n").is_err());
        assert!(parse("version: 0\n").is_err());
    }
}
