//! What every hand-written version shares: tagged-field sections (kept, so a
//! decoded message encodes back to the same bytes), sizes, and the newtype for
//! a message whose new version has the previous one's layout.

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

// kafka-protocol keeps its primitive codecs private (`types::*` implement a
// crate-private trait), so the few the new versions need are here. All the new
// versions are flexible: lengths and counts are compact (unsigned varint of
// length + 1, 0 for null).

/// Unknown tagged fields, by tag, as kafka-protocol keeps them.
pub(crate) type Tags = BTreeMap<i32, Bytes>;

pub(crate) fn put_uvarint<B: BufMut>(buf: &mut B, mut value: u32) {
    while value >= 0x80 {
        buf.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

/// An unsigned varint, read as kafka-protocol reads it (at most 5 bytes, the
/// bits past 32 dropped), so that its messages and these agree on every body
/// the guard lets through.
pub(crate) fn get_uvarint<B: Buf>(buf: &mut B) -> Result<u32> {
    let mut value: u32 = 0;
    for i in 0..5 {
        let byte = u32::from(buf.try_get_u8()?);
        value |= (byte & 0x7f).wrapping_shl(7 * i);
        if byte < 0x80 {
            break;
        }
    }
    Ok(value)
}

/// A compact length or count: `None` for null.
fn put_compact_len<B: BufMut>(buf: &mut B, len: Option<usize>) -> Result<()> {
    match len {
        None => put_uvarint(buf, 0),
        Some(len) => match u32::try_from(len).ok().and_then(|l| l.checked_add(1)) {
            Some(l) => put_uvarint(buf, l),
            None => bail!("length {len} too large to encode"),
        },
    }
    Ok(())
}

fn get_compact_len<B: Buf>(buf: &mut B) -> Result<Option<usize>> {
    Ok(get_uvarint(buf)?.checked_sub(1).map(|l| l as usize))
}

pub(crate) fn put_str<B: BufMut>(buf: &mut B, s: &str) -> Result<()> {
    put_compact_len(buf, Some(s.len()))?;
    buf.put_slice(s.as_bytes());
    Ok(())
}

pub(crate) fn put_nullable_str<B: BufMut>(buf: &mut B, s: Option<&str>) -> Result<()> {
    match s {
        None => put_compact_len(buf, None),
        Some(s) => put_str(buf, s),
    }
}

pub(crate) fn get_nullable_str<B: ByteBuf>(buf: &mut B) -> Result<Option<StrBytes>> {
    match get_compact_len(buf)? {
        None => Ok(None),
        Some(len) => Ok(Some(StrBytes::from_utf8(buf.try_get_bytes(len)?)?)),
    }
}

pub(crate) fn get_str<B: ByteBuf>(buf: &mut B) -> Result<StrBytes> {
    match get_nullable_str(buf)? {
        Some(s) => Ok(s),
        None => bail!("a null string where one is required"),
    }
}

pub(crate) fn put_uuid<B: BufMut>(buf: &mut B, id: &uuid::Uuid) {
    buf.put_slice(id.as_bytes());
}

pub(crate) fn get_uuid<B: Buf>(buf: &mut B) -> Result<uuid::Uuid> {
    Ok(uuid::Uuid::from_u128(buf.try_get_u128()?))
}

pub(crate) fn put_bool<B: BufMut>(buf: &mut B, value: bool) {
    buf.put_u8(u8::from(value));
}

/// Any non-zero byte is true, as Kafka reads it.
pub(crate) fn get_bool<B: Buf>(buf: &mut B) -> Result<bool> {
    Ok(buf.try_get_u8()? != 0)
}

/// An array of kafka-protocol structs, each encoded at `version`.
pub(crate) fn put_array<B: ByteBufMut, T: Encodable>(
    buf: &mut B,
    items: &[T],
    version: i16,
    flexible: bool,
) -> Result<()> {
    if flexible {
        put_compact_len(buf, Some(items.len()))?;
    } else {
        let Ok(len) = i32::try_from(items.len()) else { bail!("array of {} too long", items.len()) };
        buf.put_i32(len);
    }
    items.iter().try_for_each(|item| item.encode(buf, version))
}

/// An array whose elements `put` writes.
pub(crate) fn put_array_with<B: ByteBufMut, T>(
    buf: &mut B,
    items: &[T],
    flexible: bool,
    mut put: impl FnMut(&mut B, &T) -> Result<()>,
) -> Result<()> {
    if flexible {
        put_compact_len(buf, Some(items.len()))?;
    } else {
        let Ok(len) = i32::try_from(items.len()) else { bail!("array of {} too long", items.len()) };
        buf.put_i32(len);
    }
    items.iter().try_for_each(|item| put(buf, item))
}

/// A nullable compact array whose elements `put` writes.
pub(crate) fn put_nullable_array_with<B: ByteBufMut, T>(
    buf: &mut B,
    items: Option<&[T]>,
    put: impl FnMut(&mut B, &T) -> Result<()>,
) -> Result<()> {
    match items {
        None => put_compact_len(buf, None),
        Some(items) => put_array_with(buf, items, true, put),
    }
}

/// A nullable array whose elements `get` reads. The guard has checked the
/// count against the body, but nothing is reserved from it here anyway.
pub(crate) fn get_nullable_array_with<B: ByteBuf, T>(
    buf: &mut B,
    flexible: bool,
    mut get: impl FnMut(&mut B) -> Result<T>,
) -> Result<Option<Vec<T>>> {
    let count = if flexible { get_compact_len(buf)? } else { usize::try_from(buf.try_get_i32()?).ok() };
    let Some(count) = count else { return Ok(None) };
    let mut items = Vec::new();
    for _ in 0..count {
        items.push(get(buf)?);
    }
    Ok(Some(items))
}

pub(crate) fn get_array_with<B: ByteBuf, T>(
    buf: &mut B,
    flexible: bool,
    get: impl FnMut(&mut B) -> Result<T>,
) -> Result<Vec<T>> {
    match get_nullable_array_with(buf, flexible, get)? {
        Some(items) => Ok(items),
        None => bail!("a null array where one is required"),
    }
}

/// An array of kafka-protocol structs, each decoded at `version`.
pub(crate) fn get_array<B: ByteBuf, T: Decodable>(buf: &mut B, version: i16, flexible: bool) -> Result<Vec<T>> {
    get_array_with(buf, flexible, |buf| T::decode(buf, version))
}

/// Reads a tagged-field section. The guard has checked each size against the
/// body before decoding starts.
pub(crate) fn read_tags<B: ByteBuf>(buf: &mut B) -> Result<Tags> {
    let count = get_uvarint(buf)?;
    let mut tags = Tags::new();
    for _ in 0..count {
        let tag = get_uvarint(buf)?;
        let size = get_uvarint(buf)?;
        // As kafka-protocol keeps them (and the guard accepts them): a tag
        // past i32::MAX wraps.
        tags.insert(tag as i32, buf.try_get_bytes(size as usize)?);
    }
    Ok(tags)
}

/// Writes a tagged-field section holding `tags` (none of which we know).
pub(crate) fn write_tags<B: BufMut>(buf: &mut B, tags: &Tags) -> Result<()> {
    let Ok(count) = u32::try_from(tags.len()) else { bail!("too many tagged fields") };
    put_uvarint(buf, count);
    for (&tag, value) in tags {
        let Ok(size) = u32::try_from(value.len()) else { bail!("tagged field {tag} too long") };
        put_uvarint(buf, tag as u32);
        put_uvarint(buf, size);
        buf.put_slice(value);
    }
    Ok(())
}

/// The size of a hand-written version, by encoding it: these are small,
/// admin-sized messages, where a second pass costs less than a second
/// hand-written sizing that could drift from the encoder.
pub(crate) fn size_by_encoding<T: Encodable>(message: &T, version: i16) -> Result<usize> {
    let mut buf = BytesMut::new();
    message.encode(&mut buf, version)?;
    Ok(buf.len())
}

/// Whether `version` is one of `M`'s (for kafka-protocol's types: one it
/// encodes and decodes).
pub(crate) fn known<M: kafka_protocol::protocol::Message>(version: i16) -> bool {
    M::VERSIONS.min <= version && version <= M::VERSIONS.max
}

/// Refuses a version this type does not know.
pub(crate) fn unsupported(name: &str, version: i16) -> anyhow::Error {
    anyhow::anyhow!("{name} v{version} is not a version this codec knows")
}

/// A kafka-protocol message `$inner` served up to `$max`, whose versions above
/// kafka-protocol's are laid out as `$same_as` (Kafka raised the version for a
/// change of meaning only). Derefs to the inner message, which the handler
/// reads and builds.
macro_rules! same_layout {
    ($(#[$doc:meta])* $name:ident($inner:ty), max $max:literal, as $same_as:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct $name(pub $inner);

        impl $name {
            /// The version whose layout `version` has.
            const fn layout(version: i16) -> i16 {
                if version > <$inner as kafka_protocol::protocol::Message>::VERSIONS.max && version <= $max {
                    $same_as
                } else {
                    version
                }
            }
        }

        $crate::messages::kit::deref_to!($name => $inner);

        impl kafka_protocol::protocol::Message for $name {
            const VERSIONS: kafka_protocol::protocol::VersionRange = kafka_protocol::protocol::VersionRange {
                min: <$inner as kafka_protocol::protocol::Message>::VERSIONS.min,
                max: $max,
            };
            const DEPRECATED_VERSIONS: Option<kafka_protocol::protocol::VersionRange> =
                <$inner as kafka_protocol::protocol::Message>::DEPRECATED_VERSIONS;
        }

        impl kafka_protocol::protocol::Encodable for $name {
            fn encode<B: kafka_protocol::protocol::buf::ByteBufMut>(
                &self,
                buf: &mut B,
                version: i16,
            ) -> anyhow::Result<()> {
                self.0.encode(buf, Self::layout(version))
            }
            fn compute_size(&self, version: i16) -> anyhow::Result<usize> {
                self.0.compute_size(Self::layout(version))
            }
        }

        impl kafka_protocol::protocol::Decodable for $name {
            fn decode<B: kafka_protocol::protocol::buf::ByteBuf>(buf: &mut B, version: i16) -> anyhow::Result<Self> {
                <$inner>::decode(buf, Self::layout(version)).map($name)
            }
        }

        impl kafka_protocol::protocol::HeaderVersion for $name {
            fn header_version(version: i16) -> i16 {
                <$inner as kafka_protocol::protocol::HeaderVersion>::header_version(Self::layout(version))
            }
        }
    };
}
pub(crate) use same_layout;

/// `impl Request` for a request type and its response.
macro_rules! request {
    ($request:ty => $response:ty, key $key:expr) => {
        impl kafka_protocol::protocol::Request for $request {
            const KEY: i16 = $key as i16;
            type Response = $response;
        }
    };
}
pub(crate) use request;

/// Deref, DerefMut and From for a newtype over a kafka-protocol message.
macro_rules! deref_to {
    ($name:ident => $inner:ty) => {
        impl std::ops::Deref for $name {
            type Target = $inner;
            fn deref(&self) -> &$inner {
                &self.0
            }
        }

        impl std::ops::DerefMut for $name {
            fn deref_mut(&mut self) -> &mut $inner {
                &mut self.0
            }
        }

        impl From<$inner> for $name {
            fn from(inner: $inner) -> $name {
                $name(inner)
            }
        }
    };
}
pub(crate) use deref_to;
