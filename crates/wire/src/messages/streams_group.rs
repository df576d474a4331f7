//! The Streams group protocol of KIP-1071, which `kafka-protocol` 0.18 does not
//! have: StreamsGroupHeartbeat (key 88, v0-v1), StreamsGroupDescribe (key 89,
//! v0-v1) and StreamsGroupTopologyDescriptionUpdate (key 93, v0, KIP-1331),
//! written from Kafka 4.4.0's message JSON. Every version of all three is
//! flexible, so every struct ends with a tagged-field section (kept, so a
//! decoded message encodes back to the same bytes).
//!
//! Each struct is declared once with its fields in wire order
//! (`flexible_struct!`); a field that only some versions carry is wrapped in
//! [`Since`] or [`Until`], which skip it (write nothing, read the default) at
//! the other versions.

use anyhow::{bail, Result};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, VersionRange};

use super::kit::{
    get_array_with, get_bool, get_nullable_array_with, get_nullable_str, get_str, put_array_with, put_bool,
    put_nullable_array_with, put_nullable_str, put_str, read_tags, request, size_by_encoding, unsupported, write_tags,
    Tags,
};
use crate::ApiKey;

/// A value as the flexible versions carry it.
pub trait Field: Sized {
    fn put<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()>;
    fn get<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self>;

    /// The nullable form. Structs: a presence byte (-1 for null) and the
    /// struct; strings and arrays override it with a null length.
    fn put_nullable<B: ByteBufMut>(value: Option<&Self>, buf: &mut B, version: i16) -> Result<()> {
        match value {
            None => {
                buf.put_i8(-1);
                Ok(())
            }
            Some(value) => {
                buf.put_i8(1);
                value.put(buf, version)
            }
        }
    }

    /// Only a marker of 1 is read as present, as `kafka-protocol` reads it
    /// (and the guard walks it); Kafka writes -1 and 1.
    fn get_nullable<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Option<Self>> {
        if buf.try_get_i8()? == 1 {
            Self::get(buf, version).map(Some)
        } else {
            Ok(None)
        }
    }
}

macro_rules! primitive {
    ($ty:ty, $put:ident, $get:ident) => {
        impl Field for $ty {
            fn put<B: ByteBufMut>(&self, buf: &mut B, _version: i16) -> Result<()> {
                buf.$put(*self);
                Ok(())
            }
            fn get<B: ByteBuf>(buf: &mut B, _version: i16) -> Result<Self> {
                Ok(buf.$get()?)
            }
        }
    };
}
primitive!(i8, put_i8, try_get_i8);
primitive!(i16, put_i16, try_get_i16);
primitive!(i32, put_i32, try_get_i32);
primitive!(i64, put_i64, try_get_i64);
primitive!(u16, put_u16, try_get_u16);

impl Field for bool {
    fn put<B: ByteBufMut>(&self, buf: &mut B, _version: i16) -> Result<()> {
        put_bool(buf, *self);
        Ok(())
    }
    fn get<B: ByteBuf>(buf: &mut B, _version: i16) -> Result<Self> {
        get_bool(buf)
    }
}

impl Field for String {
    fn put<B: ByteBufMut>(&self, buf: &mut B, _version: i16) -> Result<()> {
        put_str(buf, self)
    }
    fn get<B: ByteBuf>(buf: &mut B, _version: i16) -> Result<Self> {
        Ok(get_str(buf)?.to_string())
    }
    fn put_nullable<B: ByteBufMut>(value: Option<&Self>, buf: &mut B, _version: i16) -> Result<()> {
        put_nullable_str(buf, value.map(String::as_str))
    }
    fn get_nullable<B: ByteBuf>(buf: &mut B, _version: i16) -> Result<Option<Self>> {
        Ok(get_nullable_str(buf)?.map(|s| s.to_string()))
    }
}

impl<T: Field> Field for Vec<T> {
    fn put<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        put_array_with(buf, self, true, |buf, item| item.put(buf, version))
    }
    fn get<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        get_array_with(buf, true, |buf| T::get(buf, version))
    }
    fn put_nullable<B: ByteBufMut>(value: Option<&Self>, buf: &mut B, version: i16) -> Result<()> {
        put_nullable_array_with(buf, value.map(Vec::as_slice), |buf, item| item.put(buf, version))
    }
    fn get_nullable<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Option<Self>> {
        get_nullable_array_with(buf, true, |buf| T::get(buf, version))
    }
}

