//! Metadata, topic administration and groups against an in-process broker.

mod common;

use common::TestBroker;
use kafgres_client::ClientError;
use kafgres_wire::error_code;

#[test]
fn create_describe_grow_and_delete_a_topic() {
    let broker = TestBroker::start();
    let mut client = broker.client();
    let configs = [("cleanup.policy".to_string(), "delete".to_string())];
    let id = client.create_topic("orders", 3, &configs).unwrap();
    assert!(!id.is_nil());

    let topics = client.metadata(Some(&["orders", "unknown"])).unwrap();
    assert_eq!(topics.len(), 2);
    let orders = topics.iter().find(|t| t.name == "orders").unwrap();
    assert_eq!((orders.topic_id, orders.error_code, orders.is_internal), (id, 0, false));
    assert_eq!(orders.partitions.iter().map(|p| (p.index, p.error_code)).collect::<Vec<_>>(), [(0, 0), (1, 0), (2, 0)]);
    assert!(orders.partitions.iter().all(|p| p.leader >= 0));
    let unknown = topics.iter().find(|t| t.name == "unknown").unwrap();
    assert_eq!(unknown.error_code, error_code::UNKNOWN_TOPIC_OR_PARTITION);
    assert!(unknown.partitions.is_empty());
    // Metadata does not create topics.
    assert_eq!(client.metadata(Some(&["unknown"])).unwrap()[0].error_code, error_code::UNKNOWN_TOPIC_OR_PARTITION);

    match client.create_topic("orders", 1, &[]).unwrap_err() {
        ClientError::Kafka {
            api: "CreateTopics",
            code: error_code::TOPIC_ALREADY_EXISTS,
            name: "TOPIC_ALREADY_EXISTS",
            ..
        } => {}
        other => panic!("{other}"),
    }
    client.create_partitions("orders", 5).unwrap();
    assert_eq!(client.metadata(Some(&["orders"])).unwrap()[0].partitions.len(), 5);
    match client.create_partitions("orders", 2).unwrap_err() {
        ClientError::Kafka { api: "CreatePartitions", code: error_code::INVALID_PARTITIONS, .. } => {}
        other => panic!("{other}"),
    }

    let all = client.metadata(None).unwrap();
    assert!(all.iter().any(|t| t.name == "orders"));
    client.delete_topic("orders").unwrap();
    assert_eq!(client.metadata(Some(&["orders"])).unwrap()[0].error_code, error_code::UNKNOWN_TOPIC_OR_PARTITION);
    match client.delete_topic("orders").unwrap_err() {
        ClientError::Kafka { api: "DeleteTopics", code: error_code::UNKNOWN_TOPIC_OR_PARTITION, .. } => {}
        other => panic!("{other}"),
    }
}

#[test]
fn an_unknown_group_is_dead_or_empty_and_groups_list() {
    let broker = TestBroker::start();
    let mut client = broker.client();
    let group = client.describe_group("nobody").unwrap();
    assert!(group.state == "Dead" || group.state == "Empty", "{group:?}");
    assert_eq!((group.group_id.as_str(), group.members), ("nobody", 0));
    let groups = client.list_groups().unwrap();
    assert!(groups.iter().all(|g| g.group_id != "nobody" || g.state == "Empty"), "{groups:?}");
}

#[test]
fn connecting_to_a_closed_port_is_an_io_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    match kafgres_client::Client::connect(addr, "x", kafgres_client::PollWait) {
        Err(ClientError::Io { api: "connect", .. }) => {}
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("connected to a closed port"),
    }
}

#[test]
fn alter_topic_configs_sets_and_deletes_overrides() {
    let broker = TestBroker::start();
    let mut client = broker.client();
    client.create_topic("tuned", 1, &[]).unwrap();
    let big = common::records("big", 20);
    client.alter_topic_configs("tuned", &[("max.message.bytes".into(), Some("100".into()))]).unwrap();
    match client.produce("tuned", 0, &big).unwrap_err() {
        ClientError::Kafka { api: "Produce", code: error_code::MESSAGE_TOO_LARGE, .. } => {}
        other => panic!("{other}"),
    }
    // A null value deletes the override: back to the broker's limit.
    client.alter_topic_configs("tuned", &[("max.message.bytes".into(), None)]).unwrap();
    assert_eq!(client.produce("tuned", 0, &big).unwrap(), 0);
    match client.alter_topic_configs("tuned", &[("no.such.config".into(), Some("1".into()))]).unwrap_err() {
        ClientError::Kafka { api: "IncrementalAlterConfigs", code: error_code::INVALID_CONFIG, .. } => {}
        other => panic!("{other}"),
    }
    match client.alter_topic_configs("absent", &[("retention.ms".into(), Some("1".into()))]).unwrap_err() {
        ClientError::Kafka { api: "IncrementalAlterConfigs", code: error_code::UNKNOWN_TOPIC_OR_PARTITION, .. } => {}
        other => panic!("{other}"),
    }
}
