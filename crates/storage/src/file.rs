//! Every byte the log writes, truncates, reads or fsyncs goes through these functions, so a
//! failure can be handled in one way everywhere and tests can make the disk misbehave.
//!
//! With the `fault-injection` feature (never in a release build: only `cargo test` enables
//! it, through dev-dependencies) [`faults::inject`] gives a directory a fault: a disk that
//! fills up after a number of bytes (writes are cut short there, as a real filesystem does,
//! and fail with `ENOSPC`), failing truncations or fsyncs, or a delay on every operation.

use std::fs::File;
use std::io::{self, Write};
use std::ops::Deref;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use crate::open_files::CachedFile;

/// A file these functions work on: a plain open [`File`], or a [`CachedFile`] that is
/// (re)opened on use, within the process's bound on open log files.
pub(crate) trait Handle {
    /// The open file for one operation.
    fn open_file(&self) -> io::Result<OpenFile<'_>>;
    /// False for a file that was never created (a lazy index): syncing it or emptying it
    /// has nothing to do.
    fn is_on_disk(&self) -> bool {
        true
    }
}

/// An open file, borrowed or held for the operation.
pub(crate) enum OpenFile<'a> {
    Borrowed(&'a File),
    Held(Arc<File>),
}

impl Deref for OpenFile<'_> {
    type Target = File;
    fn deref(&self) -> &File {
        match self {
            OpenFile::Borrowed(file) => file,
            OpenFile::Held(file) => file,
        }
    }
}

impl Handle for File {
    fn open_file(&self) -> io::Result<OpenFile<'_>> {
        Ok(OpenFile::Borrowed(self))
    }
}

impl Handle for CachedFile {
    fn open_file(&self) -> io::Result<OpenFile<'_>> {
        self.get().map(OpenFile::Held)
    }
    fn is_on_disk(&self) -> bool {
        CachedFile::is_on_disk(self)
    }
}

/// Appends all of `bytes` to `file` (opened for append). On an error some prefix of `bytes`
/// may have been written: the caller undoes it with [`set_len`].
pub(crate) fn append(file: &impl Handle, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let file = file.open_file()?;
    #[cfg(any(test, feature = "fault-injection"))]
    if let Some(allowed) = faults::before_write(path, bytes.len())? {
        (&*file).write_all(&bytes[..allowed])?;
        return Err(io::Error::from_raw_os_error(28)); // ENOSPC, after a short write
    }
    let _ = path;
    (&*file).write_all(bytes)
}

/// Cuts `file` (or extends it with zeros) to `len` bytes.
pub(crate) fn set_len(file: &impl Handle, path: &Path, len: u64) -> io::Result<()> {
    if len == 0 && !file.is_on_disk() {
        return Ok(());
    }
    let file = file.open_file()?;
    #[cfg(any(test, feature = "fault-injection"))]
    faults::before_truncate(path, &file, len)?;
    let _ = path;
    file.set_len(len)
}

/// Fills `buf` from `position`.
pub(crate) fn read_exact_at(
    file: &impl Handle,
    path: &Path,
    buf: &mut [u8],
    position: u64,
) -> io::Result<()> {
    let file = file.open_file()?;
    #[cfg(any(test, feature = "fault-injection"))]
    faults::before_read(path);
    let _ = path;
    file.read_exact_at(buf, position)
}

/// fsyncs the file's data.
pub(crate) fn sync_data(file: &impl Handle, path: &Path) -> io::Result<()> {
    if !file.is_on_disk() {
        return Ok(());
    }
    let file = file.open_file()?;
    #[cfg(any(test, feature = "fault-injection"))]
    faults::before_sync(path)?;
    let _ = path;
    file.sync_data()
}

