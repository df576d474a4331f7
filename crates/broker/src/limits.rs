//! What bounds one client, or all of them together, besides the frame
//! limit: the bytes of requests being read and handled, for the whole broker
//! (Kafka's `queued.max.request.bytes`), the connections one address may
//! hold (`max.connections.per.ip`) and open per second (the ip quota
//! `connection_creation_rate`), and how fast failed logins may be retried
//! (`connection.failed.authentication.delay.ms`, growing with each failure, up to 1 s).
//!
//! Without the first, 50 connections that each send 99 MB of a 100 MB frame
//! and stall make the broker hold 5 GB; with it, a frame's buffer is
//! reserved from the budget before it is allocated, and a read waits while
//! the budget is spent. Without the second, 1,000 idle connections from one
//! address take every slot of `max_connections`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Semaphore, SemaphorePermit};

/// The budget's unit: permits count KiB, so that a budget of gigabytes fits
/// the semaphore's `u32`.
const UNIT_BYTES: usize = 1024;

/// The memory budget for request frames in flight, shared by every connection.
#[derive(Debug)]
pub struct RequestMemory {
    permits: Arc<Semaphore>,
    /// The budget in units; a reload may change it.
    units: AtomicU32,
}

impl RequestMemory {
    pub fn new(budget_bytes: usize) -> RequestMemory {
        let units = u32::try_from(budget_bytes.div_ceil(UNIT_BYTES)).unwrap_or(u32::MAX >> 3).max(1);
        // tokio's semaphore holds at most usize::MAX >> 3 permits.
        let units = units.min(u32::MAX >> 3);
        RequestMemory { permits: Arc::new(Semaphore::new(units as usize)), units: AtomicU32::new(units) }
    }

    fn units_for(budget_bytes: usize) -> u32 {
        u32::try_from(budget_bytes.div_ceil(UNIT_BYTES)).unwrap_or(u32::MAX >> 3).clamp(1, u32::MAX >> 3)
    }

    /// A reload's new budget. Growing adds room at once; shrinking takes
    /// back what is free now and the rest as frames in flight finish (a
    /// task holds it, ahead of new reservations, then forgets it). Must run
    /// on the broker's runtime.
    pub fn resize(&self, budget_bytes: usize) {
        let wanted = Self::units_for(budget_bytes);
        let before = self.units.swap(wanted, Ordering::AcqRel);
        if wanted > before {
            self.permits.add_permits((wanted - before) as usize);
        } else if wanted < before {
            let deficit = (before - wanted) as usize;
            let taken = self.permits.forget_permits(deficit);
            let rest = u32::try_from(deficit - taken).unwrap_or(u32::MAX);
            if rest > 0 {
                let permits = Arc::clone(&self.permits);
                tokio::spawn(async move {
                    if let Ok(held) = permits.acquire_many_owned(rest).await {
                        held.forget();
                    }
                });
            }
        }
    }

    /// Reserves room for a frame of `bytes`, waiting while the budget is
    /// spent. A frame larger than the whole budget takes all of it, so it
    /// waits for every other frame to finish rather than never being read.
    pub async fn reserve(&self, bytes: usize) -> Option<SemaphorePermit<'_>> {
        let units = self.units.load(Ordering::Acquire);
        let wanted = u32::try_from(bytes.div_ceil(UNIT_BYTES).max(1)).unwrap_or(u32::MAX).min(units);
        self.permits.acquire_many(wanted).await.ok()
    }

    /// Bytes reserved by frames being read or handled now (to the KiB).
    pub fn reserved_bytes(&self) -> usize {
        (self.units.load(Ordering::Acquire) as usize).saturating_sub(self.permits.available_permits()) * UNIT_BYTES
    }

    pub fn budget_bytes(&self) -> usize {
        self.units.load(Ordering::Acquire) as usize * UNIT_BYTES
    }
}

/// New connections per second by client address, measured as quotas are
/// (11 one-second samples, at least 10 s: a burst of ten seconds' worth is
/// let through), against a limit per address. Kafka's ip quota
/// `connection_creation_rate`; a connection over it is closed at once. The
/// limit is `kafgres.max_connection_rate_per_ip`'s unless an ip quota
/// (`crate::quota`) names the address or the default ip entity.
#[derive(Debug)]
pub struct ConnectionRates {
    /// Connections per second (an f64's bits); 0: no limit.
    limit: AtomicU64,
    rates: Mutex<HashMap<IpAddr, crate::quota::rate::Rate>>,
}

