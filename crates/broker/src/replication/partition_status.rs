//! Each follower's copy of each partition, as the leader sees it: the rows
//! of the `kafgres.replica_partitions` view.
//!
//! They do not fit in shared memory (one per follower and partition), so the
//! worker writes them to a file when a backend asks (the board's status
//! tickets) and the backend reads it, as PostgreSQL's statistics collector
//! once answered through `pg_stat_tmp`. The file is text, one row per line,
//! fields separated by tabs; a name is escaped (`\t`, `\n`, `\\`), since a
//! follower names itself.

use crate::topics::Topics;

/// One follower's copy of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaPartitionRow {
    pub standby: String,
    pub topic: String,
    pub partition: i32,
    /// The follower's last fetch offset: it holds every record below, durably.
    pub replicated_offset: i64,
    pub log_end_offset: i64,
    /// What consumers see: with a synchronous policy, only what the
    /// standbys it requires hold.
    pub high_watermark: i64,
    /// When a fetch of it last started at the log end (ms since the Unix
    /// epoch); `None`: not since this broker started.
    pub caught_up_ms: Option<i64>,
}

/// Every follower of every open partition, by standby, topic and partition.
pub fn rows(topics: &Topics) -> Vec<ReplicaPartitionRow> {
    let mut rows = Vec::new();
    for partition in topics.all_partitions() {
        let acks = partition.follower_acks();
        if acks.is_empty() {
            continue;
        }
        let log_end_offset = partition.log_end_offset();
        let high_watermark = partition.high_watermark().offset;
        for (standby, ack) in acks {
            rows.push(ReplicaPartitionRow {
                standby,
                topic: partition.topic.clone(),
                partition: partition.index,
                replicated_offset: ack.offset,
                log_end_offset,
                high_watermark,
                caught_up_ms: (ack.caught_up_ms > 0).then_some(ack.caught_up_ms),
            });
        }
    }
    rows.sort_by(|a, b| (&a.standby, &a.topic, a.partition).cmp(&(&b.standby, &b.topic, b.partition)));
    rows
}

/// The rows as the file holds them.
pub fn encode(rows: &[ReplicaPartitionRow]) -> String {
    let mut out = String::new();
    for r in rows {
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            escape(&r.standby),
            escape(&r.topic),
            r.partition,
            r.replicated_offset,
            r.log_end_offset,
            r.high_watermark,
            r.caught_up_ms.unwrap_or(0)
        ));
    }
    out
}

/// The rows of a file [`encode`] wrote; an error names the line it cannot read.
pub fn decode(text: &str) -> Result<Vec<ReplicaPartitionRow>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.is_empty())
        .map(|(i, line)| {
            decode_line(line).ok_or_else(|| format!("line {} is not a replica status row: {line:?}", i + 1))
        })
        .collect()
}

fn decode_line(line: &str) -> Option<ReplicaPartitionRow> {
    let fields: Vec<&str> = line.split('\t').collect();
    let [standby, topic, partition, replicated, log_end, high_watermark, caught_up] = fields.as_slice() else {
        return None;
    };
    let caught_up: i64 = caught_up.parse().ok()?;
    Some(ReplicaPartitionRow {
        standby: unescape(standby)?,
        topic: unescape(topic)?,
        partition: partition.parse().ok()?,
        replicated_offset: replicated.parse().ok()?,
        log_end_offset: log_end.parse().ok()?,
        high_watermark: high_watermark.parse().ok()?,
        caught_up_ms: (caught_up > 0).then_some(caught_up),
    })
}

pub(crate) fn escape(name: &str) -> String {
    name.replace('\\', "\\\\").replace('\t', "\\t").replace('\n', "\\n")
}

pub(crate) fn unescape(field: &str) -> Option<String> {
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            '\\' => out.push('\\'),
            't' => out.push('\t'),
            'n' => out.push('\n'),
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(standby: &str, caught_up_ms: Option<i64>) -> ReplicaPartitionRow {
        ReplicaPartitionRow {
            standby: standby.to_owned(),
            topic: "orders.v1".to_owned(),
            partition: 3,
            replicated_offset: 40,
            log_end_offset: 42,
            high_watermark: 40,
            caught_up_ms,
        }
    }

    #[test]
    fn rows_survive_the_file_whatever_a_follower_calls_itself() {
        let rows = vec![row("kafgres_standby", Some(1_764_000_000_000)), row("odd\tname\nwith \\ in it", None)];
        let text = encode(&rows);
        assert_eq!(text.lines().count(), 2, "one line per row: {text:?}");
        assert_eq!(decode(&text).expect("decodes"), rows);
        assert_eq!(decode("").expect("no rows"), Vec::new());
    }

    #[test]
    fn a_damaged_line_is_an_error_naming_it() {
        let good = encode(&[row("a", None)]);
        let err = decode(&format!("{good}a\tb\tnot-a-number\t1\t2\t3\t0\n")).expect_err("bad partition");
        assert!(err.starts_with("line 2 "), "{err}");
        assert!(decode("a\\q\tt\t0\t0\t0\t0\t0\n").is_err(), "an unknown escape");
        assert!(decode("a\tt\t0\t0\n").is_err(), "too few fields");
    }
}
