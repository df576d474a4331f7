//! DescribeClientQuotas and AlterClientQuotas: the quotas of
//! `kafgres.client_quotas`, managed as `kafka-configs.sh --entity-type users
//! / clients` manages them. Describing needs DESCRIBE_CONFIGS on the
//! cluster, changing needs ALTER_CONFIGS (Kafka's checks). Kafgres enforces
//! `producer_byte_rate` and `consumer_byte_rate` for users (roles) and client
//! ids, `request_percentage` (time on the broker's threads), and
//! `connection_creation_rate` for ip entities (`kafka-configs.sh
//! --entity-type ips`); `controller_mutation_rate` (Kafgres has no
//! controller) is refused with INVALID_REQUEST saying so, rather than stored
//! and ignored.

use std::collections::BTreeMap;

use kafgres_wire::error_code;
use kafka_protocol::messages::alter_client_quotas_request::EntityData as AlterEntity;
use kafka_protocol::messages::alter_client_quotas_response::{EntityData as AlteredEntity, EntryData as AlteredEntry};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, ApiKey, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
};

use super::authorized_operations::CLUSTER_REFUSED;
use super::handler::{Answer, Handler, RequestContext, Versions};
use super::str_bytes;
use crate::acl::Operation;
use crate::quota::admin::{QuotaAdmin, QuotaChange};
use crate::quota::{EntityName, QuotaEntity, QuotaKey, CLIENT_ID, IP, USER};

/// Kafka's match types of a DescribeClientQuotas filter component.
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_SPECIFIED: i8 = 2;

/// What a filter component asks of one entity type.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Match {
    Exact(String),
    Default,
    Specified,
}

impl Match {
    fn accepts(&self, name: &EntityName) -> bool {
        match (self, name) {
            (Match::Exact(want), EntityName::Named(n)) => want == n,
            (Match::Default, EntityName::Default) => true,
            (Match::Specified, EntityName::Named(_)) => true,
            _ => false,
        }
    }
}

/// Keys Kafka has that Kafgres does not enforce: refused, not ignored.
fn unenforced(key: &str) -> Option<&'static str> {
    match key {
        "controller_mutation_rate" => Some("controller_mutation_rate is not enforced by Kafgres"),
        _ => None,
    }
}

fn entity_type(name: &str) -> Result<&'static str, String> {
    match name {
        USER => Ok(USER),
        CLIENT_ID => Ok(CLIENT_ID),
        IP => Ok(IP),
        other => Err(format!("Unknown entity type: {other}")),
    }
}

/// The filter of a DescribeClientQuotas: per entity type, what it must match.
fn filter_of(components: &[ComponentData]) -> Result<BTreeMap<&'static str, Match>, String> {
    let mut filter = BTreeMap::new();
    for c in components {
        let kind = entity_type(&c.entity_type)?;
        let wanted = match (c.match_type, c._match.as_deref()) {
            (MATCH_EXACT, Some(name)) => Match::Exact(name.to_owned()),
            (MATCH_EXACT, None) => return Err(format!("Missing match name for {kind} with exact match type")),
            (MATCH_DEFAULT, _) => Match::Default,
            (MATCH_SPECIFIED, _) => Match::Specified,
            (other, _) => return Err(format!("Unknown match type: {other}")),
        };
        if filter.insert(kind, wanted).is_some() {
            return Err(format!("Duplicate filter component entity type: {kind}"));
        }
    }
    if filter.contains_key(IP) && (filter.contains_key(USER) || filter.contains_key(CLIENT_ID)) {
        return Err("Invalid entity filter component combination, IP filter component should not be used with user \
                    or clientId filter component."
            .into());
    }
    Ok(filter)
}

fn matches(entity: &QuotaEntity, filter: &BTreeMap<&'static str, Match>, strict: bool) -> bool {
    let parts = [(USER, &entity.user), (CLIENT_ID, &entity.client_id), (IP, &entity.ip)];
    parts.iter().all(|(kind, name)| match (filter.get(kind), name) {
        (Some(wanted), Some(name)) => wanted.accepts(name),
        (Some(_), None) => false,
        (None, Some(_)) => !strict,
        (None, None) => true,
    })
}

fn wire_entity(entity: &QuotaEntity) -> Vec<(&'static str, Option<&str>)> {
    let mut out = Vec::new();
    if let Some(user) = &entity.user {
        out.push((USER, user.to_wire()));
    }
    if let Some(client_id) = &entity.client_id {
        out.push((CLIENT_ID, client_id.to_wire()));
    }
    if let Some(ip) = &entity.ip {
        out.push((IP, ip.to_wire()));
    }
    out
}

pub struct DescribeClientQuotas;