/// Addresses kept before idle ones are swept.
const CONNECTION_RATE_SWEEP_AT: usize = 4096;

impl ConnectionRates {
    pub fn new(limit_per_second: f64) -> ConnectionRates {
        ConnectionRates { limit: AtomicU64::new(limit_per_second.max(0.0).to_bits()), rates: Mutex::default() }
    }

    pub fn limit(&self) -> f64 {
        f64::from_bits(self.limit.load(Ordering::Relaxed))
    }

    /// A reload's new limit; the rates measured so far are kept.
    pub fn set_limit(&self, limit_per_second: f64) {
        self.limit.store(limit_per_second.max(0.0).to_bits(), Ordering::Relaxed);
    }

    /// Counts a new connection from `address`; `false` when it puts the
    /// address over its limit (it is then not counted: a refused connection
    /// does not push the address further over). `quota` is the address's
    /// ip quota (`connection_creation_rate`, always above 0), which replaces
    /// the setting's limit.
    pub fn admit(&self, address: IpAddr, quota: Option<f64>) -> bool {
        self.admit_at(address, quota, crate::quota::rate::now_ms())
    }

    fn admit_at(&self, address: IpAddr, quota: Option<f64>, now_ms: u64) -> bool {
        let limit = match quota {
            Some(quota) => quota,
            None if self.limit() == 0.0 => return true,
            None => self.limit(),
        };
        let mut rates = self.rates.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if rates.len() >= CONNECTION_RATE_SWEEP_AT && !rates.contains_key(&address) {
            rates.retain(|_, rate| !rate.idle(now_ms));
        }
        let rate = rates.entry(address).or_default();
        let mut with_this = rate.clone();
        with_this.record(now_ms, 1.0);
        if with_this.per_second(now_ms) > limit {
            return false;
        }
        *rate = with_this;
        true
    }
}

/// Open connections by client address, against a limit per address.
#[derive(Debug, Clone)]
pub struct ConnectionsPerAddress {
    /// The limit for an address without an override; `usize::MAX`: none.
    limit: Arc<AtomicUsize>,
    /// Kafka's `max.connections.per.ip.overrides`: addresses with a limit of
    /// their own (set dynamically, `crate::dynamic_config`).
    overrides: Arc<std::sync::RwLock<HashMap<IpAddr, usize>>>,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One connection's place in its address's count, given back when dropped.
#[derive(Debug)]
pub struct AddressSlot {
    address: IpAddr,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// `kafgres.max_connections_per_ip`'s meaning: 0 is no limit.
fn guc_limit(limit: usize) -> usize {
    if limit == 0 {
        usize::MAX
    } else {
        limit
    }
}

impl ConnectionsPerAddress {
    /// `limit` 0: no limit.
    pub fn new(limit: usize) -> ConnectionsPerAddress {
        ConnectionsPerAddress {
            limit: Arc::new(AtomicUsize::new(guc_limit(limit))),
            overrides: Arc::default(),
            open: Arc::default(),
        }
    }

    /// The limit of an address without an override, as the GUC says it (0:
    /// no limit), for log lines; [`Self::limit_of`] is the one that applies.
    pub fn limit(&self) -> usize {
        match self.limit.load(Ordering::Relaxed) {
            usize::MAX => 0,
            n => n,
        }
    }

    /// The limit that applies to `address`; `None`: no limit.
    pub fn limit_of(&self, address: IpAddr) -> Option<usize> {
        let overridden = self.overrides.read().unwrap_or_else(|poisoned| poisoned.into_inner()).get(&address).copied();
        match overridden.unwrap_or_else(|| self.limit.load(Ordering::Relaxed)) {
            usize::MAX => None,
            n => Some(n),
        }
    }

    /// A reload's new limit (0: none): connections already open stay, new
    /// ones count against it.
    pub fn set_limit(&self, limit: usize) {
        self.limit.store(guc_limit(limit), Ordering::Relaxed);
    }

    /// Kafka's meaning, for dynamic configs: `default` (`None`: no limit;
    /// `Some(0)`: only the overridden addresses) and the overrides.
    pub fn set_limits(&self, default: Option<usize>, overrides: HashMap<IpAddr, usize>) {
        self.limit.store(default.unwrap_or(usize::MAX), Ordering::Relaxed);
        *self.overrides.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = overrides;
    }

