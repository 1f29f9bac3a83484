//! Partition assignment as pure functions: the seed's `range` assignor and a `uniform` one.
//!
//! Both take the members' subscriptions (member id -> subscribed topic names) and the topics'
//! partition counts, and return member id -> topic -> sorted partitions. Every member appears
//! in the result, possibly with nothing assigned (members beyond the partition count stay idle).
//!
//! `range` is what Kafka's `RangeAssignor`, librdkafka's `range` and kafka-python's
//! `RangePartitionAssignor` compute client-side: per topic, the subscribed members sorted by
//! member id each get `P / C` consecutive partitions and the first `P % C` of them one more.
//! The broker offers the same function server-side for KIP-848 groups, so both protocols give
//! the same answer for the same member ids.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

/// member id -> subscribed topic names.
pub type Subscriptions = BTreeMap<String, BTreeSet<String>>;
/// member id -> topic name -> sorted partition ids.
pub type MemberAssignments = BTreeMap<String, BTreeMap<String, Vec<i32>>>;

/// A server-side assignor offered through `group.consumer.assignors` (KIP-848).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ServerAssignor {
    /// Per topic, consecutive ranges ([`range`]).
    Range,
    /// An even spread over all subscribed partitions ([`uniform`]).
    Uniform,
}

impl ServerAssignor {
    /// The name clients send in `ServerAssignor` (`range`, `uniform`).
    pub fn name(self) -> &'static str {
        match self {
            ServerAssignor::Range => "range",
            ServerAssignor::Uniform => "uniform",
        }
    }

    /// Runs this assignor.
    pub fn assign(
        self,
        subscriptions: &Subscriptions,
        partitions_per_topic: &BTreeMap<String, i32>,
    ) -> MemberAssignments {
        match self {
            ServerAssignor::Range => range(subscriptions, partitions_per_topic),
            ServerAssignor::Uniform => uniform(subscriptions, partitions_per_topic),
        }
    }
}

impl fmt::Display for ServerAssignor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The name is not one of ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown assignor '{0}': expected 'range' or 'uniform'")]
pub struct UnknownAssignor(pub String);

impl FromStr for ServerAssignor {
    type Err = UnknownAssignor;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Kafka also accepts the assignors' class names in `group.consumer.assignors`.
        match s.trim() {
            "range" | "org.apache.kafka.coordinator.group.assignor.RangeAssignor" => {
                Ok(ServerAssignor::Range)
            }
            "uniform" | "org.apache.kafka.coordinator.group.assignor.UniformAssignor" => {
                Ok(ServerAssignor::Uniform)
            }
            other => Err(UnknownAssignor(other.to_owned())),
        }
    }
}

/// The range assignment: for each topic, its subscribed members sorted by member id, with `P`
/// partitions and `C` members each member gets `P / C` consecutive partitions and the first
/// `P % C` members one more. Topics without a known partition count are skipped.
pub fn range(
    subscriptions: &Subscriptions,
    partitions_per_topic: &BTreeMap<String, i32>,
) -> MemberAssignments {
    let mut result = empty_result(subscriptions);
    for (topic, &partition_count) in partitions_per_topic {
        // BTreeMap iteration is already sorted by member id.
        let members: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, topics)| topics.contains(topic))
            .map(|(member_id, _)| member_id)
            .collect();
        if members.is_empty() || partition_count <= 0 {
            continue;
        }
        let consumers = members.len() as i32;
        let per_member = partition_count / consumers;
        let with_extra = partition_count % consumers;
        let mut next = 0;
        for (index, member_id) in members.into_iter().enumerate() {
            let count = per_member + i32::from((index as i32) < with_extra);
            if count == 0 {
                continue;
            }
            let partitions: Vec<i32> = (next..next + count).collect();
            next += count;
            result
                .get_mut(member_id)
                .expect("every member has an entry")
                .insert(topic.clone(), partitions);
        }
        debug_assert_eq!(next, partition_count, "range must hand out every partition");
    }
    result
}

/// The uniform assignment: every subscribed partition goes to the subscribed member that holds
/// the fewest partitions so far (ties go to the smallest member id), topics taken from the one
/// with the fewest subscribers, partitions in order. With identical subscriptions this is a round robin over the sorted members, and member
/// loads never differ by more than one.
pub fn uniform(
    subscriptions: &Subscriptions,
    partitions_per_topic: &BTreeMap<String, i32>,
) -> MemberAssignments {
    let mut result = empty_result(subscriptions);
    let mut load: BTreeMap<&String, usize> = subscriptions.keys().map(|m| (m, 0)).collect();
    let mut topics: Vec<(&String, i32, Vec<&String>)> = partitions_per_topic
        .iter()
        .map(|(topic, &partition_count)| {
            let members = subscriptions
                .iter()
                .filter(|(_, topics)| topics.contains(topic))
                .map(|(member_id, _)| member_id)
                .collect();
            (topic, partition_count, members)
        })
        .filter(|(_, _, members): &(_, _, Vec<&String>)| !members.is_empty())
        .collect();
    // Topics with the fewest subscribers go first: their partitions have the fewest places to
    // go, and the members left with less get the widely subscribed topics' partitions.
    topics.sort_by_key(|(topic, _, members)| (members.len(), *topic));
    for (topic, partition_count, members) in topics {
        for partition in 0..partition_count.max(0) {
            let chosen = *members
                .iter()
                .min_by_key(|m| (load[*m], **m))
                .expect("members is not empty");
            *load.get_mut(chosen).expect("every member has a load") += 1;
            result
                .get_mut(chosen)
                .expect("every member has an entry")
                .entry(topic.clone())
                .or_default()
                .push(partition);
        }
    }
    result
}

