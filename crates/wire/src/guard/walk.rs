//! The walker: reads a body once, the way `kafka-protocol` 0.18.0 would decode it, without
//! allocating, and stops at the first impossible length.
//!
//! It mirrors the decoder's reading rules exactly, including the lenient ones, so that it never
//! rejects what the decoder and Kafka both accept:
//! - unsigned varints: at most 5 bytes; bits past 32 in the fifth byte are dropped, as both
//!   `kafka-protocol` and Kafka do. A continuation bit on the fifth byte is rejected (Kafka rejects
//!   it; `kafka-protocol` would stop reading there and misparse the rest).
//! - a *known* tagged field is decoded from the stream with its own schema, and its size prefix is
//!   read and ignored (the decoder does that, so the value's real length is what counts); an unknown
//!   tag is skipped by its size. A known tag at a version where the field does not exist is an error
//!   in `kafka-protocol`, so it is one here too.
//! - a nullable struct is present only when its marker byte is exactly 1 (any other byte is null,
//!   as `kafka-protocol` reads it).
//! - bytes after the body are not looked at (`kafka-protocol` ignores them).

use super::schema::{Encoding, Field, Kind, StructSchema};
use super::{FieldPath, GuardError};

/// The name used in errors about a struct's tagged-field section itself.
const TAGGED_FIELDS: &str = "(tagged fields)";

/// The longest unsigned varint (u32) on the wire.
const VARINT_BYTES_MAX: usize = 5;

/// Walks `body` as `schema` at `encoding`; returns how many bytes the body used.
pub(crate) fn walk_body(body: &[u8], schema: &'static StructSchema, encoding: Encoding) -> Result<usize, GuardError> {
    let mut walker = Walker { body, offset: 0, encoding };
    walker.structure(schema)?;
    Ok(walker.offset)
}

struct Walker<'a> {
    body: &'a [u8],
    offset: usize,
    encoding: Encoding,
}

