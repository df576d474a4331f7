//! Counters and the table of live connections, in a block of memory the
//! host chooses: Postgres shared memory in the extension (so SQL views can
//! read what the data plane counts, from any backend), a leaked allocation in
//! tests.
//!
//! Everything is plain atomics in a `#[repr(C)]` struct that is valid when
//! all zero, so the host can place it in memory it zeroes itself. Writers are
//! data-plane threads; readers are other processes, which copy a connection
//! slot under its sequence counter (odd while a writer changes it) and retry
//! or skip a slot that changed under them.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};

/// Latency histogram buckets (fdatasyncs, Produce and woken-Fetch spans):
/// bucket `i` counts events that took less than 2^i microseconds (the last
/// one: everything slower).
pub const LATENCY_BUCKETS: usize = 24;
/// Connections listed in the table; more are served but not listed.
pub const CONNECTION_SLOTS: usize = 1024;
/// Bytes of a client id kept for the connection table.
pub const CLIENT_ID_BYTES: usize = 64;
/// Bytes of an authenticated principal kept (PostgreSQL role names have at most 63).
pub const PRINCIPAL_BYTES: usize = 64;
/// API keys counted one by one (Kafka 4.4's highest is below this); a
/// request of a higher key counts in no per-API row.
pub const API_KEYS: usize = 128;
/// Versions counted per API; higher ones count in the last row.
pub const API_VERSIONS: usize = 32;
/// Error codes counted per API: -1 (UNKNOWN_SERVER_ERROR) up to
/// `ERROR_CODES - 2`; any other counts as -1.
pub const ERROR_CODES: usize = 160;

#[repr(C)]
#[derive(Debug, Default)]
pub struct BrokerMetrics {
    /// Group-commit rounds (one fdatasync each) and the batches they covered:
    /// their ratio is how many appends share an fdatasync.
    pub flushes: AtomicU64,
    pub flushed_batches: AtomicU64,
    pub flush_micros_total: AtomicU64,
    pub flush_micros_max: AtomicU64,
    pub flush_latency: [AtomicU64; LATENCY_BUCKETS],
    pub appended_batches: AtomicU64,
    pub appended_bytes: AtomicU64,
    pub requests: AtomicU64,
    pub produce_requests: AtomicU64,
    pub fetch_requests: AtomicU64,
    /// Produce requests handled past authentication, and their total time in
    /// the broker: from the request's last byte read to its answer written
    /// (acks=all: durability included). Their ratio is the broker's mean
    /// share of a client's send latency.
    pub produce_answered: AtomicU64,
    pub produce_micros_total: AtomicU64,
    /// The same spans by duration: a client's tail latency can be set
    /// against the broker's tail, not only its mean.
    pub produce_latency: [AtomicU64; LATENCY_BUCKETS],
    /// Fetches answered because an append woke their long poll, and their
    /// total time in the broker from that append's publish to the answer's
    /// last byte sent: the broker's share of a consumer's end-to-end latency.
    pub fetch_woken: AtomicU64,
    pub fetch_woken_micros_total: AtomicU64,
    pub fetch_woken_latency: [AtomicU64; LATENCY_BUCKETS],
    pub connections_accepted: AtomicU64,
    pub connections_open: AtomicU64,
    pub connections_refused: AtomicU64,
    /// Responses after which a connection was muted for its quota.
    pub throttled_requests: AtomicU64,
    /// Rounds of committed SQL transactions applied, and their records.
    pub sql_rounds: AtomicU64,
    pub sql_records: AtomicU64,
    /// Per API (Kafka's RequestMetrics): requests by version, the error
    /// codes their answers carried (as Kafka's `errorCounts`, NONE
    /// included), and each request's time in the broker from its last byte
    /// read to its answer written.
    pub api: ApiMetrics,
    pub connections: ConnectionTable,
    /// Segment archiving (`crate::archive`).
    pub archive: ArchiveBoard,
    /// This node's replication (`crate::replication::board`).
    pub replication: crate::replication::board::ReplicationBoard,
}

