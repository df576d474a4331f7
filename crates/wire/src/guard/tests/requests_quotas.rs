//! Random valid DescribeClientQuotas and AlterClientQuotas requests for one version (see
//! `requests_data.rs` for the conventions).

use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};
use proptest::prelude::*;

use super::gen::{list, text, text_or_null, unknown_tags};

pub(super) fn describe_client_quotas(v: i16) -> impl Strategy<Value = DescribeClientQuotasRequest> {
    let flexible = v >= 1;
    let component = (text(), any::<i8>(), text_or_null(), unknown_tags(flexible)).prop_map(
        |(entity_type, match_type, matched, tags)| {
            ComponentData::default()
                .with_entity_type(entity_type)
                .with_match_type(match_type)
                .with_match(matched)
                .with_unknown_tagged_fields(tags)
        },
    );
    (list(component), any::<bool>(), unknown_tags(flexible)).prop_map(|(components, strict, tags)| {
        DescribeClientQuotasRequest::default()
            .with_components(components)
            .with_strict(strict)
            .with_unknown_tagged_fields(tags)
    })
}

pub(super) fn alter_client_quotas(v: i16) -> impl Strategy<Value = AlterClientQuotasRequest> {
    let flexible = v >= 1;
    let entity = (text(), text_or_null(), unknown_tags(flexible)).prop_map(|(entity_type, entity_name, tags)| {
        EntityData::default()
            .with_entity_type(entity_type)
            .with_entity_name(entity_name)
            .with_unknown_tagged_fields(tags)
    });
    let op = (text(), any::<f64>(), any::<bool>(), unknown_tags(flexible)).prop_map(|(key, value, remove, tags)| {
        OpData::default().with_key(key).with_value(value).with_remove(remove).with_unknown_tagged_fields(tags)
    });
    let entry = (list(entity), list(op), unknown_tags(flexible)).prop_map(|(entity, ops, tags)| {
        EntryData::default().with_entity(entity).with_ops(ops).with_unknown_tagged_fields(tags)
    });
    (list(entry), any::<bool>(), unknown_tags(flexible)).prop_map(|(entries, validate_only, tags)| {
        AlterClientQuotasRequest::default()
            .with_entries(entries)
            .with_validate_only(validate_only)
            .with_unknown_tagged_fields(tags)
    })
}