impl Walker<'_> {
    fn remaining_bytes(&self) -> usize {
        self.body.len() - self.offset
    }

    fn structure(&mut self, schema: &'static StructSchema) -> Result<(), GuardError> {
        let version = self.encoding.version;
        for field in schema.fields {
            if field.tag.is_none() && field.versions.contains(version) {
                self.value(path(schema, field), &field.kind)?;
            }
        }
        if self.encoding.flexible {
            self.tagged_fields(schema)?;
        }
        Ok(())
    }

    fn tagged_fields(&mut self, schema: &'static StructSchema) -> Result<(), GuardError> {
        let at = FieldPath { structure: schema.name, field: TAGGED_FIELDS };
        let offset = self.offset;
        let count = self.unsigned_varint(at)?;
        // A tagged field takes at least two bytes: its tag and its size.
        self.check_count(at, offset, u64::from(count), 2)?;
        for _ in 0..count {
            let tag_offset = self.offset;
            let tag = self.unsigned_varint(at)?;
            let size_bytes = self.unsigned_varint(at)?;
            match schema.fields.iter().find(|f| f.tag == Some(tag)) {
                Some(field) if field.versions.contains(self.encoding.version) => {
                    self.value(path(schema, field), &field.kind)?;
                }
                Some(field) => {
                    return Err(GuardError::TagNotValidForVersion {
                        field: path(schema, field),
                        offset: tag_offset,
                        tag,
                        version: self.encoding.version,
                    });
                }
                None => self.skip(at, u64::from(size_bytes))?,
            }
        }
        Ok(())
    }

    fn value(&mut self, at: FieldPath, kind: &'static Kind) -> Result<(), GuardError> {
        match kind {
            Kind::Int8 | Kind::Bool => self.skip(at, 1),
            Kind::Int16 => self.skip(at, 2),
            Kind::Int32 => self.skip(at, 4),
            Kind::Int64 | Kind::Float64 => self.skip(at, 8),
            Kind::Uuid => self.skip(at, 16),
            Kind::String => self.sized(at, Width::Int16, false),
            Kind::NullableString => self.sized(at, Width::Int16, true),
            Kind::Bytes => self.sized(at, Width::Int32, false),
            Kind::NullableBytes | Kind::Records => self.sized(at, Width::Int32, true),
            Kind::Array(element) => self.array(at, element, false),
            Kind::NullableArray(element) => self.array(at, element, true),
            Kind::Struct(schema) => self.structure(schema),
            Kind::NullableStruct(schema) => match self.take::<1>(at)? {
                // The only marker kafka-protocol reads as present; see `Kind::NullableStruct`.
                [1] => self.structure(schema),
                _ => Ok(()),
            },
        }
    }

    /// A string or bytes: a length, then that many bytes.
    fn sized(&mut self, at: FieldPath, width: Width, nullable: bool) -> Result<(), GuardError> {
        match self.length(at, width, nullable)? {
            Some(length) => self.skip(at, length),
            None => Ok(()),
        }
    }

    fn array(&mut self, at: FieldPath, element: &'static Kind, nullable: bool) -> Result<(), GuardError> {
        let offset = self.offset;
        let Some(count) = self.length(at, Width::Int32, nullable)? else {
            return Ok(());
        };
        let element_bytes_min = element.wire_bytes_min(self.encoding).max(1);
        self.check_count(at, offset, count, element_bytes_min)?;
        for _ in 0..count {
            self.value(at, element)?;
        }
        Ok(())
    }

    /// Rejects a count of elements that cannot fit in what is left of the body.
    fn check_count(
        &self,
        at: FieldPath,
        offset: usize,
        count: u64,
        element_bytes_min: usize,
    ) -> Result<(), GuardError> {
        let remaining_bytes = self.remaining_bytes();
        // Widening casts: usize is at most 64 bits on every target we build for.
        let fit_max = (remaining_bytes / element_bytes_min) as u64;
        if count > fit_max {
            return Err(GuardError::ArrayTooLong { field: at, offset, count, element_bytes_min, remaining_bytes });
        }
        Ok(())
    }

    /// Reads a length or count prefix: `None` for null, `Some(n)` otherwise.
    fn length(&mut self, at: FieldPath, width: Width, nullable: bool) -> Result<Option<u64>, GuardError> {
        let offset = self.offset;
        let length = if self.encoding.flexible {
            match self.unsigned_varint(at)? {
                0 => None,
                n => Some(u64::from(n - 1)),
            }
        } else {
            let raw = match width {
                Width::Int16 => i32::from(i16::from_be_bytes(self.take::<2>(at)?)),
                Width::Int32 => i32::from_be_bytes(self.take::<4>(at)?),
            };
            match raw {
                -1 => None,
                n if n < -1 => {
                    return Err(GuardError::NegativeLength { field: at, offset, length: n });
                }
                // Non-negative here, so the conversion is exact.
                n => Some(n.unsigned_abs().into()),
            }
        };
        match length {
            None if !nullable => Err(GuardError::UnexpectedNull { field: at, offset }),
            other => Ok(other),
        }
    }

    fn unsigned_varint(&mut self, at: FieldPath) -> Result<u32, GuardError> {
        let offset = self.offset;
        let mut value: u32 = 0;
        for i in 0..VARINT_BYTES_MAX {
            let [byte] = self.take::<1>(at)?;
            // `<<` drops the bits shifted past 32, which is what the decoders do with a fifth byte.
            value |= u32::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(GuardError::VarintTooLong { field: at, offset })
    }

    fn take<const N: usize>(&mut self, at: FieldPath) -> Result<[u8; N], GuardError> {
        let start = self.offset;
        let bytes = self.body.get(start..).and_then(|rest| rest.first_chunk::<N>()).ok_or(GuardError::Truncated {
            field: at,
            offset: start,
            needed_bytes: N as u64,
            remaining_bytes: self.remaining_bytes(),
        })?;
        self.offset += N;
        Ok(*bytes)
    }

    fn skip(&mut self, at: FieldPath, length_bytes: u64) -> Result<(), GuardError> {
        let remaining_bytes = self.remaining_bytes();
        if length_bytes > remaining_bytes as u64 {
            return Err(GuardError::Truncated {
                field: at,
                offset: self.offset,
                needed_bytes: length_bytes,
                remaining_bytes,
            });
        }
        // Fits in usize: it is at most `remaining_bytes`.
        self.offset += length_bytes as usize;
        Ok(())
    }
}

/// The width of a non-compact length prefix.
#[derive(Clone, Copy)]
enum Width {
    Int16,
    Int32,
}

fn path(schema: &'static StructSchema, field: &Field) -> FieldPath {
    FieldPath { structure: schema.name, field: field.name }
}
