//! Configuring a topology against the topics that exist, as Kafka's
//! `InternalTopicManager` does: every source topic must exist; repartition
//! topics take the partition count the topology fixes, else the largest
//! partition count of the sources of the subtopologies that write to them
//! (repeated until every count is known, since a repartition topic may feed
//! another); topics of one copartition group get one count; a changelog has
//! as many partitions as its subtopology has tasks (its largest source). An
//! internal topic that exists with another count is INCORRECTLY_PARTITIONED;
//! missing ones are returned to be created.

use std::collections::{BTreeMap, BTreeSet};

use super::types::{status, InternalTopic, StreamsStatus, StreamsSubtopology, StreamsTopology};
use crate::group::consumer::types::TopicLookup;

/// A subtopology with its task count and every topic's partition count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::group) struct ConfiguredSubtopology {
    pub task_count: i32,
    /// User and repartition source topics with their partition counts.
    pub source_partitions: BTreeMap<String, i32>,
    /// Changelog and repartition source topics with the counts decided.
    pub internal_partitions: BTreeMap<String, i32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(in crate::group) struct ConfiguredTopology {
    /// `None` when the topics do not allow a configuration (missing source
    /// topics, inconsistent partition counts).
    pub subtopologies: Option<BTreeMap<String, ConfiguredSubtopology>>,
    /// Internal topics still to create (the topology is not ready while any is missing).
    pub missing_internal_topics: Vec<InternalTopic>,
    /// What members are told while the topology is not ready.
    pub status: Option<StreamsStatus>,
}

impl ConfiguredTopology {
    /// Tasks can be assigned.
    pub fn is_ready(&self) -> bool {
        self.subtopologies.is_some() && self.status.is_none()
    }

    /// Task counts by subtopology when ready, else none.
    pub fn task_counts(&self) -> BTreeMap<String, i32> {
        match (&self.subtopologies, self.is_ready()) {
            (Some(subtopologies), true) => subtopologies.iter().map(|(id, s)| (id.clone(), s.task_count)).collect(),
            _ => BTreeMap::new(),
        }
    }
}

/// Every topic the topology names, with its partition count where it exists:
/// when this changes, the topology is configured again.
pub(in crate::group) fn topics_snapshot(
    topology: &StreamsTopology,
    topics: &dyn TopicLookup,
) -> BTreeMap<String, Option<i32>> {
    let mut names = BTreeSet::new();
    for s in &topology.subtopologies {
        names.extend(s.source_topics.iter().cloned());
        names.extend(s.repartition_source_topics.iter().map(|t| t.name.clone()));
        names.extend(s.state_changelog_topics.iter().map(|t| t.name.clone()));
    }
    names
        .into_iter()
        .map(|name| {
            let count = topics.topic(&name).map(|(_, partitions)| partitions);
            (name, count)
        })
        .collect()
}

fn summarize(names: &BTreeSet<String>) -> String {
    names.iter().cloned().collect::<Vec<_>>().join(", ")
}

fn not_ready(code: i8, detail: String) -> ConfiguredTopology {
    ConfiguredTopology {
        subtopologies: None,
        missing_internal_topics: Vec::new(),
        status: Some(StreamsStatus { code, detail }),
    }
}

