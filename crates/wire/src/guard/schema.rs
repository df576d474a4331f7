//! The schema language the guard walks: a request body is a struct, a struct is a list of
//! fields, each field has a kind and the versions in which it is on the wire.
//!
//! Written by hand from the `kafka-protocol` 0.18.0 decoders (and Kafka's message JSON), one table
//! per API in `schemas/`. Two rules are global rather than per field, because they are global in
//! Kafka's message format and in the generated decoders:
//! - an API is either flexible at a version or not, and everything in it follows: lengths and counts
//!   are compact (unsigned varint, value + 1, 0 for null) and every struct ends with a tagged-field
//!   section;
//! - a field is nullable at every version if `kafka-protocol` decodes it into an `Option` (the crate
//!   accepts null even at versions where Kafka's JSON says the field is not nullable).

/// An inclusive range of versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Versions {
    pub(crate) min: i16,
    pub(crate) max: i16,
}

impl Versions {
    pub(crate) const fn contains(self, version: i16) -> bool {
        self.min <= version && version <= self.max
    }
}

/// Present at every version of the message.
pub(crate) const ALL: Versions = Versions { min: 0, max: i16::MAX };

/// Present from `min` on.
pub(crate) const fn since(min: i16) -> Versions {
    Versions { min, max: i16::MAX }
}

/// Present up to and including `max`.
pub(crate) const fn until(max: i16) -> Versions {
    Versions { min: 0, max }
}

/// Present from `min` to `max`, both included.
pub(crate) const fn between(min: i16, max: i16) -> Versions {
    Versions { min, max }
}

/// How one field is encoded. Lengths and counts are compact in flexible versions.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    Int8,
    Int16,
    Int32,
    Int64,
    Float64,
    /// One byte; Kafka and `kafka-protocol` read any non-zero byte as true.
    Bool,
    Uuid,
    /// A string that must not be null.
    String,
    NullableString,
    /// Bytes that must not be null.
    Bytes,
    // Part of the schema language; covered requests use `Records` for their nullable bytes.
    #[allow(dead_code)]
    NullableBytes,
    /// Record batches: nullable bytes, opaque here (the record-batch module validates them).
    Records,
    /// An array that must not be null, of elements of the given kind.
    Array(&'static Kind),
    NullableArray(&'static Kind),
    /// A struct encoded in place (no presence byte).
    Struct(&'static StructSchema),
    /// A struct after a one-byte presence marker (`Option<T>` in `kafka-protocol`, read by its
    /// `OptionStruct`). The crate reads the struct only when the marker is exactly 1 and takes any
    /// other value as null; Kafka writes -1 for null but reads any non-negative marker as present.
    /// The guard follows the crate, whose reading is what decides the allocations.
    NullableStruct(&'static StructSchema),
}

/// One field of a struct.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field {
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    pub(crate) versions: Versions,
    /// `Some(tag)` for a tagged field: it is never in the fixed part of the struct, only in the
    /// tagged-field section, where the decoder reads it structurally (see `walk.rs`).
    pub(crate) tag: Option<u32>,
}

/// A regular field.
pub(crate) const fn field(name: &'static str, kind: Kind, versions: Versions) -> Field {
    Field { name, kind, versions, tag: None }
}

/// A tagged field that `kafka-protocol` decodes into a typed member of the struct.
pub(crate) const fn tagged(name: &'static str, tag: u32, kind: Kind, versions: Versions) -> Field {
    Field { name, kind, versions, tag: Some(tag) }
}

/// A struct: its name (for errors) and its fields in wire order.
#[derive(Debug)]
pub(crate) struct StructSchema {
    pub(crate) name: &'static str,
    pub(crate) fields: &'static [Field],
}

impl StructSchema {
    pub(crate) const fn new(name: &'static str, fields: &'static [Field]) -> Self {
        StructSchema { name, fields }
    }
}

/// One API's request body.
#[derive(Debug)]
pub(crate) struct ApiSchema {
    pub(crate) key: i16,
    /// The versions this table describes (those `kafka-protocol` 0.18.0 can decode).
    pub(crate) versions: Versions,
    /// The first flexible version.
    pub(crate) flexible_since: i16,
    pub(crate) body: &'static StructSchema,
}

/// The encoding context every field of one request shares.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Encoding {
    pub(crate) version: i16,
    pub(crate) flexible: bool,
}

impl Kind {
    /// The fewest bytes a value of this kind can take on the wire (null or empty for lengths,
    /// no tagged fields for structs).
    pub(crate) fn wire_bytes_min(&self, encoding: Encoding) -> usize {
        let length_prefix = |fixed: usize| if encoding.flexible { 1 } else { fixed };
        match self {
            Kind::Int8 | Kind::Bool => 1,
            Kind::Int16 => 2,
            Kind::Int32 => 4,
            Kind::Int64 | Kind::Float64 => 8,
            Kind::Uuid => 16,
            Kind::String | Kind::NullableString => length_prefix(2),
            Kind::Bytes | Kind::NullableBytes | Kind::Records => length_prefix(4),
            Kind::Array(_) | Kind::NullableArray(_) => length_prefix(4),
            Kind::Struct(schema) => schema.wire_bytes_min(encoding),
            Kind::NullableStruct(_) => 1,
        }
    }
}

impl StructSchema {
    /// The fewest bytes this struct can take at `encoding`: its fixed fields at their minimum,
    /// plus an empty tagged-field section (one byte) in flexible versions.
    pub(crate) fn wire_bytes_min(&self, encoding: Encoding) -> usize {
        let fixed: usize = self
            .fields
            .iter()
            .filter(|f| f.tag.is_none() && f.versions.contains(encoding.version))
            .map(|f| f.kind.wire_bytes_min(encoding))
            .sum();
        fixed + usize::from(encoding.flexible)
    }
}
