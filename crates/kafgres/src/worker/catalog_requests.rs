//! The catalog requests of the data plane (`crate::control`), served on the
//! worker's main thread, each in its own transaction: an error is answered
//! to the request that caused it, never fatal to the worker.

use kafgres_broker::catalog::{CatalogError, CommittedOffset, ShareStateRecord};
use pgrx::prelude::*;
use tokio::sync::mpsc;

use crate::catalog_sql::{run_in_transaction, CatalogPlans};
use crate::control::ControlRequest;

/// Serves every queued control request. Offset commits are gathered and
/// stored together in one transaction (a thousand consumers committing at once
/// cost one commit record, not a thousand); any other request first flushes the
/// commits gathered before it, so requests take effect in arrival order.
pub fn serve_control_requests(plans: &CatalogPlans, requests: &mut mpsc::Receiver<ControlRequest>) {
    let mut commits: Vec<(Vec<CommittedOffset>, Reply)> = Vec::new();
    // Share-partition states are gathered the same way (every ShareFetch
    // writes its acquisitions: one transaction per wake-up, not per fetch).
    let mut shares: Vec<(Vec<ShareStateRecord>, Reply)> = Vec::new();
    while let Ok(request) = requests.try_recv() {
        match request {
            ControlRequest::CommitOffsets { offsets, reply } => commits.push((offsets, reply)),
            ControlRequest::WriteShareStates { states, reply } => shares.push((states, reply)),
            other => {
                store_offset_batch(plans, std::mem::take(&mut commits));
                store_share_batch(std::mem::take(&mut shares));
                serve_one(plans, other);
            }
        }
    }
    store_offset_batch(plans, commits);
    store_share_batch(shares);
}

type Reply = tokio::sync::oneshot::Sender<Result<(), CatalogError>>;

