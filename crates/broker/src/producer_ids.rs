//! Producer ids for InitProducerId, unique across restarts.
//!
//! The catalog reserves blocks of [`PRODUCER_ID_BLOCK_SIZE`] ids durably (a
//! counter in Postgres, advanced with `UPDATE … RETURNING`); the broker hands
//! out ids from the current block in memory and asks for the next block only
//! when it is used up (Kafka's `ProducerIdManager` does the same with blocks
//! of 1000 from the controller). A restart loses the rest of a block, never
//! reuses an id.

use std::ops::Range;

use crate::catalog::{Catalog, CatalogError};

/// Ids reserved per catalog round trip.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

#[derive(Debug, Default)]
pub struct ProducerIdAllocator {
    /// The ids of the current block not handed out yet. A tokio mutex: it is
    /// held across the catalog call, so concurrent callers share one block.
    block: tokio::sync::Mutex<Range<i64>>,
}

impl ProducerIdAllocator {
    /// The next unused producer id.
    pub async fn next(&self, catalog: &dyn Catalog) -> Result<i64, CatalogError> {
        let mut block = self.block.lock().await;
        if block.is_empty() {
            let first = catalog.allocate_producer_ids(PRODUCER_ID_BLOCK_SIZE).await?;
            if first < 0 {
                return Err(CatalogError::Failed(format!("the catalog reserved producer ids from {first}")));
            }
            *block = first..first.saturating_add(PRODUCER_ID_BLOCK_SIZE);
            log::info!("reserved producer ids {}..{}", block.start, block.end);
        }
        let id = block.start;
        block.start += 1;
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryCatalog;

    #[tokio::test]
    async fn ids_are_unique_across_allocators_sharing_a_catalog() {
        let catalog = MemoryCatalog::default();
        let first = ProducerIdAllocator::default();
        let a: Vec<i64> = futures_ids(&first, &catalog, 3).await;
        assert_eq!(a, [0, 1, 2]);
        // A restarted broker (a new allocator) starts at the next block.
        let second = ProducerIdAllocator::default();
        assert_eq!(second.next(&catalog).await, Ok(PRODUCER_ID_BLOCK_SIZE));
        assert_eq!(first.next(&catalog).await, Ok(3));
    }

    async fn futures_ids(a: &ProducerIdAllocator, catalog: &MemoryCatalog, n: usize) -> Vec<i64> {
        let mut ids = Vec::new();
        for _ in 0..n {
            ids.push(a.next(catalog).await.expect("id"));
        }
        ids
    }
}