fn empty_result(subscriptions: &Subscriptions) -> MemberAssignments {
    subscriptions
        .keys()
        .map(|member_id| (member_id.clone(), BTreeMap::new()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(members: &[(&str, &[&str])]) -> Subscriptions {
        members
            .iter()
            .map(|(m, topics)| {
                (
                    m.to_string(),
                    topics.iter().map(|t| t.to_string()).collect(),
                )
            })
            .collect()
    }

    fn topics(list: &[(&str, i32)]) -> BTreeMap<String, i32> {
        list.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    /// Renders an assignment as `member: t[p,p] t[p]; member: ...` for table tests.
    fn render(assignment: &MemberAssignments) -> String {
        assignment
            .iter()
            .map(|(member, topics)| {
                let parts: Vec<String> = topics
                    .iter()
                    .map(|(t, ps)| {
                        let ps: Vec<String> = ps.iter().map(|p| p.to_string()).collect();
                        format!("{t}[{}]", ps.join(","))
                    })
                    .collect();
                format!("{member}: {}", parts.join(" "))
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    #[test]
    fn range_matches_the_seed_examples() {
        let cases: &[(&[&str], i32, &str)] = &[
            (&["c0", "c1", "c2"], 4, "c0: t[0,1]; c1: t[2]; c2: t[3]"),
            (&["c0", "c1"], 4, "c0: t[0,1]; c1: t[2,3]"),
            (&["c0"], 4, "c0: t[0,1,2,3]"),
            (&["c0", "c1", "c2"], 2, "c0: t[0]; c1: t[1]; c2: "),
            (
                &["c0", "c1", "c2"],
                7,
                "c0: t[0,1,2]; c1: t[3,4]; c2: t[5,6]",
            ),
        ];
        for (members, partitions, expected) in cases {
            let s: Vec<(&str, &[&str])> = members.iter().map(|m| (*m, &["t"][..])).collect();
            let got = render(&range(&subs(&s), &topics(&[("t", *partitions)])));
            assert_eq!(&got, expected, "{members:?} {partitions}");
        }
    }

    #[test]
    fn range_sorts_members_by_member_id_not_insertion_order() {
        let got = range(
            &subs(&[("rdkafka-b", &["t"]), ("rdkafka-a", &["t"])]),
            &topics(&[("t", 3)]),
        );
        assert_eq!(render(&got), "rdkafka-a: t[0,1]; rdkafka-b: t[2]");
    }

    #[test]
    fn range_works_per_topic_and_respects_subscriptions() {
        let got = range(
            &subs(&[("a", &["x", "y"]), ("b", &["x"]), ("c", &["y"])]),
            &topics(&[("x", 3), ("y", 2), ("z", 5)]),
        );
        assert_eq!(render(&got), "a: x[0,1] y[0]; b: x[2]; c: y[1]");
    }

    #[test]
    fn uniform_spreads_over_all_partitions() {
        let got = uniform(
            &subs(&[("a", &["x", "y"]), ("b", &["x", "y"]), ("c", &["x", "y"])]),
            &topics(&[("x", 2), ("y", 2)]),
        );
        // Range would give a: x[0] y[0], b: x[1] y[1], c: nothing.
        assert_eq!(render(&got), "a: x[0] y[1]; b: x[1]; c: y[0]");
    }

    #[test]
    fn uniform_balances_heterogeneous_subscriptions() {
        let got = uniform(
            &subs(&[("a", &["x"]), ("b", &["x", "y"])]),
            &topics(&[("x", 2), ("y", 2)]),
        );
        assert_eq!(render(&got), "a: x[0,1]; b: y[0,1]");
    }

    #[test]
    fn every_partition_goes_to_exactly_one_subscribed_member() {
        for members in 1..6usize {
            for partitions in 0..13 {
                let names: Vec<String> = (0..members).map(|i| format!("m{i}")).collect();
                let s: Subscriptions = names
                    .iter()
                    .map(|m| (m.clone(), ["t".to_string()].into()))
                    .collect();
                for assignor in [ServerAssignor::Range, ServerAssignor::Uniform] {
                    let got = assignor.assign(&s, &topics(&[("t", partitions)]));
                    let mut all: Vec<i32> = got
                        .values()
                        .flat_map(|t| t.get("t").cloned().unwrap_or_default())
                        .collect();
                    all.sort();
                    assert_eq!(all, (0..partitions).collect::<Vec<_>>(), "{assignor}");
                    let sizes: Vec<usize> = got
                        .values()
                        .map(|t| t.get("t").map_or(0, Vec::len))
                        .collect();
                    let spread = sizes.iter().max().unwrap() - sizes.iter().min().unwrap();
                    assert!(spread <= 1, "{assignor} {members} {partitions}: {sizes:?}");
                }
            }
        }
    }

    #[test]
    fn assignor_names_parse() {
        assert_eq!("range".parse(), Ok(ServerAssignor::Range));
        assert_eq!(
            "org.apache.kafka.coordinator.group.assignor.UniformAssignor".parse(),
            Ok(ServerAssignor::Uniform)
        );
        assert!("sticky".parse::<ServerAssignor>().is_err());
    }
}
