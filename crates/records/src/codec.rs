//! The codec layer: gzip, snappy, lz4 and zstd, decode and encode, in the framings Kafka's
//! clients write inside a record batch (or a magic 0/1 wrapper message).
//!
//! | codec | framing | crate |
//! | --- | --- | --- |
//! | gzip (1) | RFC 1952 members, concatenated members accepted | `flate2` on `miniz_oxide` (Rust backend) |
//! | snappy (2) | xerial `snappy-java` stream: 16-byte header, then `u32` length + raw snappy block per chunk; a plain raw snappy payload (no header) is read too, as snappy-java does | `snap` (raw blocks) |
//! | lz4 (3) | LZ4 frame format, independent blocks, as `KafkaLZ4BlockOutputStream` writes it: 64 KiB blocks, no block or content checksum; the header checksum byte is the frame format's (Kafka 0.10+) except under magic 0, whose writers hashed the magic number too | `lz4_flex` (blocks; the frame is ours), `twox-hash` |
//! | zstd (4) | zstd frames, several frames and skippable frames accepted | `ruzstd` |
//!
//! Everything here is pure Rust so that the server build needs no C toolchain. For zstd the
//! choice was `ruzstd` over the `zstd` crate (bindings to the C libzstd, built with `cc`):
//! `ruzstd` decodes every zstd frame (it is tested against the reference decoder's corpus)
//! at roughly half the reference decoder's speed, which the broker pays only on compressed
//! produce and in the cleaner; its encoder has one level, roughly libzstd level 1, which is
//! what the broker needs when it re-encodes (topic `compression.type=zstd`, the cleaner
//! keeping a batch's codec). Producers keep whatever ratio they chose; only batches the broker
//! itself writes get level-1 ratios.
//!
//! Decoding is bounded: the decompressed size of one payload may not exceed the caller's
//! limit ([`MAX_DECOMPRESSED_BYTES`] on every broker path), so a small "decompression bomb"
//! cannot make the broker allocate without bound.

use std::io::{Read, Write};

use crate::Compression;

/// The most bytes one compressed payload may decompress to on any broker path (produce
/// validation, the cleaner, down-conversion, time lookups). Kafka streams records and has no
/// such bound; ours keeps memory per batch bounded (invariant 8) at a size no real producer
/// batch approaches (librdkafka and the Java client close a batch at about 1 MB of records).
pub const MAX_DECOMPRESSED_BYTES: usize = 64 * 1024 * 1024;

/// Why a payload could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{codec:?} payload cannot be decompressed: {reason}")]
pub struct CodecError {
    pub codec: Compression,
    pub reason: String,
}

fn err(codec: Compression, reason: impl Into<String>) -> CodecError {
    CodecError {
        codec,
        reason: reason.into(),
    }
}

/// Decompresses a whole payload (the bytes after a v2 batch header, or a wrapper message's
/// value). `magic` matters only for lz4 (magic 0's broken header checksum). Refuses output
/// larger than `limit` bytes.
pub fn decompress(
    codec: Compression,
    data: &[u8],
    magic: i8,
    limit: usize,
) -> Result<Vec<u8>, CodecError> {
    match codec {
        Compression::None => {
            if data.len() > limit {
                return Err(err(codec, too_large(limit)));
            }
            Ok(data.to_vec())
        }
        Compression::Gzip => {
            let decoder = flate2::read::MultiGzDecoder::new(data);
            read_bounded(codec, decoder, limit)
        }
        Compression::Snappy => snappy_decompress(data, limit),
        Compression::Lz4 => lz4_decompress(data, magic == 0, limit),
        Compression::Zstd => zstd_decompress(data, limit),
    }
}

/// Compresses `data` with `codec` in Kafka's framing (see the module table).
pub fn compress(codec: Compression, data: &[u8], magic: i8) -> Vec<u8> {
    match codec {
        Compression::None => data.to_vec(),
        Compression::Gzip => {
            let mut encoder = flate2::write::GzEncoder::new(
                Vec::with_capacity(data.len() / 2 + 64),
                flate2::Compression::default(),
            );
            encoder.write_all(data).expect("writing to a Vec");
            encoder.finish().expect("writing to a Vec")
        }
        Compression::Snappy => snappy_compress(data),
        Compression::Lz4 => lz4_compress(data, magic == 0),
        Compression::Zstd => {
            ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
        }
    }
}

fn too_large(limit: usize) -> String {
    format!("it decompresses to more than {limit} bytes")
}

