//! Version 2 (Kafka 4.2+): KIP-1206's acquire modes and KIP-1222's RENEW.

use super::*;

const BATCH_OPTIMIZED: i8 = 0;
const RECORD_LIMIT: i8 = 1;

impl Fetch<'_> {
    /// This fetch at v2, in `mode`; `renew` flags RENEW acknowledgements (a
    /// renewal fetches nothing: its limits are 0, as KIP-1222 has them).
    async fn send_v2(&self, client: &mut Client, mode: i8, renew: bool) -> ShareFetchResponse {
        let mut request = messages::ShareFetchRequest::from(self.request());
        (request.share_acquire_mode, request.is_renew_ack) = (mode, renew);
        if renew {
            (request.max_wait_ms, request.min_bytes, request.max_bytes, request.max_records) = (0, 0, 0, 0);
        }
        client.call(2, &request).await.0
    }
}

/// A ShareAcknowledge v2, flagged `is_renew_ack` when it holds RENEW.
async fn acknowledge_v2(
    client: &mut Client,
    member: &str,
    epoch: i32,
    topic_id: Uuid,
    acks: &Acks,
) -> messages::ShareAcknowledgeResponse {
    let is_renew_ack = acks.iter().any(|(_, _, types)| types.contains(&RENEW));
    let request =
        messages::ShareAcknowledgeRequest { request: acknowledge_request(member, epoch, topic_id, acks), is_renew_ack };
    client.call(2, &request).await
}

fn ack_code(r: &ShareAcknowledgeResponse) -> i16 {
    r.responses[0].partitions[0].error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v2_record_limit_acquires_at_most_max_records() {
    let (broker, _) = start(|_| {}).await;
    // One batch of 10 records: Kafka's batch-optimized mode would hand out all of it.
    let (mut client, id) = topic_with_members(&broker, 10, &["a"]).await;
    let mut fetch = Fetch::new("a", 0, id);
    fetch.records_max = 3;
    let got = fetch.send_v2(&mut client, RECORD_LIMIT, false).await;
    assert_eq!((got.error_code, got.acquisition_lock_timeout_ms), (0, 30_000));
    assert_eq!(acquired_offsets(&got), vec![0, 1, 2]);
    // Batch-optimized: Kafgres never goes past max_records either (docs/conformance.md).
    fetch.epoch = 1;
    fetch.records_max = 4;
    let got = fetch.send_v2(&mut client, BATCH_OPTIMIZED, false).await;
    assert_eq!(acquired(&got), vec![(3, 6, 1)]);
    // An acquire mode Kafka does not have.
    fetch.epoch = 2;
    let refused = fetch.send_v2(&mut client, 2, false).await;
    assert_eq!(refused.error_code, error_code::INVALID_REQUEST);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renew_extends_a_lock_past_its_expiry_without_redelivery() {
    // Wide margins: two shared cores may delay any step by a few hundred ms.
    let lock_ms = 2_000;
    let (broker, _) = start(|c| c.share.group_defaults.record_lock_duration_ms = lock_ms).await;
    let (mut client, id) = topic_with_members(&broker, 3, &["a", "b"]).await;
    let acquired_at = Instant::now();
    let got = Fetch::new("a", 0, id).send_v2(&mut client, RECORD_LIMIT, false).await;
    assert_eq!(acquired(&got), vec![(0, 2, 1)]);

    // Well before the lock expires, a renews 0-1 with ShareAcknowledge and 2 with ShareFetch.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let renewed = acknowledge_v2(&mut client, "a", 1, id, &vec![(0, 1, vec![RENEW])]).await;
    assert_eq!((ack_code(&renewed), renewed.acquisition_lock_timeout_ms), (0, lock_ms));
    let mut renew = Fetch::new("a", 2, id);
    renew.acks = vec![(2, 2, vec![RENEW])];
    let r = renew.send_v2(&mut client, RECORD_LIMIT, true).await;
    let p = &r.responses[0].partitions[0];
    assert_eq!((r.error_code, p.acknowledge_error_code), (0, 0), "{r:?}");
    assert!(p.acquired_records.is_empty(), "a renewal acquires nothing");
    // A renewal that asks to fetch is refused, as Kafka refuses it.
    let mut greedy = messages::ShareFetchRequest::from(Fetch::new("a", 3, id).request());
    greedy.is_renew_ack = true;
    let refused = client.call(2, &greedy).await;
    assert_eq!(refused.error_code, error_code::INVALID_REQUEST);

    // The original lock has expired: the records are still a's, b gets nothing.
    tokio::time::sleep((acquired_at + Duration::from_millis(2_200)).saturating_duration_since(Instant::now())).await;
    let mut b = broker.client().await;
    let none = Fetch::new("b", 0, id).send_v2(&mut b, RECORD_LIMIT, false).await;
    assert!(acquired(&none).is_empty(), "{none:?}");

    // Once the renewed locks expire, b gets the records at their second
    // delivery: a renewal is not a delivery. The two renewals were a few ms
    // apart, so b may get them in two fetches.
    let mut delivered = Vec::new();
    for epoch in 1..=3 {
        let mut wait = Fetch::new("b", epoch, id);
        wait.wait_ms = 8_000;
        let r = wait.send_v2(&mut b, RECORD_LIMIT, false).await;
        delivered
            .extend(acquired(&r).into_iter().flat_map(|(first, last, count)| (first..=last).map(move |o| (o, count))));
        if delivered.len() >= 3 {
            break;
        }
    }
    assert_eq!(delivered, vec![(0, 2), (1, 2), (2, 2)]);
    broker.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renew_of_records_another_member_holds_or_nobody_acquired_is_refused() {
    let (broker, _) = start(|_| {}).await;
    let (mut client, id) = topic_with_members(&broker, 3, &["a", "b"]).await;
    let mut fetch = Fetch::new("a", 0, id);
    fetch.records_max = 2;
    assert_eq!(acquired(&fetch.send_v2(&mut client, RECORD_LIMIT, false).await), vec![(0, 1, 1)]);
    let mut b = broker.client().await;
    assert_eq!(acquired(&Fetch::new("b", 0, id).send_v2(&mut b, RECORD_LIMIT, false).await), vec![(2, 2, 1)]);

    let theirs = acknowledge_v2(&mut b, "b", 1, id, &vec![(0, 1, vec![RENEW])]).await;
    assert_eq!(ack_code(&theirs), error_code::INVALID_RECORD_STATE);
    let never = acknowledge_v2(&mut client, "a", 1, id, &vec![(5, 5, vec![RENEW])]).await;
    assert_eq!(ack_code(&never), error_code::INVALID_RECORD_STATE);
    // RENEW is no acknowledge type at v1.
    let v1 = acknowledge(&mut client, "a", 2, id, &vec![(0, 1, vec![RENEW])]).await;
    assert_eq!(ack_code(&v1), error_code::INVALID_REQUEST);
    // None of that touched a's records.
    let accepted = acknowledge(&mut client, "a", 3, id, &vec![(0, 1, vec![ACCEPT])]).await;
    assert_eq!(ack_code(&accepted), 0);
    broker.broker.shutdown().await;
}
