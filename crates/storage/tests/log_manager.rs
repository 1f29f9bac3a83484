//! The LogManager against real temporary directories.

use std::path::Path;
use std::time::Duration;

use model::{TopicId, TopicPartition};
use storage::{read_partition_metadata, LogManager, LogManagerConfig, StorageError};

fn tp(topic: &str, partition: i32) -> TopicPartition {
    TopicPartition::new(topic.parse().unwrap(), partition)
}

fn open(dirs: &[&Path], delay_ms: u64) -> LogManager {
    LogManager::open(LogManagerConfig {
        log_dirs: dirs.iter().map(|d| d.to_path_buf()).collect(),
        file_delete_delay: Duration::from_millis(delay_ms),
    })
    .unwrap()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn create_writes_kafka_partition_metadata_and_reloads() {
    let root = tempfile::tempdir().unwrap();
    let logs = open(&[root.path()], 60_000);
    let id: TopicId = "AAAAAAAAAAAAAAAAAAAAAQ".parse().unwrap();
    let dir = logs.create_partition(&tp("orders", 0), Some(id)).unwrap();
    assert_eq!(dir, root.path().join("orders-0"));
    assert_eq!(
        std::fs::read_to_string(dir.join("partition.metadata")).unwrap(),
        "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n"
    );
    // Idempotent, and a different id for the same directory is refused.
    assert_eq!(
        logs.create_partition(&tp("orders", 0), Some(id)).unwrap(),
        dir
    );
    let other: TopicId = "AAAAAAAAAAAAAAAAAAAAAg".parse().unwrap();
    assert!(matches!(
        logs.create_partition(&tp("orders", 0), Some(other)),
        Err(StorageError::InconsistentTopicId { .. })
    ));
    drop(logs);
    let reopened = open(&[root.path()], 60_000);
    assert_eq!(reopened.partitions(), vec![tp("orders", 0)]);
    assert_eq!(read_partition_metadata(&dir).unwrap(), Some(id));
}

#[tokio::test]
async fn spreads_over_log_dirs_by_partition_count() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let logs = open(&[a.path(), b.path()], 60_000);
    for p in 0..4 {
        logs.create_partition(&tp("t", p), None).unwrap();
    }
    assert_eq!(entries(a.path()), vec!["t-0", "t-2"]);
    assert_eq!(entries(b.path()), vec!["t-1", "t-3"]);
}

#[tokio::test]
async fn delete_renames_then_removes_after_delay() {
    let root = tempfile::tempdir().unwrap();
    let logs = open(&[root.path()], 300);
    logs.create_partition(&tp("gone", 1), None).unwrap();
    let renamed = logs.delete_partition(&tp("gone", 1)).unwrap().unwrap();
    assert!(logs.partitions().is_empty());
    let names = entries(root.path());
    assert_eq!(names.len(), 1);
    assert!(
        names[0].starts_with("gone-1.") && names[0].ends_with("-delete"),
        "{names:?}"
    );
    assert!(renamed.exists());
    assert_eq!(logs.delete_partition(&tp("gone", 1)).unwrap(), None);
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(entries(root.path()).is_empty());
}

#[tokio::test]
async fn leftover_delete_dirs_are_skipped_and_removed_on_open() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(
        root.path()
            .join("old-0.0123456789abcdef0123456789abcdef-delete"),
    )
    .unwrap();
    std::fs::create_dir(root.path().join("live-2")).unwrap();
    let logs = open(&[root.path()], 50);
    assert_eq!(logs.partitions(), vec![tp("live", 2)]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(entries(root.path()), vec!["live-2"]);
}

