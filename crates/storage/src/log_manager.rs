//! The [`LogManager`]: the set of live partition directories over the configured `log.dirs`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use model::{TopicId, TopicName, TopicPartition};
use tracing::{debug, info, warn};

use crate::partition_metadata::{read_partition_metadata, write_partition_metadata};
use crate::StorageError;

/// Suffix of a partition directory that is waiting to be removed (Kafka's `-delete`).
pub const DELETE_DIR_SUFFIX: &str = "-delete";

/// Longest file name most filesystems accept; Kafka truncates the topic part of a
/// `-delete` name to stay under it.
const MAX_FILE_NAME_BYTES: usize = 255;

/// What the [`LogManager`] needs from the broker's configuration.
#[derive(Debug, Clone)]
pub struct LogManagerConfig {
    /// `log.dirs`, in configured order.
    pub log_dirs: Vec<PathBuf>,
    /// `file.delete.delay.ms`: how long a `-delete` directory stays before removal.
    pub file_delete_delay: Duration,
}

/// A partition's directory, from [`LogManager::open_or_create_partition`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionDir {
    pub dir: PathBuf,
    /// Created just now by this call: it holds nothing but `partition.metadata`.
    pub fresh: bool,
}

/// The live partition logs of one broker. Cheap to clone; clones share state.
///
/// Must be used inside a Tokio runtime: removals of `-delete` directories run as background
/// tasks after `file.delete.delay.ms`.
#[derive(Debug, Clone)]
pub struct LogManager {
    config: Arc<LogManagerConfig>,
    logs: Arc<Mutex<Logs>>,
}

/// The live partition directories, with a count per log directory so that choosing where a
/// new partition goes costs O(log dirs), not a scan of every partition. The lock guarding it
/// is never held across a filesystem call.
#[derive(Debug, Default)]
struct Logs {
    by_partition: BTreeMap<TopicPartition, PathBuf>,
    /// Partitions per configured log directory, in `log.dirs` order.
    per_dir: Vec<usize>,
}

impl Logs {
    fn dir_index(&self, config: &LogManagerConfig, partition_dir: &Path) -> Option<usize> {
        let parent = partition_dir.parent()?;
        config.log_dirs.iter().position(|d| d == parent)
    }

    fn insert(&mut self, config: &LogManagerConfig, tp: TopicPartition, dir: PathBuf) {
        let index = self.dir_index(config, &dir);
        if let Some(previous) = self.by_partition.insert(tp, dir) {
            if let Some(i) = self.dir_index(config, &previous) {
                self.per_dir[i] -= 1;
            }
        }
        if let Some(i) = index {
            self.per_dir[i] += 1;
        }
    }

    fn remove(&mut self, config: &LogManagerConfig, tp: &TopicPartition) -> Option<PathBuf> {
        let dir = self.by_partition.remove(tp)?;
        if let Some(i) = self.dir_index(config, &dir) {
            self.per_dir[i] -= 1;
        }
        Some(dir)
    }

    /// The log directory holding the fewest partitions (the first of equals).
    fn least_loaded(&self, config: &LogManagerConfig) -> PathBuf {
        let (index, _) = self
            .per_dir
            .iter()
            .enumerate()
            .min_by_key(|(i, count)| (**count, *i))
            .expect("open() refuses an empty log.dirs");
        config.log_dirs[index].clone()
    }
}

