//! The command-line replica-assignment string, `0:1:2,3:4:5`: partitions separated by `,`
//! (partition `i` is the `i`-th group), replicas by `:`, the first replica the preferred
//! leader.

use std::collections::BTreeMap;

use crate::BrokerId;

/// Why a replica-assignment string is not valid. Messages name the partition and token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplicaAssignmentError {
    /// The whole string is empty or blank.
    #[error("replica assignment is empty: expected broker ids like 0:1:2,3:4:5")]
    Empty,
    /// A partition's group (between commas) or one replica (between colons) is empty.
    #[error("partition {partition} has an empty replica entry in '{group}'")]
    EmptyEntry {
        /// The partition (0-based position of the comma group).
        partition: i32,
        /// The group as written.
        group: String,
    },
    /// A replica is not a 32-bit integer.
    #[error("partition {partition}: broker id '{token}' is not a number")]
    NotANumber {
        /// The partition.
        partition: i32,
        /// The offending token, trimmed.
        token: String,
    },
    /// The same broker appears twice in one partition.
    #[error("Partition replica lists may not contain duplicate entries: partition {partition} lists broker {broker} more than once")]
    DuplicateBroker {
        /// The partition.
        partition: i32,
        /// The repeated broker.
        broker: BrokerId,
    },
    /// A partition's replica count differs from partition 0's.
    #[error("Partition {partition} has different replication factor: {actual} replicas, but partition 0 has {expected}")]
    DifferentReplicationFactor {
        /// The partition.
        partition: i32,
        /// Partition 0's replica count.
        expected: usize,
        /// This partition's replica count.
        actual: usize,
    },
    /// More partitions than an `i32` can number.
    #[error("replica assignment lists too many partitions")]
    TooManyPartitions,
}

/// Parses `0:1:2,3:4:5` into `{0: [0, 1, 2], 1: [3, 4, 5]}`. Whitespace around each number
/// is ignored.
pub fn parse_replica_assignment(
    s: &str,
) -> Result<BTreeMap<i32, Vec<BrokerId>>, ReplicaAssignmentError> {
    if s.trim().is_empty() {
        return Err(ReplicaAssignmentError::Empty);
    }
    let mut assignment = BTreeMap::new();
    let mut replication_factor = None;
    for (index, group) in s.split(',').enumerate() {
        let partition =
            i32::try_from(index).map_err(|_| ReplicaAssignmentError::TooManyPartitions)?;
        let replicas = parse_group(partition, group)?;
        let expected = *replication_factor.get_or_insert(replicas.len());
        if replicas.len() != expected {
            return Err(ReplicaAssignmentError::DifferentReplicationFactor {
                partition,
                expected,
                actual: replicas.len(),
            });
        }
        assignment.insert(partition, replicas);
    }
    Ok(assignment)
}

/// Writes an assignment back as `0:1:2,3:4:5`, partitions in ascending order. The inverse of
/// [`parse_replica_assignment`] for assignments whose partitions are `0..n`.
pub fn format_replica_assignment(assignment: &BTreeMap<i32, Vec<BrokerId>>) -> String {
    assignment
        .values()
        .map(|replicas| {
            replicas
                .iter()
                .map(BrokerId::to_string)
                .collect::<Vec<_>>()
                .join(":")
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn parse_group(partition: i32, group: &str) -> Result<Vec<BrokerId>, ReplicaAssignmentError> {
    let mut replicas = Vec::new();
    for token in group.split(':') {
        let token = token.trim();
        if token.is_empty() {
            return Err(ReplicaAssignmentError::EmptyEntry {
                partition,
                group: group.to_owned(),
            });
        }
        let broker: BrokerId = token
            .parse()
            .map_err(|_| ReplicaAssignmentError::NotANumber {
                partition,
                token: token.to_owned(),
            })?;
        if replicas.contains(&broker) {
            return Err(ReplicaAssignmentError::DuplicateBroker { partition, broker });
        }
        replicas.push(broker);
    }
    Ok(replicas)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_groups_in_order() {
        let parsed = parse_replica_assignment("0:1:2,3:4:5, 6 : 7 :8").unwrap();
        assert_eq!(
            parsed,
            BTreeMap::from([(0, vec![0, 1, 2]), (1, vec![3, 4, 5]), (2, vec![6, 7, 8])])
        );
        assert_eq!(
            parse_replica_assignment("7").unwrap(),
            BTreeMap::from([(0, vec![7])])
        );
    }

    #[test]
    fn errors_name_the_problem() {
        use ReplicaAssignmentError::*;
        assert_eq!(parse_replica_assignment(""), Err(Empty));
        assert_eq!(parse_replica_assignment("  "), Err(Empty));
        assert_eq!(
            parse_replica_assignment("0:1,,2:3"),
            Err(EmptyEntry {
                partition: 1,
                group: String::new()
            })
        );
        assert_eq!(
            parse_replica_assignment("0:1,2:"),
            Err(EmptyEntry {
                partition: 1,
                group: "2:".into()
            })
        );
        assert_eq!(
            parse_replica_assignment("0:x"),
            Err(NotANumber {
                partition: 0,
                token: "x".into()
            })
        );
        assert_eq!(
            parse_replica_assignment("0:1,2:99999999999"),
            Err(NotANumber {
                partition: 1,
                token: "99999999999".into()
            })
        );
        assert_eq!(
            parse_replica_assignment("0:1,2:2"),
            Err(DuplicateBroker {
                partition: 1,
                broker: 2
            })
        );
        assert_eq!(
            parse_replica_assignment("0:1,2"),
            Err(DifferentReplicationFactor {
                partition: 1,
                expected: 2,
                actual: 1
            })
        );
        assert_eq!(
            DuplicateBroker { partition: 1, broker: 2 }.to_string(),
            "Partition replica lists may not contain duplicate entries: partition 1 lists broker 2 more than once"
        );
        assert_eq!(
            NotANumber {
                partition: 0,
                token: "x".into()
            }
            .to_string(),
            "partition 0: broker id 'x' is not a number"
        );
    }

    #[test]
    fn negative_ids_are_numbers() {
        // Kafka's parser accepts any int; whether the broker exists is checked elsewhere.
        assert_eq!(
            parse_replica_assignment("-1:2").unwrap(),
            BTreeMap::from([(0, vec![-1, 2])])
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn format_then_parse_round_trips(rf in 1usize..5, parts in 1usize..20, seed in any::<u64>()) {
            let assignment: BTreeMap<i32, Vec<BrokerId>> = (0..parts)
                .map(|p| {
                    let replicas = (0..rf).map(|r| ((seed as usize + p * 7 + r) % 1000) as i32 + (r as i32) * 1000).collect();
                    (p as i32, replicas)
                })
                .collect();
            let text = format_replica_assignment(&assignment);
            prop_assert_eq!(parse_replica_assignment(&text).unwrap(), assignment);
        }
    }
}
