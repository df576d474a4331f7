//! Changes to the client quotas (AlterClientQuotas): stored by the catalog
//! first, then put in force, one change at a time.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{ClientQuotas, QuotaEntity, QuotaKey, QuotaRule};
use crate::catalog::{Catalog, CatalogError};

/// One quota set (`value` Some) or removed (None).
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaChange {
    pub entity: QuotaEntity,
    pub key: QuotaKey,
    pub value: Option<f64>,
}

pub struct QuotaAdmin {
    quotas: Arc<ClientQuotas>,
    catalog: Arc<dyn Catalog>,
    serial: tokio::sync::Mutex<()>,
}

impl QuotaAdmin {
    pub fn new(quotas: Arc<ClientQuotas>, catalog: Arc<dyn Catalog>) -> QuotaAdmin {
        QuotaAdmin { quotas, catalog, serial: tokio::sync::Mutex::new(()) }
    }

    pub fn quotas(&self) -> &ClientQuotas {
        &self.quotas
    }

    /// Stores `changes` durably (all or none), then enforces them.
    pub async fn alter(&self, changes: Vec<QuotaChange>) -> Result<(), CatalogError> {
        if changes.is_empty() {
            return Ok(());
        }
        let _serial = self.serial.lock().await;
        self.catalog.alter_client_quotas(changes.clone()).await?;
        let mut rules: BTreeMap<(QuotaEntity, QuotaKey), f64> =
            self.quotas.rules().into_iter().map(|r| ((r.entity, r.key), r.value)).collect();
        for change in changes {
            match change.value {
                Some(value) => rules.insert((change.entity, change.key), value),
                None => rules.remove(&(change.entity, change.key)),
            };
        }
        self.quotas.replace(rules.into_iter().map(|((entity, key), value)| QuotaRule { entity, key, value }).collect());
        Ok(())
    }
}