fn read_bounded(
    codec: Compression,
    reader: impl Read,
    limit: usize,
) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::new();
    let mut bounded = reader.take(limit as u64 + 1);
    bounded
        .read_to_end(&mut out)
        .map_err(|e| err(codec, e.to_string()))?;
    if out.len() > limit {
        return Err(err(codec, too_large(limit)));
    }
    Ok(out)
}

// ---- snappy (xerial snappy-java framing) ----

const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const XERIAL_HEADER: usize = 16;
/// snappy-java's default block size.
const XERIAL_BLOCK: usize = 32 * 1024;

fn snappy_decompress(data: &[u8], limit: usize) -> Result<Vec<u8>, CodecError> {
    let codec = Compression::Snappy;
    let mut decoder = snap::raw::Decoder::new();
    let mut raw = |block: &[u8], out: &mut Vec<u8>| -> Result<(), CodecError> {
        let n = snap::raw::decompress_len(block).map_err(|e| err(codec, e.to_string()))?;
        if out.len() + n > limit {
            return Err(err(codec, too_large(limit)));
        }
        let start = out.len();
        out.resize(start + n, 0);
        let written = decoder
            .decompress(block, &mut out[start..])
            .map_err(|e| err(codec, e.to_string()))?;
        out.truncate(start + written);
        Ok(())
    };
    let mut out = Vec::new();
    if data.len() >= XERIAL_HEADER && data[..8] == XERIAL_MAGIC {
        let mut pos = XERIAL_HEADER;
        while pos < data.len() {
            let Some(len) = data.get(pos..pos + 4) else {
                return Err(err(codec, "truncated xerial chunk length"));
            };
            let len = u32::from_be_bytes(len.try_into().expect("4 bytes")) as usize;
            pos += 4;
            let Some(block) = data.get(pos..pos.saturating_add(len)) else {
                return Err(err(
                    codec,
                    format!("xerial chunk of {len} bytes runs past the payload"),
                ));
            };
            raw(block, &mut out)?;
            pos += len;
        }
    } else {
        raw(data, &mut out)?;
    }
    Ok(out)
}

fn snappy_compress(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(XERIAL_HEADER + data.len() / 2 + 64);
    out.extend_from_slice(&XERIAL_MAGIC);
    out.extend_from_slice(&1i32.to_be_bytes()); // version
    out.extend_from_slice(&1i32.to_be_bytes()); // minimum compatible version
    let mut encoder = snap::raw::Encoder::new();
    let mut block = vec![0u8; snap::raw::max_compress_len(XERIAL_BLOCK)];
    for chunk in data.chunks(XERIAL_BLOCK) {
        let n = encoder
            .compress(chunk, &mut block)
            .expect("the block buffer has max_compress_len bytes");
        out.extend_from_slice(&(n as u32).to_be_bytes());
        out.extend_from_slice(&block[..n]);
    }
    out
}

// ---- lz4 (frame format, Kafka's KafkaLZ4Block{In,Out}putStream) ----

const LZ4_MAGIC: u32 = 0x184D_2204;
const LZ4_UNCOMPRESSED_BIT: u32 = 0x8000_0000;
/// FLG: version 01, independent blocks, no block checksum, no content size or checksum.
const LZ4_FLG: u8 = 0b0110_0000;
/// BD: 64 KiB maximum block size (code 4).
const LZ4_BD_64K: u8 = 4 << 4;
const LZ4_BLOCK: usize = 64 * 1024;

fn xxh32(data: &[u8]) -> u32 {
    twox_hash::XxHash32::oneshot(0, data)
}

