//! Producer ids for InitProducerId, unique across restarts.
//!
//! The catalog reserves blocks of [`PRODUCER_ID_BLOCK_SIZE`] ids durably (a
//! counter in Postgres, advanced with `UPDATE … RETURNING`); the broker hands
//! out ids from the current block in memory and asks for the next block only
//! when it is used up (Kafka's `ProducerIdManager` does the same with blocks
//! of 1000 from the controller). A restart loses the rest of a block, never
//! reuses an id.

use std::ops::Range;
use std::sync::Arc;

use crate::catalog::{Catalog, CatalogError};

/// Ids reserved per catalog round trip.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

pub struct ProducerIds {
    catalog: Arc<dyn Catalog>,
    /// The ids of the current block not handed out yet. A tokio mutex: it is
    /// held across the catalog call, so concurrent callers share one block.
    block: tokio::sync::Mutex<Range<i64>>,
}

impl ProducerIds {
    pub fn new(catalog: Arc<dyn Catalog>) -> ProducerIds {
        ProducerIds { catalog, block: tokio::sync::Mutex::new(0..0) }
    }

    /// The next unused producer id.
    pub async fn next(&self) -> Result<i64, CatalogError> {
        let mut block = self.block.lock().await;
        if block.is_empty() {
            let first = self.catalog.allocate_producer_ids(PRODUCER_ID_BLOCK_SIZE).await?;
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
        let catalog: Arc<dyn Catalog> = Arc::new(MemoryCatalog::default());
        let first = ProducerIds::new(Arc::clone(&catalog));
        let a: Vec<i64> = futures_ids(&first, 3).await;
        assert_eq!(a, [0, 1, 2]);
        // A restarted broker (a new allocator) starts at the next block.
        let second = ProducerIds::new(catalog);
        assert_eq!(second.next().await, Ok(PRODUCER_ID_BLOCK_SIZE));
        assert_eq!(first.next().await, Ok(3));
    }

    async fn futures_ids(a: &ProducerIds, n: usize) -> Vec<i64> {
        let mut ids = Vec::new();
        for _ in 0..n {
            ids.push(a.next().await.expect("id"));
        }
        ids
    }
}
