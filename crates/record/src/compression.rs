//! Decompressing a batch's records section, never past a caller-given cap.
//!
//! Every codec is read as a stream into a buffer that grows as bytes arrive,
//! so no allocation is sized from a length the peer wrote; the stream is cut
//! one byte past the cap and the batch refused if it got there. The formats
//! are the ones Kafka's clients write for magic v2:
//!
//! | id | codec  | format |
//! |----|--------|--------|
//! | 1  | gzip   | RFC 1952 members (Java's `GZIPOutputStream`, librdkafka's zlib) |
//! | 2  | snappy | xerial framing (`\x82SNAPPY\0`, then `[len i32][raw block]`…) as the Java client writes it, or one raw snappy block as librdkafka writes it |
//! | 3  | lz4    | the LZ4 frame format (Kafka's `Lz4BlockOutputStream`, librdkafka's LZ4F) |
//! | 4  | zstd   | zstd frames |
//!
//! The decoders' own working memory is bounded by their formats: an lz4
//! block is at most 4 MiB, a snappy block is checked against the cap before
//! it is allocated, and zstd's window is limited to [`ZSTD_WINDOW_LOG_MAX`]
//! (or the cap's size, if larger, never past 2^27).

use std::io::Read;

use crate::batch::BatchError;

/// The most bytes a batch's records section may decompress to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecompressLimit {
    pub bytes_max: usize,
}

/// Compression codec ids carried in a batch's attributes.
pub const CODEC_NONE: u8 = 0;
pub const CODEC_GZIP: u8 = 1;
pub const CODEC_SNAPPY: u8 = 2;
pub const CODEC_LZ4: u8 = 3;
pub const CODEC_ZSTD: u8 = 4;

/// The xerial snappy stream header: magic, then version 1 and
/// min-compatible version 1 (both i32).
pub const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
const XERIAL_HEADER_BYTES: usize = 16;

/// zstd windows up to 8 MiB are always accepted (a streaming compressor
/// at level 19 asks for this much even for small input).
pub const ZSTD_WINDOW_LOG_MAX: u32 = 23;
const ZSTD_WINDOW_LOG_CEILING: u32 = 27;

/// Decompresses `payload` (a batch's records section) written with `codec`.
pub fn decompress(codec: u8, payload: &[u8], limit: DecompressLimit) -> Result<Vec<u8>, BatchError> {
    match codec {
        CODEC_GZIP => read_capped(flate2::read::MultiGzDecoder::new(payload), limit, "gzip"),
        CODEC_SNAPPY => decompress_snappy(payload, limit),
        CODEC_LZ4 => read_capped(lz4_flex::frame::FrameDecoder::new(payload), limit, "lz4"),
        CODEC_ZSTD => {
            let mut decoder = zstd::stream::read::Decoder::new(payload).map_err(|e| corrupt("zstd", &e.to_string()))?;
            decoder.window_log_max(zstd_window_log_max(limit)).map_err(|e| corrupt("zstd", &e.to_string()))?;
            read_capped(decoder, limit, "zstd")
        }
        other => Err(BatchError::UnknownCompression(other)),
    }
}

fn zstd_window_log_max(limit: DecompressLimit) -> u32 {
    let needed = usize::BITS - limit.bytes_max.saturating_sub(1).leading_zeros();
    needed.clamp(ZSTD_WINDOW_LOG_MAX, ZSTD_WINDOW_LOG_CEILING)
}

fn corrupt(codec: &'static str, reason: &str) -> BatchError {
    BatchError::Decompression { codec, reason: reason.to_owned() }
}

/// Reads a decoder to its end, refusing once more than the cap came out.
fn read_capped(decoder: impl Read, limit: DecompressLimit, codec: &'static str) -> Result<Vec<u8>, BatchError> {
    let mut out = Vec::new();
    let cap_plus_one = (limit.bytes_max as u64).saturating_add(1);
    decoder.take(cap_plus_one).read_to_end(&mut out).map_err(|e| corrupt(codec, &e.to_string()))?;
    if out.len() > limit.bytes_max {
        return Err(BatchError::DecompressedTooLarge { codec, bytes_max: limit.bytes_max });
    }
    Ok(out)
}

