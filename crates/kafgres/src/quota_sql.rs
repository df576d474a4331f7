//! `kafgres.client_quotas`: the client quotas the broker enforces, read at
//! start and at each reload, written by AlterClientQuotas (through the
//! control plane, on the main thread).

use kafgres_broker::quota::admin::QuotaChange;
use kafgres_broker::quota::{EntityName, QuotaEntity, QuotaKey, QuotaRule};
use pgrx::prelude::*;

/// How the table names a default entity (Kafka's own word for it).
const DEFAULT: &str = "<default>";

const LOAD: &str = "SELECT user_name, client_id, ip, quota_key, quota_value FROM kafgres.client_quotas \
     ORDER BY user_name NULLS FIRST, client_id NULLS FIRST, ip NULLS FIRST, quota_key";
const UPSERT: &str = "INSERT INTO kafgres.client_quotas (user_name, client_id, ip, quota_key, quota_value) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (user_name, client_id, ip, quota_key) \
     DO UPDATE SET quota_value = EXCLUDED.quota_value";
const REMOVE: &str = "DELETE FROM kafgres.client_quotas \
     WHERE user_name IS NOT DISTINCT FROM $1 AND client_id IS NOT DISTINCT FROM $2 AND ip IS NOT DISTINCT FROM $3 \
     AND quota_key = $4";

fn to_column(name: &Option<EntityName>) -> Option<String> {
    name.as_ref().map(|n| match n {
        EntityName::Default => DEFAULT.to_owned(),
        EntityName::Named(n) => n.clone(),
    })
}

fn from_column(value: Option<String>) -> Option<EntityName> {
    value.map(|v| if v == DEFAULT { EntityName::Default } else { EntityName::Named(v) })
}

pub fn load_quotas() -> Result<Vec<QuotaRule>, String> {
    Spi::connect(|client| {
        let mut out = Vec::new();
        for row in client.select(LOAD, None, &[])? {
            let user = row.get::<String>(1)?;
            let client_id = row.get::<String>(2)?;
            let ip = row.get::<String>(3)?;
            let key = row.get::<String>(4)?.unwrap_or_default();
            let value = row.get::<f64>(5)?.unwrap_or(0.0);
            // The acceptor looks addresses up as IpAddr prints them; the
            // table's CHECK makes the column an address (or the default).
            let ip = ip.map(|ip| ip.parse::<std::net::IpAddr>().map_or(ip, |address| address.to_string()));
            match QuotaKey::parse(&key) {
                Some(key) => out.push(QuotaRule {
                    entity: QuotaEntity {
                        user: from_column(user),
                        client_id: from_column(client_id),
                        ip: from_column(ip),
                    },
                    key,
                    value,
                }),
                None => pgrx::warning!("kafgres: kafgres.client_quotas key {key:?} is not one Kafgres enforces"),
            }
        }
        Ok::<_, pgrx::spi::Error>(out)
    })
    .map_err(|e| format!("loading kafgres.client_quotas: {e}"))
}

pub fn alter_quotas(changes: &[QuotaChange]) -> Result<(), String> {
    Spi::connect_mut(|client| {
        for change in changes {
            let user = to_column(&change.entity.user);
            let client_id = to_column(&change.entity.client_id);
            let ip = to_column(&change.entity.ip);
            let key = change.key.name().to_owned();
            match change.value {
                Some(value) => client.update(
                    UPSERT,
                    None,
                    &[user.into(), client_id.into(), ip.into(), key.into(), value.into()],
                )?,
                None => client.update(REMOVE, None, &[user.into(), client_id.into(), ip.into(), key.into()])?,
            };
        }
        Ok::<_, pgrx::spi::Error>(())
    })
    .map_err(|e| format!("storing {} client quota changes: {e}", changes.len()))
}