impl LogManager {
    /// Creates missing log directories, loads every `<topic>-<partition>` directory found in
    /// them, and schedules the removal of leftover `-delete` directories.
    pub fn open(config: LogManagerConfig) -> Result<LogManager, StorageError> {
        if config.log_dirs.is_empty() {
            return Err(StorageError::NoLogDirs);
        }
        let mut logs: BTreeMap<TopicPartition, PathBuf> = BTreeMap::new();
        let mut leftovers = Vec::new();
        for dir in &config.log_dirs {
            std::fs::create_dir_all(dir).map_err(StorageError::io("create log directory", dir))?;
            for entry in std::fs::read_dir(dir).map_err(StorageError::io("list", dir))? {
                let entry = entry.map_err(StorageError::io("list", dir))?;
                let path = entry.path();
                if !path.is_dir() {
                    continue;
                }
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.ends_with(DELETE_DIR_SUFFIX) {
                    leftovers.push(path);
                } else if let Some(tp) = parse_partition_dir_name(&name) {
                    if let Some(previous) = logs.insert(tp.clone(), path.clone()) {
                        warn!(%tp, first = %previous.display(), second = %path.display(),
                            "partition found in two log directories; using the second");
                    }
                } else {
                    warn!(dir = %path.display(), "ignoring a directory that is not <topic>-<partition>");
                }
            }
        }
        info!(
            partitions = logs.len(),
            pending_deletions = leftovers.len(),
            "loaded partition logs"
        );
        let mut counted = Logs {
            by_partition: BTreeMap::new(),
            per_dir: vec![0; config.log_dirs.len()],
        };
        for (tp, dir) in logs {
            counted.insert(&config, tp, dir);
        }
        let manager = LogManager {
            config: Arc::new(config),
            logs: Arc::new(Mutex::new(counted)),
        };
        for path in leftovers {
            manager.schedule_removal(path);
        }
        Ok(manager)
    }

    /// Creates `<log dir>/<topic>-<partition>/` if this broker has no log for `tp`, in the log
    /// directory holding the fewest partitions, and writes `partition.metadata` when a topic id
    /// is known. Returns the partition's directory.
    pub fn create_partition(
        &self,
        tp: &TopicPartition,
        topic_id: Option<TopicId>,
    ) -> Result<PathBuf, StorageError> {
        self.open_or_create_partition(tp, topic_id).map(|p| p.dir)
    }

