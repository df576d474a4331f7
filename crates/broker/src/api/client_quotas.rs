//! DescribeClientQuotas and AlterClientQuotas: the quotas of
//! `kafgres.client_quotas`, managed as `kafka-configs.sh --entity-type users
//! / clients` manages them. Describing needs DESCRIBE_CONFIGS on the
//! cluster, changing needs ALTER_CONFIGS (Kafka's checks). Kafgres enforces
//! `producer_byte_rate` and `consumer_byte_rate` for users (roles) and client
//! ids, `request_percentage` (time on the broker's threads), and
//! `connection_creation_rate` for ip entities (`kafka-configs.sh
//! --entity-type ips`); `controller_mutation_rate` (Kafgres has no
//! controller) is refused with INVALID_REQUEST saying so, rather than stored
//! and ignored. Requests are checked as Kafka 4.1's controller checks them,
//! in its order and with its messages (the conformance scenario
//! `client_quotas` compares them).

use std::collections::BTreeMap;

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::alter_client_quotas_request::EntityData as AlterEntity;
use kafka_protocol::messages::alter_client_quotas_response::{EntityData as AlteredEntity, EntryData as AlteredEntry};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse,
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
            // Any entity of the type, the default one included: Kafka's
            // MATCH_TYPE_SPECIFIED asks only that the type be present
            // (`kafka-configs --describe --entity-type users` lists the
            // default user too).
            (Match::Specified, _) => true,
            _ => false,
        }
    }
}

/// Kafka's key that Kafgres does not enforce: refused, not ignored.
const CONTROLLER_MUTATION_RATE: &str = "controller_mutation_rate";

/// Kafka's type of a quota value, which decides how it is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueType {
    Long,
    Int,
    Double,
}

/// The keys an entity may have (Kafka's sets: ip entities one, users and
/// client ids the others), with their types; `None` for a key outside the
/// entity's set.
fn value_type(key: &str, for_ip: bool) -> Option<ValueType> {
    match (key, for_ip) {
        ("connection_creation_rate", true) => Some(ValueType::Int),
        ("producer_byte_rate" | "consumer_byte_rate", false) => Some(ValueType::Long),
        ("request_percentage" | CONTROLLER_MUTATION_RATE, false) => Some(ValueType::Double),
        _ => None,
    }
}

/// A value to set, checked as Kafka checks it: positive, and for an integral
/// key within its type's range and whole. NaN, which passes Kafka's checks
/// and would be stored, is refused.
fn check_value(key: &str, value: f64, value_type: ValueType) -> Result<(), String> {
    if value.is_nan() {
        return Err(format!("Quota {key} must be a number, not NaN"));
    }
    if value <= 0.0 {
        return Err(format!("Quota {key} must be greater than 0"));
    }
    let (max, type_name) = match value_type {
        ValueType::Double => return Ok(()),
        ValueType::Long => (i64::MAX as f64, "a LONG"),
        ValueType::Int => (i32::MAX as f64, "an INT"),
    };
    if value > max {
        return Err(format!("Proposed value for {key} is too large for {type_name}."));
    }
    if value.fract() != 0.0 {
        return Err(format!("{key} cannot be a fractional value."));
    }
    Ok(())
}

/// A DescribeClientQuotas filter's entity type.
fn filter_entity_type(name: &str) -> Result<&'static str, (i16, String)> {
    match name {
        USER => Ok(USER),
        CLIENT_ID => Ok(CLIENT_ID),
        IP => Ok(IP),
        "" => Err((error_code::INVALID_REQUEST, "Invalid empty entity type.".into())),
        // Kafka answers an unknown type with UNSUPPORTED_VERSION.
        other => Err((error_code::UNSUPPORTED_VERSION, format!("Unsupported entity type {other}"))),
    }
}

