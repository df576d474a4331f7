//! A walk of each response body before `kafka-protocol` decodes it.
//!
//! `kafka-protocol` 0.18.0 reserves `Vec::with_capacity(count)` from array
//! counts read off the wire before checking that the elements exist, and
//! allocates strings from their length prefix. A ten-byte answer could ask for
//! terabytes and abort the process, which in a Postgres backend restarts the
//! whole cluster. So each response is first walked here against a description
//! of its schema at the one version this client sends (see [`crate::api`]):
//! an array of `n` elements whose smallest encoding is `m` bytes is refused when
//! `n > remaining / m`, a string or bytes field must fit in what is left, and
//! the body must be used exactly.
//!
//! Every pinned version is flexible, so the language knows only the flexible
//! encoding: compact lengths (unsigned varint, value + 1, 0 for null) and a
//! tagged-field section at the end of every struct. Tags that `kafka-protocol`
//! decodes as fields (it reads them straight from the buffer, ignoring their
//! size) are walked with their schema and must fill exactly their size; other
//! tags are skipped by size. Varints are read exactly as `kafka-protocol` reads
//! them (at most five bytes, high bits dropped), so both see the same counts.
//!
//! The guard never allocates.

/// How one field is encoded (flexible versions only).
#[derive(Debug)]
pub enum Kind {
    /// A fixed-size field: int8/bool 1, int16 2, int32 4, int64 8, uuid 16 bytes.
    Fixed(usize),
    /// A compact string or compact bytes, maybe null.
    Blob,
    /// A compact array, maybe null.
    Array(&'static Kind),
    /// Fields in order, then the tagged-field section with the tags decoded as fields.
    Struct(&'static [Kind], &'static [(u32, Kind)]),
    /// A one-byte presence marker, then the struct when it is exactly 1: `kafka-protocol` reads any other
    /// marker as null (Kafka writes -1).
    NullableStruct(&'static Kind),
}

impl Kind {
    /// The fewest bytes an element of this kind takes.
    fn min_bytes(&self) -> usize {
        match self {
            Kind::Fixed(n) => *n,
            Kind::Blob | Kind::Array(_) | Kind::NullableStruct(_) => 1,
            Kind::Struct(fields, _) => 1 + fields.iter().map(Kind::min_bytes).sum::<usize>(),
        }
    }
}

/// Checks that `body` is one complete value of `schema`.
pub fn check(schema: &Kind, body: &[u8]) -> Result<(), String> {
    let mut buf = body;
    walk(schema, &mut buf)?;
    match buf.len() {
        0 => Ok(()),
        n => Err(format!("{n} bytes left after the response")),
    }
}

/// Skips a tagged-field section with no known tags (a response header's);
/// returns how many bytes it took.
pub fn skip_tagged_fields(body: &[u8]) -> Result<usize, String> {
    let mut buf = body;
    walk_tagged_fields(&[], &mut buf)?;
    Ok(body.len() - buf.len())
}

fn walk(kind: &Kind, buf: &mut &[u8]) -> Result<(), String> {
    match kind {
        Kind::Fixed(n) => take(buf, *n).map(|_| ()),
        Kind::Blob => match read_unsigned_varint(buf)? {
            0 => Ok(()),
            n => take(buf, (n - 1) as usize).map(|_| ()),
        },
        Kind::Array(element) => match read_unsigned_varint(buf)? {
            0 => Ok(()),
            n => {
                let count = (n - 1) as usize;
                let possible = buf.len() / element.min_bytes().max(1);
                if count > possible {
                    return Err(format!("array of {count} elements in {} bytes", buf.len()));
                }
                (0..count).try_for_each(|_| walk(element, buf))
            }
        },
        Kind::Struct(fields, tags) => {
            fields.iter().try_for_each(|field| walk(field, buf))?;
            walk_tagged_fields(tags, buf)
        }
        Kind::NullableStruct(inner) => match take(buf, 1)? {
            [1] => walk(inner, buf),
            _ => Ok(()),
        },
    }
}

fn walk_tagged_fields(known: &[(u32, Kind)], buf: &mut &[u8]) -> Result<(), String> {
    let count = read_unsigned_varint(buf)? as usize;
    // Each tagged field takes at least two bytes (tag and size).
    if count > buf.len() / 2 {
        return Err(format!("{count} tagged fields in {} bytes", buf.len()));
    }
    for _ in 0..count {
        let tag = read_unsigned_varint(buf)?;
        let size = read_unsigned_varint(buf)? as usize;
        match known.iter().find(|(t, _)| *t == tag) {
            None => {
                take(buf, size)?;
            }
            Some((_, kind)) => {
                let before = buf.len();
                walk(kind, buf)?;
                if before - buf.len() != size {
                    return Err(format!("tagged field {tag} does not fill its {size} bytes"));
                }
            }
        }
    }
    Ok(())
}

fn take<'a>(buf: &mut &'a [u8], n: usize) -> Result<&'a [u8], String> {
    if n > buf.len() {
        return Err(format!("field of {n} bytes with {} bytes left", buf.len()));
    }
    let (head, rest) = buf.split_at(n);
    *buf = rest;
    Ok(head)
}

