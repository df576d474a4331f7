//! The SQL behind dynamic broker configs (`kafgres.broker_configs`): Kafka
//! broker configs set with IncrementalAlterConfigs or AlterConfigs on a
//! BROKER resource, one row per node and name (node -1: the cluster-wide
//! default), loaded at startup and replaced by the broker one resource at a
//! time, before it answers. Call inside `run_in_transaction`.

use std::collections::BTreeMap;

use kafgres_broker::catalog::BrokerConfigRecord;
use pgrx::spi::Spi;

const LOAD: &str = "SELECT node_id, name, value FROM kafgres.broker_configs ORDER BY 1, 2";
// The resource's whole new set: rows it no longer has go, the others are
// inserted or updated (updated_at moves only for a value that changed).
const SET: &str = "WITH gone AS (DELETE FROM kafgres.broker_configs \
     WHERE node_id = $1 AND NOT (name = ANY ($2::text[]))) \
     INSERT INTO kafgres.broker_configs AS c (node_id, name, value, updated_at) \
     SELECT $1, n, v, now() FROM unnest($2::text[], $3::text[]) AS u(n, v) \
     ON CONFLICT (node_id, name) DO UPDATE SET value = excluded.value, updated_at = now() \
     WHERE c.value IS DISTINCT FROM excluded.value";

/// Every node's dynamic broker configs and the default's.
pub fn load_broker_configs() -> Result<Vec<BrokerConfigRecord>, String> {
    Spi::connect(|client| {
        let mut by_node: BTreeMap<i32, BTreeMap<String, String>> = BTreeMap::new();
        for row in client.select(LOAD, None, &[])? {
            let node_id: i32 = row.get(1)?.unwrap_or(kafgres_broker::dynamic_config::DEFAULT_NODE_ID);
            let name: String = row.get(2)?.unwrap_or_default();
            let value: String = row.get(3)?.unwrap_or_default();
            by_node.entry(node_id).or_default().insert(name, value);
        }
        Ok::<_, pgrx::spi::Error>(by_node.into_iter().collect())
    })
    .map_err(|e| format!("loading kafgres.broker_configs: {e}"))
}

/// Replaces one resource's dynamic broker configs (the whole set; empty
/// removes them).
pub fn set_broker_configs(node_id: i32, configs: &BTreeMap<String, String>) -> Result<(), String> {
    let names: Vec<String> = configs.keys().cloned().collect();
    let values: Vec<String> = configs.values().cloned().collect();
    Spi::connect_mut(|client| {
        client.update(SET, None, &[node_id.into(), names.into(), values.into()])?;
        Ok::<_, pgrx::spi::Error>(())
    })
    .map_err(|e| format!("storing the dynamic broker configs of node {node_id}: {e}"))
}
