//! Kafka 2.8's placement, exactly (`AdminUtils.assignReplicasToBrokers`).

use std::collections::BTreeMap;

use model::BrokerId;

use crate::{partitions_check, Assignment, AssignmentError, BrokerMetadata, Fixed, Layout};

/// Kafka's replica assignment over `brokers` in the given order.
///
/// Rack-unaware when no broker has a rack or `ignore_racks` is set; rack-aware when every
/// broker has one (over [`rack_alternated_broker_list`]); an error when only some do.
/// Random values come from `rng` in Kafka's order (start index, then shift), and only for
/// the values `fixed` leaves open. Partition ids run from `max(0, start_partition_id)`.
pub fn assign_replicas_to_brokers(
    brokers: &[BrokerMetadata],
    partitions: i32,
    replication_factor: i16,
    fixed: Fixed,
    start_partition_id: i32,
    ignore_racks: bool,
    rng: &mut impl rand::Rng,
) -> Result<Assignment, AssignmentError> {
    partitions_check(partitions, replication_factor, brokers, start_partition_id)?;
    let layout = Layout::new(brokers, ignore_racks)?;
    let n = layout.len();
    let start_index = fixed.start_index.unwrap_or_else(|| rng.random_range(0..n));
    let shift = match fixed {
        Fixed {
            replica_shift: Some(shift),
            ..
        } => shift,
        Fixed {
            start_index: Some(start),
            ..
        } => start,
        Fixed {
            start_index: None,
            replica_shift: None,
        } => rng.random_range(0..n),
    };
    Ok(layout.place(
        partitions,
        replication_factor,
        start_index,
        shift,
        start_partition_id,
    ))
}

/// Kafka's rack-alternated broker order: racks sorted by name, brokers within a rack sorted
/// by id, then one broker from each rack in turn until all are taken (racks that run out are
/// skipped). Brokers without a rack are left out.
///
/// Racks `a: [0, 3]`, `b: [1]`, `c: [2, 4, 5]` give `[0, 1, 2, 3, 4, 5]`.
pub fn rack_alternated_broker_list(brokers: &[BrokerMetadata]) -> Vec<BrokerId> {
    let mut by_rack: BTreeMap<&str, Vec<BrokerId>> = BTreeMap::new();
    for b in brokers {
        if let Some(rack) = b.rack.as_deref() {
            by_rack.entry(rack).or_default().push(b.id);
        }
    }
    let mut queues: Vec<std::vec::IntoIter<BrokerId>> = by_rack
        .into_values()
        .map(|mut ids| {
            ids.sort_unstable();
            ids.into_iter()
        })
        .collect();
    let total: usize = queues.iter().map(|q| q.len()).sum();
    let mut out = Vec::with_capacity(total);
    while out.len() < total {
        for queue in &mut queues {
            out.extend(queue.next());
        }
    }
    out
}