impl<T: Field> Field for Option<T> {
    fn put<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        T::put_nullable(self.as_ref(), buf, version)
    }
    fn get<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        T::get_nullable(buf, version)
    }
    fn put_nullable<B: ByteBufMut>(_: Option<&Self>, _: &mut B, _: i16) -> Result<()> {
        bail!("a nullable field cannot be nullable twice")
    }
}

/// A field carried from version `V` on (its default below `V`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Since<const V: i16, T>(pub T);

impl<const V: i16, T: Field + Default> Field for Since<V, T> {
    fn put<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if version >= V {
            self.0.put(buf, version)?;
        }
        Ok(())
    }
    fn get<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if version >= V {
            T::get(buf, version).map(Since)
        } else {
            Ok(Since(T::default()))
        }
    }
}

/// A field carried up to version `V` (its default above `V`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Until<const V: i16, T>(pub T);

impl<const V: i16, T: Field + Default> Field for Until<V, T> {
    fn put<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        if version <= V {
            self.0.put(buf, version)?;
        }
        Ok(())
    }
    fn get<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        if version <= V {
            T::get(buf, version).map(Until)
        } else {
            Ok(Until(T::default()))
        }
    }
}

/// A struct of a flexible message: its fields in wire order, then its
/// tagged-field section.
macro_rules! flexible_struct {
    ($(#[$doc:meta])* $name:ident { $($(#[$fdoc:meta])* $field:ident: $ty:ty,)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Default, PartialEq)]
        pub struct $name {
            $($(#[$fdoc])* pub $field: $ty,)*
            pub unknown_tagged_fields: Tags,
        }

        impl Field for $name {
            fn put<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
                $(Field::put(&self.$field, buf, version)?;)*
                write_tags(buf, &self.unknown_tagged_fields)
            }
            fn get<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
                Ok($name { $($field: Field::get(buf, version)?,)* unknown_tagged_fields: read_tags(buf)? })
            }
        }
    };
}

/// The traits of a top-level message whose versions are 0..=`$max`.
macro_rules! message {
    ($name:ident, max $max:literal, header $header:literal) => {
        impl Message for $name {
            const VERSIONS: VersionRange = VersionRange { min: 0, max: $max };
            const DEPRECATED_VERSIONS: Option<VersionRange> = None;
        }

        impl Encodable for $name {
            fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
                if !(0..=$max).contains(&version) {
                    return Err(unsupported(stringify!($name), version));
                }
                Field::put(self, buf, version)
            }
            fn compute_size(&self, version: i16) -> Result<usize> {
                size_by_encoding(self, version)
            }
        }

        impl Decodable for $name {
            fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
                if !(0..=$max).contains(&version) {
                    return Err(unsupported(stringify!($name), version));
                }
                Field::get(buf, version)
            }
        }

        impl HeaderVersion for $name {
            fn header_version(_version: i16) -> i16 {
                $header
            }
        }
    };
}

// ------------------------------------------------------------------ shared structs

flexible_struct!(
    /// A configuration key and value (topic configs, client tags).
    KeyValue { key: String, value: String, }
);

flexible_struct!(
    /// An internal topic the topology declares.
    TopicInfo {
        name: String,
        /// 0: not fixed by the topology (always 0 for changelogs).
        partitions: i32,
        /// 0: the broker's default.
        replication_factor: i16,
        topic_configs: Vec<KeyValue>,
    }
);

flexible_struct!(
    /// A member's endpoint for interactive queries.
    Endpoint { host: String, port: u16, }
);

flexible_struct!(
    /// A changelog offset of a task.
    TaskOffset { subtopology_id: String, partition: i32, offset: i64, }
);

flexible_struct!(
    /// The tasks of one subtopology (one task per partition).
    TaskIds { subtopology_id: String, partitions: Vec<i32>, }
);

// ------------------------------------------------------------------ StreamsGroupHeartbeat

flexible_struct!(
    /// Indexes into the subtopology's topic arrays of topics that must be copartitioned.
    CopartitionGroup { source_topics: Vec<i16>, source_topic_regex: Vec<i16>, repartition_source_topics: Vec<i16>, }
);

flexible_struct!(
    /// One subtopology as the client declares it.
    Subtopology {
        subtopology_id: String,
        source_topics: Vec<String>,
        source_topic_regex: Vec<String>,
        state_changelog_topics: Vec<TopicInfo>,
        repartition_sink_topics: Vec<String>,
        repartition_source_topics: Vec<TopicInfo>,
        copartition_groups: Vec<CopartitionGroup>,
    }
);