fn serve_one(plans: &CatalogPlans, request: ControlRequest) {
    match request {
        ControlRequest::CreateTopic { topic, reply } => {
            let result = match run_in_transaction(|| plans.insert_topic(&topic)) {
                Ok(true) => Ok(()),
                Ok(false) => Err(CatalogError::TopicExists(topic.name.clone())),
                Err(e) => {
                    warning!("kafgres: {e}");
                    Err(CatalogError::Failed(e))
                }
            };
            let _ = reply.send(result);
        }
        ControlRequest::DeleteTopic { topic_id, reply } => {
            let result = catalog_result(run_in_transaction(|| plans.delete_topic(topic_id)), topic_id);
            let _ = reply.send(result);
        }
        ControlRequest::SetPartitionCount { topic_id, partition_count, reply } => {
            let result =
                catalog_result(run_in_transaction(|| plans.set_partition_count(topic_id, partition_count)), topic_id);
            let _ = reply.send(result);
        }
        ControlRequest::SetTopicConfigs { topic_id, configs, reply } => {
            let result = catalog_result(run_in_transaction(|| plans.set_topic_configs(topic_id, &configs)), topic_id);
            let _ = reply.send(result);
        }
        ControlRequest::DeleteOffsets { group_id, partitions, reply } => {
            let result = run_in_transaction(|| plans.delete_offsets(&group_id, partitions.as_deref()));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::CommitOffsets { offsets, reply } => store_offset_batch(plans, vec![(offsets, reply)]),
        ControlRequest::DeleteShareGroup { group_id, reply } => {
            let result = run_in_transaction(|| crate::share_sql::delete_share_group(&group_id));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::SetBrokerConfigs { node_id, configs, reply } => {
            let result = run_in_transaction(|| crate::broker_config_sql::set_broker_configs(node_id, &configs));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::StoreDelegationToken { token, reply } => {
            let result = run_in_transaction(|| crate::delegation_token_sql::store_delegation_token(&token));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::DeleteDelegationToken { token_id, reply } => {
            let result = run_in_transaction(|| crate::delegation_token_sql::delete_delegation_token(&token_id));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::SetGroupConfigs { group_id, configs, reply } => {
            let result = run_in_transaction(|| crate::share_sql::set_group_configs(&group_id, &configs));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::WriteShareStates { states, reply } => store_share_batch(vec![(states, reply)]),
        ControlRequest::LoadGroupOffsets { group_id, reply } => {
            let result = run_in_transaction(|| plans.load_offsets(Some(&group_id)));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::AllocateProducerIds { count, reply } => {
            let result = run_in_transaction(|| plans.allocate_producer_ids(count));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::ScramCredential { username, reply } => {
            let result = run_in_transaction(|| plans.scram_credential(&username));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::DeleteTransaction { transactional_id, reply } => {
            let result = run_in_transaction(|| plans.delete_transaction(&transactional_id));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::ScramVerifiers { reply } => {
            let result = run_in_transaction(crate::scram_sql::scram_verifiers);
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::SetScramVerifier { role, verifier, reply } => {
            let result = run_in_transaction(|| crate::scram_sql::set_scram_verifier(&role, verifier.as_deref()));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::Identity { role, reply } => {
            let result = run_in_transaction(|| crate::acl_sql::identity(&role));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::ExternalLogin { role, reply } => {
            let result = run_in_transaction(|| crate::acl_sql::external_login(&role));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::CreateAcls { bindings, reply } => {
            let result = run_in_transaction(|| crate::acl_sql::insert_acls(&bindings));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::DeleteAcls { bindings, reply } => {
            let result = run_in_transaction(|| crate::acl_sql::delete_acls(&bindings));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::AlterClientQuotas { changes, reply } => {
            let result = run_in_transaction(|| crate::quota_sql::alter_quotas(&changes));
            let _ = reply.send(result.map_err(failed));
        }
        ControlRequest::StoreTransaction { record, offsets, reply } => {
            let result = run_in_transaction(|| {
                if !offsets.is_empty() {
                    let rows = latest_per_partition(offsets.iter());
                    plans.upsert_offsets(&rows)?;
                }
                plans.store_transaction(&record)
            });
            let _ = reply.send(result.map_err(failed));
        }
    }
}

/// Stores a batch of commits in one transaction and answers each once it is
/// durable. If the batch fails, each commit is retried alone so one bad
/// request cannot fail the others.
fn store_offset_batch(plans: &CatalogPlans, commits: Vec<(Vec<CommittedOffset>, Reply)>) {
    if commits.is_empty() {
        return;
    }
    let rows = latest_per_partition(commits.iter().flat_map(|(offsets, _)| offsets.iter()));
    match run_in_transaction(|| plans.upsert_offsets(&rows)) {
        Ok(()) => {
            for (_, reply) in commits {
                let _ = reply.send(Ok(()));
            }
        }
        Err(e) if commits.len() == 1 => {
            for (_, reply) in commits {
                let _ = reply.send(Err(failed(e.clone())));
            }
        }
        Err(_) => {
            for (offsets, reply) in commits {
                let rows = latest_per_partition(offsets.iter());
                let _ = reply.send(run_in_transaction(|| plans.upsert_offsets(&rows)).map_err(failed));
            }
        }
    }
}

/// Stores a batch of share-partition states in one transaction, as
/// [`store_offset_batch`] does with commits (one request at a time if the
/// batch fails). Of several states of one share-partition only the highest
/// version is written: the upsert may not touch a row twice, and the table
/// keeps the highest anyway.
fn store_share_batch(writes: Vec<(Vec<ShareStateRecord>, Reply)>) {
    if writes.is_empty() {
        return;
    }
    let write = |states: &mut dyn Iterator<Item = &ShareStateRecord>| {
        let mut latest: std::collections::HashMap<(&str, uuid::Uuid, i32), &ShareStateRecord> =
            std::collections::HashMap::new();
        for s in states {
            let key = (s.group_id.as_str(), s.topic_id, s.partition);
            if latest.get(&key).is_none_or(|old| old.version < s.version) {
                latest.insert(key, s);
            }
        }
        let rows: Vec<ShareStateRecord> = latest.into_values().cloned().collect();
        run_in_transaction(|| crate::share_sql::write_share_states(&rows))
    };
    match write(&mut writes.iter().flat_map(|(states, _)| states.iter())) {
        Ok(()) => {
            for (_, reply) in writes {
                let _ = reply.send(Ok(()));
            }
        }
        Err(e) if writes.len() == 1 => {
            for (_, reply) in writes {
                let _ = reply.send(Err(failed(e.clone())));
            }
        }
        Err(_) => {
            for (states, reply) in writes {
                let _ = reply.send(write(&mut states.iter()).map_err(failed));
            }
        }
    }
}

/// One row per (group, topic, partition), the last one queued winning: an
/// upsert may not touch the same row twice in one statement.
fn latest_per_partition<'a>(offsets: impl Iterator<Item = &'a CommittedOffset>) -> Vec<&'a CommittedOffset> {
    let mut latest: std::collections::HashMap<(&str, &str, i32), &CommittedOffset> = std::collections::HashMap::new();
    for o in offsets {
        latest.insert((o.group_id.as_str(), o.topic.as_str(), o.partition), o);
    }
    latest.into_values().collect()
}

fn failed(e: String) -> CatalogError {
    warning!("kafgres: {e}");
    CatalogError::Failed(e)
}

/// Maps "no row matched" to UnknownTopic and SQL failures to Failed.
fn catalog_result(outcome: Result<bool, String>, topic_id: uuid::Uuid) -> Result<(), CatalogError> {
    match outcome {
        Ok(true) => Ok(()),
        Ok(false) => Err(CatalogError::UnknownTopic(topic_id)),
        Err(e) => {
            warning!("kafgres: {e}");
            Err(CatalogError::Failed(e))
        }
    }
}
