//! The cost of one authorization check with many bindings in force (the
//! security issue's target: under 1 µs with 10,000). Prints figures, asserts
//! nothing about time:
//!
//!     cargo run --release -p kafgres-broker --example acl_check [bindings] [checks]
//!
//! The bindings: per role, LITERAL and PREFIXED topic and group bindings,
//! a DENY every tenth; the checks: a member of a group role asking READ on
//! topics that match a literal, a prefix, or nothing (the worst case: every
//! prefix length is looked up and nothing allows).

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant;

use kafgres_broker::acl::{AclBinding, Authorizer, Identity, Operation, PatternType, Permission, ResourceType};

fn main() {
    let mut args = std::env::args().skip(1);
    let bindings: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let checks: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(2_000_000);
    let mut all = Vec::with_capacity(bindings);
    for i in 0..bindings {
        let (resource_type, pattern_type, name) = match i % 4 {
            0 => (ResourceType::Topic, PatternType::Literal, format!("tenant{i}.orders")),
            1 => (ResourceType::Topic, PatternType::Prefixed, format!("tenant{i}.")),
            2 => (ResourceType::Group, PatternType::Prefixed, format!("tenant{i}-")),
            _ => (ResourceType::Topic, PatternType::Prefixed, format!("shared.{}.", i % 97)),
        };
        all.push(AclBinding {
            resource_type,
            resource_name: name,
            pattern_type,
            principal: format!("User:role{}", i % 500),
            host: "*".into(),
            operation: if i % 3 == 0 { Operation::Write } else { Operation::Read },
            permission: if i % 10 == 9 { Permission::Deny } else { Permission::Allow },
        });
    }
    let started = Instant::now();
    let authorizer = Authorizer::new(true, all);
    println!("bindings: {bindings}, index built in {:.1} ms", started.elapsed().as_secs_f64() * 1e3);
    let who = Identity { role: "app".into(), member_of: vec!["role1".into(), "role5".into()], ..Identity::default() };
    let host = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let cases = [
        ("literal binding", "tenant4.orders"),
        ("prefix binding", "tenant1.payments"),
        ("shared prefixes", "shared.5.events"),
        ("no binding", "unrelated.topic.name.of.some.length"),
    ];
    for (label, topic) in cases {
        let started = Instant::now();
        let mut allowed = 0usize;
        for _ in 0..checks {
            allowed += usize::from(authorizer.authorize(
                black_box(&who),
                host,
                Operation::Read,
                ResourceType::Topic,
                black_box(topic),
            ));
        }
        let ns = started.elapsed().as_secs_f64() * 1e9 / checks as f64;
        println!("{label:>16}: {ns:7.1} ns per check ({} of {checks} allowed)", allowed);
    }
}
