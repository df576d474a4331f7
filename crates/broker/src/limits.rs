//! What bounds one client, or all of them together, besides the frame
//! limit: the bytes of requests being read and handled, for the whole broker
//! (Kafka's `queued.max.request.bytes`), and the connections one address may
//! hold (`max.connections.per.ip`).
//!
//! Without the first, 50 connections that each send 99 MB of a 100 MB frame
//! and stall make the broker hold 5 GB; with it, a frame's buffer is
//! reserved from the budget before it is allocated, and a read waits while
//! the budget is spent. Without the second, 1,000 idle connections from one
//! address take every slot of `max_connections`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio::sync::{Semaphore, SemaphorePermit};

/// The budget's unit: permits count KiB, so that a budget of gigabytes fits
/// the semaphore's `u32`.
const UNIT_BYTES: usize = 1024;

/// The memory budget for request frames in flight, shared by every connection.
#[derive(Debug)]
pub struct RequestMemory {
    permits: Semaphore,
    units: u32,
}

impl RequestMemory {
    pub fn new(budget_bytes: usize) -> RequestMemory {
        let units = u32::try_from(budget_bytes.div_ceil(UNIT_BYTES)).unwrap_or(u32::MAX >> 3).max(1);
        // tokio's semaphore holds at most usize::MAX >> 3 permits.
        let units = units.min(u32::MAX >> 3);
        RequestMemory { permits: Semaphore::new(units as usize), units }
    }

    /// Reserves room for a frame of `bytes`, waiting while the budget is
    /// spent. A frame larger than the whole budget takes all of it, so it
    /// waits for every other frame to finish rather than never being read.
    pub async fn reserve(&self, bytes: usize) -> Option<SemaphorePermit<'_>> {
        let wanted = u32::try_from(bytes.div_ceil(UNIT_BYTES).max(1)).unwrap_or(u32::MAX).min(self.units);
        self.permits.acquire_many(wanted).await.ok()
    }

    /// Bytes reserved by frames being read or handled now (to the KiB).
    pub fn reserved_bytes(&self) -> usize {
        (self.units as usize - self.permits.available_permits()) * UNIT_BYTES
    }

    pub fn budget_bytes(&self) -> usize {
        self.units as usize * UNIT_BYTES
    }
}

/// Open connections by client address, against a limit per address.
#[derive(Debug, Clone)]
pub struct ConnectionsPerAddress {
    limit: usize,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One connection's place in its address's count, given back when dropped.
#[derive(Debug)]
pub struct AddressSlot {
    address: IpAddr,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl ConnectionsPerAddress {
    /// `limit` 0: no limit.
    pub fn new(limit: usize) -> ConnectionsPerAddress {
        ConnectionsPerAddress { limit, open: Arc::default() }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// A slot for a new connection from `address`; `None` when it already
    /// holds `limit` connections.
    pub fn admit(&self, address: IpAddr) -> Option<AddressSlot> {
        let mut open = self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let count = open.entry(address).or_insert(0);
        if self.limit != 0 && *count >= self.limit {
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
    use std::time::Duration;

    use super::*;

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