impl Handler for DescribeClientQuotas {
    const KEY: ApiKey = ApiKey::DescribeClientQuotas;
    /// v0-v1: Kafka 4.1's range; v1 is flexible.
    const VERSIONS: Versions = Versions::new(0, 1);
    type Request = DescribeClientQuotasRequest;
    type Response = DescribeClientQuotasResponse;
    type Services<'a> = &'a QuotaAdmin;

    async fn handle(
        admin: Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: DescribeClientQuotasRequest,
    ) -> Answer<DescribeClientQuotasResponse> {
        let failed = |code: i16, message: &str| {
            DescribeClientQuotasResponse::default()
                .with_error_code(code)
                .with_error_message(Some(str_bytes(message)))
                .with_entries(None)
                .into()
        };
        if !cx.may_on_cluster(Operation::DescribeConfigs) {
            return failed(error_code::CLUSTER_AUTHORIZATION_FAILED, CLUSTER_REFUSED);
        }
        let filter = match filter_of(&request.components) {
            Ok(filter) => filter,
            Err(reason) => return failed(error_code::INVALID_REQUEST, &reason),
        };
        let mut entries: Vec<(QuotaEntity, Vec<ValueData>)> = Vec::new();
        // Rules come sorted by entity: one entity's quotas are adjacent.
        for rule in admin.quotas().rules() {
            if !matches(&rule.entity, &filter, request.strict) {
                continue;
            }
            let value = ValueData::default().with_key(str_bytes(rule.key.name())).with_value(rule.value);
            match entries.last_mut() {
                Some((entity, values)) if *entity == rule.entity => values.push(value),
                _ => entries.push((rule.entity, vec![value])),
            }
        }
        let entries = entries
            .into_iter()
            .map(|(entity, values)| {
                let entity = wire_entity(&entity)
                    .into_iter()
                    .map(|(kind, name)| {
                        EntityData::default().with_entity_type(str_bytes(kind)).with_entity_name(name.map(str_bytes))
                    })
                    .collect();
                EntryData::default().with_entity(entity).with_values(values)
            })
            .collect();
        DescribeClientQuotasResponse::default().with_entries(Some(entries)).into()
    }
}

/// One AlterClientQuotas entry, checked: its entity and its changes.
fn changes_of(
    entity: &[AlterEntity],
    ops: &[kafka_protocol::messages::alter_client_quotas_request::OpData],
) -> Result<Vec<QuotaChange>, String> {
    let mut parsed = QuotaEntity::default();
    if entity.is_empty() {
        return Err("Invalid empty client quota entity".into());
    }
    for part in entity {
        let kind = entity_type(&part.entity_type)?;
        let mut name = EntityName::from_wire(part.entity_name.as_deref());
        if matches!(&name, EntityName::Named(n) if n.is_empty()) && kind == USER {
            return Err("Empty user name: a user quota names a role, or null for the default".into());
        }
        if kind == IP {
            // Kept as the acceptor sees addresses; host names are not
            // resolved (the broker does no DNS on its accept path).
            if let EntityName::Named(n) = &name {
                let address: std::net::IpAddr =
                    n.parse().map_err(|_| format!("{n} is not a valid IP or resolvable host."))?;
                name = EntityName::Named(address.to_string());
            }
        }
        let slot = match kind {
            USER => &mut parsed.user,
            CLIENT_ID => &mut parsed.client_id,
            _ => &mut parsed.ip,
        };
        if slot.replace(name).is_some() {
            return Err(format!("Duplicate entity type: {kind}"));
        }
    }
    let for_ip = parsed.ip.is_some();
    if for_ip && (parsed.user.is_some() || parsed.client_id.is_some()) {
        // Kafka's words for an ip entity with a user or client id.
        return Err("Invalid empty client quota entity".into());
    }
    let mut changes: Vec<QuotaChange> = Vec::with_capacity(ops.len());
    for op in ops {
        if let Some(why) = unenforced(&op.key) {
            return Err(why.into());
        }
        let Some(key) = QuotaKey::parse(&op.key) else {
            return Err(format!("Unknown quota key: {}", &*op.key));
        };
        if changes.iter().any(|c| c.key == key) {
            return Err(format!("Duplicate quota key: {}", key.name()));
        }
        if key.is_ip_quota() != for_ip {
            return Err(format!("Invalid configuration key {}", key.name()));
        }
        let value = if op.remove {
            None
        } else if key == QuotaKey::ConnectionCreationRate {
            if !(op.value.is_finite() && op.value >= 0.0 && op.value.fract() == 0.0) {
                return Err(format!(
                    "connection_creation_rate must be a whole number of connections per second, not {}",
                    op.value
                ));
            }
            Some(op.value)
        } else if op.value.is_finite()
            && op.value > 0.0
            && (key == QuotaKey::RequestPercentage || op.value.fract() == 0.0)
        {
            Some(op.value)
        } else if key == QuotaKey::RequestPercentage {
            return Err(format!("request_percentage must be a positive percentage, not {}", op.value));
        } else {
            return Err(format!(
                "{} must be a positive whole number of bytes per second, not {}",
                key.name(),
                op.value
            ));
        };
        changes.push(QuotaChange { entity: parsed.clone(), key, value });
    }
    Ok(changes)
}