/// An unsigned varint read the way `kafka-protocol` reads it: at most five
/// bytes, bits past 32 dropped.
fn read_unsigned_varint(buf: &mut &[u8]) -> Result<u32, String> {
    let mut value = 0u32;
    for i in 0..5 {
        let (&byte, rest) = buf.split_first().ok_or("truncated varint")?;
        *buf = rest;
        value |= u32::from(byte & 0x7f).wrapping_shl(i * 7);
        if byte < 0x80 {
            break;
        }
    }
    Ok(value)
}

/// The response schemas of the pinned versions, written from the
/// `kafka-protocol` 0.18.0 decoders (field names in the comments are Kafka's).
pub mod schemas {
    use super::Kind::{self, Array, Blob, Fixed, NullableStruct, Struct};

    const I8: Kind = Fixed(1);
    const BOOL: Kind = Fixed(1);
    const I16: Kind = Fixed(2);
    const I32: Kind = Fixed(4);
    const I64: Kind = Fixed(8);
    const UUID: Kind = Fixed(16);
    const STR: Kind = Blob;

    /// ProduceResponse v9.
    pub const PRODUCE_V9: Kind = Struct(
        &[
            // responses: name, partition_responses
            Array(&Struct(
                &[
                    STR,
                    // index, error_code, base_offset, log_append_time_ms, log_start_offset,
                    // record_errors (batch_index, batch_index_error_message), error_message
                    Array(&Struct(&[I32, I16, I64, I64, I64, Array(&Struct(&[I32, STR], &[])), STR], &[])),
                ],
                &[],
            )),
            I32, // throttle_time_ms
        ],
        &[],
    );

    /// FetchResponse v12.
    pub const FETCH_V12: Kind = Struct(
        &[
            I32, // throttle_time_ms
            I16, // error_code
            I32, // session_id
            // responses: topic, partitions
            Array(&Struct(
                &[
                    STR,
                    Array(&Struct(
                        &[
                            I32,                              // partition_index
                            I16,                              // error_code
                            I64,                              // high_watermark
                            I64,                              // last_stable_offset
                            I64,                              // log_start_offset
                            Array(&Struct(&[I64, I64], &[])), // aborted_transactions
                            I32,                              // preferred_read_replica
                            Blob,                             // records
                        ],
                        &[
                            (0, Struct(&[I32, I64], &[])), // diverging_epoch
                            (1, Struct(&[I32, I32], &[])), // current_leader
                            (2, Struct(&[I64, I32], &[])), // snapshot_id
                        ],
                    )),
                ],
                &[],
            )),
        ],
        &[],
    );

