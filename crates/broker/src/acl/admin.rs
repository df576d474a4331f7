//! Changes to the ACLs (CreateAcls, DeleteAcls): stored by the catalog
//! first, then applied to the authorizer, one change at a time.

use std::sync::Arc;

use super::{AclBinding, AclFilter, Authorizer};
use crate::catalog::{Catalog, CatalogError};

pub struct AclAdmin {
    acls: Arc<Authorizer>,
    catalog: Arc<dyn Catalog>,
    /// One change at a time: a DeleteAcls computes its matches from the set
    /// the previous change left.
    serial: tokio::sync::Mutex<()>,
}

impl AclAdmin {
    pub fn new(acls: Arc<Authorizer>, catalog: Arc<dyn Catalog>) -> AclAdmin {
        AclAdmin { acls, catalog, serial: tokio::sync::Mutex::new(()) }
    }

    pub fn authorizer(&self) -> &Authorizer {
        &self.acls
    }

    /// Stores `bindings` durably, then enforces them.
    pub async fn create(&self, bindings: Vec<AclBinding>) -> Result<(), CatalogError> {
        let _serial = self.serial.lock().await;
        self.catalog.create_acls(bindings.clone()).await?;
        self.acls.add(&bindings);
        Ok(())
    }

    /// Removes every binding a filter matches, durably, then stops
    /// enforcing them; answers each filter's matches.
    pub async fn delete(&self, filters: &[AclFilter]) -> Result<Vec<Vec<AclBinding>>, CatalogError> {
        let _serial = self.serial.lock().await;
        let rules = self.acls.rules();
        let matched: Vec<Vec<AclBinding>> = filters.iter().map(|f| rules.matching(f)).collect();
        let mut gone: Vec<AclBinding> = matched.iter().flatten().cloned().collect();
        gone.sort();
        gone.dedup();
        if !gone.is_empty() {
            self.catalog.delete_acls(gone.clone()).await?;
            self.acls.remove(&gone);
        }
        Ok(matched)
    }
}