    /// [`LogManager::create_partition`], saying whether the directory was created just now
    /// (then it holds only `partition.metadata`, and the log in it can start without reading
    /// the disk: [`crate::Log::create_new`]).
    pub fn open_or_create_partition(
        &self,
        tp: &TopicPartition,
        topic_id: Option<TopicId>,
    ) -> Result<PartitionDir, StorageError> {
        // Chosen and recorded under the lock; created outside it (a failure takes it back).
        let (dir, created) = {
            let mut logs = self.lock();
            match logs.by_partition.get(tp) {
                Some(dir) => (dir.clone(), false),
                None => {
                    let dir = logs.least_loaded(&self.config).join(partition_dir_name(tp));
                    logs.insert(&self.config, tp.clone(), dir.clone());
                    (dir, true)
                }
            }
        };
        let mut fresh = false;
        if created {
            // One mkdir: the log directory exists (open() made it). A directory already there
            // (not loaded at start) is used as it is, not assumed empty.
            let made = match std::fs::create_dir(&dir) {
                Ok(()) => {
                    fresh = true;
                    Ok(())
                }
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {
                    if dir.is_dir() {
                        Ok(())
                    } else {
                        Err(err)
                    }
                }
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                    std::fs::create_dir_all(&dir)
                }
                Err(err) => Err(err),
            };
            if let Err(err) = made {
                let mut logs = self.lock();
                if logs.by_partition.get(tp) == Some(&dir) {
                    logs.remove(&self.config, tp);
                }
                return Err(StorageError::io("create partition directory", &dir)(err));
            }
            debug!(%tp, dir = %dir.display(), "created partition log");
        }
        if let Some(requested) = topic_id.filter(|id| *id != TopicId::ZERO) {
            if fresh {
                write_partition_metadata(&dir, requested)?;
                return Ok(PartitionDir { dir, fresh });
            }
            match read_partition_metadata(&dir)? {
                Some(on_disk) if on_disk != requested => {
                    return Err(StorageError::InconsistentTopicId {
                        tp: tp.clone(),
                        on_disk,
                        requested,
                    });
                }
                Some(_) => {}
                None => write_partition_metadata(&dir, requested)?,
            }
        }
        Ok(PartitionDir { dir, fresh })
    }

    /// Drops `tp` from the live set and renames its directory to
    /// `<topic>-<partition>.<uuid>-delete`; a background task removes it after
    /// `file.delete.delay.ms`. Returns the new path, or `None` if there was no such log.
    pub fn delete_partition(&self, tp: &TopicPartition) -> Result<Option<PathBuf>, StorageError> {
        let Some(dir) = self.lock().remove(&self.config, tp) else {
            return Ok(None);
        };
        self.rename_for_deletion(tp, dir)
    }

    /// Renames the directory of a partition already dropped from the live set (put back if
    /// the rename fails).
    fn rename_for_deletion(
        &self,
        tp: &TopicPartition,
        dir: PathBuf,
    ) -> Result<Option<PathBuf>, StorageError> {
        // Rename before deleting: a crash mid-delete must never leave a half-deleted
        // directory that the next start would load as a live log.
        let parent = dir.parent().map(Path::to_path_buf).unwrap_or_default();
        let renamed = parent.join(delete_dir_name(tp));
        if let Err(err) = std::fs::rename(&dir, &renamed) {
            let mut logs = self.lock();
            if !logs.by_partition.contains_key(tp) {
                logs.insert(&self.config, tp.clone(), dir.clone());
            }
            return Err(StorageError::io("rename for deletion", &dir)(err));
        }
        debug!(%tp, dir = %renamed.display(), delay_ms = self.config.file_delete_delay.as_millis() as u64,
            "renamed partition log for deletion");
        self.schedule_removal(renamed.clone());
        Ok(Some(renamed))
    }

    /// [`LogManager::delete_partition`], only if the log's `partition.metadata` still names
    /// `topic_id` (`None`: the log has no `partition.metadata`). The log leaves the live set
    /// before the check, so a LeaderAndIsr cannot reuse it meanwhile; it is put back if it
    /// names another topic id. Returns the new path, or `None` if nothing was removed.
    pub fn delete_partition_if_topic_id(
        &self,
        tp: &TopicPartition,
        topic_id: Option<TopicId>,
    ) -> Result<Option<PathBuf>, StorageError> {
        let Some(dir) = self.lock().remove(&self.config, tp) else {
            return Ok(None);
        };
        let put_back = |logs: &mut Logs| {
            if !logs.by_partition.contains_key(tp) {
                logs.insert(&self.config, tp.clone(), dir.clone());
            }
        };
        match read_partition_metadata(&dir) {
            Ok(on_disk) if on_disk == topic_id => self.rename_for_deletion(tp, dir.clone()),
            Ok(_) => {
                put_back(&mut self.lock());
                Ok(None)
            }
            Err(err) => {
                put_back(&mut self.lock());
                Err(err)
            }
        }
    }

    /// The live partitions, sorted.
    pub fn partitions(&self) -> Vec<TopicPartition> {
        self.lock().by_partition.keys().cloned().collect()
    }

    /// The directory of `tp`'s log, if this broker has one.
    pub fn partition_dir(&self, tp: &TopicPartition) -> Option<PathBuf> {
        self.lock().by_partition.get(tp).cloned()
    }

    /// How many partitions each log directory holds, in `log.dirs` order.
    pub fn partitions_per_dir(&self) -> Vec<(PathBuf, usize)> {
        let logs = self.lock();
        self.config
            .log_dirs
            .iter()
            .cloned()
            .zip(logs.per_dir.iter().copied())
            .collect()
    }

    /// The file system holding `dir`: (total bytes, bytes usable by the broker), from
    /// statvfs (DescribeLogDirs v4). Blocking: call off the async workers.
    pub fn dir_space(dir: &Path) -> Result<(u64, u64), StorageError> {
        let stat = rustix::fs::statvfs(dir).map_err(|errno| {
            StorageError::io("read the file system of", dir)(std::io::Error::from(errno))
        })?;
        Ok((
            stat.f_blocks.saturating_mul(stat.f_frsize),
            stat.f_bavail.saturating_mul(stat.f_frsize),
        ))
    }

    /// The bytes of the `.log` segment files in a partition directory (the size of a log
    /// that is not open). Blocking: call off the async workers.
    pub fn segment_bytes(dir: &Path) -> u64 {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        entries
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    }

    /// The configured log directories.
    pub fn log_dirs(&self) -> &[PathBuf] {
        &self.config.log_dirs
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Logs> {
        // A panic while holding this lock cannot leave the map half-updated (every update is
        // one insert or remove with its count), so a poisoned lock is still safe to use.
        self.logs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn schedule_removal(&self, path: PathBuf) {
        let delay = self.config.file_delete_delay;
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            match tokio::fs::remove_dir_all(&path).await {
                Ok(()) => debug!(dir = %path.display(), "removed deleted partition log"),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => {
                    warn!(dir = %path.display(), error = %err, "could not remove deleted partition log")
                }
            }
        });
    }
}