flexible_struct!(
    /// The topology a member joins with.
    Topology { epoch: i32, subtopologies: Vec<Subtopology>, }
);

flexible_struct!(
    /// A StreamsGroupHeartbeat request, v0-v1 (v1 has v0's layout).
    StreamsGroupHeartbeatRequest {
        group_id: String,
        member_id: String,
        /// 0 joins, -1 leaves, -2 a static member leaving for a while.
        member_epoch: i32,
        endpoint_information_epoch: i32,
        instance_id: Option<String>,
        rack_id: Option<String>,
        /// -1: unchanged.
        rebalance_timeout_ms: i32,
        /// Only when joining (epoch 0).
        topology: Option<Topology>,
        active_tasks: Option<Vec<TaskIds>>,
        standby_tasks: Option<Vec<TaskIds>>,
        warmup_tasks: Option<Vec<TaskIds>>,
        process_id: Option<String>,
        user_endpoint: Option<Endpoint>,
        client_tags: Option<Vec<KeyValue>>,
        task_offsets: Option<Vec<TaskOffset>>,
        task_end_offsets: Option<Vec<TaskOffset>>,
        shutdown_application: bool,
    }
);
message!(StreamsGroupHeartbeatRequest, max 1, header 2);
request!(StreamsGroupHeartbeatRequest => StreamsGroupHeartbeatResponse, key ApiKey::StreamsGroupHeartbeat);

flexible_struct!(
    /// A status of the group the member should know about.
    Status {
        /// 0 STALE_TOPOLOGY, 1 MISSING_SOURCE_TOPICS, 2 INCORRECTLY_PARTITIONED_TOPICS,
        /// 3 MISSING_INTERNAL_TOPICS, 4 SHUTDOWN_APPLICATION, 5 ASSIGNMENT_DELAYED,
        /// 6 MISSING_CLIENT_TAGS (v1+).
        status_code: i8,
        status_detail: String,
    }
);

flexible_struct!(
    /// A topic's partitions.
    TopicPartition { topic: String, partitions: Vec<i32>, }
);

flexible_struct!(
    /// What one member serves, for interactive queries.
    EndpointToPartitions {
        user_endpoint: Endpoint,
        active_partitions: Vec<TopicPartition>,
        standby_partitions: Vec<TopicPartition>,
    }
);

flexible_struct!(
    /// A StreamsGroupHeartbeat response, v0-v1.
    StreamsGroupHeartbeatResponse {
        throttle_time_ms: i32,
        error_code: i16,
        error_message: Option<String>,
        member_id: String,
        member_epoch: i32,
        heartbeat_interval_ms: i32,
        /// v0 only.
        acceptable_recovery_lag_legacy: Until<0, i32>,
        task_offset_interval_ms: i32,
        /// v1+.
        acceptable_recovery_lag: Since<1, i64>,
        status: Option<Vec<Status>>,
        active_tasks: Option<Vec<TaskIds>>,
        standby_tasks: Option<Vec<TaskIds>>,
        warmup_tasks: Option<Vec<TaskIds>>,
        /// v1+ (KIP-1331).
        topology_description_required: Since<1, bool>,
        endpoint_information_epoch: i32,
        partitions_by_user_endpoint: Option<Vec<EndpointToPartitions>>,
    }
);
message!(StreamsGroupHeartbeatResponse, max 1, header 1);

// ------------------------------------------------------------------ StreamsGroupDescribe

flexible_struct!(
    /// A StreamsGroupDescribe request, v0-v1.
    StreamsGroupDescribeRequest {
        group_ids: Vec<String>,
        include_authorized_operations: bool,
        /// v1+.
        include_topology_description: Since<1, bool>,
    }
);
message!(StreamsGroupDescribeRequest, max 1, header 2);
request!(StreamsGroupDescribeRequest => StreamsGroupDescribeResponse, key ApiKey::StreamsGroupDescribe);

flexible_struct!(
    /// A configured subtopology as the coordinator holds it.
    DescribedSubtopology {
        subtopology_id: String,
        source_topics: Vec<String>,
        repartition_sink_topics: Vec<String>,
        state_changelog_topics: Vec<TopicInfo>,
        repartition_source_topics: Vec<TopicInfo>,
    }
);

