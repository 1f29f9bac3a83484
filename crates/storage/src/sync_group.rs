//! Small files replaced atomically (checkpoints, `partition.metadata`), and [`SyncGroup`],
//! which makes the fsyncs of many of them one per filesystem.
//!
//! A file is replaced by writing `<name>.tmp`, making it durable, then renaming it over the
//! old one, so a crash leaves either the old or the new file whole. Alone, that is one fsync
//! per file. Creating 10,000 partitions writes two such files each: 20,000 fsyncs, each a
//! journal commit, is most of a minute on a small disk. Inside a [`SyncGroup`] (entered on the
//! threads that do the work) a replacement only writes its temporary file; the group's
//! [`SyncGroup::commit`] then makes every temporary file durable with one `syncfs` per
//! filesystem, renames them all, and makes the renames durable with one more `syncfs`. The
//! crash guarantee is the same: no file is renamed over before its new content is on disk.
//!
//! Until the commit, a file written in the group still reads as its old version (or as
//! missing); work done in a group must not read back what it wrote.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use tracing::{debug, warn};

use crate::StorageError;

thread_local! {
    /// The group the current thread writes into, if any.
    static CURRENT: RefCell<Option<Arc<Mutex<Pending>>>> = const { RefCell::new(None) };
}

/// Files written in a group, waiting for its commit: (temporary file, final path).
#[derive(Debug, Default)]
struct Pending {
    files: Vec<(PathBuf, PathBuf)>,
}

/// Replaces `path` with `bytes`, through the temporary file `tmp` (see the module docs):
/// durable and renamed now, or at the commit of the group the thread is in.
pub(crate) fn replace_file(path: &Path, tmp: &Path, bytes: &[u8]) -> Result<(), StorageError> {
    let mut file = File::create(tmp).map_err(StorageError::io("create", tmp))?;
    file.write_all(bytes)
        .map_err(StorageError::io("write", tmp))?;
    let group = CURRENT.with(|current| current.borrow().clone());
    if let Some(group) = group {
        lock(&group)
            .files
            .push((tmp.to_path_buf(), path.to_path_buf()));
        return Ok(());
    }
    file.sync_all().map_err(StorageError::io("fsync", tmp))?;
    std::fs::rename(tmp, path).map_err(StorageError::io("rename", tmp))
}

/// Defers the fsync and rename of every file replaced on the threads that entered it, to
/// one [`SyncGroup::commit`]. Cheap to clone; clones are the same group.
#[derive(Debug, Clone, Default)]
pub struct SyncGroup {
    pending: Arc<Mutex<Pending>>,
}

/// While alive, files replaced on this thread go into the group.
#[derive(Debug)]
pub struct EnteredGroup {
    previous: Option<Arc<Mutex<Pending>>>,
}

impl Drop for EnteredGroup {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|current| *current.borrow_mut() = previous);
    }
}

impl SyncGroup {
    /// An empty group.
    pub fn new() -> SyncGroup {
        SyncGroup::default()
    }

    /// Makes the current thread write into this group until the guard is dropped.
    pub fn enter(&self) -> EnteredGroup {
        let previous =
            CURRENT.with(|current| current.borrow_mut().replace(Arc::clone(&self.pending)));
        EnteredGroup { previous }
    }

    /// How many files wait for the commit.
    pub fn len(&self) -> usize {
        lock(&self.pending).files.len()
    }

    /// Whether no file waits for the commit.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Makes every file written in the group durable and puts it in place: one `syncfs` per
    /// filesystem, the renames, one more `syncfs` each. When a `syncfs` fails, each file is
    /// fsynced and renamed on its own instead. Returns the files that could not be put in
    /// place (their final path and why); the others are done.
    pub fn commit(&self) -> Vec<(PathBuf, StorageError)> {
        let files = std::mem::take(&mut lock(&self.pending).files);
        if files.is_empty() {
            return Vec::new();
        }
        let filesystems = filesystems_of(&files);
        if let Err(err) = sync_filesystems(&filesystems) {
            warn!(error = %err, files = files.len(), "syncfs failed; fsyncing each file instead");
            return files
                .into_iter()
                .filter_map(|(tmp, path)| one_by_one(&tmp, &path).err().map(|e| (path, e)))
                .collect();
        }
        let mut failed = Vec::new();
        for (tmp, path) in files {
            if let Err(err) = std::fs::rename(&tmp, &path) {
                failed.push((path, StorageError::io("rename", &tmp)(err)));
            }
        }
        if let Err(err) = sync_filesystems(&filesystems) {
            // The renames are done; only their durability is in doubt. Nothing better to do
            // than to say so (the next checkpoint rewrites what a crash would lose).
            warn!(error = %err, "syncfs after the renames failed");
        }
        debug!(
            filesystems = filesystems.len(),
            failed = failed.len(),
            "grouped fsyncs committed"
        );
        failed
    }
}

