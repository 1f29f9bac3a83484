//! Kafka's checkpoint files, read and written atomically (write a temp file, fsync, rename):
//! - per log dir: `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`
//!   (`0\n<count>\n<topic> <partition> <offset>\n...`);
//! - per partition: `leader-epoch-checkpoint` (`0\n<count>\n<epoch> <start offset>\n...`).

use std::collections::BTreeMap;
use std::path::Path;

use model::{TopicName, TopicPartition};

use crate::StorageError;

pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";

const VERSION: &str = "0";

/// Reads a per-dir offsets checkpoint; a missing file is empty.
pub fn read_offsets(path: &Path) -> Result<BTreeMap<TopicPartition, i64>, StorageError> {
    let lines = read_lines(path)?;
    let mut offsets = BTreeMap::new();
    for line in &lines {
        let malformed = || malformed(path, format!("bad entry '{line}'"));
        let mut fields = line.split(' ');
        let (Some(topic), Some(partition), Some(offset), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(malformed());
        };
        let topic: TopicName = topic.parse().map_err(|_| malformed())?;
        let partition = partition.parse().map_err(|_| malformed())?;
        offsets.insert(
            TopicPartition { topic, partition },
            offset.parse().map_err(|_| malformed())?,
        );
    }
    Ok(offsets)
}

/// Writes a per-dir offsets checkpoint atomically.
pub fn write_offsets(
    path: &Path,
    offsets: &BTreeMap<TopicPartition, i64>,
) -> Result<(), StorageError> {
    let entries = offsets
        .iter()
        .map(|(tp, offset)| format!("{} {} {offset}", tp.topic.as_str(), tp.partition));
    write_lines(path, entries.collect())
}

/// Reads a partition's leader-epoch checkpoint: (epoch, start offset) pairs in order; a
/// missing file is empty.
pub fn read_leader_epochs(path: &Path) -> Result<Vec<(i32, i64)>, StorageError> {
    Ok(read_leader_epochs_if_present(path)?.unwrap_or_default())
}

/// [`read_leader_epochs`], telling a missing file (`None`) from an empty one.
pub fn read_leader_epochs_if_present(path: &Path) -> Result<Option<Vec<(i32, i64)>>, StorageError> {
    let Some(lines) = read_lines_if_present(path)? else {
        return Ok(None);
    };
    lines
        .iter()
        .map(|line| {
            let malformed = || malformed(path, format!("bad entry '{line}'"));
            let (epoch, offset) = line.split_once(' ').ok_or_else(malformed)?;
            Ok((
                epoch.parse().map_err(|_| malformed())?,
                offset.parse().map_err(|_| malformed())?,
            ))
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// Writes a partition's leader-epoch checkpoint atomically.
pub fn write_leader_epochs(path: &Path, epochs: &[(i32, i64)]) -> Result<(), StorageError> {
    write_lines(
        path,
        epochs
            .iter()
            .map(|(epoch, offset)| format!("{epoch} {offset}"))
            .collect(),
    )
}

fn read_lines(path: &Path) -> Result<Vec<String>, StorageError> {
    Ok(read_lines_if_present(path)?.unwrap_or_default())
}

fn read_lines_if_present(path: &Path) -> Result<Option<Vec<String>>, StorageError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(StorageError::Io {
                op: "read",
                path: path.to_owned(),
                source: e,
            })
        }
    };
    let mut lines = text.lines();
    if lines.next() != Some(VERSION) {
        return Err(malformed(path, "unknown version (expected 0)".into()));
    }
    let count: usize = lines
        .next()
        .and_then(|c| c.trim().parse().ok())
        .ok_or_else(|| malformed(path, "missing entry count".into()))?;
    let entries: Vec<String> = lines
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect();
    if entries.len() != count {
        return Err(malformed(
            path,
            format!("says {count} entries but has {}", entries.len()),
        ));
    }
    Ok(Some(entries))
}

fn write_lines(path: &Path, entries: Vec<String>) -> Result<(), StorageError> {
    let tmp = path.with_extension("tmp");
    let mut text = format!("{VERSION}\n{}\n", entries.len());
    for entry in entries {
        text.push_str(&entry);
        text.push('\n');
    }
    // Rename over the old file only after the new one is on disk: a crash leaves one whole
    // file (inside a SyncGroup, at the group's commit).
    crate::sync_group::replace_file(path, &tmp, text.as_bytes())
}

fn malformed(path: &Path, reason: String) -> StorageError {
    StorageError::MalformedCheckpoint {
        path: path.to_owned(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(t: &str, p: i32) -> TopicPartition {
        TopicPartition {
            topic: t.parse().unwrap(),
            partition: p,
        }
    }

    #[test]
    fn offsets_round_trip_in_kafkas_text_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RECOVERY_POINT_CHECKPOINT);
        assert!(
            read_offsets(&path).unwrap().is_empty(),
            "missing file reads as empty"
        );
        let offsets = BTreeMap::from([(tp("a", 0), 42), (tp("b.c", 3), 0)]);
        write_offsets(&path, &offsets).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "0\n2\na 0 42\nb.c 3 0\n"
        );
        assert_eq!(read_offsets(&path).unwrap(), offsets);
    }

    #[test]
    fn leader_epochs_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LEADER_EPOCH_CHECKPOINT);
        write_leader_epochs(&path, &[(0, 0), (3, 120)]).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "0\n2\n0 0\n3 120\n"
        );
        assert_eq!(read_leader_epochs(&path).unwrap(), vec![(0, 0), (3, 120)]);
    }

    #[test]
    fn malformed_files_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x");
        for (text, why) in [
            ("1\n0\n", "version"),
            ("0\n2\na 0 1\n", "entries"),
            ("0\n1\na zero 1\n", "bad entry"),
        ] {
            std::fs::write(&path, text).unwrap();
            let err = read_offsets(&path).unwrap_err().to_string();
            assert!(err.contains(why), "{err}");
        }
    }
}
