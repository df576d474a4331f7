//! Server-side assignors: `uniform` (balanced and sticky, Kafka's default)
//! and `range` (contiguous ranges per topic, members in id order). Both are
//! deterministic functions of their inputs.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::types::Assignment;

/// What an assignor sees: each member's subscribed topic ids, the partition
/// count of each, and the previous target (for stickiness).
pub(in crate::group) struct AssignmentSpec<'a> {
    pub subscriptions: &'a BTreeMap<String, BTreeSet<Uuid>>,
    pub partitions: &'a BTreeMap<Uuid, i32>,
    pub previous: &'a BTreeMap<String, Assignment>,
}

pub(in crate::group) fn assign(assignor: &str, spec: &AssignmentSpec<'_>) -> BTreeMap<String, Assignment> {
    match assignor {
        "range" => range(spec),
        _ => uniform(spec),
    }
}

fn count(assignment: &Assignment) -> usize {
    assignment.values().map(BTreeSet::len).sum()
}

fn partition_count(spec: &AssignmentSpec<'_>, topic: &Uuid) -> i32 {
    spec.partitions.get(topic).copied().unwrap_or(0).max(0)
}

/// Every member ends within one partition of the others it could trade with;
/// partitions stay where they were when that allows.
fn uniform(spec: &AssignmentSpec<'_>) -> BTreeMap<String, Assignment> {
    let mut result: BTreeMap<String, Assignment> =
        spec.subscriptions.keys().map(|m| (m.clone(), Assignment::new())).collect();
    let mut taken: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    // 1. Keep what is still valid, each partition once.
    for (member, subscribed) in spec.subscriptions {
        let Some(previous) = spec.previous.get(member) else { continue };
        for (topic, partitions) in previous {
            if !subscribed.contains(topic) {
                continue;
            }
            let limit = partition_count(spec, topic);
            for &p in partitions {
                if p < limit && taken.insert((*topic, p)) {
                    result.entry(member.clone()).or_default().entry(*topic).or_default().insert(p);
                }
            }
        }
    }
    // 2. Cap what is kept at the fair share when every member subscribes to
    //    the same topics, so newcomers get their share without trading.
    let homogeneous = spec.subscriptions.values().collect::<BTreeSet<_>>().len() <= 1;
    if homogeneous && !result.is_empty() {
        let total: usize = spec
            .subscriptions
            .values()
            .next()
            .map_or(0, |topics| topics.iter().map(|t| partition_count(spec, t) as usize).sum());
        let members = result.len();
        let (floor, mut extra) = (total / members, total % members);
        let mut by_count: Vec<String> = result.keys().cloned().collect();
        by_count.sort_by_key(|m| std::cmp::Reverse(count(&result[m])));
        for member in by_count {
            let quota = if extra > 0 && count(&result[&member]) > floor {
                extra -= 1;
                floor + 1
            } else {
                floor
            };
            let assignment = result.get_mut(&member).expect("member listed");
            while count(assignment) > quota {
                let Some((&topic, partitions)) = assignment.iter_mut().next_back() else { break };
                if let Some(p) = partitions.pop_last() {
                    taken.remove(&(topic, p));
                }
                if partitions.is_empty() {
                    assignment.remove(&topic);
                }
            }
        }
    }
    // 3. Give each free partition to the least loaded member subscribed to it.
    let topics: BTreeSet<Uuid> = spec.subscriptions.values().flatten().copied().collect();
    for topic in &topics {
        for p in 0..partition_count(spec, topic) {
            if taken.contains(&(*topic, p)) {
                continue;
            }
            let receiver = result
                .iter()
                .filter(|(m, _)| spec.subscriptions[*m].contains(topic))
                .min_by_key(|(m, a)| (count(a), (*m).clone()))
                .map(|(m, _)| m.clone());
            if let Some(receiver) = receiver {
                result.entry(receiver).or_default().entry(*topic).or_default().insert(p);
                taken.insert((*topic, p));
            }
        }
    }
    // 4. Move partitions from members with two or more than a member that
    //    could take them, until none can. Each move lowers the sum of squared
    //    counts, so this ends; the bound only guards against a mistake.
    let bound = taken.len() * result.len() + 1;
    for _ in 0..bound {
        if !rebalance_once(spec, &mut result) {
            break;
        }
    }
    result
}

fn rebalance_once(spec: &AssignmentSpec<'_>, result: &mut BTreeMap<String, Assignment>) -> bool {
    let mut members: Vec<String> = result.keys().cloned().collect();
    members.sort_by_key(|m| (count(&result[m]), m.clone()));
    for receiver in &members {
        for donor in members.iter().rev() {
            if count(&result[donor]) < count(&result[receiver]) + 2 {
                break;
            }
            let movable = result[donor].iter().rev().find_map(|(topic, partitions)| {
                spec.subscriptions[receiver].contains(topic).then(|| partitions.last().map(|&p| (*topic, p))).flatten()
            });
            if let Some((topic, p)) = movable {
                let from = result.get_mut(donor).expect("member listed");
                if let Some(partitions) = from.get_mut(&topic) {
                    partitions.remove(&p);
                    if partitions.is_empty() {
                        from.remove(&topic);
                    }
                }
                result.entry(receiver.clone()).or_default().entry(topic).or_default().insert(p);
                return true;
            }
        }
    }
    false
}