    /// ListOffsetsResponse v7.
    pub const LIST_OFFSETS_V7: Kind = Struct(
        &[
            I32, // throttle_time_ms
            // topics: name, partitions (partition_index, error_code, timestamp, offset, leader_epoch)
            Array(&Struct(&[STR, Array(&Struct(&[I32, I16, I64, I64, I32], &[]))], &[])),
        ],
        &[],
    );

    /// MetadataResponse v12.
    pub const METADATA_V12: Kind = Struct(
        &[
            I32,                                        // throttle_time_ms
            Array(&Struct(&[I32, STR, I32, STR], &[])), // brokers: node_id, host, port, rack
            STR,                                        // cluster_id
            I32,                                        // controller_id
            // topics: error_code, name, topic_id, is_internal, partitions, topic_authorized_operations
            Array(&Struct(
                &[
                    I16,
                    STR,
                    UUID,
                    BOOL,
                    // error_code, partition_index, leader_id, leader_epoch, replica_nodes, isr_nodes,
                    // offline_replicas
                    Array(&Struct(&[I16, I32, I32, I32, Array(&I32), Array(&I32), Array(&I32)], &[])),
                    I32,
                ],
                &[],
            )),
        ],
        &[],
    );

    /// DescribeGroupsResponse v5.
    pub const DESCRIBE_GROUPS_V5: Kind = Struct(
        &[
            I32, // throttle_time_ms
            // groups: error_code, group_id, group_state, protocol_type, protocol_data, members,
            // authorized_operations
            Array(&Struct(
                &[
                    I16,
                    STR,
                    STR,
                    STR,
                    STR,
                    // member_id, group_instance_id, client_id, client_host, member_metadata,
                    // member_assignment
                    Array(&Struct(&[STR, STR, STR, STR, Blob, Blob], &[])),
                    I32,
                ],
                &[],
            )),
        ],
        &[],
    );

    /// ListGroupsResponse v4.
    pub const LIST_GROUPS_V4: Kind = Struct(
        &[
            I32,                                   // throttle_time_ms
            I16,                                   // error_code
            Array(&Struct(&[STR, STR, STR], &[])), // groups: group_id, protocol_type, group_state
        ],
        &[],
    );

    /// CreateTopicsResponse v7.
    pub const CREATE_TOPICS_V7: Kind = Struct(
        &[
            I32, // throttle_time_ms
            // topics: name, topic_id, error_code, error_message, num_partitions, replication_factor,
            // configs (name, value, read_only, config_source, is_sensitive)
            Array(&Struct(
                &[STR, UUID, I16, STR, I32, I16, Array(&Struct(&[STR, STR, BOOL, I8, BOOL], &[]))],
                &[(0, I16)], // topic_config_error_code
            )),
        ],
        &[],
    );

    /// DeleteTopicsResponse v6.
    pub const DELETE_TOPICS_V6: Kind = Struct(
        &[
            I32,                                         // throttle_time_ms
            Array(&Struct(&[STR, UUID, I16, STR], &[])), // responses: name, topic_id, error_code, error_message
        ],
        &[],
    );

    /// CreatePartitionsResponse v3.
    pub const CREATE_PARTITIONS_V3: Kind = Struct(
        &[
            I32,                                   // throttle_time_ms
            Array(&Struct(&[STR, I16, STR], &[])), // results: name, error_code, error_message
        ],
        &[],
    );

    /// IncrementalAlterConfigsResponse v1.
    pub const INCREMENTAL_ALTER_CONFIGS_V1: Kind = Struct(
        &[
            I32, // throttle_time_ms
            // responses: error_code, error_message, resource_type, resource_name
            Array(&Struct(&[I16, STR, I8, STR], &[])),
        ],
        &[],
    );

    /// InitProducerIdResponse v4: throttle_time_ms, error_code, producer_id, producer_epoch.
    pub const INIT_PRODUCER_ID_V4: Kind = Struct(&[I32, I16, I64, I16], &[]);