    /// A slot for a new connection from `address`; `None` when it already
    /// holds as many connections as its limit.
    pub fn admit(&self, address: IpAddr) -> Option<AddressSlot> {
        let limit = self.limit_of(address);
        let mut open = self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = open.entry(address).or_insert(0);
        if limit.is_some_and(|limit| *count >= limit) {
            if *count == 0 {
                open.remove(&address);
            }
            return None;
        }
        *count += 1;
        Some(AddressSlot { address, open: Arc::clone(&self.open) })
    }

    pub fn open_from(&self, address: IpAddr) -> usize {
        let open = self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        open.get(&address).copied().unwrap_or(0)
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut open = self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(count) = open.get_mut(&self.address) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.address);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    #[test]
    fn connections_over_the_rate_are_refused_and_not_counted() {
        let rates = ConnectionRates::new(2.0);
        let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        // 2 per second over the 10 s minimum window: a burst of 20, then no more.
        let admitted = (0..30).filter(|_| rates.admit_at(a, None, 1_000)).count();
        assert_eq!(admitted, 20);
        assert!(rates.admit_at(b, None, 1_000), "another address has a rate of its own");
        // Once the burst leaves the window, the address connects again.
        assert!(rates.admit_at(a, None, 12_500));
        assert!(ConnectionRates::new(0.0).admit_at(a, None, 0), "0: no limit");
    }

    #[test]
    fn an_ip_quota_replaces_the_settings_limit() {
        let unlimited = ConnectionRates::new(0.0);
        let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let admitted = (0..30).filter(|_| unlimited.admit_at(a, Some(1.0), 1_000)).count();
        assert_eq!(admitted, 10, "1 per second over the 10 s window");
        let strict = ConnectionRates::new(1.0);
        let b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!((0..30).filter(|_| strict.admit_at(b, Some(2.0), 1_000)).count(), 20, "the quota, not the setting");
    }

    #[tokio::test]
    async fn reads_wait_while_the_budget_is_spent() {
        let memory = RequestMemory::new(10 << 20);
        let first = memory.reserve(6 << 20).await;
        assert_eq!(memory.reserved_bytes(), 6 << 20);
        // A second 6 MiB frame waits; a small one does not.
        let waiting = tokio::time::timeout(Duration::from_millis(50), memory.reserve(6 << 20)).await;
        assert!(waiting.is_err(), "the budget is spent");
        let small = memory.reserve(100).await;
        assert_eq!(memory.reserved_bytes(), (6 << 20) + 1024);
        drop((first, small));
        assert_eq!(memory.reserved_bytes(), 0);
        // Larger than the budget: takes all of it.
        let huge = memory.reserve(64 << 20).await;
        assert_eq!(memory.reserved_bytes(), memory.budget_bytes());
        drop(huge);
    }

    #[test]
    fn an_address_holds_at_most_its_limit() {
        let limits = ConnectionsPerAddress::new(2);
        let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        let first = limits.admit(a);
        let second = limits.admit(a);
        assert!(first.is_some() && second.is_some());
        assert!(limits.admit(a).is_none(), "a third from the same address");
        assert!(limits.admit(b).is_some(), "another address is served");
        drop(first);
        assert_eq!(limits.open_from(a), 1);
        assert!(limits.admit(a).is_some());
        assert!(ConnectionsPerAddress::new(0).admit(a).is_some(), "0: no limit");
    }
}

/// Failed SASL logins, per client address and per role name, in a sliding
/// window: each failure is answered only after a delay (Kafka's
/// `connection.failed.authentication.delay.ms`) that doubles with every
/// failure the address or the role had in the window, so guessing passwords
/// gets slower the more it is tried, from one address or from many against
/// one role. Also decides which failures are logged (the first of a window,
/// then one line per period with the count left out).
#[derive(Debug)]
pub struct FailedLogins {
    /// Microseconds; a reload may change it.
    base_delay_micros: AtomicU64,
    window: Duration,
    state: Mutex<FailedLoginState>,
}

#[derive(Debug, Default)]
struct FailedLoginState {
    by_address: HashMap<IpAddr, Failures>,
    by_role: HashMap<String, Failures>,
}

#[derive(Debug, Clone, Copy)]
struct Failures {
    count: u32,
    first: Instant,
    /// Failures not logged since the last line.
    unlogged: u32,
    logged: Instant,
}

/// What to do with one failed login.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedLogin {
    /// How long to wait before answering (and closing).
    pub delay: Duration,
    /// `Some(n)`: log this failure, saying `n` others from the address were
    /// not logged since the last line; `None`: count it silently.
    pub log_with_unlogged: Option<u32>,
}

/// The longest delay a failure gets, however many came before it.
// Past a second, clients with short metadata timeouts (kcat's 5 s) report a
// transport failure instead of the authentication error they got.
pub const FAILED_LOGIN_DELAY_MAX: Duration = Duration::from_secs(1);
/// Most entries kept per map: past it the oldest windows are forgotten, so
/// a flood of addresses or names cannot grow the tracker without bound.
const FAILED_LOGIN_ENTRIES_MAX: usize = 10_000;
const FAILED_LOGIN_LOG_PERIOD: Duration = Duration::from_secs(10);

impl FailedLogins {
    pub fn new(base_delay: Duration) -> FailedLogins {
        FailedLogins {
            base_delay_micros: AtomicU64::new(u64::try_from(base_delay.as_micros()).unwrap_or(u64::MAX)),
            window: Duration::from_secs(60),
            state: Mutex::default(),
        }
    }