fn decompress_snappy(payload: &[u8], limit: DecompressLimit) -> Result<Vec<u8>, BatchError> {
    if !payload.starts_with(XERIAL_MAGIC) {
        let mut out = Vec::new();
        append_snappy_block(payload, limit, &mut out)?;
        return Ok(out);
    }
    if payload.len() < XERIAL_HEADER_BYTES {
        return Err(corrupt("snappy", "xerial header truncated"));
    }
    let mut rest = &payload[XERIAL_HEADER_BYTES..];
    let mut out = Vec::new();
    while !rest.is_empty() {
        let Some((len, after)) = rest.split_first_chunk::<4>() else {
            return Err(corrupt("snappy", "xerial chunk length truncated"));
        };
        let len = i32::from_be_bytes(*len);
        if len < 0 || len as usize > after.len() {
            return Err(corrupt("snappy", "xerial chunk runs past the batch"));
        }
        let (block, next) = after.split_at(len as usize);
        append_snappy_block(block, limit, &mut out)?;
        rest = next;
    }
    Ok(out)
}

/// Decodes one raw snappy block onto `out`, checking its declared length
/// against what the cap still allows before allocating for it.
fn append_snappy_block(block: &[u8], limit: DecompressLimit, out: &mut Vec<u8>) -> Result<(), BatchError> {
    let len = snap::raw::decompress_len(block).map_err(|e| corrupt("snappy", &e.to_string()))?;
    if len > limit.bytes_max.saturating_sub(out.len()) {
        return Err(BatchError::DecompressedTooLarge { codec: "snappy", bytes_max: limit.bytes_max });
    }
    let start = out.len();
    out.resize(start + len, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut out[start..])
        .map_err(|e| corrupt("snappy", &e.to_string()))?;
    if written != len {
        return Err(corrupt("snappy", "block shorter than its declared length"));
    }
    Ok(())
}

/// Encoders for each codec in the format a Kafka client writes: for tests,
/// the benchmark, [`crate::build::encode_compressed_batch`] and the log
/// cleaner (which recompresses the batches it rewrites with their codec).
/// The produce path never compresses.
pub mod encode {
    use std::io::Write;

    use super::*;

    /// Compresses a records section with `codec`.
    pub fn compress(codec: u8, records: &[u8]) -> Vec<u8> {
        match codec {
            CODEC_GZIP => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(records).expect("in-memory write");
                e.finish().expect("in-memory write")
            }
            CODEC_SNAPPY => xerial_snappy(records, 32 * 1024),
            CODEC_LZ4 => {
                let mut e = lz4_flex::frame::FrameEncoder::new(Vec::new());
                e.write_all(records).expect("in-memory write");
                e.finish().expect("in-memory write")
            }
            CODEC_ZSTD => zstd::stream::encode_all(records, 3).expect("in-memory write"),
            other => panic!("no encoder for codec {other}"),
        }
    }

    /// One raw snappy block, as librdkafka writes it.
    pub fn raw_snappy(records: &[u8]) -> Vec<u8> {
        snap::raw::Encoder::new().compress_vec(records).expect("snappy input fits")
    }

    /// The xerial framing the Java client writes, in chunks of `chunk_bytes`.
    pub fn xerial_snappy(records: &[u8], chunk_bytes: usize) -> Vec<u8> {
        let mut out = XERIAL_MAGIC.to_vec();
        out.extend_from_slice(&1i32.to_be_bytes());
        out.extend_from_slice(&1i32.to_be_bytes());
        for chunk in records.chunks(chunk_bytes.max(1)) {
            let block = raw_snappy(chunk);
            out.extend_from_slice(&(block.len() as i32).to_be_bytes());
            out.extend_from_slice(&block);
        }
        out
    }
}