/// `<topic>-<partition>`.
fn partition_dir_name(tp: &TopicPartition) -> String {
    format!("{}-{}", tp.topic, tp.partition)
}

/// `<topic>-<partition>.<uuid without dashes>-delete`, with the topic part truncated as Kafka
/// does when the whole name would pass 255 bytes.
fn delete_dir_name(tp: &TopicPartition) -> String {
    let suffix = format!(
        "-{}.{}{DELETE_DIR_SUFFIX}",
        tp.partition,
        uuid::Uuid::new_v4().simple()
    );
    let topic = tp.topic.as_str();
    let keep = topic.len().min(MAX_FILE_NAME_BYTES - suffix.len());
    format!("{}{suffix}", &topic[..keep])
}

/// Parses `<topic>-<partition>`; `None` for anything else.
/// Whether `name` is a partition directory's name (`<topic>-<partition>`).
pub(crate) fn is_partition_dir_name(name: &str) -> bool {
    parse_partition_dir_name(name).is_some()
}

fn parse_partition_dir_name(name: &str) -> Option<TopicPartition> {
    let (topic, partition) = name.rsplit_once('-')?;
    let partition: i32 = partition.parse().ok().filter(|p| *p >= 0)?;
    if partition.to_string() != partition_str(name) {
        return None;
    }
    let topic: TopicName = topic.parse().ok()?;
    Some(TopicPartition::new(topic, partition))
}

fn partition_str(name: &str) -> &str {
    name.rsplit_once('-').map(|(_, p)| p).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition::new(topic.parse().unwrap(), partition)
    }

    #[test]
    fn dir_space_and_segment_bytes_read_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        let (total, usable) = LogManager::dir_space(dir.path()).unwrap();
        assert!(total > 0 && usable <= total, "{total} {usable}");
        assert!(LogManager::dir_space(&dir.path().join("missing")).is_err());
        let part = dir.path().join("t-0");
        std::fs::create_dir(&part).unwrap();
        std::fs::write(part.join("00000000000000000000.log"), [0u8; 100]).unwrap();
        std::fs::write(part.join("00000000000000000007.log"), [0u8; 23]).unwrap();
        std::fs::write(part.join("00000000000000000000.index"), [0u8; 64]).unwrap();
        assert_eq!(LogManager::segment_bytes(&part), 123);
        assert_eq!(LogManager::segment_bytes(&dir.path().join("none")), 0);
    }

    #[test]
    fn dir_names() {
        assert_eq!(parse_partition_dir_name("orders-3"), Some(tp("orders", 3)));
        assert_eq!(
            parse_partition_dir_name("my-topic-10"),
            Some(tp("my-topic", 10))
        );
        assert_eq!(parse_partition_dir_name("orders-03"), None);
        assert_eq!(parse_partition_dir_name("orders"), None);
        assert_eq!(parse_partition_dir_name("lost+found"), None);
        let name = delete_dir_name(&tp("orders", 3));
        assert!(name.starts_with("orders-3."), "{name}");
        assert!(name.ends_with("-delete"));
        assert_eq!(name.len(), "orders-3.".len() + 32 + "-delete".len());
        let long = delete_dir_name(&tp(&"x".repeat(249), 0));
        assert_eq!(long.len(), MAX_FILE_NAME_BYTES);
    }
}
