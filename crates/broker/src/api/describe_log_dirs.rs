//! DescribeLogDirs: the broker's one log directory (`kafgres.log_dir`) with
//! every partition in it, each with the bytes its files take. There are no
//! replicas being moved, so the offset lag is 0 and no partition is a future
//! one. From v4 the directory's total and usable bytes (statvfs).

use std::path::Path;

use kafgres_wire::ApiKey;
use kafgres_wire::{error_code, messages};
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};

use super::handler::{Answer, Handler, RequestContext, Versions};
use super::{str_bytes, topic_name};
use crate::acl::Operation;
use crate::config::BrokerConfig;
use crate::topics::{partition_dir, Topics};

/// Total and usable bytes are in the response from v4 (KIP-827).
const SPACE_VERSION_MIN: i16 = 4;

pub struct DescribeLogDirs;

impl Handler for DescribeLogDirs {
    const KEY: ApiKey = ApiKey::DescribeLogDirs;
    /// v1-v5: Kafka 4.4's range (KIP-896 removed v0); v4 adds the
    /// directory's total and usable bytes (KIP-827), v5 whether it is
    /// cordoned (never: Kafgres has one log directory and no cordoning).
    const VERSIONS: Versions = Versions::new(1, 5);
    type Request = messages::DescribeLogDirsRequest;
    type Response = messages::DescribeLogDirsResponse;
    type Services<'a> = (&'a BrokerConfig, &'a Topics);

    async fn handle(
        (config, topics): Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: messages::DescribeLogDirsRequest,
    ) -> Answer<messages::DescribeLogDirsResponse> {
        let request = request.0;
        let version = cx.api_version;
        if !cx.may_on_cluster(Operation::Describe) {
            // Kafka answers no directory, and from v3 says why.
            let mut response = messages::DescribeLogDirsResponse::default();
            if version >= 3 {
                response.error_code = error_code::CLUSTER_AUTHORIZATION_FAILED;
            }
            return response.into();
        }
        // (topic, partitions) to describe: null asks for every partition of every
        // topic; partitions that do not exist are left out, as in Kafka.
        let wanted: Vec<(String, Vec<i32>)> = match request.topics {
            None => topics.all().iter().map(|t| (t.name.clone(), (0..t.partitions.len() as i32).collect())).collect(),
            Some(asked) => asked
                .into_iter()
                .filter_map(|t| {
                    let topic = topics.get(&t.topic.0)?;
                    let partitions: Vec<i32> =
                        t.partitions.into_iter().filter(|p| topic.partition(*p).is_some()).collect();
                    Some((topic.name.clone(), partitions))
                })
                .collect(),
        };
        let log_dir = config.log_dir.clone();
        // Sizes and space come from the file system: off the async workers.
        let measured = tokio::task::spawn_blocking(move || {
            let sizes: Vec<(String, Vec<(i32, i64)>)> = wanted
                .into_iter()
                .map(|(topic, partitions)| {
                    let sizes = partitions
                        .iter()
                        .map(|p| (*p, directory_bytes(&partition_dir(&log_dir, &topic, *p))))
                        .collect();
                    (topic, sizes)
                })
                .collect();
            (sizes, disk_space(&log_dir))
        })
        .await;
        let mut response = messages::DescribeLogDirsResponse::default();
        let mut result = DescribeLogDirsResult::default();
        result.log_dir = str_bytes(&config.log_dir.display().to_string());
        match measured {
            Ok((sizes, space)) => {
                result.topics = sizes
                    .into_iter()
                    .filter(|(_, partitions)| !partitions.is_empty())
                    .map(|(topic, partitions)| {
                        let mut t = DescribeLogDirsTopic::default();
                        t.name = topic_name(&topic);
                        t.partitions = partitions
                            .into_iter()
                            .map(|(index, size)| {
                                let mut p = DescribeLogDirsPartition::default();
                                p.partition_index = index;
                                p.partition_size = size;
                                p.offset_lag = 0;
                                p.is_future_key = false;
                                p
                            })
                            .collect();
                        t
                    })
                    .collect();
                if version >= SPACE_VERSION_MIN {
                    if let Some((total, usable)) = space {
                        result.total_bytes = total;
                        result.usable_bytes = usable;
                    }
                }
            }
            Err(e) => {
                log::error!("DescribeLogDirs task failed: {e}");
                result.error_code = error_code::KAFKA_STORAGE_ERROR;
            }
        }
        response.results.push(messages::DescribeLogDirsResult { result, is_cordoned: false });
        response.into()
    }
}

/// The bytes of the files directly in `dir` (a partition directory has no
/// sub-directories); 0 if it cannot be read.
fn directory_bytes(dir: &Path) -> i64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len() as i64)
                .sum()
        })
        .unwrap_or(0)
}

/// (total, usable) bytes of the file system holding `dir`, as Kafka reports
/// them (`getTotalSpace`, `getUsableSpace`: blocks available to unprivileged
/// users).
fn disk_space(dir: &Path) -> Option<(i64, i64)> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: `statvfs` is a C struct of integers only, for which all-zero
    // bytes are a valid value; statvfs(3) overwrites it on success.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a NUL-terminated string and `stat` a valid out-pointer.
    if unsafe { libc::statvfs(path.as_ptr(), &mut stat) } != 0 {
        return None;
    }
    let block = stat.f_frsize as u128;
    let clamp = |blocks: u128| i64::try_from(blocks * block).unwrap_or(i64::MAX);
    Some((clamp(stat.f_blocks as u128), clamp(stat.f_bavail as u128)))
}