impl BrokerMetrics {
    /// A zeroed block that lives for the rest of the process (tests, and any
    /// host without shared memory).
    pub fn leaked() -> &'static BrokerMetrics {
        // Zeroed in place, as the extension's shared memory is: the block is
        // hundreds of KiB, too large to build on a test thread's stack first.
        // SAFETY: BrokerMetrics is `repr(C)` and made only of atomic integers
        // and arrays of them, for which all-zero bytes are a valid value.
        Box::leak(unsafe { Box::<BrokerMetrics>::new_zeroed().assume_init() })
    }

    pub fn record_flush(&self, batches: u64, micros: u64) {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        self.flushed_batches.fetch_add(batches, Ordering::Relaxed);
        self.flush_micros_total.fetch_add(micros, Ordering::Relaxed);
        self.flush_micros_max.fetch_max(micros, Ordering::Relaxed);
        count_in_bucket(&self.flush_latency, micros);
    }

    pub fn record_produce_time(&self, spent: std::time::Duration) {
        let micros = u64::try_from(spent.as_micros()).unwrap_or(u64::MAX);
        self.produce_answered.fetch_add(1, Ordering::Relaxed);
        self.produce_micros_total.fetch_add(micros, Ordering::Relaxed);
        count_in_bucket(&self.produce_latency, micros);
    }

    pub fn record_fetch_wake_time(&self, spent: std::time::Duration) {
        let micros = u64::try_from(spent.as_micros()).unwrap_or(u64::MAX);
        self.fetch_woken.fetch_add(1, Ordering::Relaxed);
        self.fetch_woken_micros_total.fetch_add(micros, Ordering::Relaxed);
        count_in_bucket(&self.fetch_woken_latency, micros);
    }

    pub fn record_append(&self, batches: u64, bytes: u64) {
        self.appended_batches.fetch_add(batches, Ordering::Relaxed);
        self.appended_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Every counter by name, in a fixed order (what `kafgres.broker_metrics` shows).
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        vec![
            ("flushes", get(&self.flushes)),
            ("flushed_batches", get(&self.flushed_batches)),
            ("flush_micros_total", get(&self.flush_micros_total)),
            ("flush_micros_max", get(&self.flush_micros_max)),
            ("appended_batches", get(&self.appended_batches)),
            ("appended_bytes", get(&self.appended_bytes)),
            ("requests", get(&self.requests)),
            ("produce_requests", get(&self.produce_requests)),
            ("fetch_requests", get(&self.fetch_requests)),
            ("produce_answered", get(&self.produce_answered)),
            ("produce_micros_total", get(&self.produce_micros_total)),
            ("fetch_woken", get(&self.fetch_woken)),
            ("fetch_woken_micros_total", get(&self.fetch_woken_micros_total)),
            ("connections_accepted", get(&self.connections_accepted)),
            ("connections_open", get(&self.connections_open)),
            ("connections_refused", get(&self.connections_refused)),
            ("throttled_requests", get(&self.throttled_requests)),
            ("sql_rounds", get(&self.sql_rounds)),
            ("sql_records", get(&self.sql_records)),
        ]
    }

    /// (upper bound in microseconds, count) per histogram bucket; the last
    /// bound is `u64::MAX`.
    pub fn flush_histogram(&self) -> Vec<(u64, u64)> {
        histogram(&self.flush_latency)
    }

    /// Each broker span's histogram by name, as `flush_histogram` gives
    /// buckets (what `kafgres.request_latency` shows): `produce` and
    /// `fetch_woken`, the spans `produce_micros_total` and
    /// `fetch_woken_micros_total` add up.
    pub fn span_histograms(&self) -> Vec<(&'static str, Vec<(u64, u64)>)> {
        vec![("produce", histogram(&self.produce_latency)), ("fetch_woken", histogram(&self.fetch_woken_latency))]
    }
}