    /// DescribeConfigsResponse v4.
    pub const DESCRIBE_CONFIGS_V4: Kind = Struct(
        &[
            I32, // throttle_time_ms
            // results: error_code, error_message, resource_type, resource_name, configs (name,
            // value, read_only, config_source, is_sensitive, synonyms (name, value, source),
            // config_type, documentation)
            Array(&Struct(
                &[
                    I16,
                    STR,
                    I8,
                    STR,
                    Array(&Struct(&[STR, STR, BOOL, I8, BOOL, Array(&Struct(&[STR, STR, I8], &[])), I8, STR], &[])),
                ],
                &[],
            )),
        ],
        &[],
    );

    /// DescribeProducersResponse v0.
    // error_code, error_message, auth_bytes, session_lifetime_ms
    pub const SASL_AUTHENTICATE_V2: Kind = Struct(&[I16, STR, STR, I64], &[]);

    pub const DESCRIBE_PRODUCERS_V0: Kind = Struct(
        &[
            I32, // throttle_time_ms
            // topics: name, partitions
            Array(&Struct(
                &[
                    STR,
                    // partition_index, error_code, error_message, active_producers (producer_id,
                    // producer_epoch, last_sequence, last_timestamp, coordinator_epoch,
                    // current_txn_start_offset)
                    Array(&Struct(&[I32, I16, STR, Array(&Struct(&[I64, I32, I32, I64, I32, I64], &[]))], &[])),
                ],
                &[],
            )),
        ],
        &[],
    );

    /// The current leader (id, epoch) of a share-partition answer.
    const LEADER_ID_AND_EPOCH: Kind = Struct(&[I32, I32], &[]);
    /// The brokers a share answer names: node_id, host, port, rack.
    const NODE_ENDPOINTS: Kind = Array(&Struct(&[I32, STR, I32, STR], &[]));

    /// ShareGroupHeartbeatResponse v1.
    pub const SHARE_GROUP_HEARTBEAT_V1: Kind = Struct(
        &[
            I32, // throttle_time_ms
            I16, // error_code
            STR, // error_message
            STR, // member_id
            I32, // member_epoch
            I32, // heartbeat_interval_ms
            // assignment: topic_partitions (topic_id, partitions)
            NullableStruct(&Struct(&[Array(&Struct(&[UUID, Array(&I32)], &[]))], &[])),
        ],
        &[],
    );

    /// ShareFetchResponse v1.
    pub const SHARE_FETCH_V1: Kind = Struct(
        &[
            I32, // throttle_time_ms
            I16, // error_code
            STR, // error_message
            I32, // acquisition_lock_timeout_ms
            // responses: topic_id, partitions
            Array(&Struct(
                &[
                    UUID,
                    Array(&Struct(
                        &[
                            I32,                 // partition_index
                            I16,                 // error_code
                            STR,                 // error_message
                            I16,                 // acknowledge_error_code
                            STR,                 // acknowledge_error_message
                            LEADER_ID_AND_EPOCH, // current_leader
                            Blob,                // records
                            // acquired_records: first_offset, last_offset, delivery_count
                            Array(&Struct(&[I64, I64, I16], &[])),
                        ],
                        &[],
                    )),
                ],
                &[],
            )),
            NODE_ENDPOINTS,
        ],
        &[],
    );

    /// ShareAcknowledgeResponse v1.
    pub const SHARE_ACKNOWLEDGE_V1: Kind = Struct(
        &[
            I32, // throttle_time_ms
            I16, // error_code
            STR, // error_message
            // responses: topic_id, partitions (partition_index, error_code, error_message, current_leader)
            Array(&Struct(&[UUID, Array(&Struct(&[I32, I16, STR, LEADER_ID_AND_EPOCH], &[]))], &[])),
            NODE_ENDPOINTS,
        ],
        &[],
    );
}

#[cfg(test)]
mod tests;