fn lz4_decompress(data: &[u8], broken_hc: bool, limit: usize) -> Result<Vec<u8>, CodecError> {
    let codec = Compression::Lz4;
    let eos = || err(codec, "premature end of the lz4 frame");
    if data.len() < 7 {
        return Err(eos());
    }
    let magic = u32::from_le_bytes(data[0..4].try_into().expect("4 bytes"));
    if magic != LZ4_MAGIC {
        return Err(err(
            codec,
            format!("not an lz4 frame (magic {magic:#010x})"),
        ));
    }
    let flg = data[4];
    let bd = data[5];
    if flg >> 6 != 1 {
        return Err(err(
            codec,
            format!("lz4 frame version {} is not supported", flg >> 6),
        ));
    }
    if flg & 0b10 != 0 || bd & 0b1000_1111 != 0 {
        return Err(err(codec, "reserved lz4 frame descriptor bits are set"));
    }
    if flg & 0b0010_0000 == 0 {
        return Err(err(codec, "dependent lz4 block streams are not supported"));
    }
    let block_checksum = flg & 0b0001_0000 != 0;
    let content_size = flg & 0b0000_1000 != 0;
    let content_checksum = flg & 0b0000_0100 != 0;
    let dict_id = flg & 0b0000_0001 != 0;
    let max_block = match (bd >> 4) & 0x7 {
        4 => 64 * 1024,
        5 => 256 * 1024,
        6 => 1024 * 1024,
        7 => 4 * 1024 * 1024,
        other => {
            return Err(err(
                codec,
                format!("lz4 block maximum size code {other} is not valid"),
            ))
        }
    };
    let descriptor_end = 6 + if content_size { 8 } else { 0 } + if dict_id { 4 } else { 0 };
    let Some(&hc) = data.get(descriptor_end) else {
        return Err(eos());
    };
    if !broken_hc {
        let expected = ((xxh32(&data[4..descriptor_end]) >> 8) & 0xff) as u8;
        if hc != expected {
            return Err(err(codec, "lz4 frame descriptor checksum mismatch"));
        }
    }
    let mut pos = descriptor_end + 1;
    let mut out = Vec::new();
    loop {
        let Some(word) = data.get(pos..pos + 4) else {
            return Err(eos());
        };
        let word = u32::from_le_bytes(word.try_into().expect("4 bytes"));
        pos += 4;
        if word == 0 {
            break;
        }
        let uncompressed = word & LZ4_UNCOMPRESSED_BIT != 0;
        let size = (word & !LZ4_UNCOMPRESSED_BIT) as usize;
        if size > max_block {
            return Err(err(
                codec,
                format!("lz4 block of {size} bytes exceeds the frame's maximum {max_block}"),
            ));
        }
        let Some(block) = data.get(pos..pos + size) else {
            return Err(eos());
        };
        pos += size;
        if block_checksum {
            let Some(sum) = data.get(pos..pos + 4) else {
                return Err(eos());
            };
            pos += 4;
            if u32::from_le_bytes(sum.try_into().expect("4 bytes")) != xxh32(block) {
                return Err(err(codec, "lz4 block checksum mismatch"));
            }
        }
        let start = out.len();
        if uncompressed {
            if start + size > limit {
                return Err(err(codec, too_large(limit)));
            }
            out.extend_from_slice(block);
        } else {
            let room = max_block.min(limit.saturating_sub(start) + 1);
            out.resize(start + room, 0);
            match lz4_flex::block::decompress_into(block, &mut out[start..]) {
                Ok(n) => out.truncate(start + n),
                Err(_) if room < max_block => return Err(err(codec, too_large(limit))),
                Err(e) => return Err(err(codec, e.to_string())),
            }
            if out.len() > limit {
                return Err(err(codec, too_large(limit)));
            }
        }
    }
    if content_checksum {
        let Some(sum) = data.get(pos..pos + 4) else {
            return Err(eos());
        };
        pos += 4;
        if u32::from_le_bytes(sum.try_into().expect("4 bytes")) != xxh32(&out) {
            return Err(err(codec, "lz4 content checksum mismatch"));
        }
    }
    if pos != data.len() {
        return Err(err(
            codec,
            format!("{} bytes follow the lz4 frame", data.len() - pos),
        ));
    }
    Ok(out)
}

fn lz4_compress(data: &[u8], broken_hc: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() / 2 + 64);
    out.extend_from_slice(&LZ4_MAGIC.to_le_bytes());
    out.push(LZ4_FLG);
    out.push(LZ4_BD_64K);
    // Magic 0 writers (Kafka before 0.10) hashed the magic number with the descriptor.
    let hc = if broken_hc {
        xxh32(&out[0..6])
    } else {
        xxh32(&out[4..6])
    };
    out.push(((hc >> 8) & 0xff) as u8);
    let mut block = vec![0u8; lz4_flex::block::get_maximum_output_size(LZ4_BLOCK)];
    for chunk in data.chunks(LZ4_BLOCK) {
        let n = lz4_flex::block::compress_into(chunk, &mut block)
            .expect("the block buffer has the maximum output size");
        if n >= chunk.len() {
            out.extend_from_slice(&(chunk.len() as u32 | LZ4_UNCOMPRESSED_BIT).to_le_bytes());
            out.extend_from_slice(chunk);
        } else {
            out.extend_from_slice(&(n as u32).to_le_bytes());
            out.extend_from_slice(&block[..n]);
        }
    }
    out.extend_from_slice(&0u32.to_le_bytes());
    out
}

// ---- zstd ----

