//! The task assignor: every active task (subtopology × partition) to one
//! member, balanced over members and sticky (a task stays where it was while
//! that member is not over its share), then `num_standby_replicas` standby
//! copies of each on members of other processes (never with the active copy,
//! never two copies on one process), also sticky. Kafka's sticky task
//! assignor balances over processes first and weighs stateful tasks and lag;
//! this one does not (docs/conformance.md), so which member gets which task
//! may differ.

use std::collections::{BTreeMap, BTreeSet};

use super::types::{Tasks, TasksTuple};

pub(in crate::group) struct AssignmentSpec<'a> {
    /// member id → process id.
    pub members: BTreeMap<&'a str, &'a str>,
    /// subtopology → task count.
    pub task_counts: &'a BTreeMap<String, i32>,
    /// The previous target, for stickiness.
    pub previous: &'a BTreeMap<String, TasksTuple>,
    pub num_standby_replicas: i32,
}

pub(in crate::group) fn assign(spec: &AssignmentSpec<'_>) -> BTreeMap<String, TasksTuple> {
    let mut out: BTreeMap<String, TasksTuple> =
        spec.members.keys().map(|m| (m.to_string(), TasksTuple::default())).collect();
    if spec.members.is_empty() {
        return out;
    }
    let tasks: Vec<(String, i32)> =
        spec.task_counts.iter().flat_map(|(id, &count)| (0..count.max(0)).map(move |p| (id.clone(), p))).collect();
    let owner_of = |role: fn(&TasksTuple) -> &Tasks, id: &str, p: i32| -> Vec<&str> {
        spec.previous
            .iter()
            .filter(|(m, t)| spec.members.contains_key(m.as_str()) && role(t).get(id).is_some_and(|s| s.contains(&p)))
            .map(|(m, _)| m.as_str())
            .collect()
    };
    // Active: at most ceil(n / members) each.
    let share = tasks.len().div_ceil(spec.members.len());
    let mut load: BTreeMap<&str, usize> = spec.members.keys().map(|m| (*m, 0)).collect();
    let mut active_owner: BTreeMap<(String, i32), &str> = BTreeMap::new();
    let mut unassigned = Vec::new();
    for (id, p) in &tasks {
        match owner_of(|t| &t.active, id, *p).first() {
            Some(&m) if load[m] < share => {
                *load.entry(m).or_default() += 1;
                active_owner.insert((id.clone(), *p), m);
            }
            _ => unassigned.push((id.clone(), *p)),
        }
    }
    for (id, p) in unassigned {
        let Some((&m, _)) = load.iter().min_by_key(|(m, l)| (**l, **m)) else { break };
        *load.entry(m).or_default() += 1;
        active_owner.insert((id, p), m);
    }
    for ((id, p), m) in &active_owner {
        if let Some(t) = out.get_mut(*m) {
            t.active.entry(id.clone()).or_default().insert(*p);
        }
    }
    // Standby copies on other processes.
    for (id, p) in &tasks {
        let Some(&active) = active_owner.get(&(id.clone(), *p)) else { continue };
        let mut processes: BTreeSet<&str> = BTreeSet::from([spec.members[active]]);
        let previous = owner_of(|t| &t.standby, id, *p);
        for _ in 0..spec.num_standby_replicas.max(0) {
            let eligible = |m: &&str| !processes.contains(spec.members[*m]);
            let pick = previous
                .iter()
                .copied()
                .find(|m| eligible(m))
                .or_else(|| spec.members.keys().copied().filter(|m| eligible(m)).min_by_key(|m| (load[*m], *m)));
            let Some(m) = pick else { break };
            processes.insert(spec.members[m]);
            *load.entry(m).or_default() += 1;
            if let Some(t) = out.get_mut(m) {
                t.standby.entry(id.clone()).or_default().insert(*p);
            }
        }
    }
    out
}
