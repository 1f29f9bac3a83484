//! A bounded set of open log files: [`CachedFile`] is a segment or index file that is open
//! only while the process has room for it.
//!
//! Every partition has at least three files (`.log`, `.index`, `.timeindex`); keeping them
//! all open would need 300,000 descriptors for 100,000 partitions, far beyond the usual limit
//! (20,000 here), and a log that cannot be opened leaves its partition dead. So the process
//! keeps at most [`capacity`] of these files open, least recently used first to go; a file
//! not open is reopened on its next use. A closed file loses nothing: writes went to the
//! kernel already, and an fsync through a new descriptor flushes the same inode.
//!
//! An operation holds its file's `Arc<File>` while it runs, so a file evicted meanwhile is
//! closed when the operation ends, and the open count can pass the capacity by the number of
//! operations in flight. The set's lock is held for bookkeeping only, never across a system
//! call that waits for the disk.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// How many log files stay open when [`set_capacity`] was never called.
pub const DEFAULT_CAPACITY: usize = 4096;

/// `EMFILE` and `ENFILE`: the process or the system is out of descriptors.
const EMFILE: i32 = 24;
const ENFILE: i32 = 23;

static CACHE: Mutex<Cache> = Mutex::new(Cache::new());
static CAPACITY: AtomicUsize = AtomicUsize::new(DEFAULT_CAPACITY);
static NEXT_ID: AtomicU64 = AtomicU64::new(1);
static OPENS: AtomicU64 = AtomicU64::new(0);

/// Sets how many log files the process keeps open at most (at least 1); files beyond it are
/// closed, least recently used first.
pub fn set_capacity(capacity: usize) {
    CAPACITY.store(capacity.max(1), Ordering::SeqCst);
    let evicted = lock().evict_to(capacity.max(1));
    drop(evicted);
}

/// The current capacity.
pub fn capacity() -> usize {
    CAPACITY.load(Ordering::SeqCst)
}

/// What the set holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFileStats {
    /// Log files open now (held by the set).
    pub open: usize,
    /// The capacity.
    pub capacity: usize,
    /// Opens since start (first opens and reopens).
    pub opens: u64,
}

/// The set's figures.
pub fn stats() -> OpenFileStats {
    OpenFileStats {
        open: lock().len(),
        capacity: capacity(),
        opens: OPENS.load(Ordering::Relaxed),
    }
}

/// A log file that is reopened on demand. Dropping it closes the file (once no operation
/// holds it).
#[derive(Debug)]
pub(crate) struct CachedFile {
    id: u64,
    path: PathBuf,
    /// False for a file [`CachedFile::lazy`] has not created yet.
    on_disk: AtomicBool,
}

impl CachedFile {
    /// Opens (creating it if missing) `path` for reading and appending, and keeps it open
    /// while there is room.
    pub(crate) fn create(path: &Path) -> io::Result<(CachedFile, Arc<File>)> {
        let file = Arc::new(open_with_room(path, true)?);
        let cached = CachedFile {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            path: path.to_path_buf(),
            on_disk: AtomicBool::new(true),
        };
        let evicted = lock().insert(cached.id, Arc::clone(&file), capacity());
        drop(evicted);
        Ok((cached, file))
    }

    /// A file that does not exist yet and is created by its first use: an empty index costs
    /// no inode (creating inodes is most of what creating a partition costs) and no
    /// descriptor.
    pub(crate) fn lazy(path: &Path) -> CachedFile {
        CachedFile {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            path: path.to_path_buf(),
            on_disk: AtomicBool::new(false),
        }
    }

    /// Whether the file exists (was opened or created at least once).
    pub(crate) fn is_on_disk(&self) -> bool {
        self.on_disk.load(Ordering::Acquire)
    }

    /// The open file: from the set, or opened again (created only by the first use of a
    /// [`CachedFile::lazy`] file: a file that vanished later is an error).
    pub(crate) fn get(&self) -> io::Result<Arc<File>> {
        if let Some(file) = lock().touch(self.id) {
            return Ok(file);
        }
        let create = !self.is_on_disk();
        let file = Arc::new(open_with_room(&self.path, create)?);
        self.on_disk.store(true, Ordering::Release);
        let mut cache = lock();
        // Another thread may have reopened it meanwhile: use one, drop the other.
        if let Some(existing) = cache.touch(self.id) {
            return Ok(existing);
        }
        let evicted = cache.insert(self.id, Arc::clone(&file), capacity());
        drop(cache);
        drop(evicted);
        Ok(file)
    }

    /// The file's path.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for CachedFile {
    fn drop(&mut self) {
        let removed = lock().remove(self.id);
        drop(removed);
    }
}

/// Opens `path` (read + append); when the process is out of descriptors, closes half of the
/// set and tries once more.
fn open_with_room(path: &Path, create: bool) -> io::Result<File> {
    let open = || {
        OPENS.fetch_add(1, Ordering::Relaxed);
        OpenOptions::new()
            .create(create)
            .read(true)
            .append(true)
            .open(path)
    };
    match open() {
        Err(err) if matches!(err.raw_os_error(), Some(EMFILE | ENFILE)) => {
            let evicted = {
                let mut cache = lock();
                let keep = cache.len() / 2;
                cache.evict_to(keep)
            };
            drop(evicted);
            open()
        }
        other => other,
    }
}