/// Bytes kept of the last archived file's name and of the last failure.
pub const ARCHIVE_TEXT_BYTES: usize = 256;

/// What `crate::archive` did, for `kafgres.archive_status` and the metrics
/// endpoint. Texts are written under `sequence` (odd while changing).
#[repr(C)]
#[derive(Debug, Default)]
pub struct ArchiveBoard {
    pub segments_archived: AtomicU64,
    pub files_archived: AtomicU64,
    pub bytes_archived: AtomicU64,
    pub failures: AtomicU64,
    /// Closed segments not archived yet, as of the task's last pass.
    pub backlog_segments: AtomicU64,
    pub last_archived_ms: AtomicI64,
    pub last_failure_ms: AtomicI64,
    sequence: AtomicU64,
    last_archived_len: AtomicU32,
    last_archived: [AtomicU64; ARCHIVE_TEXT_BYTES / 8],
    last_failure_len: AtomicU32,
    last_failure: [AtomicU64; ARCHIVE_TEXT_BYTES / 8],
}

/// A copy of the [`ArchiveBoard`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ArchiveStatus {
    pub segments_archived: u64,
    pub files_archived: u64,
    pub bytes_archived: u64,
    pub failures: u64,
    pub backlog_segments: u64,
    /// Milliseconds since the Unix epoch; 0: never.
    pub last_archived_ms: i64,
    pub last_archived: String,
    pub last_failure_ms: i64,
    pub last_failure: String,
}

impl ArchiveBoard {
    pub fn record_file(&self, now_ms: i64, relative: &str, bytes: u64) {
        self.files_archived.fetch_add(1, Ordering::Relaxed);
        self.bytes_archived.fetch_add(bytes, Ordering::Relaxed);
        self.last_archived_ms.store(now_ms, Ordering::Relaxed);
        let seq = self.sequence.fetch_add(1, Ordering::Acquire);
        let len = write_bytes(&self.last_archived, relative.as_bytes());
        self.last_archived_len.store(len as u32, Ordering::Relaxed);
        self.sequence.store(seq + 2, Ordering::Release);
    }

    pub fn record_segment(&self) {
        self.segments_archived.fetch_add(1, Ordering::Relaxed);
    }

    pub fn record_failure(&self, now_ms: i64, reason: &str) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.last_failure_ms.store(now_ms, Ordering::Relaxed);
        let seq = self.sequence.fetch_add(1, Ordering::Acquire);
        let len = write_bytes(&self.last_failure, reason.as_bytes());
        self.last_failure_len.store(len as u32, Ordering::Relaxed);
        self.sequence.store(seq + 2, Ordering::Release);
    }

    pub fn set_backlog(&self, segments: u64) {
        self.backlog_segments.store(segments, Ordering::Relaxed);
    }

    pub fn status(&self) -> ArchiveStatus {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let texts = (0..4).find_map(|_| {
            let before = self.sequence.load(Ordering::Acquire);
            if before % 2 == 1 {
                std::hint::spin_loop();
                return None;
            }
            let archived = read_bytes(&self.last_archived, self.last_archived_len.load(Ordering::Relaxed) as usize);
            let failure = read_bytes(&self.last_failure, self.last_failure_len.load(Ordering::Relaxed) as usize);
            std::sync::atomic::fence(Ordering::Acquire);
            (self.sequence.load(Ordering::Relaxed) == before).then_some((archived, failure))
        });
        let (last_archived, last_failure) = texts.unwrap_or_default();
        ArchiveStatus {
            segments_archived: get(&self.segments_archived),
            files_archived: get(&self.files_archived),
            bytes_archived: get(&self.bytes_archived),
            failures: get(&self.failures),
            backlog_segments: get(&self.backlog_segments),
            last_archived_ms: self.last_archived_ms.load(Ordering::Relaxed),
            last_archived,
            last_failure_ms: self.last_failure_ms.load(Ordering::Relaxed),
            last_failure,
        }
    }
}