flexible_struct!(
    /// The topology the group is initialized with.
    DescribedTopology {
        epoch: i32,
        /// Null while the group is not configured (missing topics).
        subtopologies: Option<Vec<DescribedSubtopology>>,
    }
);

flexible_struct!(
    /// Active, standby and warm-up tasks.
    Assignment { active_tasks: Vec<TaskIds>, standby_tasks: Vec<TaskIds>, warmup_tasks: Vec<TaskIds>, }
);

flexible_struct!(
    /// One member of a described group.
    DescribedMember {
        member_id: String,
        member_epoch: i32,
        instance_id: Option<String>,
        rack_id: Option<String>,
        client_id: String,
        client_host: String,
        topology_epoch: i32,
        process_id: String,
        user_endpoint: Option<Endpoint>,
        client_tags: Vec<KeyValue>,
        task_offsets: Vec<TaskOffset>,
        task_end_offsets: Vec<TaskOffset>,
        assignment: Assignment,
        target_assignment: Assignment,
        is_classic: bool,
    }
);

flexible_struct!(
    /// A node of a topology description (KIP-1331).
    TopologyDescriptionNode {
        name: String,
        /// 1 SOURCE, 2 PROCESSOR, 3 SINK.
        node_type: i8,
        source_topics: Vec<String>,
        sink_topic: Option<String>,
        stores: Vec<String>,
        successors: Vec<String>,
    }
);

flexible_struct!(
    /// A subtopology of a topology description.
    TopologyDescriptionSubtopology { subtopology_id: String, nodes: Vec<TopologyDescriptionNode>, }
);

flexible_struct!(
    /// A global store of a topology description.
    TopologyDescriptionGlobalStore { source: TopologyDescriptionNode, processor: TopologyDescriptionNode, }
);

flexible_struct!(
    /// A topology description (KIP-1331).
    TopologyDescription {
        subtopologies: Vec<TopologyDescriptionSubtopology>,
        global_stores: Vec<TopologyDescriptionGlobalStore>,
    }
);

/// StreamsGroupDescribe v1's TopologyDescriptionStatus when none was asked for.
pub const TOPOLOGY_DESCRIPTION_NOT_REQUESTED: i8 = 0;
/// ... when the broker holds no description of the group's topology.
pub const TOPOLOGY_DESCRIPTION_NOT_STORED: i8 = 1;
/// ... when it is in the answer.
pub const TOPOLOGY_DESCRIPTION_AVAILABLE: i8 = 3;

flexible_struct!(
    /// One described group.
    DescribedGroup {
        error_code: i16,
        error_message: Option<String>,
        group_id: String,
        group_state: String,
        group_epoch: i32,
        assignment_epoch: i32,
        topology: Option<DescribedTopology>,
        members: Vec<DescribedMember>,
        authorized_operations: i32,
        /// v1+.
        topology_description: Since<1, Option<TopologyDescription>>,
        /// v1+.
        topology_description_status: Since<1, i8>,
        /// v1+.
        assignor_name: Since<1, Option<String>>,
    }
);

flexible_struct!(
    /// A StreamsGroupDescribe response, v0-v1.
    StreamsGroupDescribeResponse { throttle_time_ms: i32, groups: Vec<DescribedGroup>, }
);
message!(StreamsGroupDescribeResponse, max 1, header 1);

// ------------------------------------------------------------------ StreamsGroupTopologyDescriptionUpdate

flexible_struct!(
    /// A StreamsGroupTopologyDescriptionUpdate request, v0 (KIP-1331).
    StreamsGroupTopologyDescriptionUpdateRequest {
        group_id: String,
        member_id: String,
        topology_epoch: i32,
        topology_description: TopologyDescription,
    }
);
message!(StreamsGroupTopologyDescriptionUpdateRequest, max 0, header 2);
request!(
    StreamsGroupTopologyDescriptionUpdateRequest => StreamsGroupTopologyDescriptionUpdateResponse,
    key ApiKey::StreamsGroupTopologyDescriptionUpdate
);

flexible_struct!(
    /// A StreamsGroupTopologyDescriptionUpdate response, v0.
    StreamsGroupTopologyDescriptionUpdateResponse {
        throttle_time_ms: i32,
        error_code: i16,
        error_message: Option<String>,
    }
);
message!(StreamsGroupTopologyDescriptionUpdateResponse, max 0, header 1);
