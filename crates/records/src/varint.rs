//! Zigzag varints and varlongs as the v2 record format writes them (protobuf's encoding):
//! a varint is at most 5 bytes, a varlong at most 10, as Kafka's `ByteUtils` enforces.

/// Why a varint could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VarintError {
    /// The bytes ran out inside the number.
    Eof,
    /// More continuation bytes than the type allows.
    TooLong,
}

/// Reads a zigzag varint (i32) at `*pos` and moves `*pos` past it.
#[inline]
pub(crate) fn read_varint(buf: &[u8], pos: &mut usize) -> Result<i32, VarintError> {
    let mut value: u32 = 0;
    for i in 0..5 {
        let Some(&byte) = buf.get(*pos) else {
            return Err(VarintError::Eof);
        };
        *pos += 1;
        value |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(((value >> 1) as i32) ^ -((value & 1) as i32));
        }
    }
    Err(VarintError::TooLong)
}

/// Reads a zigzag varlong (i64) at `*pos` and moves `*pos` past it.
#[inline]
pub(crate) fn read_varlong(buf: &[u8], pos: &mut usize) -> Result<i64, VarintError> {
    let mut value: u64 = 0;
    for i in 0..10 {
        let Some(&byte) = buf.get(*pos) else {
            return Err(VarintError::Eof);
        };
        *pos += 1;
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(((value >> 1) as i64) ^ -((value & 1) as i64));
        }
    }
    Err(VarintError::TooLong)
}

/// Appends `v` as a zigzag varint.
pub(crate) fn write_varint(out: &mut Vec<u8>, v: i32) {
    let mut z = ((v << 1) ^ (v >> 31)) as u32;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Appends `v` as a zigzag varlong.
pub(crate) fn write_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Bytes `v` takes as a zigzag varint.
pub(crate) fn varint_size(v: i32) -> usize {
    let mut z = ((v << 1) ^ (v >> 31)) as u32;
    let mut n = 1;
    while z >= 0x80 {
        z >>= 7;
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_limits() {
        for v in [0, 1, -1, 63, -64, 64, 300, i32::MAX, i32::MIN] {
            let mut out = Vec::new();
            write_varint(&mut out, v);
            assert_eq!(out.len(), varint_size(v));
            let mut pos = 0;
            assert_eq!(read_varint(&out, &mut pos), Ok(v));
            assert_eq!(pos, out.len());
        }
        for v in [0i64, -1, i64::MAX, i64::MIN, 1 << 40] {
            let mut out = Vec::new();
            write_varlong(&mut out, v);
            let mut pos = 0;
            assert_eq!(read_varlong(&out, &mut pos), Ok(v));
        }
        let mut pos = 0;
        assert_eq!(read_varint(&[0x80; 6], &mut pos), Err(VarintError::TooLong));
        let mut pos = 0;
        assert_eq!(read_varint(&[0x80, 0x80], &mut pos), Err(VarintError::Eof));
    }
}