pub(in crate::group) fn configure(topology: &StreamsTopology, topics: &dyn TopicLookup) -> ConfiguredTopology {
    let existing = |name: &str| topics.topic(name).map(|(_, partitions)| partitions);
    let repartition: BTreeSet<&str> = topology
        .subtopologies
        .iter()
        .flat_map(|s| s.repartition_source_topics.iter().map(|t| t.name.as_str()))
        .collect();
    // Source topics that are not repartition topics must exist.
    let missing: BTreeSet<String> = topology
        .subtopologies
        .iter()
        .flat_map(|s| s.source_topics.iter())
        .filter(|t| !repartition.contains(t.as_str()) && existing(t).is_none())
        .cloned()
        .collect();
    if !missing.is_empty() {
        return not_ready(status::MISSING_SOURCE_TOPICS, format!("Source topics {} are missing.", summarize(&missing)));
    }
    let mut decided: BTreeMap<String, i32> = BTreeMap::new();
    let count = |decided: &BTreeMap<String, i32>, name: &str| -> Option<i32> {
        decided.get(name).copied().or_else(|| if repartition.contains(name) { None } else { existing(name) })
    };
    for s in &topology.subtopologies {
        for t in s.repartition_source_topics.iter().filter(|t| t.partitions > 0) {
            decided.insert(t.name.clone(), t.partitions);
        }
    }
    // Derived repartition counts: the largest source of the writers, until
    // nothing changes.
    loop {
        let mut progress = false;
        let mut needed = false;
        for topic in &repartition {
            if decided.contains_key(*topic) {
                continue;
            }
            let mut best: Option<i32> = None;
            for writer in topology.subtopologies.iter().filter(|s| s.repartition_sink_topics.iter().any(|t| t == topic))
            {
                for source in sources(writer) {
                    if let Some(n) = count(&decided, source) {
                        best = Some(best.map_or(n, |b| b.max(n)));
                    }
                }
            }
            match best {
                Some(n) => {
                    decided.insert(topic.to_string(), n);
                    progress = true;
                }
                None => needed = true,
            }
        }
        if !needed {
            break;
        }
        if !progress {
            return not_ready(
                status::INCORRECTLY_PARTITIONED_TOPICS,
                "Failed to compute number of partitions for all repartition topics, make sure all user input topics \
                 are created and all Pattern subscriptions match at least one topic in the cluster"
                    .to_string(),
            );
        }
    }
    // Copartition groups: user topics must agree; derived repartition topics follow them.
    for s in &topology.subtopologies {
        for group in &s.copartition_groups {
            let fixed: BTreeMap<&str, i32> = group
                .iter()
                .filter(|t| !repartition.contains(t.as_str()) || fixed_count(topology, t).is_some())
                .filter_map(|t| count(&decided, t).map(|n| (t.as_str(), n)))
                .collect();
            let distinct: BTreeSet<i32> = fixed.values().copied().collect();
            if distinct.len() > 1 {
                return not_ready(
                    status::INCORRECTLY_PARTITIONED_TOPICS,
                    format!(
                        "Following topics do not have the same number of partitions: [{}]",
                        fixed.iter().map(|(t, n)| format!("{t}={n}")).collect::<Vec<_>>().join(", ")
                    ),
                );
            }
            let target = match distinct.first() {
                Some(&n) => n,
                None => group.iter().filter_map(|t| count(&decided, t)).max().unwrap_or(0),
            };
            for t in group.iter().filter(|t| repartition.contains(t.as_str()) && fixed_count(topology, t).is_none()) {
                decided.insert(t.clone(), target);
            }
        }
    }
    let mut subtopologies = BTreeMap::new();
    let mut wanted: BTreeMap<String, InternalTopic> = BTreeMap::new();
    for s in &topology.subtopologies {
        let source_partitions: BTreeMap<String, i32> =
            sources(s).filter_map(|t| count(&decided, t).map(|n| (t.to_string(), n))).collect();
        let task_count = source_partitions.values().copied().max().unwrap_or(0);
        let mut internal_partitions = BTreeMap::new();
        for t in &s.repartition_source_topics {
            let n = decided.get(&t.name).copied().unwrap_or(task_count);
            internal_partitions.insert(t.name.clone(), n);
            wanted.insert(t.name.clone(), internal_topic(t, n, false));
        }
        for t in &s.state_changelog_topics {
            internal_partitions.insert(t.name.clone(), task_count);
            wanted.insert(t.name.clone(), internal_topic(t, task_count, true));
        }
        subtopologies.insert(
            s.subtopology_id.clone(),
            ConfiguredSubtopology { task_count, source_partitions, internal_partitions },
        );
    }
    let mut missing_internal_topics = Vec::new();
    for (name, topic) in wanted {
        match existing(&name) {
            Some(n) if n != topic.partitions => {
                return not_ready(
                    status::INCORRECTLY_PARTITIONED_TOPICS,
                    format!(
                        "Existing topic {name} has different number of partitions: expected {}, found {n}",
                        topic.partitions
                    ),
                );
            }
            Some(_) => {}
            None => missing_internal_topics.push(topic),
        }
    }
    let status = (!missing_internal_topics.is_empty()).then(|| StreamsStatus {
        code: status::MISSING_INTERNAL_TOPICS,
        detail: format!(
            "Internal topics are missing: {}",
            summarize(&missing_internal_topics.iter().map(|t| t.name.clone()).collect())
        ),
    });
    ConfiguredTopology { subtopologies: Some(subtopologies), missing_internal_topics, status }
}

/// The topics a subtopology reads: user sources and repartition sources.
fn sources(s: &StreamsSubtopology) -> impl Iterator<Item = &str> {
    s.source_topics.iter().map(String::as_str).chain(s.repartition_source_topics.iter().map(|t| t.name.as_str()))
}

fn fixed_count(topology: &StreamsTopology, name: &str) -> Option<i32> {
    topology
        .subtopologies
        .iter()
        .flat_map(|s| s.repartition_source_topics.iter())
        .find(|t| t.name == name && t.partitions > 0)
        .map(|t| t.partitions)
}

/// A changelog is compacted unless the topology says otherwise, as Kafka
/// Streams declares it (`cleanup.policy=compact` comes with the topology).
fn internal_topic(info: &super::types::StreamsTopicInfo, partitions: i32, changelog: bool) -> InternalTopic {
    let mut configs = info.configs.clone();
    if changelog {
        configs.entry("cleanup.policy".to_string()).or_insert_with(|| "compact".to_string());
    }
    InternalTopic { name: info.name.clone(), partitions, configs }
}
