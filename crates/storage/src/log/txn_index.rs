//! The aborted-transaction index of a segment (`<base offset>.txnindex`, Kafka's
//! `TransactionIndex`): one 34-byte entry per transaction aborted by a marker in the segment,
//! in marker order: version i16 (0), producer id i64, first offset i64, last offset i64 (the
//! marker's), last stable offset i64 (where the LSO stood once it was aborted). A
//! READ_COMMITTED fetch lists the aborted transactions its range overlaps.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::segment::file_stem;
use super::LogError;

/// Bytes of one entry.
pub const ENTRY_SIZE: usize = 34;
/// The entry format version Kafka writes.
const VERSION: i16 = 0;

/// One aborted transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

impl AbortedTxn {
    /// Kafka's 34-byte layout.
    pub fn encode(&self) -> [u8; ENTRY_SIZE] {
        let mut out = [0u8; ENTRY_SIZE];
        out[0..2].copy_from_slice(&VERSION.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        out[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        out
    }

    /// Reads one entry; `None` for another version.
    pub fn decode(bytes: &[u8; ENTRY_SIZE]) -> Option<AbortedTxn> {
        let i64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            i64::from_be_bytes(b)
        };
        (i16::from_be_bytes([bytes[0], bytes[1]]) == VERSION).then(|| AbortedTxn {
            producer_id: i64_at(2),
            first_offset: i64_at(10),
            last_offset: i64_at(18),
            last_stable_offset: i64_at(26),
        })
    }
}

/// The `.txnindex` of the segment with this base offset.
pub(crate) fn path(dir: &Path, base_offset: i64) -> PathBuf {
    dir.join(format!("{}.txnindex", file_stem(base_offset)))
}

/// Every entry of a `.txnindex` (none when there is no file); a torn last entry is ignored.
pub fn read_entries(path: &Path) -> Result<Vec<AbortedTxn>, LogError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(LogError::Io {
                op: "read",
                path: path.to_owned(),
                source: e,
            })
        }
    };
    Ok(bytes
        .chunks_exact(ENTRY_SIZE)
        .filter_map(|chunk| AbortedTxn::decode(chunk.try_into().expect("exact chunk")))
        .collect())
}

/// Appends one entry.
pub(crate) fn append(path: &Path, txn: &AbortedTxn) -> Result<(), LogError> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(LogError::io("open", path))?;
    file.write_all(&txn.encode())
        .map_err(LogError::io("write", path))
}

/// Makes the file hold exactly `entries` (removed when there are none); untouched when it
/// already does.
pub(crate) fn write_exactly(path: &Path, entries: &[AbortedTxn]) -> Result<(), LogError> {
    let wanted: Vec<u8> = entries.iter().flat_map(|e| e.encode()).collect();
    let current = match std::fs::read(path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(LogError::Io {
                op: "read",
                path: path.to_owned(),
                source: e,
            })
        }
    };
    match current {
        None if wanted.is_empty() => Ok(()),
        Some(bytes) if bytes == wanted => Ok(()),
        Some(_) if wanted.is_empty() => remove(path),
        _ => std::fs::write(path, &wanted).map_err(LogError::io("write", path)),
    }
}

/// Removes the file if there is one.
pub(crate) fn remove(path: &Path) -> Result<(), LogError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(LogError::Io {
            op: "remove",
            path: path.to_owned(),
            source: e,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_have_kafkas_34_byte_layout_and_round_trip() {
        let txn = AbortedTxn {
            producer_id: 0x0102030405060708,
            first_offset: 10,
            last_offset: 20,
            last_stable_offset: 21,
        };
        let bytes = txn.encode();
        assert_eq!(bytes.len(), 34);
        assert_eq!(&bytes[0..2], &[0, 0]);
        assert_eq!(&bytes[2..10], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&bytes[26..34], &21i64.to_be_bytes());
        assert_eq!(AbortedTxn::decode(&bytes), Some(txn));
        let dir = tempfile::tempdir().unwrap();
        let p = path(dir.path(), 0);
        assert!(p.ends_with("00000000000000000000.txnindex"));
        assert!(read_entries(&p).unwrap().is_empty());
        append(&p, &txn).unwrap();
        append(&p, &txn).unwrap();
        assert_eq!(read_entries(&p).unwrap(), vec![txn, txn]);
        write_exactly(&p, &[txn]).unwrap();
        assert_eq!(std::fs::read(&p).unwrap().len(), 34);
        write_exactly(&p, &[]).unwrap();
        assert!(!p.exists());
    }
}