/// Per topic, its subscribers in member-id order take contiguous ranges; the
/// first `partitions % members` take one more.
fn range(spec: &AssignmentSpec<'_>) -> BTreeMap<String, Assignment> {
    let mut result: BTreeMap<String, Assignment> =
        spec.subscriptions.keys().map(|m| (m.clone(), Assignment::new())).collect();
    let topics: BTreeSet<Uuid> = spec.subscriptions.values().flatten().copied().collect();
    for topic in topics {
        let subscribers: Vec<&String> =
            spec.subscriptions.iter().filter(|(_, t)| t.contains(&topic)).map(|(m, _)| m).collect();
        let n = partition_count(spec, &topic) as usize;
        let (each, extra) = (n / subscribers.len(), n % subscribers.len());
        let mut next = 0;
        for (i, member) in subscribers.into_iter().enumerate() {
            let len = each + usize::from(i < extra);
            if len > 0 {
                let partitions = (next..next + len).map(|p| p as i32).collect();
                result.entry(member.clone()).or_default().insert(topic, partitions);
            }
            next += len;
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn subs(members: &[(&str, &[u128])]) -> BTreeMap<String, BTreeSet<Uuid>> {
        members.iter().map(|(m, ts)| (m.to_string(), ts.iter().map(|&t| topic(t)).collect())).collect()
    }

    fn counts(result: &BTreeMap<String, Assignment>) -> Vec<usize> {
        result.values().map(count).collect()
    }

    fn all_assigned_once(result: &BTreeMap<String, Assignment>, partitions: &BTreeMap<Uuid, i32>) {
        let mut seen = BTreeSet::new();
        for assignment in result.values() {
            for (t, ps) in assignment {
                for &p in ps {
                    assert!(seen.insert((*t, p)), "{t}:{p} assigned twice");
                }
            }
        }
        let expected: usize = partitions.values().map(|&n| n as usize).sum();
        assert_eq!(seen.len(), expected);
    }

    #[test]
    fn uniform_splits_evenly_and_keeps_what_it_can() {
        let partitions = BTreeMap::from([(topic(1), 6)]);
        let two = subs(&[("a", &[1]), ("b", &[1])]);
        let first =
            uniform(&AssignmentSpec { subscriptions: &two, partitions: &partitions, previous: &BTreeMap::new() });
        assert_eq!(counts(&first), vec![3, 3]);
        all_assigned_once(&first, &partitions);

        let three = subs(&[("a", &[1]), ("b", &[1]), ("c", &[1])]);
        let second = uniform(&AssignmentSpec { subscriptions: &three, partitions: &partitions, previous: &first });
        assert_eq!(counts(&second), vec![2, 2, 2]);
        all_assigned_once(&second, &partitions);
        // a and b keep two of their three each; c gets the released ones.
        for m in ["a", "b"] {
            let kept = second[m][&topic(1)].intersection(&first[m][&topic(1)]).count();
            assert_eq!(kept, 2, "{m} kept {kept}");
        }
    }

    #[test]
    fn uniform_balances_heterogeneous_subscriptions() {
        let partitions = BTreeMap::from([(topic(1), 4), (topic(2), 2)]);
        let s = subs(&[("a", &[1, 2]), ("b", &[1]), ("c", &[2])]);
        let result =
            uniform(&AssignmentSpec { subscriptions: &s, partitions: &partitions, previous: &BTreeMap::new() });
        all_assigned_once(&result, &partitions);
        assert_eq!(counts(&result), vec![2, 2, 2]);
        assert!(!result["b"].contains_key(&topic(2)));
        assert!(!result["c"].contains_key(&topic(1)));
    }

    #[test]
    fn uniform_drops_partitions_of_unsubscribed_or_shrunk_topics() {
        let partitions = BTreeMap::from([(topic(1), 2)]);
        let s = subs(&[("a", &[1])]);
        let previous = BTreeMap::from([(
            "a".to_string(),
            Assignment::from([(topic(1), BTreeSet::from([0, 1, 5])), (topic(9), BTreeSet::from([0]))]),
        )]);
        let result = uniform(&AssignmentSpec { subscriptions: &s, partitions: &partitions, previous: &previous });
        assert_eq!(result["a"], Assignment::from([(topic(1), BTreeSet::from([0, 1]))]));
    }

    #[test]
    fn range_gives_contiguous_ranges_in_member_order() {
        let partitions = BTreeMap::from([(topic(1), 7)]);
        let s = subs(&[("b", &[1]), ("a", &[1]), ("c", &[1])]);
        let result = range(&AssignmentSpec { subscriptions: &s, partitions: &partitions, previous: &BTreeMap::new() });
        assert_eq!(result["a"][&topic(1)], BTreeSet::from([0, 1, 2]));
        assert_eq!(result["b"][&topic(1)], BTreeSet::from([3, 4]));
        assert_eq!(result["c"][&topic(1)], BTreeSet::from([5, 6]));
    }

    #[test]
    fn more_members_than_partitions_leaves_some_empty() {
        let partitions = BTreeMap::from([(topic(1), 2)]);
        let s = subs(&[("a", &[1]), ("b", &[1]), ("c", &[1])]);
        for assignor in ["uniform", "range"] {
            let result = assign(
                assignor,
                &AssignmentSpec { subscriptions: &s, partitions: &partitions, previous: &BTreeMap::new() },
            );
            all_assigned_once(&result, &partitions);
            let mut c = counts(&result);
            c.sort();
            assert_eq!(c, vec![0, 1, 1], "{assignor}");
        }
    }
}