#[tokio::test]
async fn delete_if_topic_id_removes_only_the_log_of_that_topic_id() {
    let root = tempfile::tempdir().unwrap();
    let logs = open(&[root.path()], 60_000);
    let old: TopicId = "AAAAAAAAAAAAAAAAAAAAAQ".parse().unwrap();
    let new: TopicId = "AAAAAAAAAAAAAAAAAAAAAg".parse().unwrap();
    logs.create_partition(&tp("again", 0), Some(old)).unwrap();
    logs.create_partition(&tp("bare", 0), None).unwrap();
    // Another topic id, or none, leaves the log in place.
    assert_eq!(
        logs.delete_partition_if_topic_id(&tp("again", 0), Some(new))
            .unwrap(),
        None
    );
    assert_eq!(
        logs.delete_partition_if_topic_id(&tp("again", 0), None)
            .unwrap(),
        None
    );
    assert_eq!(
        logs.delete_partition_if_topic_id(&tp("bare", 0), Some(old))
            .unwrap(),
        None
    );
    assert_eq!(logs.partitions(), vec![tp("again", 0), tp("bare", 0)]);
    assert!(logs
        .delete_partition_if_topic_id(&tp("again", 0), Some(old))
        .unwrap()
        .is_some());
    assert!(logs
        .delete_partition_if_topic_id(&tp("bare", 0), None)
        .unwrap()
        .is_some());
    assert!(logs.partitions().is_empty());
    // The name is free for the topic's new incarnation.
    logs.create_partition(&tp("again", 0), Some(new)).unwrap();
}

/// The counts behind the log-dir choice follow creations, deletions, reloads and failures.
#[tokio::test]
async fn per_dir_counts_follow_creates_deletes_reloads_and_failures() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let logs = open(&[a.path(), b.path()], 60_000);
    for p in 0..10 {
        logs.create_partition(&tp("t", p), None).unwrap();
    }
    let counts = |logs: &LogManager| -> Vec<usize> {
        logs.partitions_per_dir()
            .into_iter()
            .map(|(_, n)| n)
            .collect()
    };
    assert_eq!(counts(&logs), vec![5, 5]);
    // Creating an existing partition again changes nothing.
    logs.create_partition(&tp("t", 3), None).unwrap();
    assert_eq!(counts(&logs), vec![5, 5]);
    for p in [0, 2, 4] {
        logs.delete_partition(&tp("t", p)).unwrap().unwrap();
    }
    assert_eq!(counts(&logs), vec![2, 5]);
    // The next three go where there is room.
    for p in 10..13 {
        let dir = logs.create_partition(&tp("t", p), None).unwrap();
        assert_eq!(dir.parent(), Some(a.path()));
    }
    assert_eq!(counts(&logs), vec![5, 5]);
    drop(logs);
    let reloaded = open(&[a.path(), b.path()], 60_000);
    assert_eq!(counts(&reloaded), vec![5, 5]);

    // A directory that cannot be created is not counted (a file is in the way).
    std::fs::write(a.path().join("u-0"), b"not a directory").unwrap();
    std::fs::write(b.path().join("u-0"), b"not a directory").unwrap();
    assert!(reloaded.create_partition(&tp("u", 0), None).is_err());
    assert_eq!(counts(&reloaded), vec![5, 5]);
    assert_eq!(reloaded.partition_dir(&tp("u", 0)), None);
}

#[test]
fn a_partition_directory_is_fresh_only_when_created_by_the_call() {
    let a = tempfile::tempdir().unwrap();
    let logs = open(&[a.path()], 60_000);
    let id = model::TopicId::from_bytes([7; 16]);
    let first = logs
        .open_or_create_partition(&tp("f", 0), Some(id))
        .unwrap();
    assert!(first.fresh);
    // Only partition.metadata is in it, with the id.
    let names: Vec<_> = std::fs::read_dir(&first.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec![storage::PARTITION_METADATA_FILE.to_string()]);
    assert_eq!(
        storage::read_partition_metadata(&first.dir).unwrap(),
        Some(id)
    );
    let again = logs
        .open_or_create_partition(&tp("f", 0), Some(id))
        .unwrap();
    assert_eq!(
        again,
        storage::PartitionDir {
            dir: first.dir.clone(),
            fresh: false
        }
    );
    // A directory already there (made after the start) is used, not assumed empty, and its
    // partition.metadata is still checked.
    std::fs::create_dir(a.path().join("f-1")).unwrap();
    let other = model::TopicId::from_bytes([8; 16]);
    std::fs::write(a.path().join("f-1/leftover"), b"x").unwrap();
    let existing = logs
        .open_or_create_partition(&tp("f", 1), Some(other))
        .unwrap();
    assert!(!existing.fresh);
    assert!(existing.dir.join("leftover").exists());
    drop(logs);
    let reloaded = open(&[a.path()], 60_000);
    let after = reloaded.open_or_create_partition(&tp("f", 0), Some(other));
    assert!(after.is_err(), "the id on disk is checked after a restart");
}