pub struct AlterClientQuotas;

impl Handler for AlterClientQuotas {
    const KEY: ApiKey = ApiKey::AlterClientQuotas;
    /// v0-v1: Kafka 4.1's range; v1 is flexible.
    const VERSIONS: Versions = Versions::new(0, 1);
    type Request = AlterClientQuotasRequest;
    type Response = AlterClientQuotasResponse;
    type Services<'a> = &'a QuotaAdmin;

    async fn handle(
        admin: Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: AlterClientQuotasRequest,
    ) -> Answer<AlterClientQuotasResponse> {
        let allowed = cx.may_on_cluster(Operation::AlterConfigs);
        let mut results = Vec::with_capacity(request.entries.len());
        let mut accepted = Vec::new();
        for entry in &request.entries {
            let outcome = if allowed {
                changes_of(&entry.entity, &entry.ops).map_err(|reason| (error_code::INVALID_REQUEST, reason))
            } else {
                Err((error_code::CLUSTER_AUTHORIZATION_FAILED, CLUSTER_REFUSED.to_owned()))
            };
            if let Ok(changes) = &outcome {
                accepted.extend(changes.iter().cloned());
            }
            results.push(outcome.err());
        }
        // Stored together, so a failure of the catalog fails every entry
        // that was valid (none of them is in force).
        let stored = if request.validate_only { Ok(()) } else { admin.alter(accepted).await };
        let entries = request
            .entries
            .iter()
            .zip(results)
            .map(|(entry, refused)| {
                let (code, message) = match (refused, &stored) {
                    (Some((code, message)), _) => (code, Some(message)),
                    (None, Err(e)) => {
                        (error_code::UNKNOWN_SERVER_ERROR, Some(format!("storing the quotas failed: {e}")))
                    }
                    (None, Ok(())) => (error_code::NONE, None),
                };
                let entity = entry
                    .entity
                    .iter()
                    .map(|e| {
                        AlteredEntity::default()
                            .with_entity_type(e.entity_type.clone())
                            .with_entity_name(e.entity_name.clone())
                    })
                    .collect();
                AlteredEntry::default()
                    .with_error_code(code)
                    .with_error_message(message.as_deref().map(str_bytes))
                    .with_entity(entity)
            })
            .collect();
        AlterClientQuotasResponse::default().with_entries(entries).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn component(kind: &str, match_type: i8, name: Option<&str>) -> ComponentData {
        ComponentData::default()
            .with_entity_type(str_bytes(kind))
            .with_match_type(match_type)
            .with_match(name.map(str_bytes))
    }

    fn entity(user: Option<EntityName>, client_id: Option<EntityName>) -> QuotaEntity {
        QuotaEntity::of_user_and_client(user, client_id)
    }

    #[test]
    fn filters_match_as_kafkas_describe_does() {
        let alice = entity(Some(EntityName::Named("alice".into())), None);
        let alice_app = entity(Some(EntityName::Named("alice".into())), Some(EntityName::Named("app".into())));
        let default_user = entity(Some(EntityName::Default), None);
        let app = entity(None, Some(EntityName::Named("app".into())));
        let exact = filter_of(&[component(USER, MATCH_EXACT, Some("alice"))]).unwrap();
        assert!(matches(&alice, &exact, true));
        assert!(!matches(&alice_app, &exact, true), "strict: no other entity type");
        assert!(matches(&alice_app, &exact, false));
        assert!(!matches(&default_user, &exact, false));
        assert!(!matches(&app, &exact, false));
        let default = filter_of(&[component(USER, MATCH_DEFAULT, None)]).unwrap();
        assert!(matches(&default_user, &default, true) && !matches(&alice, &default, true));
        let specified = filter_of(&[component(USER, MATCH_SPECIFIED, None)]).unwrap();
        assert!(matches(&alice, &specified, true) && !matches(&default_user, &specified, true));
        let everything = filter_of(&[]).unwrap();
        assert!([&alice, &alice_app, &default_user, &app].iter().all(|e| matches(e, &everything, false)));
        assert!(![&alice, &alice_app, &default_user, &app].iter().any(|e| matches(e, &everything, true)));
    }

    #[test]
    fn bad_filters_are_invalid_requests() {
        for (components, why) in [
            (vec![component("group", MATCH_DEFAULT, None)], "Unknown entity type"),
            (
                vec![component("ip", MATCH_DEFAULT, None), component(USER, MATCH_DEFAULT, None)],
                "IP filter component should not be used",
            ),
            (vec![component(USER, MATCH_EXACT, None)], "Missing match name"),
            (vec![component(USER, 7, None)], "Unknown match type"),
            (vec![component(USER, MATCH_DEFAULT, None), component(USER, MATCH_SPECIFIED, None)], "Duplicate"),
        ] {
            let e = filter_of(&components).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn alterations_refuse_what_kafgres_would_not_enforce() {
        use kafka_protocol::messages::alter_client_quotas_request::OpData;
        let user = |name: Option<&str>| {
            AlterEntity::default().with_entity_type(str_bytes(USER)).with_entity_name(name.map(str_bytes))
        };
        let op = |key: &str, value: f64, remove: bool| {
            OpData::default().with_key(str_bytes(key)).with_value(value).with_remove(remove)
        };
        let changes = changes_of(
            &[user(Some("alice"))],
            &[op("producer_byte_rate", 1024.0, false), op("consumer_byte_rate", 0.0, true)],
        )
        .unwrap();
        assert_eq!(changes.len(), 2);
        assert_eq!(changes[0].value, Some(1024.0));
        assert_eq!(changes[1].value, None);
        assert_eq!(
            changes_of(&[user(None)], &[op("producer_byte_rate", 1.0, false)]).unwrap()[0].entity.user,
            Some(EntityName::Default)
        );
        // A percentage need not be whole.
        assert_eq!(changes_of(&[user(None)], &[op("request_percentage", 12.5, false)]).unwrap()[0].value, Some(12.5));
        let ip = |name: Option<&str>| {
            AlterEntity::default().with_entity_type(str_bytes(IP)).with_entity_name(name.map(str_bytes))
        };
        let changes =
            changes_of(&[ip(Some("::ffff:10.0.0.1"))], &[op("connection_creation_rate", 0.0, false)]).unwrap();
        assert_eq!(changes[0].entity.ip, Some(EntityName::Named("::ffff:10.0.0.1".into())));
        assert_eq!(changes[0].value, Some(0.0), "0 lets no connection in");
        let changes = changes_of(&[ip(Some("10.0.0.01"))], &[op("connection_creation_rate", 1.0, true)]);
        assert!(changes.unwrap_err().contains("not a valid IP"));
        assert_eq!(
            changes_of(&[ip(None)], &[op("connection_creation_rate", 25.0, false)]).unwrap()[0].entity.ip,
            Some(EntityName::Default)
        );
        for (entity, ops, why) in [
            (vec![ip(Some("broker.example"))], vec![op("connection_creation_rate", 5.0, false)], "not a valid IP"),
            (vec![ip(None), user(None)], vec![op("connection_creation_rate", 5.0, false)], "Invalid empty"),
            (vec![ip(None)], vec![op("producer_byte_rate", 5.0, false)], "Invalid configuration key"),
            (vec![user(None)], vec![op("connection_creation_rate", 5.0, false)], "Invalid configuration key"),
            (vec![ip(None)], vec![op("connection_creation_rate", 2.5, false)], "whole number"),
            (vec![ip(None)], vec![op("connection_creation_rate", -1.0, false)], "whole number"),
            (vec![user(Some("alice"))], vec![op("controller_mutation_rate", 50.0, false)], "not enforced"),
            (vec![user(Some("alice"))], vec![op("request_percentage", -5.0, false)], "positive percentage"),
            (vec![user(Some("alice"))], vec![op("fancy_rate", 1.0, false)], "Unknown quota key"),
            (vec![user(Some("alice"))], vec![op("producer_byte_rate", -1.0, false)], "positive whole number"),
            (vec![user(Some("alice"))], vec![op("producer_byte_rate", 1.5, false)], "positive whole number"),
            (vec![user(Some("alice"))], vec![op("producer_byte_rate", f64::NAN, false)], "positive whole number"),
            (
                vec![user(Some("a")), user(Some("b"))],
                vec![op("producer_byte_rate", 1.0, false)],
                "Duplicate entity type",
            ),
            (vec![], vec![op("producer_byte_rate", 1.0, false)], "empty"),
            (vec![user(Some(""))], vec![op("producer_byte_rate", 1.0, false)], "Empty user name"),
            (
                vec![user(Some("a"))],
                vec![op("producer_byte_rate", 1.0, false), op("producer_byte_rate", 2.0, false)],
                "Duplicate quota key",
            ),
        ] {
            let e = changes_of(&entity, &ops).unwrap_err();
            assert!(e.contains(why), "{e}");
        }
    }
}