/// The per-API counters of [`BrokerMetrics::api`].
#[repr(C)]
#[derive(Debug)]
pub struct ApiMetrics {
    requests: [[AtomicU64; API_VERSIONS]; API_KEYS],
    errors: [[AtomicU64; ERROR_CODES]; API_KEYS],
    latency: [[AtomicU64; LATENCY_BUCKETS]; API_KEYS],
    micros_total: [AtomicU64; API_KEYS],
}

impl Default for ApiMetrics {
    fn default() -> Self {
        ApiMetrics {
            requests: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            errors: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            latency: std::array::from_fn(|_| std::array::from_fn(|_| AtomicU64::new(0))),
            micros_total: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// One API's counters, as [`ApiMetrics::snapshot`] copies them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiCounts {
    pub api_key: i16,
    /// (version, requests), versions with none left out.
    pub requests: Vec<(i16, u64)>,
    /// (error code, times answered), codes never answered left out.
    pub errors: Vec<(i16, u64)>,
    /// As [`BrokerMetrics::flush_histogram`] gives buckets.
    pub latency: Vec<(u64, u64)>,
    pub micros_total: u64,
}

impl ApiMetrics {
    pub fn count_request(&self, api_key: i16, version: i16) {
        let (Ok(key), Ok(version)) = (usize::try_from(api_key), usize::try_from(version)) else { return };
        if let Some(row) = self.requests.get(key) {
            row[version.min(API_VERSIONS - 1)].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn count_error(&self, api_key: i16, code: i16) {
        let Some(row) = usize::try_from(api_key).ok().and_then(|k| self.errors.get(k)) else { return };
        let index = usize::try_from(i32::from(code) + 1).ok().filter(|&i| i < ERROR_CODES).unwrap_or(0);
        row[index].fetch_add(1, Ordering::Relaxed);
    }

    pub fn record_time(&self, api_key: i16, spent: std::time::Duration) {
        let Some(key) = usize::try_from(api_key).ok().filter(|&k| k < API_KEYS) else { return };
        let micros = u64::try_from(spent.as_micros()).unwrap_or(u64::MAX);
        self.micros_total[key].fetch_add(micros, Ordering::Relaxed);
        count_in_bucket(&self.latency[key], micros);
    }

    /// Every API that has been asked anything.
    pub fn snapshot(&self) -> Vec<ApiCounts> {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        (0..API_KEYS)
            .filter_map(|key| {
                let requests: Vec<(i16, u64)> = (0..API_VERSIONS)
                    .map(|v| (v as i16, get(&self.requests[key][v])))
                    .filter(|&(_, n)| n > 0)
                    .collect();
                if requests.is_empty() {
                    return None;
                }
                let errors = (0..ERROR_CODES)
                    .map(|i| (i as i16 - 1, get(&self.errors[key][i])))
                    .filter(|&(_, n)| n > 0)
                    .collect();
                Some(ApiCounts {
                    api_key: key as i16,
                    requests,
                    errors,
                    latency: histogram(&self.latency[key]),
                    micros_total: get(&self.micros_total[key]),
                })
            })
            .collect()
    }
}

fn count_in_bucket(buckets: &[AtomicU64; LATENCY_BUCKETS], micros: u64) {
    let bucket = (64 - micros.leading_zeros() as usize).min(LATENCY_BUCKETS - 1);
    buckets[bucket].fetch_add(1, Ordering::Relaxed);
}

fn histogram(buckets: &[AtomicU64; LATENCY_BUCKETS]) -> Vec<(u64, u64)> {
    (0..LATENCY_BUCKETS)
        .map(|i| {
            let bound = if i + 1 == LATENCY_BUCKETS { u64::MAX } else { 1u64 << i };
            (bound, buckets[i].load(Ordering::Relaxed))
        })
        .collect()
}

/// One live connection, as copied out of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionInfo {
    pub peer: SocketAddr,
    /// The port of the listener it came in on.
    pub listener_port: u16,
    pub client_id: String,
    /// The role the connection authenticated as (SASL); `None` before, or without authentication.
    pub principal: Option<String>,
    pub connected_at_ms: i64,
    pub requests: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

#[repr(C)]
#[derive(Debug, Default)]
pub struct ConnectionSlot {
    /// 0: free. Otherwise a sequence number, odd while being written.
    sequence: AtomicU64,
    ip_high: AtomicU64,
    ip_low: AtomicU64,
    port: AtomicU32,
    listener_port: AtomicU32,
    client_id_len: AtomicU32,
    client_id: [AtomicU64; CLIENT_ID_BYTES / 8],
    /// 0: not authenticated; else the principal's length + 1.
    principal_len: AtomicU32,
    principal: [AtomicU64; PRINCIPAL_BYTES / 8],
    connected_at_ms: AtomicI64,
    requests: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
}

#[repr(C)]
#[derive(Debug)]
pub struct ConnectionTable {
    slots: [ConnectionSlot; CONNECTION_SLOTS],
}

impl Default for ConnectionTable {
    fn default() -> Self {
        ConnectionTable { slots: std::array::from_fn(|_| ConnectionSlot::default()) }
    }
}

/// A connection's claim on a slot; frees it when dropped.
pub struct ConnectionEntry<'a> {
    slot: Option<&'a ConnectionSlot>,
    metrics: &'a BrokerMetrics,
}

impl ConnectionTable {
    fn claim(&self, peer: SocketAddr, listener_port: u16, now_ms: i64) -> Option<&ConnectionSlot> {
        let slot = self.slots.iter().find(|s| {
            s.sequence.load(Ordering::Relaxed) == 0
                && s.sequence.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok()
        })?;
        let ip = match peer.ip() {
            IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            IpAddr::V6(v6) => v6,
        };
        let bits = u128::from(ip);
        slot.ip_high.store((bits >> 64) as u64, Ordering::Relaxed);
        slot.ip_low.store(bits as u64, Ordering::Relaxed);
        slot.port.store(peer.port() as u32, Ordering::Relaxed);
        slot.listener_port.store(listener_port as u32, Ordering::Relaxed);
        slot.client_id_len.store(0, Ordering::Relaxed);
        slot.principal_len.store(0, Ordering::Relaxed);
        slot.connected_at_ms.store(now_ms, Ordering::Relaxed);
        slot.requests.store(0, Ordering::Relaxed);
        slot.bytes_in.store(0, Ordering::Relaxed);
        slot.bytes_out.store(0, Ordering::Relaxed);
        slot.sequence.store(2, Ordering::Release);
        Some(slot)
    }

    /// Copies every live connection out of the table.
    pub fn snapshot(&self) -> Vec<ConnectionInfo> {
        let mut live = Vec::new();
        for slot in &self.slots {
            for _ in 0..4 {
                let before = slot.sequence.load(Ordering::Acquire);
                if before == 0 || before % 2 == 1 {
                    break;
                }
                let bits = ((slot.ip_high.load(Ordering::Relaxed) as u128) << 64)
                    | slot.ip_low.load(Ordering::Relaxed) as u128;
                let ip = Ipv6Addr::from(bits);
                let ip = ip.to_ipv4_mapped().map_or(IpAddr::V6(ip), IpAddr::V4);
                let len = (slot.client_id_len.load(Ordering::Relaxed) as usize).min(CLIENT_ID_BYTES);
                let id = read_bytes(&slot.client_id, len);
                let principal = match slot.principal_len.load(Ordering::Relaxed) as usize {
                    0 => None,
                    n => Some(read_bytes(&slot.principal, (n - 1).min(PRINCIPAL_BYTES))),
                };
                let info = ConnectionInfo {
                    peer: SocketAddr::new(ip, slot.port.load(Ordering::Relaxed) as u16),
                    listener_port: slot.listener_port.load(Ordering::Relaxed) as u16,
                    client_id: id,
                    principal,
                    connected_at_ms: slot.connected_at_ms.load(Ordering::Relaxed),
                    requests: slot.requests.load(Ordering::Relaxed),
                    bytes_in: slot.bytes_in.load(Ordering::Relaxed),
                    bytes_out: slot.bytes_out.load(Ordering::Relaxed),
                };
                std::sync::atomic::fence(Ordering::Acquire);
                if slot.sequence.load(Ordering::Relaxed) == before {
                    live.push(info);
                    break;
                }
            }
        }
        live
    }
}

impl BrokerMetrics {
    /// Counts a new connection from `peer` to the listener on `listener_port`
    /// and lists it (if a slot is free).
    pub fn open_connection(&self, peer: SocketAddr, listener_port: u16, now_ms: i64) -> ConnectionEntry<'_> {
        self.connections_accepted.fetch_add(1, Ordering::Relaxed);
        self.connections_open.fetch_add(1, Ordering::Relaxed);
        ConnectionEntry { slot: self.connections.claim(peer, listener_port, now_ms), metrics: self }
    }
}

impl ConnectionEntry<'_> {
    /// Counts one request of `bytes_in` bytes and its `bytes_out`-byte answer.
    pub fn record_request(&self, bytes_in: u64, bytes_out: u64) {
        if let Some(slot) = self.slot {
            slot.requests.fetch_add(1, Ordering::Relaxed);
            slot.bytes_in.fetch_add(bytes_in, Ordering::Relaxed);
            slot.bytes_out.fetch_add(bytes_out, Ordering::Relaxed);
        }
    }

    /// Whether the client id is still unknown (set from the first request).
    pub fn needs_client_id(&self) -> bool {
        self.slot.is_some_and(|s| s.client_id_len.load(Ordering::Relaxed) == 0)
    }

    pub fn set_client_id(&self, id: &[u8]) {
        let Some(slot) = self.slot else { return };
        let seq = slot.sequence.fetch_add(1, Ordering::Acquire); // now odd
        let len = write_bytes(&slot.client_id, id);
        slot.client_id_len.store(len as u32, Ordering::Relaxed);
        slot.sequence.store(seq + 2, Ordering::Release); // even again, and changed
    }

    /// Records the role the connection authenticated as (once).
    pub fn set_principal(&self, principal: &[u8]) {
        let Some(slot) = self.slot else { return };
        if slot.principal_len.load(Ordering::Relaxed) != 0 {
            return;
        }
        let seq = slot.sequence.fetch_add(1, Ordering::Acquire); // now odd
        let len = write_bytes(&slot.principal, principal);
        slot.principal_len.store(len as u32 + 1, Ordering::Relaxed);
        slot.sequence.store(seq + 2, Ordering::Release); // even again, and changed
    }
}

/// Stores up to `8 * words.len()` bytes of `value` into `words`; returns how many.
fn write_bytes(words: &[AtomicU64], value: &[u8]) -> usize {
    let len = value.len().min(words.len() * 8);
    let mut buf = vec![0u8; words.len() * 8];
    buf[..len].copy_from_slice(&value[..len]);
    for (word, chunk) in words.iter().zip(buf.chunks_exact(8)) {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(chunk);
        word.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
    }
    len
}

/// The first `len` bytes stored in `words`, as text.
fn read_bytes(words: &[AtomicU64], len: usize) -> String {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.load(Ordering::Relaxed).to_le_bytes()).collect();
    String::from_utf8_lossy(&bytes[..len.min(bytes.len())]).into_owned()
}

