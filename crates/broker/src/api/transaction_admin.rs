//! DescribeTransactions and ListTransactions (KIP-664): the transaction
//! coordinator's state as `kafka-transactions.sh list`, `describe` and
//! `find-hanging` read it. Both read [`TxnService::summaries`], the last
//! stored state of each id, so neither waits on a transaction that is ending.

use kafgres_wire::error_code;
use kafgres_wire::ApiKey;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState as DescribedState};
use kafka_protocol::messages::list_transactions_response::TransactionState as ListedState;
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ListTransactionsRequest, ListTransactionsResponse,
    ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::handler::{Answer, Handler, RequestContext, Versions};
use super::topic_name;
use crate::acl::Operation;
use crate::txn::{TxnService, TxnState, TxnSummary};

/// Kafka's transaction states that this coordinator never stores: a filter
/// naming one is known (not in `unknown_state_filters`) and matches nothing.
const STATES_NEVER_HELD: [&str; 2] = ["Dead", "PrepareEpochFence"];

pub struct DescribeTransactions;

impl Handler for DescribeTransactions {
    const KEY: ApiKey = ApiKey::DescribeTransactions;
    /// v0: Kafka 4.1's and 4.4's range.
    const VERSIONS: Versions = Versions::new(0, 0);
    type Request = DescribeTransactionsRequest;
    type Response = DescribeTransactionsResponse;
    type Services<'a> = &'a TxnService;

    async fn handle(
        txns: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: DescribeTransactionsRequest,
    ) -> Answer<DescribeTransactionsResponse> {
        let mut response = DescribeTransactionsResponse::default();
        for id in req.transactional_ids {
            let state = if !cx.may_on_transactional_id(Operation::Describe, &id.0) {
                failed(id, error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            } else if let Some(summary) = txns.summary(&id.0) {
                describe(cx, id, &summary)
            } else {
                failed(id, error_code::TRANSACTIONAL_ID_NOT_FOUND)
            };
            response.transaction_states.push(state);
        }
        response.into()
    }

    fn refused(
        _: &RequestContext<'_>,
        req: &DescribeTransactionsRequest,
        code: i16,
    ) -> Option<DescribeTransactionsResponse> {
        let mut response = DescribeTransactionsResponse::default();
        response.transaction_states = req.transactional_ids.iter().map(|id| failed(id.clone(), code)).collect();
        Some(response)
    }
}

/// An id's entry when it cannot be described: the code and Kafka's defaults.
fn failed(id: TransactionalId, code: i16) -> DescribedState {
    let mut out = DescribedState::default();
    out.error_code = code;
    out.transactional_id = id;
    out.transaction_start_time_ms = -1;
    out.producer_id = ProducerId(-1);
    out.producer_epoch = -1;
    out
}

fn describe(cx: &RequestContext<'_>, id: TransactionalId, summary: &TxnSummary) -> DescribedState {
    let mut out = DescribedState::default();
    out.transactional_id = id;
    out.transaction_state = StrBytes::from_static_str(summary.state.as_str());
    out.transaction_timeout_ms = summary.timeout_ms;
    out.transaction_start_time_ms = summary.started_ms;
    out.producer_id = ProducerId(summary.producer_id);
    out.producer_epoch = summary.producer_epoch;
    // Kafka lists only the topics the client may describe.
    for (topic, partition) in &summary.partitions {
        if !cx.may_on_topic(Operation::Describe, topic) {
            continue;
        }
        match out.topics.iter_mut().find(|t| t.topic.0.as_str() == topic) {
            Some(t) => t.partitions.push(*partition),
            None => {
                let mut t = TopicData::default();
                t.topic = topic_name(topic);
                t.partitions.push(*partition);
                out.topics.push(t);
            }
        }
    }
    out
}

pub struct ListTransactions;

impl Handler for ListTransactions {
    const KEY: ApiKey = ApiKey::ListTransactions;
    /// v0-v2: v1 adds the duration filter (KIP-994), v2 the transactional id
    /// pattern (KIP-1152); Kafka 4.1's and 4.4's range.
    const VERSIONS: Versions = Versions::new(0, 2);
    type Request = ListTransactionsRequest;
    type Response = ListTransactionsResponse;
    type Services<'a> = &'a TxnService;

    async fn handle(
        txns: Self::Services<'_>,
        cx: &RequestContext<'_>,
        req: ListTransactionsRequest,
    ) -> Answer<ListTransactionsResponse> {
        let mut response = ListTransactionsResponse::default();
        let filter = match ListFilter::from_request(&req, cx.api_version) {
            Ok(filter) => filter,
            Err(code) => {
                response.error_code = code;
                return response.into();
            }
        };
        response.unknown_state_filters =
            filter.unknown_states.iter().map(|s| StrBytes::from_string(s.clone())).collect();
        let now_ms = crate::now_ms();
        for (id, summary) in txns.summaries() {
            if !filter.includes(&id, &summary, now_ms) || !cx.may_on_transactional_id(Operation::Describe, &id) {
                continue;
            }
            let mut state = ListedState::default();
            state.transactional_id = TransactionalId(StrBytes::from_string(id));
            state.producer_id = ProducerId(summary.producer_id);
            state.transaction_state = StrBytes::from_static_str(summary.state.as_str());
            response.transaction_states.push(state);
        }
        response.into()
    }
}

/// A ListTransactions request's filters, each empty (or negative) for none.
struct ListFilter {
    /// `None`: no state filter was given.
    states: Option<Vec<TxnState>>,
    unknown_states: Vec<String>,
    producer_ids: Vec<i64>,
    /// Only transactions open for longer than this (v1+; < 0: any).
    min_duration_ms: i64,
    /// The whole id must match (v2+; Java's `Pattern.matches`).
    id_pattern: Option<regex::Regex>,
}

impl ListFilter {
    fn from_request(req: &ListTransactionsRequest, version: i16) -> Result<ListFilter, i16> {
        let mut states = Vec::new();
        let mut unknown_states = Vec::new();
        for name in &req.state_filters {
            match TxnState::parse(name) {
                Some(state) => states.push(state),
                None if STATES_NEVER_HELD.contains(&name.as_str()) => {}
                None => unknown_states.push(name.to_string()),
            }
        }
        let id_pattern = match req.transactional_id_pattern.as_ref().filter(|_| version >= 2) {
            Some(p) if !p.is_empty() => Some(
                regex::Regex::new(&format!("^(?:{})$", p.as_str()))
                    .map_err(|_| error_code::INVALID_REGULAR_EXPRESSION)?,
            ),
            _ => None,
        };
        Ok(ListFilter {
            // As Kafka: a filter of unknown states only matches nothing.
            states: (!req.state_filters.is_empty()).then_some(states),
            unknown_states,
            producer_ids: req.producer_id_filters.iter().map(|p| p.0).collect(),
            min_duration_ms: if version >= 1 { req.duration_filter } else { -1 },
            id_pattern,
        })
    }

    fn includes(&self, id: &str, summary: &TxnSummary, now_ms: i64) -> bool {
        if self.states.as_ref().is_some_and(|states| !states.contains(&summary.state)) {
            return false;
        }
        if !self.producer_ids.is_empty() && !self.producer_ids.contains(&summary.producer_id) {
            return false;
        }
        if self.min_duration_ms >= 0 && now_ms - summary.started_ms <= self.min_duration_ms {
            return false;
        }
        self.id_pattern.as_ref().is_none_or(|p| p.is_match(id))
    }
}
