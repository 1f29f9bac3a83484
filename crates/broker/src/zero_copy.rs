//! Zero-copy Fetch (Kafka's `FileRecords.writeTo`): on a PLAINTEXT connection a consumer's
//! records go from the page cache to the socket with `sendfile(2)` (the `rustix` crate's
//! safe wrapper; the workspace forbids unsafe code), never through the broker's memory.
//!
//! The response is still encoded by `kafka-protocol`: the Fetch handler puts a 16-byte
//! marker where each partition's records go ([`attach`]), and after encoding the connection
//! cuts the frame at the markers ([`splice`]): the bytes before each marker, the records
//! field's length prefix rewritten to the region's length, the file region, and so on; the
//! frame's size prefix is corrected for the difference. A marker is a per-process random
//! salt and a counter, so it cannot occur elsewhere in a response by chance.
//!
//! Where zero-copy is off (TLS connections later, `fetch.zero.copy.enable=false`, Fetch v0-3
//! down-conversion, followers) the handler reads the records into memory as before.

use std::cell::RefCell;
use std::future::Future;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use bytes::{BufMut, Bytes, BytesMut};
use storage::log::FileRegion;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;

const MARKER_BYTES: usize = 16;

/// The file regions attached to a response, each with the marker encoded in its place.
pub(crate) type Regions = Vec<([u8; MARKER_BYTES], FileRegion)>;

type Attached = RefCell<Option<Regions>>;

tokio::task_local! {
    static ATTACHED: Attached;
}

/// Runs a request's handler with zero-copy on (`enabled`) or off; returns the regions it
/// attached, in the order their markers appear.
pub(crate) async fn scope<F: Future>(enabled: bool, handler: F) -> (F::Output, Regions) {
    let attached: Attached = RefCell::new(enabled.then(Vec::new));
    ATTACHED
        .scope(attached, async {
            let output = handler.await;
            let regions = ATTACHED.with(|a| a.borrow_mut().take().unwrap_or_default());
            (output, regions)
        })
        .await
}

/// Whether the request being handled may send records with `sendfile`.
pub(crate) fn enabled() -> bool {
    ATTACHED.try_with(|a| a.borrow().is_some()).unwrap_or(false)
}

/// Registers `region` to be sent from the file; returns the marker to encode in its place.
/// Only call when [`enabled`].
pub(crate) fn attach(region: FileRegion) -> Bytes {
    let marker = next_marker();
    let _ = ATTACHED.try_with(|a| {
        if let Some(list) = a.borrow_mut().as_mut() {
            list.push((marker, region));
        }
    });
    Bytes::copy_from_slice(&marker)
}

/// How many record bytes `records` (a partition's records field of the response being
/// built) stands for: the region's length when it is one of this request's markers, else
/// its own length. For the bytes-out counters.
pub(crate) fn records_len(records: &[u8]) -> usize {
    if records.len() == MARKER_BYTES {
        let region = ATTACHED.try_with(|a| {
            a.borrow().as_ref().and_then(|list| {
                list.iter()
                    .find(|(marker, _)| marker[..] == *records)
                    .map(|(_, region)| region.len)
            })
        });
        if let Ok(Some(len)) = region {
            return len;
        }
    }
    records.len()
}

fn next_marker() -> [u8; MARKER_BYTES] {
    static SALT: OnceLock<[u8; 8]> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let salt = SALT.get_or_init(|| {
        let random = uuid::Uuid::new_v4();
        random.as_bytes()[..8].try_into().expect("8 bytes")
    });
    let mut marker = [0u8; MARKER_BYTES];
    marker[..8].copy_from_slice(salt);
    marker[8..].copy_from_slice(&COUNTER.fetch_add(1, Ordering::Relaxed).to_be_bytes());
    marker
}

/// One piece of a response frame on the wire.
#[derive(Debug)]
pub(crate) enum Chunk {
    Bytes(Bytes),
    File(FileRegion),
}

/// Why a frame could not be cut at its markers (a bug: the connection closes).
#[derive(Debug, thiserror::Error)]
#[error("zero-copy Fetch: {0}")]
pub(crate) struct SpliceError(String);