impl Drop for ConnectionEntry<'_> {
    fn drop(&mut self) {
        self.metrics.connections_open.fetch_sub(1, Ordering::Relaxed);
        if let Some(slot) = self.slot {
            slot.sequence.store(0, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_zeroed_block_is_a_valid_empty_one() {
        let size = std::mem::size_of::<BrokerMetrics>();
        // SAFETY: BrokerMetrics is `repr(C)` and made only of atomic integers
        // and arrays of them, for which all-zero bytes are a valid value: the
        // same promise the extension relies on when it places the block in
        // zeroed shared memory, and what this test checks.
        let zeroed: Box<BrokerMetrics> = unsafe { Box::new(std::mem::zeroed()) };
        assert!(zeroed.connections.snapshot().is_empty());
        assert!(zeroed.counters().iter().all(|(_, v)| *v == 0));
        assert!(size > CONNECTION_SLOTS * 64, "{size}");
    }

    #[test]
    fn connections_are_listed_until_they_close() {
        let m = BrokerMetrics::leaked();
        let peer: SocketAddr = "127.0.0.1:5555".parse().expect("literal");
        let a = m.open_connection(peer, 9092, 1000);
        let b = m.open_connection("[::1]:6000".parse().expect("literal"), 9093, 2000);
        assert!(a.needs_client_id());
        a.set_client_id(b"rdkafka-client-with-a-rather-long-name-that-goes-past-the-sixty-four-byte-limit");
        a.record_request(100, 40);
        a.set_principal(b"app_role");
        let mut live = m.connections.snapshot();
        live.sort_by_key(|c| c.connected_at_ms);
        assert_eq!(live.len(), 2);
        assert_eq!(live[0].peer, peer);
        assert_eq!((live[0].listener_port, live[1].listener_port), (9092, 9093));
        assert_eq!(live[0].client_id.len(), CLIENT_ID_BYTES);
        assert!(live[0].client_id.starts_with("rdkafka-client"));
        assert_eq!(live[0].principal.as_deref(), Some("app_role"));
        assert_eq!(live[1].principal, None);
        assert_eq!((live[0].requests, live[0].bytes_in, live[0].bytes_out), (1, 100, 40));
        assert_eq!(live[1].peer.ip().to_string(), "::1");
        drop(a);
        assert_eq!(m.connections.snapshot().len(), 1);
        assert_eq!(m.connections_open.load(Ordering::Relaxed), 1);
        drop(b);
        assert!(m.connections.snapshot().is_empty());
        assert_eq!(m.connections_accepted.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn flush_latencies_land_in_power_of_two_buckets() {
        let m = BrokerMetrics::leaked();
        m.record_flush(3, 0);
        m.record_flush(5, 250);
        m.record_flush(1, u64::MAX / 2);
        let h = m.flush_histogram();
        assert_eq!(h[0], (1, 1)); // 0 µs: < 1
        assert_eq!(h[8], (256, 1)); // 250 µs: < 256
        assert_eq!(h[LATENCY_BUCKETS - 1], (u64::MAX, 1));
        let counters: std::collections::HashMap<_, _> = m.counters().into_iter().collect();
        assert_eq!((counters["flushes"], counters["flushed_batches"]), (3, 9));
    }

    #[test]
    fn produce_and_woken_fetch_spans_have_histograms_of_their_own() {
        let m = BrokerMetrics::leaked();
        m.record_produce_time(std::time::Duration::from_micros(40));
        m.record_produce_time(std::time::Duration::from_micros(70));
        m.record_fetch_wake_time(std::time::Duration::from_millis(3));
        let h: std::collections::HashMap<_, _> = m.span_histograms().into_iter().collect();
        let filled = |name: &str| h[name].iter().filter(|&&(_, n)| n > 0).copied().collect::<Vec<_>>();
        assert_eq!(filled("produce"), vec![(64, 1), (128, 1)]);
        assert_eq!(filled("fetch_woken"), vec![(4096, 1)]);
        assert!(m.flush_histogram().iter().all(|&(_, n)| n == 0));
        let counters: std::collections::HashMap<_, _> = m.counters().into_iter().collect();
        assert_eq!((counters["produce_answered"], counters["produce_micros_total"]), (2, 110));
        assert_eq!((counters["fetch_woken"], counters["fetch_woken_micros_total"]), (1, 3000));
    }
}