/// Test-only disk faults, per directory (every file below it is affected).
#[cfg(any(test, feature = "fault-injection"))]
pub mod faults {
    use std::fs::File;
    use std::io;
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex, PoisonError};
    use std::time::Duration;

    /// What goes wrong under a directory.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Fault {
        /// The filesystem has `free_bytes` left: a write that needs more writes what fits
        /// and fails with `ENOSPC`; truncating a file gives its bytes back.
        NoSpace { free_bytes: u64 },
        /// Every truncation fails with `EIO` (a write can then not be undone).
        FailTruncate,
        /// Every fsync fails with `EIO`.
        FailSync,
        /// Every read, write and fsync first sleeps this long (a slow disk). Several faults
        /// may be given to one directory; they all apply.
        Delay(Duration),
    }

    /// Removes its fault when dropped.
    #[derive(Debug)]
    pub struct FaultGuard {
        state: Arc<Mutex<Fault>>,
    }

    impl FaultGuard {
        /// Changes the fault in place (e.g. frees space on a full disk).
        pub fn set(&self, fault: Fault) {
            *lock(&self.state) = fault;
        }
        /// The fault as it is now (a `NoSpace` budget shrinks as writes use it).
        pub fn get(&self) -> Fault {
            *lock(&self.state)
        }
    }

    impl Drop for FaultGuard {
        fn drop(&mut self) {
            let mut registry = registry();
            registry.retain(|(_, state)| !Arc::ptr_eq(state, &self.state));
            ACTIVE.store(registry.len(), Ordering::SeqCst);
        }
    }

    /// Gives every file below `dir` the `fault` until the guard is dropped.
    pub fn inject(dir: &Path, fault: Fault) -> FaultGuard {
        let state = Arc::new(Mutex::new(fault));
        let mut registry = registry();
        registry.push((dir.to_owned(), Arc::clone(&state)));
        ACTIVE.store(registry.len(), Ordering::SeqCst);
        FaultGuard { state }
    }

    type Registry = Vec<(PathBuf, Arc<Mutex<Fault>>)>;
    static REGISTRY: Mutex<Registry> = Mutex::new(Vec::new());
    /// Lets the common case (no fault anywhere) skip the registry lock.
    static ACTIVE: AtomicUsize = AtomicUsize::new(0);

    fn registry() -> std::sync::MutexGuard<'static, Registry> {
        REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock(state: &Mutex<Fault>) -> std::sync::MutexGuard<'_, Fault> {
        state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The faults of every registered directory that holds `path`.
    fn faults_for(path: &Path) -> Vec<Arc<Mutex<Fault>>> {
        if ACTIVE.load(Ordering::SeqCst) == 0 {
            return Vec::new();
        }
        registry()
            .iter()
            .filter(|(dir, _)| path.starts_with(dir))
            .map(|(_, state)| Arc::clone(state))
            .collect()
    }

    fn eio() -> io::Error {
        io::Error::from_raw_os_error(5)
    }

    fn enospc() -> io::Error {
        io::Error::from_raw_os_error(28)
    }

    /// `Some(n)`: only `n` of the bytes fit; write them and fail.
    pub(super) fn before_write(path: &Path, len: usize) -> io::Result<Option<usize>> {
        let mut allowed = None;
        for state in faults_for(path) {
            let mut fault = lock(&state);
            match *fault {
                Fault::NoSpace { free_bytes } => {
                    if free_bytes >= len as u64 {
                        *fault = Fault::NoSpace {
                            free_bytes: free_bytes - len as u64,
                        };
                    } else {
                        *fault = Fault::NoSpace { free_bytes: 0 };
                        allowed = Some(free_bytes as usize);
                    }
                }
                Fault::Delay(delay) => {
                    drop(fault);
                    std::thread::sleep(delay);
                }
                Fault::FailTruncate | Fault::FailSync => {}
            }
        }
        Ok(allowed)
    }

    pub(super) fn before_truncate(path: &Path, file: &File, len: u64) -> io::Result<()> {
        for state in faults_for(path) {
            let mut fault = lock(&state);
            match *fault {
                Fault::FailTruncate => return Err(eio()),
                Fault::NoSpace { free_bytes } => {
                    let old = file.metadata()?.len();
                    let free_bytes = if len <= old {
                        free_bytes + (old - len)
                    } else {
                        free_bytes.checked_sub(len - old).ok_or_else(enospc)?
                    };
                    *fault = Fault::NoSpace { free_bytes };
                }
                Fault::FailSync | Fault::Delay(_) => {}
            }
        }
        Ok(())
    }

    pub(super) fn before_read(path: &Path) {
        for state in faults_for(path) {
            let fault = *lock(&state);
            if let Fault::Delay(delay) = fault {
                std::thread::sleep(delay);
            }
        }
    }

    pub(super) fn before_sync(path: &Path) -> io::Result<()> {
        for state in faults_for(path) {
            let fault = *lock(&state);
            match fault {
                Fault::FailSync => return Err(eio()),
                Fault::Delay(delay) => std::thread::sleep(delay),
                Fault::NoSpace { .. } | Fault::FailTruncate => {}
            }
        }
        Ok(())
    }
}
