//! The kept metrics as text, for `kafgres.client_metrics`: the worker writes
//! them to a status file when a backend asks (the replication board's
//! status ticket, as `kafgres.replica_partitions`), the backend reads them.
//! One row a line, tab-separated, fields escaped as the replica status rows.

use std::net::SocketAddr;

use uuid::Uuid;

use super::MetricRow;
use crate::replication::partition_status::{escape, unescape};

pub fn encode(rows: &[MetricRow]) -> String {
    let mut out = String::new();
    for r in rows {
        // f64's Display is the shortest text that parses back to the same value.
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\n",
            r.client_instance_id,
            escape(&r.client_id),
            r.address,
            escape(&r.name),
            r.value,
            r.pushed_at_ms
        ));
    }
    out
}

/// The rows of `text`, or which line is not one.
pub fn decode(text: &str) -> Result<Vec<MetricRow>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.is_empty())
        .map(|(i, line)| {
            decode_line(line).ok_or_else(|| format!("line {} is not a client metric row: {line:?}", i + 1))
        })
        .collect()
}

fn decode_line(line: &str) -> Option<MetricRow> {
    let fields: Vec<&str> = line.split('\t').collect();
    let [id, client_id, address, name, value, pushed_at] = fields.as_slice() else {
        return None;
    };
    Some(MetricRow {
        client_instance_id: id.parse::<Uuid>().ok()?,
        client_id: unescape(client_id)?,
        address: address.parse::<SocketAddr>().ok()?,
        name: unescape(name)?,
        value: value.parse().ok()?,
        pushed_at_ms: pushed_at.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip() {
        let rows = vec![
            MetricRow {
                client_instance_id: Uuid::from_u128(7),
                client_id: "app\twith\\tab".into(),
                address: "[::1]:5000".parse().expect("address"),
                name: "org.apache.kafka.producer.record.send.rate".into(),
                value: 0.1 + 0.2,
                pushed_at_ms: 1_700_000_000_000,
            },
            MetricRow {
                client_instance_id: Uuid::from_u128(8),
                client_id: String::new(),
                address: "127.0.0.1:1".parse().expect("address"),
                name: "m\n".into(),
                value: -3.0,
                pushed_at_ms: 1,
            },
        ];
        assert_eq!(decode(&encode(&rows)), Ok(rows));
        assert!(decode("not\ta row\n").is_err());
    }
}
