//! Size-prefixed frames: every Kafka request and response is a big-endian `int32` length
//! followed by that many bytes.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Kafka's `socket.request.max.bytes` default (100 MiB).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 104_857_600;

/// Length of the size prefix.
pub const SIZE_PREFIX_BYTES: usize = 4;

/// Why a byte stream is not a valid sequence of frames. The connection cannot be resynchronised
/// after any of these, so the caller closes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The size prefix is negative.
    #[error("frame size {0} is negative")]
    NegativeSize(i32),
    /// The frame is larger than `socket.request.max.bytes`.
    #[error("frame of {size} bytes is larger than socket.request.max.bytes ({max})")]
    TooLarge {
        /// Announced size.
        size: usize,
        /// The configured limit.
        max: usize,
    },
}

/// The size of the frame at the front of `buf` once its size prefix is there (`Ok(None)`
/// before), checked like [`decode_frame`] checks it: a reader can make room for the whole
/// frame before reading its body.
pub fn peek_frame_size(buf: &[u8], max_bytes: usize) -> Result<Option<usize>, FrameError> {
    let Some(prefix) = buf.get(..SIZE_PREFIX_BYTES) else {
        return Ok(None);
    };
    let size = i32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
    let size = usize::try_from(size).map_err(|_| FrameError::NegativeSize(size))?;
    if size > max_bytes {
        return Err(FrameError::TooLarge {
            size,
            max: max_bytes,
        });
    }
    Ok(Some(size))
}

/// Takes one complete frame's body off the front of `buf`, or returns `Ok(None)` if more
/// bytes are needed. A frame over `max_bytes` is refused before it is buffered.
pub fn decode_frame(buf: &mut BytesMut, max_bytes: usize) -> Result<Option<Bytes>, FrameError> {
    let Some(size) = peek_frame_size(buf, max_bytes)? else {
        return Ok(None);
    };
    if buf.len() < SIZE_PREFIX_BYTES + size {
        buf.reserve(SIZE_PREFIX_BYTES + size - buf.len());
        return Ok(None);
    }
    buf.advance(SIZE_PREFIX_BYTES);
    Ok(Some(buf.split_to(size).freeze()))
}

/// Prefixes `body` with its size.
pub fn encode_frame(body: &[u8]) -> BytesMut {
    let mut out = BytesMut::with_capacity(SIZE_PREFIX_BYTES + body.len());
    out.put_i32(i32::try_from(body.len()).expect("frame bodies stay far below 2 GiB"));
    out.put_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn waits_for_whole_frame() {
        let mut buf = BytesMut::from(&[0u8, 0, 0, 3, 1, 2][..]);
        assert_eq!(decode_frame(&mut buf, 100), Ok(None));
        buf.put_u8(3);
        assert_eq!(
            decode_frame(&mut buf, 100).unwrap().unwrap().as_ref(),
            &[1, 2, 3]
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn refuses_oversized_and_negative() {
        let mut buf = BytesMut::from(&[0u8, 0, 1, 0][..]);
        assert_eq!(
            decode_frame(&mut buf, 255),
            Err(FrameError::TooLarge {
                size: 256,
                max: 255
            })
        );
        let mut buf = BytesMut::from(&[0xffu8, 0xff, 0xff, 0xff][..]);
        assert_eq!(
            decode_frame(&mut buf, 255),
            Err(FrameError::NegativeSize(-1))
        );
    }

    proptest! {
        #[test]
        fn frames_round_trip(bodies in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..8)) {
            let mut stream = BytesMut::new();
            for body in &bodies {
                stream.extend_from_slice(&encode_frame(body));
            }
            let mut decoded = Vec::new();
            while let Some(frame) = decode_frame(&mut stream, 1024).unwrap() {
                decoded.push(frame.to_vec());
            }
            prop_assert_eq!(decoded, bodies);
            prop_assert!(stream.is_empty());
        }
    }
}