/// Cuts an encoded Fetch response `frame` (size prefix included) at the markers of
/// `regions`: the chunks to write, in order. `flexible` is Fetch v12+, whose records field
/// has a varint length (+1); older versions have an int32.
pub(crate) fn splice(
    mut frame: BytesMut,
    regions: Regions,
    flexible: bool,
) -> Result<Vec<Chunk>, SpliceError> {
    let old_prefix: &[u8] = if flexible {
        &[MARKER_BYTES as u8 + 1]
    } else {
        &[0, 0, 0, MARKER_BYTES as u8]
    };
    let mut size = i64::from(i32::from_be_bytes(
        frame
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| SpliceError("frame shorter than its size".into()))?,
    ));
    // (start of the bytes before the region, end of its new length prefix, the region)
    let mut spans = Vec::with_capacity(regions.len());
    let mut cursor = 0;
    for (marker, region) in regions {
        let at = find(&frame[cursor..], &marker)
            .map(|i| cursor + i)
            .ok_or_else(|| SpliceError("a marker is missing from the encoded response".into()))?;
        let prefix_at = at
            .checked_sub(old_prefix.len())
            .filter(|&p| p >= cursor.max(4) && &frame[p..at] == old_prefix)
            .ok_or_else(|| SpliceError("a marker is not preceded by its records length".into()))?;
        let mut prefix = BytesMut::with_capacity(5);
        if flexible {
            put_unsigned_varint(&mut prefix, region.len as u64 + 1);
        } else {
            let len =
                i32::try_from(region.len).map_err(|_| SpliceError("records over 2 GiB".into()))?;
            prefix.put_i32(len);
        }
        size += (prefix.len() + region.len) as i64 - (old_prefix.len() + MARKER_BYTES) as i64;
        // The new prefix (at most 5 bytes) overwrites the old one and the marker (17 or 20),
        // so the bytes before a region and its prefix leave as one chunk, with no copy.
        frame[prefix_at..prefix_at + prefix.len()].copy_from_slice(&prefix);
        spans.push((cursor, prefix_at + prefix.len(), region));
        cursor = at + MARKER_BYTES;
    }
    let size = i32::try_from(size).map_err(|_| SpliceError("response larger than 2 GiB".into()))?;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    let frame = frame.freeze();
    let mut chunks = Vec::with_capacity(spans.len() * 2 + 1);
    for (from, to, region) in spans {
        chunks.push(Chunk::Bytes(frame.slice(from..to)));
        chunks.push(Chunk::File(region));
    }
    chunks.push(Chunk::Bytes(frame.slice(cursor..)));
    Ok(chunks)
}

/// Writes `chunks` to `stream`, file regions with `sendfile`.
///
/// The socket is corked (`TCP_CORK`) while a frame with file regions goes out, so the bytes
/// before a region leave in the same segment as its first records and the frame's tail with
/// its last ones, instead of as small segments of their own (the connection has
/// `TCP_NODELAY`); uncorking sends what is left at once.
pub(crate) async fn write(stream: &mut TcpStream, chunks: &[Chunk]) -> io::Result<()> {
    let cork = chunks.iter().any(|c| matches!(c, Chunk::File(_)));
    if cork {
        socket2::SockRef::from(&*stream).set_tcp_cork(true)?;
    }
    let written = write_chunks(stream, chunks).await;
    if cork {
        socket2::SockRef::from(&*stream).set_tcp_cork(false)?;
    }
    written
}

async fn write_chunks(stream: &mut TcpStream, chunks: &[Chunk]) -> io::Result<()> {
    for chunk in chunks {
        match chunk {
            Chunk::Bytes(bytes) => stream.write_all(bytes).await?,
            Chunk::File(region) => send_file(stream, region).await?,
        }
    }
    Ok(())
}