/// The filter of a DescribeClientQuotas: per entity type, what it must
/// match; else the error code and message Kafka answers with.
fn filter_of(components: &[ComponentData]) -> Result<BTreeMap<&'static str, Match>, (i16, String)> {
    let invalid = |message: String| (error_code::INVALID_REQUEST, message);
    let mut filter = BTreeMap::new();
    for c in components {
        if filter.contains_key(&*c.entity_type) {
            return Err(invalid(format!(
                "Entity type {} cannot appear more than once in the filter.",
                &*c.entity_type
            )));
        }
        let kind = filter_entity_type(&c.entity_type)?;
        let wanted = match (c.match_type, c._match.as_deref()) {
            (MATCH_EXACT, Some(name)) => Match::Exact(name.to_owned()),
            (MATCH_EXACT, None) => {
                return Err(invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.".into()))
            }
            (MATCH_DEFAULT, None) => Match::Default,
            (MATCH_SPECIFIED, None) => Match::Specified,
            (MATCH_DEFAULT, Some(_)) => {
                return Err(invalid("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.".into()))
            }
            (MATCH_SPECIFIED, Some(_)) => {
                return Err(invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.".into(),
                ))
            }
            (other, _) => return Err(invalid(format!("Unknown match type {other}"))),
        };
        filter.insert(kind, wanted);
    }
    if filter.contains_key(IP) && (filter.contains_key(USER) || filter.contains_key(CLIENT_ID)) {
        return Err(invalid(
            "Invalid entity filter component combination. IP filter component should not be used with user or \
             clientId filter component."
                .into(),
        ));
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
            Err((code, reason)) => return failed(code, &reason),
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

/// One AlterClientQuotas entry, checked as Kafka checks it (the entity
/// first, then each operation in order): its changes.
fn changes_of(
    entity: &[AlterEntity],
    ops: &[kafka_protocol::messages::alter_client_quotas_request::OpData],
) -> Result<Vec<QuotaChange>, String> {
    if entity.is_empty() {
        return Err("Invalid empty client quota entity".into());
    }
    // Kafka reads the entity as a map: of a type given twice, the last name counts.
    let mut parts: Vec<(&str, Option<&str>)> = Vec::with_capacity(entity.len());
    for part in entity {
        let name = part.entity_name.as_deref();
        match parts.iter_mut().find(|(kind, _)| *kind == &*part.entity_type) {
            Some(slot) => slot.1 = name,
            None => parts.push((&part.entity_type, name)),
        }
    }
    let mut parsed = QuotaEntity::default();
    for (kind, name) in parts {
        let slot = match kind {
            USER => &mut parsed.user,
            CLIENT_ID => &mut parsed.client_id,
            IP => &mut parsed.ip,
            other => return Err(format!("Unhandled client quota entity type: {other}")),
        };
        if name == Some("") {
            return Err(format!("Empty {kind} not supported"));
        }
        *slot = Some(EntityName::from_wire(name));
    }
    if parsed.ip.is_some() && (parsed.user.is_some() || parsed.client_id.is_some()) {
        // Kafka's words, "shouldnot" included.
        return Err("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId".into());
    }
    if let Some(EntityName::Named(n)) = &mut parsed.ip {
        // Kept as typed, as Kafka keeps it (the acceptor compares parsed
        // addresses); host names are not resolved (the broker does no DNS on
        // its accept path), where Kafka resolves them.
        n.parse::<std::net::IpAddr>().map_err(|_| format!("{n} is not a valid IP or resolvable host."))?;
    }
    let for_ip = parsed.ip.is_some();
    let mut changes: Vec<QuotaChange> = Vec::with_capacity(ops.len());
    for op in ops {
        let key = QuotaKey::parse(&op.key).filter(|k| k.is_ip_quota() == for_ip);
        if op.remove {
            // Kafka checks nothing of a removal: a key the entity cannot have
            // (unknown, of the other kind of entity, or controller_mutation_rate)
            // is not there to remove.
            if let Some(key) = key {
                if changes.iter().any(|c| c.key == key) {
                    return Err(format!("Duplicate quota key: {}", key.name()));
                }
                changes.push(QuotaChange { entity: parsed.clone(), key, value: None });
            }
            continue;
        }
        let Some(value_type) = value_type(&op.key, for_ip) else {
            return Err(format!("Invalid configuration key {}", &*op.key));
        };
        check_value(&op.key, op.value, value_type)?;
        let Some(key) = key else {
            // The one key of Kafka's set that is not a QuotaKey.
            return Err(format!("{CONTROLLER_MUTATION_RATE} is not enforced by Kafgres"));
        };
        if changes.iter().any(|c| c.key == key) {
            return Err(format!("Duplicate quota key: {}", key.name()));
        }
        changes.push(QuotaChange { entity: parsed.clone(), key, value: Some(op.value) });
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
    use kafka_protocol::messages::alter_client_quotas_request::OpData;

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

    fn part(kind: &str, name: Option<&str>) -> AlterEntity {
        AlterEntity::default().with_entity_type(str_bytes(kind)).with_entity_name(name.map(str_bytes))
    }

    fn user(name: Option<&str>) -> AlterEntity {
        part(USER, name)
    }

    fn ip(name: Option<&str>) -> AlterEntity {
        part(IP, name)
    }

    fn op(key: &str, value: f64, remove: bool) -> OpData {
        OpData::default().with_key(str_bytes(key)).with_value(value).with_remove(remove)
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
        // SPECIFIED: any user, the default one included (`kafka-configs --describe --entity-type users`).
        let specified = filter_of(&[component(USER, MATCH_SPECIFIED, None)]).unwrap();
        assert!(matches(&alice, &specified, true) && matches(&default_user, &specified, true));
        assert!(!matches(&app, &specified, false) && !matches(&alice_app, &specified, true));
        let everything = filter_of(&[]).unwrap();
        assert!([&alice, &alice_app, &default_user, &app].iter().all(|e| matches(e, &everything, false)));
        assert!(![&alice, &alice_app, &default_user, &app].iter().any(|e| matches(e, &everything, true)));
    }

    #[test]
    fn bad_filters_are_refused_with_kafkas_codes_and_words() {
        use error_code::{INVALID_REQUEST, UNSUPPORTED_VERSION};
        for (components, code, message) in [
            (vec![component("group", MATCH_DEFAULT, None)], UNSUPPORTED_VERSION, "Unsupported entity type group"),
            (vec![component("", MATCH_DEFAULT, None)], INVALID_REQUEST, "Invalid empty entity type."),
            (
                vec![component(IP, MATCH_DEFAULT, None), component(USER, MATCH_DEFAULT, None)],
                INVALID_REQUEST,
                "Invalid entity filter component combination. IP filter component should not be used with user or \
                 clientId filter component.",
            ),
            (
                vec![component(USER, MATCH_EXACT, None)],
                INVALID_REQUEST,
                "Request specified MATCH_TYPE_EXACT, but set match string to null.",
            ),
            (
                vec![component(USER, MATCH_DEFAULT, Some("alice"))],
                INVALID_REQUEST,
                "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
            ),
            (
                vec![component(USER, MATCH_SPECIFIED, Some("alice"))],
                INVALID_REQUEST,
                "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
            ),
            (vec![component(USER, 7, None)], INVALID_REQUEST, "Unknown match type 7"),
            // The repetition is found before the second component's own faults.
            (
                vec![component(USER, MATCH_DEFAULT, None), component(USER, 7, None)],
                INVALID_REQUEST,
                "Entity type user cannot appear more than once in the filter.",
            ),
            (
                vec![component("group", MATCH_DEFAULT, None), component("group", MATCH_DEFAULT, None)],
                UNSUPPORTED_VERSION,
                "Unsupported entity type group",
            ),
        ] {
            assert_eq!(filter_of(&components).unwrap_err(), (code, message.to_owned()));
        }
    }

    #[test]
    fn alterations_are_parsed_into_changes() {
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
        // A percentage need not be whole, nor finite (Kafka's DOUBLE).
        assert_eq!(changes_of(&[user(None)], &[op("request_percentage", 12.5, false)]).unwrap()[0].value, Some(12.5));
        assert!(changes_of(&[user(None)], &[op("request_percentage", f64::INFINITY, false)]).is_ok());
        // The integral types' bounds: Long.MAX_VALUE and Integer.MAX_VALUE as doubles.
        assert!(changes_of(&[user(None)], &[op("producer_byte_rate", i64::MAX as f64, false)]).is_ok());
        assert!(changes_of(&[ip(None)], &[op("connection_creation_rate", i32::MAX as f64, false)]).is_ok());
        let changes =
            changes_of(&[ip(Some("fd00:0:0:0:0:0:0:7"))], &[op("connection_creation_rate", 1.0, false)]).unwrap();
        assert_eq!(changes[0].entity.ip, Some(EntityName::Named("fd00:0:0:0:0:0:0:7".into())), "as typed");
        assert!(changes_of(&[ip(Some("10.0.0.1"))], &[op("connection_creation_rate", 0.0, false)])
            .unwrap_err()
            .contains("must be greater than 0"));
        assert_eq!(
            changes_of(&[ip(None)], &[op("connection_creation_rate", 25.0, false)]).unwrap()[0].entity.ip,
            Some(EntityName::Default)
        );
        // A type given twice: the last name counts, as in Kafka's map.
        let changes = changes_of(&[user(Some("")), user(Some("bob"))], &[op("producer_byte_rate", 1.0, false)]);
        assert_eq!(changes.unwrap()[0].entity.user, Some(EntityName::Named("bob".into())));
        // A removal is not checked: what the entity cannot have is not there.
        for (entity, key) in [
            (user(Some("alice")), "fancy_rate"),
            (user(Some("alice")), "connection_creation_rate"),
            (user(Some("alice")), "controller_mutation_rate"),
            (ip(None), "producer_byte_rate"),
        ] {
            assert_eq!(changes_of(&[entity], &[op(key, 0.0, true)]).unwrap(), Vec::new(), "{key}");
        }
    }

    #[test]
    fn alterations_are_refused_with_kafkas_words() {
        for (entity, ops, message) in [
            (vec![], vec![op("producer_byte_rate", 1.0, false)], "Invalid empty client quota entity"),
            (
                vec![part("group", Some("g"))],
                vec![op("producer_byte_rate", 1.0, false)],
                "Unhandled client quota entity type: group",
            ),
            (vec![user(Some(""))], vec![op("producer_byte_rate", 1.0, false)], "Empty user not supported"),
            (
                vec![part(CLIENT_ID, Some(""))],
                vec![op("producer_byte_rate", 1.0, false)],
                "Empty client-id not supported",
            ),
            (vec![ip(Some(""))], vec![op("connection_creation_rate", 1.0, false)], "Empty ip not supported"),
            (
                vec![ip(None), user(None)],
                vec![op("connection_creation_rate", 5.0, false)],
                "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
            ),
            // The combination is refused before the address is looked at.
            (
                vec![ip(Some("999.1.1.1")), user(Some("u"))],
                vec![op("connection_creation_rate", 5.0, false)],
                "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId",
            ),
            (
                vec![ip(Some("999.1.2.3"))],
                vec![op("connection_creation_rate", 5.0, false)],
                "999.1.2.3 is not a valid IP or resolvable host.",
            ),
            (
                vec![ip(Some("broker.example"))],
                vec![op("connection_creation_rate", 5.0, false)],
                "broker.example is not a valid IP or resolvable host.",
            ),
            (
                vec![ip(Some("10.0.0.1:80"))],
                vec![op("connection_creation_rate", 5.0, true)],
                "10.0.0.1:80 is not a valid IP or resolvable host.",
            ),
            (
                vec![ip(None)],
                vec![op("producer_byte_rate", 5.0, false)],
                "Invalid configuration key producer_byte_rate",
            ),
            (
                vec![ip(None)],
                vec![op("controller_mutation_rate", 5.0, false)],
                "Invalid configuration key controller_mutation_rate",
            ),
            (
                vec![user(None)],
                vec![op("connection_creation_rate", 5.0, false)],
                "Invalid configuration key connection_creation_rate",
            ),
            (
                vec![user(Some("alice"))],
                vec![op("fancy_rate", 1.5, false), op("producer_byte_rate", 1.5, false)],
                "Invalid configuration key fancy_rate",
            ),
            (
                vec![user(Some("alice"))],
                vec![op("producer_byte_rate", 5.0, false), op("fancy_rate", 1.0, false)],
                "Invalid configuration key fancy_rate",
            ),
            (
                vec![ip(None)],
                vec![op("connection_creation_rate", 2.5, false)],
                "connection_creation_rate cannot be a fractional value.",
            ),
            (
                vec![ip(None)],
                vec![op("connection_creation_rate", -1.0, false)],
                "Quota connection_creation_rate must be greater than 0",
            ),
            (
                vec![ip(None)],
                vec![op("connection_creation_rate", -0.5, false)],
                "Quota connection_creation_rate must be greater than 0",
            ),
            (
                vec![ip(None)],
                vec![op("connection_creation_rate", 2147483648.0, false)],
                "Proposed value for connection_creation_rate is too large for an INT.",
            ),
            (
                vec![ip(None)],
                vec![op("connection_creation_rate", 2147483648.5, false)],
                "Proposed value for connection_creation_rate is too large for an INT.",
            ),
            (
                vec![user(Some("alice"))],
                vec![op("producer_byte_rate", 1.5, false)],
                "producer_byte_rate cannot be a fractional value.",
            ),
            (
                vec![user(Some("alice"))],
                vec![op("consumer_byte_rate", -5.0, false)],
                "Quota consumer_byte_rate must be greater than 0",
            ),
            (
                vec![user(Some("alice"))],
                vec![op("producer_byte_rate", 0.0, false)],
                "Quota producer_byte_rate must be greater than 0",
            ),
            (
                vec![user(Some("alice"))],
                vec![op("producer_byte_rate", f64::NEG_INFINITY, false)],
                "Quota producer_byte_rate must be greater than 0",
            ),
            (
                vec![user(Some("alice"))],
                vec![op("producer_byte_rate", 1e30, false)],
                "Proposed value for producer_byte_rate is too large for a LONG.",
            ),
            (
                vec![user(Some("alice"))],
                vec![op("producer_byte_rate", f64::INFINITY, false)],
                "Proposed value for producer_byte_rate is too large for a LONG.",
            ),
            (
                vec![user(Some("alice"))],
                vec![op("request_percentage", 0.0, false)],
                "Quota request_percentage must be greater than 0",
            ),
            (
                vec![user(Some("alice"))],
                vec![op("request_percentage", -5.0, false)],
                "Quota request_percentage must be greater than 0",
            ),
            // Kafka stores NaN; Kafgres refuses it.
            (
                vec![user(Some("alice"))],
                vec![op("producer_byte_rate", f64::NAN, false)],
                "Quota producer_byte_rate must be a number, not NaN",
            ),
            // Kafgres's own: checked as Kafka checks it, then refused.
            (
                vec![user(Some("alice"))],
                vec![op("controller_mutation_rate", 0.0, false)],
                "Quota controller_mutation_rate must be greater than 0",
            ),
            (
                vec![user(Some("alice"))],
                vec![op("controller_mutation_rate", 50.0, false)],
                "controller_mutation_rate is not enforced by Kafgres",
            ),
            (
                vec![user(Some("a"))],
                vec![op("producer_byte_rate", 1.0, false), op("producer_byte_rate", 2.0, false)],
                "Duplicate quota key: producer_byte_rate",
            ),
        ] {
            assert_eq!(changes_of(&entity, &ops).unwrap_err(), message);
        }
    }
}