fn zstd_decompress(data: &[u8], limit: usize) -> Result<Vec<u8>, CodecError> {
    use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
    use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};
    let codec = Compression::Zstd;
    let mut decoder = FrameDecoder::new();
    decoder.set_max_window_size(limit.max(1 << 20) as u64);
    let mut input = data;
    let mut out = Vec::new();
    let mut frames = 0;
    while !input.is_empty() {
        match decoder.init(&mut input) {
            Ok(()) => {}
            Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                length,
                ..
            })) => {
                input = input
                    .get(length as usize..)
                    .ok_or_else(|| err(codec, "a skippable zstd frame runs past the payload"))?;
                continue;
            }
            Err(e) => return Err(err(codec, e.to_string())),
        }
        frames += 1;
        loop {
            decoder
                .decode_blocks(&mut input, BlockDecodingStrategy::UptoBytes(256 * 1024))
                .map_err(|e| err(codec, e.to_string()))?;
            let ready = decoder.can_collect();
            if out.len() + ready > limit {
                return Err(err(codec, too_large(limit)));
            }
            let start = out.len();
            out.resize(start + ready, 0);
            let n = decoder
                .read(&mut out[start..])
                .map_err(|e| err(codec, e.to_string()))?;
            out.truncate(start + n);
            if decoder.is_finished() && decoder.can_collect() == 0 {
                break;
            }
            if n == 0 && input.is_empty() && !decoder.is_finished() {
                return Err(err(codec, "premature end of the zstd frame"));
            }
        }
        if let (Some(stored), Some(computed)) = (
            decoder.get_checksum_from_data(),
            decoder.get_calculated_checksum(),
        ) {
            if stored != computed {
                return Err(err(codec, "zstd content checksum mismatch"));
            }
        }
    }
    if frames == 0 {
        return Err(err(codec, "no zstd frame in the payload"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    fn sample(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i % 251) as u8 ^ (i / 7) as u8).collect()
    }

    #[test]
    fn every_codec_round_trips_small_and_multi_block_payloads() {
        for codec in ALL {
            for n in [0, 1, 100, 70_000, 300_000] {
                let data = sample(n);
                for magic in [0, 1, 2] {
                    let packed = compress(codec, &data, magic);
                    let back = decompress(codec, &packed, magic, MAX_DECOMPRESSED_BYTES)
                        .unwrap_or_else(|e| panic!("{codec:?} {n} bytes: {e}"));
                    assert_eq!(back, data, "{codec:?} {n} bytes magic {magic}");
                }
            }
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for codec in ALL.into_iter().skip(1) {
            for garbage in [
                &b""[..],
                b"x",
                b"not compressed at all, just text",
                &[0xff; 64],
            ] {
                assert!(
                    decompress(codec, garbage, 2, MAX_DECOMPRESSED_BYTES).is_err(),
                    "{codec:?} accepted {garbage:?}"
                );
            }
        }
    }

    #[test]
    fn output_is_bounded() {
        let zeros = vec![0u8; 1 << 20];
        for codec in ALL {
            let packed = compress(codec, &zeros, 2);
            let e = decompress(codec, &packed, 2, 1000).expect_err("over the limit");
            assert!(e.reason.contains("more than 1000 bytes"), "{codec:?}: {e}");
        }
    }

    #[test]
    fn lz4_header_checksum_follows_the_magic() {
        let data = sample(1000);
        let proper = compress(Compression::Lz4, &data, 1);
        let broken = compress(Compression::Lz4, &data, 0);
        assert_ne!(proper[6], broken[6], "magic 0 hashes the magic number too");
        // Magic 0 readers ignore the byte (old writers); newer ones check it.
        assert!(decompress(Compression::Lz4, &broken, 1, 1 << 20).is_err());
        assert_eq!(
            decompress(Compression::Lz4, &broken, 0, 1 << 20).unwrap(),
            data
        );
    }

    #[test]
    fn raw_snappy_without_the_xerial_header_is_read() {
        let data = sample(5000);
        let raw = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        assert_eq!(
            decompress(Compression::Snappy, &raw, 2, 1 << 20).unwrap(),
            data
        );
    }

    #[test]
    fn truncated_payloads_are_refused() {
        let data = sample(100_000);
        for codec in ALL.into_iter().skip(1) {
            let packed = compress(codec, &data, 2);
            let cut = &packed[..packed.len() - 3];
            assert!(
                decompress(codec, cut, 2, 1 << 20).is_err(),
                "{codec:?} accepted a truncated payload"
            );
        }
    }
}
