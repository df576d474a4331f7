//! InitProducerId (v0-5): a producer id and epoch for an idempotent or a
//! transactional producer.
//!
//! As in Kafka 4.x (`TransactionCoordinator.handleInitProducerId`), a request
//! without a transactional id always gets a *new* producer id with epoch 0,
//! whatever producer id and epoch it carries (v3+): a non-transactional
//! producer bumps its epoch itself (KIP-360), and Produce accepts a newer
//! epoch that restarts at sequence 0. An empty transactional id is
//! INVALID_REQUEST, as in Kafka. A transactional id goes to the transaction
//! coordinator ([`crate::txn`]): its producer id, with the epoch bumped at
//! each initialisation (fencing the previous instance), an open transaction
//! aborted first.

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};

use super::handler::{Answer, Handler, RequestContext, Versions};
use crate::acl::{Operation, ResourceType};

use crate::catalog::CatalogError;
use crate::producer_ids::ProducerIds;
use crate::txn::TxnService;

pub struct InitProducerId;

impl Handler for InitProducerId {
    const KEY: ApiKey = ApiKey::InitProducerId;
    /// v0-v5; PRODUCER_FENCED exists from v4. Kafka 4.x's v6 adds two-phase
    /// commit (KIP-939), not served.
    const VERSIONS: Versions = Versions::new(0, 5);
    type Request = InitProducerIdRequest;
    type Response = InitProducerIdResponse;
    type Services<'a> = (&'a TxnService, &'a ProducerIds);

    async fn handle(
        (txns, producer_ids): Self::Services<'_>,
        cx: &RequestContext<'_>,
        request: InitProducerIdRequest,
    ) -> Answer<InitProducerIdResponse> {
        let version = cx.api_version;
        let mut response = InitProducerIdResponse::default();
        response.producer_id = ProducerId(-1);
        response.producer_epoch = -1;
        match request.transactional_id.as_ref().map(|t| t.0.as_str()) {
            Some("") => response.error_code = error_code::INVALID_REQUEST,
            Some(id) if !cx.may_on_transactional_id(Operation::Write, id) => {
                response.error_code = error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            }
            // An idempotent producer: IDEMPOTENT_WRITE on the cluster, or
            // WRITE on some topic, as Kafka allows it.
            None if !cx.may_on_cluster(Operation::IdempotentWrite)
                && !cx.may_on_any(Operation::Write, ResourceType::Topic) =>
            {
                response.error_code = error_code::CLUSTER_AUTHORIZATION_FAILED
            }
            Some(transactional_id) => {
                let expected = if version >= 3 { (request.producer_id.0, request.producer_epoch) } else { (-1, -1) };
                let timeout_ms = request.transaction_timeout_ms;
                match txns.init_producer_id(transactional_id, timeout_ms, expected).await {
                    Ok((id, epoch)) => {
                        response.producer_id = ProducerId(id);
                        response.producer_epoch = epoch;
                    }
                    Err(code) => {
                        // PRODUCER_FENCED exists from v4 on; older clients get
                        // INVALID_PRODUCER_EPOCH, as Kafka maps it.
                        response.error_code = if code == error_code::PRODUCER_FENCED && version < 4 {
                            error_code::INVALID_PRODUCER_EPOCH
                        } else {
                            code
                        };
                    }
                }
            }
            None => match producer_ids.next().await {
                Ok(id) => {
                    response.producer_id = ProducerId(id);
                    response.producer_epoch = 0;
                }
                Err(e) => {
                    log::warn!("InitProducerId: cannot reserve producer ids: {e}");
                    // Kafka's producer-id manager answers this while it waits for a
                    // block; clients retry it.
                    response.error_code = match e {
                        CatalogError::Unavailable(_) => error_code::COORDINATOR_LOAD_IN_PROGRESS,
                        _ => error_code::UNKNOWN_SERVER_ERROR,
                    };
                }
            },
        }
        response.into()
    }

    fn refused(_: &RequestContext<'_>, req: &InitProducerIdRequest, code: i16) -> Option<InitProducerIdResponse> {
        let mut response = InitProducerIdResponse::default();
        response.producer_id = ProducerId(-1);
        response.producer_epoch = -1;
        // An idempotent producer's request (no transactional id) has no
        // coordinator to look up (the Java client would ask FindCoordinator
        // for a null key on NOT_COORDINATOR): it gets the retriable answer
        // Kafka's producer-id manager gives while it cannot hand ids out, and
        // sends it again to another broker.
        response.error_code = if req.transactional_id.is_none() && code == error_code::NOT_COORDINATOR {
            error_code::COORDINATOR_LOAD_IN_PROGRESS
        } else {
            code
        };
        Some(response)
    }
}
