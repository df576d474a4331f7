//! ListOffsets: one partition, many partitions in one request, and the log
//! bounds of many partitions (two requests pipelined, one round trip).

use kafgres_wire::error_code;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, ListOffsetsResponse};

use super::{topic_name, unexpected, Client};
use crate::error::ClientError;
use crate::wait::Wait;

const API: &str = "ListOffsets";

/// Which offset of a partition to look up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset.
    Earliest,
    /// The log end offset (the high watermark).
    Latest,
    /// The first offset whose timestamp is at or after this time (ms since
    /// the epoch); offset -1 if there is none.
    Timestamp(i64),
}

impl OffsetSpec {
    fn wire_timestamp(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::Timestamp(ms) => ms,
        }
    }
}

/// One partition's answer in a many-partition lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionOffset {
    pub topic: String,
    pub partition: i32,
    /// 0, or the Kafka error for this partition (offset and timestamp are then -1).
    pub error_code: i16,
    pub offset: i64,
    pub timestamp: i64,
}

/// A partition's log start and end offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogBounds {
    pub topic: String,
    pub partition: i32,
    /// 0, or the first Kafka error met for this partition (offsets are then -1).
    pub error_code: i16,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
}

impl<W: Wait> Client<W> {
    /// One partition's offset for `spec`: `(offset, timestamp)`, each -1 when
    /// the broker has none (a time after every record).
    pub fn list_offsets(&mut self, topic: &str, partition: i32, spec: OffsetSpec) -> Result<(i64, i64), ClientError> {
        let [p] = <[PartitionOffset; 1]>::try_from(self.list_offsets_many(&[(topic, partition)], spec)?)
            .map_err(|v| unexpected(API, format_args!("has {} partitions, not 1", v.len())))?;
        if p.error_code != error_code::NONE {
            return Err(ClientError::kafka(API, p.error_code, format!("{topic}-{partition}")));
        }
        Ok((p.offset, p.timestamp))
    }

    /// The offsets for `spec` of many partitions in one request, in the order
    /// asked; per-partition errors are in each answer.
    pub fn list_offsets_many(
        &mut self,
        partitions: &[(&str, i32)],
        spec: OffsetSpec,
    ) -> Result<Vec<PartitionOffset>, ClientError> {
        let request = list_offsets_request(partitions, spec)?;
        let response = self.call(&request)?;
        answers(partitions, &response)
    }

    /// Log start and end offsets of many partitions: the two lookups are sent
    /// together and answered in one round trip.
    pub fn log_bounds(&mut self, partitions: &[(&str, i32)]) -> Result<Vec<LogBounds>, ClientError> {
        let earliest = list_offsets_request(partitions, OffsetSpec::Earliest)?;
        let latest = list_offsets_request(partitions, OffsetSpec::Latest)?;
        let deadline = self.deadline(std::time::Duration::ZERO);
        let first = self.conn.send(&earliest, deadline)?;
        let second = self.conn.send(&latest, deadline)?;
        let starts = answers(partitions, &self.conn.receive::<ListOffsetsRequest>(first, deadline)?)?;
        let ends = answers(partitions, &self.conn.receive::<ListOffsetsRequest>(second, deadline)?)?;
        let bounds = starts.into_iter().zip(ends).map(|(start, end)| {
            let code = if start.error_code != error_code::NONE { start.error_code } else { end.error_code };
            let ok = code == error_code::NONE;
            LogBounds {
                topic: start.topic,
                partition: start.partition,
                error_code: code,
                log_start_offset: if ok { start.offset } else { -1 },
                log_end_offset: if ok { end.offset } else { -1 },
            }
        });
        Ok(bounds.collect())
    }
}

/// One request for every partition, grouped by topic; a partition asked
/// twice is refused (Kafka answers INVALID_REQUEST for duplicates).
fn list_offsets_request(partitions: &[(&str, i32)], spec: OffsetSpec) -> Result<ListOffsetsRequest, ClientError> {
    let mut topics: Vec<ListOffsetsTopic> = Vec::new();
    for (i, &(topic, partition)) in partitions.iter().enumerate() {
        if partitions[..i].contains(&(topic, partition)) {
            return Err(ClientError::InvalidArgument(format!("{topic}-{partition} asked twice")));
        }
        let p = ListOffsetsPartition::default()
            .with_partition_index(partition)
            .with_current_leader_epoch(-1)
            .with_timestamp(spec.wire_timestamp());
        let name = topic_name(topic);
        match topics.iter_mut().find(|t| t.name == name) {
            Some(t) => t.partitions.push(p),
            None => topics.push(ListOffsetsTopic::default().with_name(name).with_partitions(vec![p])),
        }
    }
    Ok(ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_isolation_level(0).with_topics(topics))
}

/// The answers for `partitions`, in their order.
fn answers(partitions: &[(&str, i32)], response: &ListOffsetsResponse) -> Result<Vec<PartitionOffset>, ClientError> {
    partitions
        .iter()
        .map(|&(topic, partition)| {
            let answer = response
                .topics
                .iter()
                .filter(|t| t.name.as_str() == topic)
                .flat_map(|t| t.partitions.iter())
                .find(|p| p.partition_index == partition)
                .ok_or_else(|| unexpected(API, format_args!("has no answer for {topic}-{partition}")))?;
            let ok = answer.error_code == error_code::NONE;
            Ok(PartitionOffset {
                topic: topic.to_owned(),
                partition,
                error_code: answer.error_code,
                offset: if ok { answer.offset } else { -1 },
                timestamp: if ok { answer.timestamp } else { -1 },
            })
        })
        .collect()
}