/// One directory per filesystem the files are on.
fn filesystems_of(files: &[(PathBuf, PathBuf)]) -> Vec<PathBuf> {
    let parents: BTreeSet<&Path> = files.iter().filter_map(|(tmp, _)| tmp.parent()).collect();
    let mut by_device: BTreeMap<u64, PathBuf> = BTreeMap::new();
    for parent in parents {
        // A parent that cannot be read makes its own file fail at the rename.
        if let Ok(meta) = std::fs::metadata(parent) {
            by_device
                .entry(meta.dev())
                .or_insert_with(|| parent.to_path_buf());
        }
    }
    by_device.into_values().collect()
}

/// Flushes every filesystem that holds one of `dirs` (one `syncfs` each, however many of the
/// directories share one). Before fsyncing many files one by one, this turns each of those
/// fsyncs into a no-op on an already clean file: 10,000 dirty logs cost one journal commit,
/// not 10,000.
pub fn sync_dirs(dirs: &[PathBuf]) -> Result<(), StorageError> {
    let mut by_device: BTreeMap<u64, PathBuf> = BTreeMap::new();
    for dir in dirs {
        let meta = std::fs::metadata(dir).map_err(StorageError::io("stat", dir))?;
        by_device.entry(meta.dev()).or_insert_with(|| dir.clone());
    }
    sync_filesystems(&by_device.into_values().collect::<Vec<_>>())
}

fn sync_filesystems(dirs: &[PathBuf]) -> Result<(), StorageError> {
    for dir in dirs {
        let handle = File::open(dir).map_err(StorageError::io("open", dir))?;
        rustix::fs::syncfs(&handle)
            .map_err(|errno| StorageError::io("syncfs", dir)(std::io::Error::from(errno)))?;
    }
    Ok(())
}

fn one_by_one(tmp: &Path, path: &Path) -> Result<(), StorageError> {
    let file = File::open(tmp).map_err(StorageError::io("open", tmp))?;
    file.sync_all().map_err(StorageError::io("fsync", tmp))?;
    std::fs::rename(tmp, path).map_err(StorageError::io("rename", tmp))
}

fn lock(pending: &Mutex<Pending>) -> std::sync::MutexGuard<'_, Pending> {
    // Every update is one push or one take: a poisoned lock still guards a consistent list.
    pending.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_a_group_a_file_is_in_place_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        replace_file(&path, &dir.path().join("f.tmp"), b"one").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"one");
        assert!(!dir.path().join("f.tmp").exists());
    }

    #[test]
    fn inside_a_group_files_appear_at_the_commit_from_every_thread() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        replace_file(&a, &dir.path().join("a.tmp"), b"old").unwrap();
        let group = SyncGroup::new();
        {
            let _entered = group.enter();
            replace_file(&a, &dir.path().join("a.tmp"), b"new").unwrap();
            std::thread::scope(|s| {
                s.spawn(|| {
                    let _entered = group.enter();
                    for i in 0..100 {
                        let sub = dir.path().join(format!("p-{i}"));
                        std::fs::create_dir(&sub).unwrap();
                        replace_file(&sub.join("m"), &sub.join("m.tmp"), b"x").unwrap();
                    }
                });
            });
        }
        // Outside the group again: this one is in place at once.
        let b = dir.path().join("b");
        replace_file(&b, &dir.path().join("b.tmp"), b"now").unwrap();
        assert_eq!(std::fs::read(&b).unwrap(), b"now");

        assert_eq!(group.len(), 101);
        assert_eq!(std::fs::read(&a).unwrap(), b"old", "not before the commit");
        assert!(!dir.path().join("p-7/m").exists());
        assert!(group.commit().is_empty());
        assert_eq!(std::fs::read(&a).unwrap(), b"new");
        for i in 0..100 {
            let sub = dir.path().join(format!("p-{i}"));
            assert_eq!(std::fs::read(sub.join("m")).unwrap(), b"x");
            assert!(!sub.join("m.tmp").exists());
        }
        assert!(group.is_empty());
    }

    #[test]
    fn sync_dirs_flushes_existing_dirs_and_names_a_missing_one() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        sync_dirs(&[a.path().to_path_buf(), b.path().to_path_buf()]).unwrap();
        let missing = a.path().join("missing");
        let err = sync_dirs(std::slice::from_ref(&missing))
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing"), "{err}");
    }

    #[test]
    fn a_file_that_cannot_be_put_in_place_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let group = SyncGroup::new();
        let sub = dir.path().join("gone");
        std::fs::create_dir(&sub).unwrap();
        {
            let _entered = group.enter();
            replace_file(&sub.join("m"), &sub.join("m.tmp"), b"x").unwrap();
            replace_file(&dir.path().join("ok"), &dir.path().join("ok.tmp"), b"y").unwrap();
        }
        std::fs::remove_dir_all(&sub).unwrap();
        let failed = group.commit();
        assert_eq!(failed.len(), 1);
        assert_eq!(failed[0].0, sub.join("m"));
        assert_eq!(std::fs::read(dir.path().join("ok")).unwrap(), b"y");
    }
}