fn lock() -> std::sync::MutexGuard<'static, Cache> {
    // Every operation leaves both maps consistent before it could panic.
    CACHE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The LRU: open files by id, and ids by last use.
#[derive(Debug)]
struct Cache {
    files: Option<HashMap<u64, (Arc<File>, u64)>>,
    by_use: BTreeMap<u64, u64>,
    clock: u64,
}

impl Cache {
    const fn new() -> Cache {
        Cache {
            files: None,
            by_use: BTreeMap::new(),
            clock: 0,
        }
    }

    fn files(&mut self) -> &mut HashMap<u64, (Arc<File>, u64)> {
        self.files.get_or_insert_with(HashMap::new)
    }

    fn len(&self) -> usize {
        self.files.as_ref().map_or(0, HashMap::len)
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The file, marked as just used.
    fn touch(&mut self, id: u64) -> Option<Arc<File>> {
        let now = self.tick();
        let (file, used) = self.files().get_mut(&id)?;
        let (file, old) = (Arc::clone(file), std::mem::replace(used, now));
        self.by_use.remove(&old);
        self.by_use.insert(now, id);
        Some(file)
    }

    /// Adds a file as just used; returns the files evicted to stay within `capacity` (to be
    /// closed outside the lock).
    fn insert(&mut self, id: u64, file: Arc<File>, capacity: usize) -> Vec<Arc<File>> {
        let now = self.tick();
        if let Some((_, old)) = self.files().insert(id, (file, now)) {
            self.by_use.remove(&old);
        }
        self.by_use.insert(now, id);
        self.evict_to(capacity)
    }

    fn remove(&mut self, id: u64) -> Option<Arc<File>> {
        let (file, used) = self.files().remove(&id)?;
        self.by_use.remove(&used);
        Some(file)
    }

    /// Drops least recently used files until at most `keep` are left.
    fn evict_to(&mut self, keep: usize) -> Vec<Arc<File>> {
        let mut evicted = Vec::new();
        while self.len() > keep {
            let Some((_, id)) = self.by_use.pop_first() else {
                break;
            };
            if let Some((file, _)) = self.files().remove(&id) {
                evicted.push(file);
            }
        }
        evicted
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::fs::FileExt;

    use super::*;

    fn temp_file(file: &File) -> File {
        file.try_clone().unwrap()
    }

    #[test]
    fn the_least_recently_used_go_first_and_come_back_on_use() {
        let mut cache = Cache::new();
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("f")).unwrap();
        for id in 1..=3 {
            assert!(cache.insert(id, Arc::new(temp_file(&file)), 3).is_empty());
        }
        assert!(cache.touch(1).is_some());
        // 4 pushes out the least recently used: 2.
        assert_eq!(cache.insert(4, Arc::new(temp_file(&file)), 3).len(), 1);
        assert!(cache.touch(2).is_none());
        assert!(cache.touch(1).is_some() && cache.touch(3).is_some());
        assert_eq!(cache.len(), 3);
        assert!(cache.remove(3).is_some());
        assert_eq!(cache.evict_to(1).len(), 1);
        // 1 was used after 4: 4 went.
        assert!(cache.touch(4).is_none() && cache.touch(1).is_some());
        assert_eq!(cache.by_use.len(), cache.len());
    }

    /// Many more files than the capacity, written and read in turns: every byte is there,
    /// files are reopened, and the set never holds more than the capacity. (Other tests of
    /// the crate run meanwhile with the small capacity too: they must not notice.)
    #[test]
    fn more_files_than_descriptors_read_and_write_correctly() {
        let dir = tempfile::tempdir().unwrap();
        set_capacity(8);
        let opens_before = stats().opens;
        let files: Vec<CachedFile> = (0..100)
            .map(|i| {
                CachedFile::create(&dir.path().join(format!("{i}.log")))
                    .unwrap()
                    .0
            })
            .collect();
        for round in 0..3u8 {
            for (i, f) in files.iter().enumerate() {
                let file = f.get().unwrap();
                (&*file).write_all(&[round, i as u8]).unwrap();
                assert!(stats().open <= 8);
            }
        }
        for (i, f) in files.iter().enumerate() {
            let mut buf = [0u8; 6];
            f.get().unwrap().read_exact_at(&mut buf, 0).unwrap();
            assert_eq!(
                buf,
                [0, i as u8, 1, i as u8, 2, i as u8],
                "{}",
                f.path().display()
            );
        }
        assert!(stats().opens - opens_before >= 300, "files were reopened");
        drop(files);
        set_capacity(DEFAULT_CAPACITY);
    }

    #[test]
    fn a_lazy_file_is_created_by_its_first_use_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("later.index");
        let f = CachedFile::lazy(&path);
        assert!(!f.is_on_disk() && !path.exists());
        (&*f.get().unwrap()).write_all(b"x").unwrap();
        assert!(f.is_on_disk());
        assert_eq!(std::fs::read(&path).unwrap(), b"x");
    }

    #[test]
    fn a_vanished_file_is_an_error_not_a_new_empty_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gone.log");
        let (f, file) = CachedFile::create(&path).unwrap();
        drop(file);
        // Push it out of the set, then remove it on disk.
        assert!(lock().remove(f.id).is_some());
        std::fs::remove_file(&path).unwrap();
        assert_eq!(f.get().unwrap_err().kind(), io::ErrorKind::NotFound);
        assert!(!path.exists());
    }
}