    /// A reload's new `failed_authentication_delay_ms`.
    pub fn set_base_delay(&self, base_delay: Duration) {
        self.base_delay_micros.store(u64::try_from(base_delay.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Records a failed login from `address` as `role` (if the client got
    /// as far as naming one) and says what to do with it.
    pub fn record(&self, address: IpAddr, role: Option<&str>) -> FailedLogin {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let window = self.window;
        let by_address = bump(&mut state.by_address, address, now, window);
        let by_role = role.map(|r| bump(&mut state.by_role, r.to_owned(), now, window).count).unwrap_or(0);
        let before = by_address.count.max(by_role).saturating_sub(1).min(16);
        let base_delay = Duration::from_micros(self.base_delay_micros.load(Ordering::Relaxed));
        let delay = base_delay.saturating_mul(1 << before).min(FAILED_LOGIN_DELAY_MAX.max(base_delay));
        let log_with_unlogged = match state.by_address.get_mut(&address) {
            Some(f) if f.count == 1 || now.duration_since(f.logged) >= FAILED_LOGIN_LOG_PERIOD => {
                let unlogged = f.unlogged;
                f.unlogged = 0;
                f.logged = now;
                Some(unlogged)
            }
            Some(f) => {
                f.unlogged += 1;
                None
            }
            None => Some(0),
        };
        FailedLogin { delay, log_with_unlogged }
    }
}

/// Counts one failure under `key`, starting a new window when the last one
/// has passed; returns the entry after counting.
fn bump<K: std::hash::Hash + Eq>(map: &mut HashMap<K, Failures>, key: K, now: Instant, window: Duration) -> Failures {
    if map.len() >= FAILED_LOGIN_ENTRIES_MAX {
        map.retain(|_, f| now.duration_since(f.first) < window);
        if map.len() >= FAILED_LOGIN_ENTRIES_MAX {
            map.clear();
        }
    }
    let entry = map.entry(key).or_insert(Failures { count: 0, first: now, unlogged: 0, logged: now });
    if now.duration_since(entry.first) >= window {
        *entry = Failures { count: 0, first: now, unlogged: 0, logged: now };
    }
    entry.count += 1;
    *entry
}

#[cfg(test)]
mod failed_login_tests {
    use std::net::Ipv4Addr;

    use super::*;

    #[test]
    fn the_delay_doubles_per_address_and_per_role() {
        let logins = FailedLogins::new(Duration::from_millis(100));
        let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        let delays: Vec<u128> = (0..4).map(|_| logins.record(a, Some("alice")).delay.as_millis()).collect();
        assert_eq!(delays, vec![100, 200, 400, 800]);
        // Another address guessing the same role is slowed too.
        let b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(logins.record(b, Some("alice")).delay, FAILED_LOGIN_DELAY_MAX, "1600 ms, capped");
        // A fresh address and role start at the base delay.
        let c = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3));
        assert_eq!(logins.record(c, Some("bob")).delay.as_millis(), 100);
        for _ in 0..20 {
            logins.record(a, None);
        }
        assert_eq!(logins.record(a, None).delay, FAILED_LOGIN_DELAY_MAX);
    }

    #[test]
    fn only_the_first_failure_of_a_period_is_logged() {
        let logins = FailedLogins::new(Duration::ZERO);
        let a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(logins.record(a, Some("x")).log_with_unlogged, Some(0));
        assert_eq!(logins.record(a, Some("x")).log_with_unlogged, None);
        assert_eq!(logins.record(a, Some("x")).log_with_unlogged, None);
        assert_eq!(logins.record(a, Some("x")).delay, Duration::ZERO, "a zero base delay stays zero");
    }
}
