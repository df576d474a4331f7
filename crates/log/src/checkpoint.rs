//! Small files replaced atomically: the recovery point, the log start offset,
//! the leader epoch history, the cleaner's checkpoints, an interrupted
//! truncation's plan and producer-state snapshots.
//!
//! Each is written by [`crate::storage::replace_file_atomically`] (`<name>.tmp`,
//! fdatasync, rename over `<name>`, fsync of the directory), so a crash
//! anywhere leaves either the old file or the new one, whole; a leftover
//! `.tmp` is removed at open. Each file ends with a CRC-32C of the
//! rest so that a file damaged by something else (a disk, a person) reads as
//! absent instead of as wrong numbers; what "absent" costs is said where each
//! file is read.
//!
//! Offset checkpoint layout (text, so an operator can read it):
//!
//! ```text
//! kafgres-checkpoint 1
//! <key> <decimal i64>        one line per value
//! crc32c <8 hex digits>      CRC-32C of every byte before this line
//! ```
//!
//! The leader epoch history ([`crate::epochs`]) uses the same header and CRC
//! line around one `epoch <E> start <S>` line per entry.

use std::path::Path;
use std::sync::Arc;

use crate::error::LogError;
use crate::storage::{replace_file_atomically, Storage};

/// Kafka's name for the same thing: the offset below which the log is known
/// to be flushed (ours also says where, see [`crate::recovery`]).
pub const RECOVERY_POINT_FILE: &str = "recovery-point-offset-checkpoint";
/// The log start offset, advanced by retention and DeleteRecords.
pub const LOG_START_FILE: &str = "log-start-offset-checkpoint";
const HEADER: &str = "kafgres-checkpoint 1\n";

/// Replaces `dir/name` with `bytes`, whole or not at all.
pub(crate) fn write_atomically(
    storage: &Arc<dyn Storage>,
    dir: &Path,
    name: &str,
    bytes: &[u8],
) -> Result<(), LogError> {
    replace_file_atomically(storage.as_ref(), &dir.join(name), bytes)
}

/// The whole contents of a file, or `None` if it does not exist.
pub(crate) fn read_whole(storage: &Arc<dyn Storage>, path: &Path, bytes_max: u64) -> Result<Option<Vec<u8>>, LogError> {
    let file = match storage.open(path, false) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::Io { path: path.to_path_buf(), source: e }),
    };
    let len = file.len().map_err(LogError::io(path))?;
    if len > bytes_max {
        log::warn!("{} is {len} bytes, more than the {bytes_max} expected; ignoring it", path.display());
        return Ok(None);
    }
    let mut buf = vec![0u8; len as usize];
    file.read_exact_at(&mut buf, 0).map_err(LogError::io(path))?;
    Ok(Some(buf))
}

/// Encodes named offsets in the text layout above.
pub(crate) fn encode_offsets(values: &[(&str, i64)]) -> Vec<u8> {
    let lines: Vec<String> = values.iter().map(|(key, value)| format!("{key} {value}")).collect();
    encode_lines(&lines)
}

/// Encodes lines of text (each without its newline) between the header and
/// the CRC line of the layout above.
pub(crate) fn encode_lines(lines: &[String]) -> Vec<u8> {
    let mut text = String::from(HEADER);
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    let crc = crc32c(text.as_bytes());
    text.push_str(&format!("crc32c {crc:08x}\n"));
    text.into_bytes()
}

/// Decodes the text layout; `None` (with a warning) if anything is off.
pub(crate) fn decode_offsets(path: &Path, bytes: &[u8], keys: &[&str]) -> Option<Vec<i64>> {
    let parsed = decode_lines(bytes).and_then(|lines| {
        if lines.len() < keys.len() {
            return None;
        }
        keys.iter()
            .zip(lines)
            .map(|(key, line)| {
                let (k, v) = line.split_once(' ')?;
                if k != *key {
                    return None;
                }
                v.parse().ok()
            })
            .collect::<Option<Vec<i64>>>()
    });
    if parsed.is_none() {
        log::warn!("{} is damaged (bad layout or CRC); ignoring it", path.display());
    }
    parsed
}

/// The lines between the header and the CRC line, or `None` if the header,
/// the CRC or the final newline is missing or wrong. The caller parses the
/// lines (and warns about a damaged file).
pub(crate) fn decode_lines(bytes: &[u8]) -> Option<Vec<&str>> {
    let text = std::str::from_utf8(bytes).ok()?.strip_suffix('\n')?;
    let body_len = text.rfind('\n')? + 1;
    let (body, crc_line) = text.split_at(body_len);
    let crc = u32::from_str_radix(crc_line.strip_prefix("crc32c ")?, 16).ok()?;
    if crc != crc32c(body.as_bytes()) || !body.starts_with(HEADER) {
        return None;
    }
    Some(body[HEADER.len()..].lines().collect())
}

/// CRC-32C (Castagnoli), bitwise: only small files use it, so a table-free
/// loop is fast enough and saves a dependency. Batches are checked by the
/// record crate's hardware-accelerated CRC.
pub(crate) fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::memory::{CrashMode, MemStorage};

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn offsets_round_trip_and_damage_reads_as_absent() {
        let bytes = encode_offsets(&[("a", 1), ("b", -7)]);
        let p = Path::new("x");
        assert_eq!(decode_offsets(p, &bytes, &["a", "b"]), Some(vec![1, -7]));
        assert_eq!(decode_offsets(p, &bytes, &["a", "c"]), None);
        for cut in 0..bytes.len() {
            assert_eq!(decode_offsets(p, &bytes[..cut], &["a", "b"]), None, "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        flipped[22] ^= 1;
        assert_eq!(decode_offsets(p, &flipped, &["a", "b"]), None);
    }

    #[test]
    fn an_atomic_write_survives_whole_or_not_at_all() {
        let mem = MemStorage::new();
        let storage: Arc<dyn Storage> = Arc::new(mem.clone());
        let dir = Path::new("/d");
        storage.create_dir_all(dir).unwrap();
        write_atomically(&storage, dir, "f", b"one").unwrap();
        write_atomically(&storage, dir, "f", b"two!").unwrap();
        let after: Arc<dyn Storage> = Arc::new(mem.crash(CrashMode::DropUnsynced));
        assert_eq!(read_whole(&after, &dir.join("f"), 100).unwrap().unwrap(), b"two!");
    }
}