async fn send_file(stream: &TcpStream, region: &FileRegion) -> io::Result<()> {
    let mut offset = region.position;
    let end = region.position + region.len as u64;
    while offset < end {
        stream.writable().await?;
        let remaining = (end - offset) as usize;
        match stream.try_io(Interest::WRITABLE, || {
            rustix::fs::sendfile(stream, &*region.file, Some(&mut offset), remaining)
                .map_err(io::Error::from)
        }) {
            // The file is shorter than when the region was taken (truncated): the frame
            // cannot be completed; the connection closes and the client fetches again.
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("{} shrank while it was being sent", region.path.display()),
                ))
            }
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn put_unsigned_varint(out: &mut BytesMut, mut value: u64) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::Arc;
    use tokio::io::AsyncReadExt;

    /// A frame of Fetch v4 shape with two records fields (int32 length, marker), the file
    /// regions they stand for, and the frame the copying path would send.
    fn frame_and_regions(
        file: &Arc<std::fs::File>,
        path: &Arc<std::path::Path>,
        content: &[u8],
    ) -> (BytesMut, Regions, Vec<u8>) {
        let pieces: [(&[u8], u64, usize); 2] = [(b"head-bytes", 3, 5000), (b"between", 6000, 70)];
        let (mut frame, mut expected) = (BytesMut::new(), Vec::new());
        let mut regions = Vec::new();
        for (bytes, position, len) in pieces {
            let marker = next_marker();
            frame.extend_from_slice(bytes);
            frame.put_i32(MARKER_BYTES as i32);
            frame.extend_from_slice(&marker);
            expected.extend_from_slice(bytes);
            expected.extend_from_slice(&(len as i32).to_be_bytes());
            expected.extend_from_slice(&content[position as usize..position as usize + len]);
            let region = FileRegion {
                file: Arc::clone(file),
                path: Arc::clone(path),
                position,
                len,
            };
            regions.push((marker, region));
        }
        frame.extend_from_slice(b"tail");
        expected.extend_from_slice(b"tail");
        let mut framed = BytesMut::new();
        framed.put_i32(frame.len() as i32);
        framed.extend_from_slice(&frame);
        let mut with_size = (expected.len() as i32).to_be_bytes().to_vec();
        with_size.extend_from_slice(&expected);
        (framed, regions, with_size)
    }

    #[tokio::test]
    async fn a_spliced_frame_goes_out_whole_in_one_send_per_piece_and_uncorked() {
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<std::path::Path> = Arc::from(dir.path().join("segment.log"));
        let content: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::File::create(&*path)
            .unwrap()
            .write_all(&content)
            .unwrap();
        let file = Arc::new(std::fs::File::open(&*path).unwrap());
        let (frame, regions, expected) = frame_and_regions(&file, &path, &content);

        let chunks = splice(frame, regions, false).unwrap();
        // The bytes before each region and its length go out as one chunk.
        let kinds: Vec<&str> = chunks
            .iter()
            .map(|c| match c {
                Chunk::Bytes(_) => "bytes",
                Chunk::File(_) => "file",
            })
            .collect();
        assert_eq!(kinds, ["bytes", "file", "bytes", "file", "bytes"]);

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        server.set_nodelay(true).unwrap();
        write(&mut server, &chunks).await.unwrap();
        // Uncorked again: a later small response is not held back.
        assert!(!socket2::SockRef::from(&server).tcp_cork().unwrap());
        let mut got = vec![0u8; expected.len()];
        client.read_exact(&mut got).await.unwrap();
        assert_eq!(got, expected);
    }

    #[test]
    fn a_marker_without_its_records_length_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path: Arc<std::path::Path> = Arc::from(dir.path().join("segment.log"));
        std::fs::write(&*path, [0u8; 16]).unwrap();
        let file = Arc::new(std::fs::File::open(&*path).unwrap());
        let marker = next_marker();
        let mut frame = BytesMut::new();
        frame.put_i32(MARKER_BYTES as i32 + 2);
        frame.extend_from_slice(&[0, 0]);
        frame.extend_from_slice(&marker);
        let region = FileRegion {
            file,
            path,
            position: 0,
            len: 16,
        };
        let err = splice(frame, vec![(marker, region)], false).unwrap_err();
        assert!(err.to_string().contains("records length"), "{err}");
    }

    #[test]
    fn varints_are_kafkas() {
        for (value, bytes) in [
            (0u64, vec![0u8]),
            (17, vec![17]),
            (127, vec![127]),
            (128, vec![0x80, 1]),
            (1_048_577, vec![0x81, 0x80, 0x40]),
        ] {
            let mut out = BytesMut::new();
            put_unsigned_varint(&mut out, value);
            assert_eq!(&out[..], &bytes[..], "{value}");
        }
    }
}
