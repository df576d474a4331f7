//! Reading a partition's log for a share-partition: the batches at an
//! offset, as bytes to send and as the headers acquisition needs.

use bytes::Bytes;
use kafgres_log::{AbortedTxn, LogError};
use kafgres_record::BatchHeader;

use super::config::IsolationLevel;
use super::partition::LogBatch;
use crate::partition::Partition;

/// Batches read from one offset: each batch's header as acquisition needs
/// it and its bytes.
pub struct ReadBatches {
    pub batches: Vec<(LogBatch, Bytes)>,
}

/// The end of what a share group may read: the high watermark, or under
/// read_committed the last stable offset.
pub fn fetchable_end(partition: &Partition, isolation: IsolationLevel) -> i64 {
    match isolation {
        IsolationLevel::ReadUncommitted => partition.high_watermark().offset,
        IsolationLevel::ReadCommitted => partition.last_stable_offset(),
    }
}

/// Reads up to `bytes_max` from `offset`, below the fetchable end; with
/// `first_whole`, the first batch whole even if larger (what an answer that
/// holds nothing yet may do). Records of aborted transactions are flagged
/// under read_committed.
pub fn read_batches(
    partition: &Partition,
    offset: i64,
    bytes_max: u64,
    first_whole: bool,
    isolation: IsolationLevel,
) -> Result<ReadBatches, LogError> {
    let (slice, aborted) = match isolation {
        IsolationLevel::ReadUncommitted => (partition.read(offset, bytes_max, first_whole)?, Vec::new()),
        IsolationLevel::ReadCommitted => {
            let (slice, _, aborted) = partition.read_committed(offset, bytes_max, first_whole)?;
            (slice, aborted)
        }
    };
    let bytes = Bytes::from(slice.read_to_vec()?);
    Ok(ReadBatches { batches: split_batches(&bytes, &aborted) })
}

/// Splits bytes read from the log into batches; a torn tail (a read cut
/// inside a batch) is left out.
fn split_batches(bytes: &Bytes, aborted: &[AbortedTxn]) -> Vec<(LogBatch, Bytes)> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let Ok(header) = BatchHeader::parse(&bytes[at..]) else { break };
        let end = at + header.total_bytes();
        if header.batch_length <= 0 || end > bytes.len() {
            break;
        }
        let batch = LogBatch {
            base_offset: header.base_offset,
            last_offset: header.last_offset(),
            is_control: header.is_control(),
            aborted: header.is_transactional()
                && !header.is_control()
                && aborted.iter().any(|a| {
                    a.producer_id == header.producer_id
                        && a.first_offset <= header.base_offset
                        && header.last_offset() <= a.last_offset
                }),
        };
        out.push((batch, bytes.slice(at..end)));
        at = end;
    }
    out
}
