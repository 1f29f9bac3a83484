//! Replica placement (SPEC sections 3, 4 and 9) as pure functions: which brokers hold the
//! replicas of each partition of a new topic, or of partitions added to an existing one.
//!
//! Two strategies:
//! - [`Strategy::Kafka`] reproduces Kafka 2.8's `AdminUtils.assignReplicasToBrokers` exactly
//!   (rack-unaware and rack-aware), over the broker list in the caller's order, with a random
//!   or fixed start index and replica shift.
//! - [`Strategy::Balanced`] (the default) uses the same placement pattern, so it keeps all of
//!   Kafka's invariants, but orders brokers by id and chooses the start index and shift from
//!   the cluster's current leader and replica counts ([`ClusterLoad`]) instead of at random.
//!
//! Reassignment proposals (`reassign-partitions --generate`) are [`propose_reassignment`]:
//! each topic balanced over the listed brokers with the fewest replica moves.
//!
//! Owns no I/O and no cluster state: callers pass the live brokers and the current load in,
//! and write the result wherever it goes (`znodes` for the store, `cli` for `gregor assign`).

mod balanced;
mod flow;
mod kafka;
mod reassign;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use model::BrokerId;

pub use balanced::assign_balanced;
pub use kafka::{assign_replicas_to_brokers, rack_alternated_broker_list};
pub use reassign::{propose_reassignment, ReassignmentProposal, TopicAssignments};

/// A partition id -> replica list map; the first replica of each list is the preferred leader.
pub type Assignment = BTreeMap<i32, Vec<BrokerId>>;

/// A live broker as placement sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BrokerMetadata {
    /// The broker's id.
    pub id: BrokerId,
    /// Its `broker.rack`, if configured.
    pub rack: Option<String>,
}

impl BrokerMetadata {
    /// A broker without a rack.
    pub fn new(id: BrokerId) -> Self {
        BrokerMetadata { id, rack: None }
    }

    /// A broker in `rack`.
    pub fn with_rack(id: BrokerId, rack: impl Into<String>) -> Self {
        BrokerMetadata {
            id,
            rack: Some(rack.into()),
        }
    }
}

/// Which placement algorithm to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Strategy {
    /// Exactly Kafka 2.8 (random start index and shift unless fixed).
    Kafka,
    /// Kafka's pattern with a deterministic, load-aware start index and shift.
    #[default]
    Balanced,
}

impl FromStr for Strategy {
    type Err = AssignmentError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "kafka" => Ok(Strategy::Kafka),
            "balanced" => Ok(Strategy::Balanced),
            other => Err(AssignmentError::UnknownStrategy(other.to_owned())),
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Strategy::Kafka => "kafka",
            Strategy::Balanced => "balanced",
        })
    }
}

/// Fixed values for Kafka's otherwise random choices.
///
/// `start_index` is the position in the broker list of partition 0's leader;
/// `replica_shift` is the gap between the first and second replica. When only
/// `start_index` is given the shift equals it, as Kafka's `fixedStartIndex` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fixed {
    /// Fixed start index, or random.
    pub start_index: Option<usize>,
    /// Fixed replica shift, or `start_index`, or random.
    pub replica_shift: Option<usize>,
}

impl Fixed {
    /// Both values random (Kafka's default for new topics).
    pub const RANDOM: Fixed = Fixed {
        start_index: None,
        replica_shift: None,
    };

    /// Kafka's `fixedStartIndex`: the start index and the shift both equal `index`.
    pub fn start_index(index: usize) -> Self {
        Fixed {
            start_index: Some(index),
            replica_shift: None,
        }
    }

    /// Whether any value is fixed.
    pub fn is_fixed(&self) -> bool {
        self.start_index.is_some() || self.replica_shift.is_some()
    }
}

/// The current number of partition leaders and replicas per broker, over the whole cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterLoad {
    /// Preferred leaders (first replicas) per broker.
    pub leaders: BTreeMap<BrokerId, u32>,
    /// Replicas (leaders included) per broker.
    pub replicas: BTreeMap<BrokerId, u32>,
}

impl ClusterLoad {
    /// An empty cluster.
    pub fn new() -> Self {
        ClusterLoad::default()
    }

    /// The load of a set of existing assignments (e.g. every topic in `/brokers/topics`).
    pub fn from_assignments<'a>(assignments: impl IntoIterator<Item = &'a Assignment>) -> Self {
        let mut load = ClusterLoad::new();
        for assignment in assignments {
            load.add(assignment);
        }
        load
    }

    /// Adds the leaders and replicas of `assignment`.
    pub fn add(&mut self, assignment: &Assignment) {
        for replicas in assignment.values() {
            if let Some(leader) = replicas.first() {
                *self.leaders.entry(*leader).or_default() += 1;
            }
            for broker in replicas {
                *self.replicas.entry(*broker).or_default() += 1;
            }
        }
    }

    /// Leaders on `broker`.
    pub fn leaders_of(&self, broker: BrokerId) -> u32 {
        self.leaders.get(&broker).copied().unwrap_or(0)
    }

    /// Replicas on `broker`.
    pub fn replicas_of(&self, broker: BrokerId) -> u32 {
        self.replicas.get(&broker).copied().unwrap_or(0)
    }
}

/// Why no assignment could be computed. Messages follow Kafka's where it has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssignmentError {
    /// The broker list is empty.
    #[error("No brokers are available for replica assignment.")]
    NoBrokers,
    /// Partitions < 1.
    #[error("Number of partitions must be larger than 0, got {0}.")]
    InvalidPartitions(i32),
    /// Replication factor < 1.
    #[error("Replication factor must be larger than 0, got {0}.")]
    ReplicationFactorNotPositive(i16),
    /// More replicas per partition than brokers.
    #[error("Replication factor: {requested} larger than available brokers: {available}.")]
    InvalidReplicationFactor {
        /// The requested replication factor.
        requested: i16,
        /// The number of brokers.
        available: usize,
    },
    /// Some brokers have a rack and some do not, and racks were not ignored.
    #[error(
        "Not all brokers have rack information for replica rack aware assignment. \
         Brokers without a rack: {without_rack:?} (pass --ignore-racks / disable rack awareness to place them anyway)"
    )]
    PartialRacks {
        /// The brokers without a rack.
        without_rack: Vec<BrokerId>,
    },
    /// The same broker id appears twice in the broker list.
    #[error("Broker {0} appears more than once in the broker list.")]
    DuplicateBroker(BrokerId),
    /// The last partition id would not fit in an `i32`.
    #[error("Partition ids from {start} for {partitions} partitions would overflow a 32-bit id.")]
    TooManyPartitions {
        /// The first new partition id.
        start: i32,
        /// How many partitions.
        partitions: i32,
    },
    /// Adding partitions to a topic that has no partition 0 to copy the replication factor from.
    #[error("The topic's existing assignment has no partition 0 (partitions: {existing:?}).")]
    MissingPartitionZero {
        /// The existing partition ids.
        existing: Vec<i32>,
    },
    /// The requested partition count is not larger than the current one.
    #[error(
        "Topic currently has {current} partitions, {requested} would not be an increase; \
         the number of partitions can only be increased."
    )]
    PartitionsNotIncreased {
        /// The current number of partitions.
        current: i32,
        /// The requested total.
        requested: i32,
    },
    /// A fixed start index or replica shift was given to the balanced strategy.
    #[error("a fixed start index or replica shift only applies to the 'kafka' strategy")]
    FixedWithBalanced,
    /// Not `kafka` or `balanced`.
    #[error("unknown assignment strategy '{0}': expected 'kafka' or 'balanced'")]
    UnknownStrategy(String),
}

/// Runs `strategy` for a new topic (or for partitions from `start_partition_id` on).
///
/// [`Strategy::Kafka`] uses `fixed` and `rng` ([`assign_replicas_to_brokers`]);
/// [`Strategy::Balanced`] uses `load` ([`assign_balanced`]) and refuses fixed values.
#[allow(clippy::too_many_arguments)] // mirrors Kafka's assignReplicasToBrokers inputs one to one
pub fn assign(
    strategy: Strategy,
    brokers: &[BrokerMetadata],
    partitions: i32,
    replication_factor: i16,
    fixed: Fixed,
    start_partition_id: i32,
    ignore_racks: bool,
    load: &ClusterLoad,
    rng: &mut impl rand::Rng,
) -> Result<Assignment, AssignmentError> {
    match strategy {
        Strategy::Kafka => assign_replicas_to_brokers(
            brokers,
            partitions,
            replication_factor,
            fixed,
            start_partition_id,
            ignore_racks,
            rng,
        ),
        Strategy::Balanced if fixed.is_fixed() => Err(AssignmentError::FixedWithBalanced),
        Strategy::Balanced => assign_balanced(
            brokers,
            partitions,
            replication_factor,
            start_partition_id,
            ignore_racks,
            load,
        ),
    }
}

/// Places the partitions added to a topic that has `existing` partitions, growing it to
/// `new_total`. Returns only the new partitions (ids `existing.len()..new_total`); existing
/// partitions never move.
///
/// - [`Strategy::Kafka`] is Kafka 2.8's `createPartitions` (SPEC section 4): brokers sorted
///   by id, start index = position of the first broker whose id is >= partition 0's leader
///   (0 if none), the same value as replica shift, replication factor of partition 0,
///   first new id = current count.
/// - [`Strategy::Balanced`] continues the topic's original pattern (SPEC section 9): if the
///   existing partitions are exactly what some start index and shift produce over today's
///   brokers (id-sorted or rack-alternated, in the caller's order, or in the order the
///   partition leaders reveal), the new partitions are the next ones of that same pattern,
///   so the topic looks as if it had been created with `new_total` partitions. Otherwise (brokers joined or left since, or a manual assignment) the new
///   partitions are placed with [`assign_balanced`] against `load`.
pub fn assign_added_partitions(
    brokers: &[BrokerMetadata],
    existing: &Assignment,
    new_total: i32,
    strategy: Strategy,
    ignore_racks: bool,
    load: &ClusterLoad,
) -> Result<Assignment, AssignmentError> {
    let current =
        i32::try_from(existing.len()).map_err(|_| AssignmentError::TooManyPartitions {
            start: 0,
            partitions: i32::MAX,
        })?;
    let first = existing.get(&0).filter(|r| !r.is_empty()).ok_or_else(|| {
        AssignmentError::MissingPartitionZero {
            existing: existing.keys().copied().collect(),
        }
    })?;
    if new_total <= current {
        return Err(AssignmentError::PartitionsNotIncreased {
            current,
            requested: new_total,
        });
    }
    let replication_factor = i16::try_from(first.len()).unwrap_or(i16::MAX);
    let added = new_total - current;
    let sorted = sorted_by_id(brokers);
    match strategy {
        Strategy::Kafka => {
            partitions_check(added, replication_factor, &sorted, current)?;
            let layout = Layout::new(&sorted, ignore_racks)?;
            let start = sorted.iter().position(|b| b.id >= first[0]).unwrap_or(0);
            Ok(layout.place(added, replication_factor, start, start, current))
        }
        Strategy::Balanced => {
            partitions_check(added, replication_factor, &sorted, current)?;
            for layout in pattern_layouts(brokers, &sorted, existing, ignore_racks)? {
                if let Some((start, shift)) = layout.find_pattern(existing, replication_factor) {
                    // Kafka's loop bumps the shift at every multiple of n it passes after
                    // partition 0; a run that starts at `current` has not seen those bumps.
                    let bumps = usize::try_from(current - 1).unwrap_or(0) / layout.len();
                    return Ok(layout.place(
                        added,
                        replication_factor,
                        start,
                        shift + bumps,
                        current,
                    ));
                }
            }
            assign_balanced(
                &sorted,
                added,
                replication_factor,
                current,
                ignore_racks,
                load,
            )
        }
    }
}

/// The broker orders a topic may have been created over, most likely first: id-sorted
/// (Kafka's controller and our balanced strategy), the caller's order, and, when the topic
/// has at least one partition per broker, the order its partition leaders reveal (partition
/// `p` is led by `list[(p + start) % n]`, so leaders of `0..n` are the list, rotated).
/// Rack-aware layouts are fully determined by the racks, so only one is tried.
fn pattern_layouts(
    brokers: &[BrokerMetadata],
    sorted: &[BrokerMetadata],
    existing: &Assignment,
    ignore_racks: bool,
) -> Result<Vec<Layout>, AssignmentError> {
    let canonical = Layout::new(sorted, ignore_racks)?;
    if canonical.racks.is_some() {
        return Ok(vec![canonical]);
    }
    let n = canonical.len();
    let mut layouts = vec![canonical, Layout::new(brokers, ignore_racks)?];
    let leaders: Vec<BrokerId> = (0..n)
        .filter_map(|p| existing.get(&i32::try_from(p).ok()?)?.first().copied())
        .collect();
    let known: BTreeSet<BrokerId> = sorted.iter().map(|b| b.id).collect();
    if leaders.len() == n && leaders.iter().copied().collect::<BTreeSet<_>>() == known {
        layouts.push(Layout {
            brokers: leaders,
            racks: None,
            num_racks: 0,
        });
    }
    layouts.dedup_by(|a, b| a.brokers == b.brokers);
    Ok(layouts)
}

/// The broker list sorted by id (Kafka's controller does this before placing).
fn sorted_by_id(brokers: &[BrokerMetadata]) -> Vec<BrokerMetadata> {
    let mut sorted = brokers.to_vec();
    sorted.sort_by_key(|b| b.id);
    sorted
}

/// Kafka's checks before any placement, in Kafka's order, plus our own (duplicates,
/// id overflow).
pub(crate) fn partitions_check(
    partitions: i32,
    replication_factor: i16,
    brokers: &[BrokerMetadata],
    start_partition_id: i32,
) -> Result<(), AssignmentError> {
    if partitions <= 0 {
        return Err(AssignmentError::InvalidPartitions(partitions));
    }
    if replication_factor <= 0 {
        return Err(AssignmentError::ReplicationFactorNotPositive(
            replication_factor,
        ));
    }
    if brokers.is_empty() {
        return Err(AssignmentError::NoBrokers);
    }
    let rf = usize::try_from(replication_factor).unwrap_or(usize::MAX);
    if rf > brokers.len() {
        return Err(AssignmentError::InvalidReplicationFactor {
            requested: replication_factor,
            available: brokers.len(),
        });
    }
    let mut seen = BTreeSet::new();
    if let Some(dup) = brokers.iter().find(|b| !seen.insert(b.id)) {
        return Err(AssignmentError::DuplicateBroker(dup.id));
    }
    if start_partition_id
        .max(0)
        .checked_add(partitions - 1)
        .is_none()
    {
        return Err(AssignmentError::TooManyPartitions {
            start: start_partition_id,
            partitions,
        });
    }
    Ok(())
}

/// The broker list placement walks, and each position's rack when placement is rack-aware.
#[derive(Debug, Clone)]
struct Layout {
    brokers: Vec<BrokerId>,
    /// Rack index of each position; `None` for rack-unaware placement.
    racks: Option<Vec<usize>>,
    num_racks: usize,
}

impl Layout {
    /// Validates rack information and arranges the list: as given for rack-unaware
    /// placement, rack-alternated for rack-aware placement.
    fn new(brokers: &[BrokerMetadata], ignore_racks: bool) -> Result<Layout, AssignmentError> {
        let with_rack = brokers.iter().filter(|b| b.rack.is_some()).count();
        if ignore_racks || with_rack == 0 {
            return Ok(Layout {
                brokers: brokers.iter().map(|b| b.id).collect(),
                racks: None,
                num_racks: 0,
            });
        }
        if with_rack < brokers.len() {
            let without_rack = brokers
                .iter()
                .filter(|b| b.rack.is_none())
                .map(|b| b.id)
                .collect();
            return Err(AssignmentError::PartialRacks { without_rack });
        }
        let arranged = rack_alternated_broker_list(brokers);
        let rack_names: BTreeSet<&str> = brokers.iter().filter_map(|b| b.rack.as_deref()).collect();
        let rack_of: BTreeMap<BrokerId, usize> = brokers
            .iter()
            .filter_map(|b| {
                let rack = b.rack.as_deref()?;
                Some((b.id, rack_names.iter().position(|r| *r == rack)?))
            })
            .collect();
        let racks = arranged.iter().map(|id| rack_of[id]).collect();
        Ok(Layout {
            brokers: arranged,
            racks: Some(racks),
            num_racks: rack_names.len(),
        })
    }

    fn len(&self) -> usize {
        self.brokers.len()
    }

    /// Kafka's placement loop (SPEC section 3) from a start index and replica shift.
    fn place(
        &self,
        partitions: i32,
        replication_factor: i16,
        start_index: usize,
        shift: usize,
        start_partition_id: i32,
    ) -> Assignment {
        let mut out = Assignment::new();
        self.place_each(
            partitions,
            replication_factor,
            start_index,
            shift,
            start_partition_id,
            |p, positions| {
                out.insert(p, positions.iter().map(|i| self.brokers[*i]).collect());
            },
        );
        out
    }

    /// [`Layout::place`] without allocating: calls `sink` with each partition id and the
    /// positions (indexes into `brokers`) of its replicas.
    fn place_each(
        &self,
        partitions: i32,
        replication_factor: i16,
        start_index: usize,
        shift: usize,
        start_partition_id: i32,
        mut sink: impl FnMut(i32, &[usize]),
    ) {
        let n = self.len();
        let rf = usize::try_from(replication_factor).unwrap_or(0);
        let first_id = start_partition_id.max(0);
        let mut next_replica_shift = shift;
        let mut replicas: Vec<usize> = Vec::with_capacity(rf);
        let mut used_racks = vec![false; self.num_racks];
        let mut used_brokers = vec![false; n];
        for p in first_id..first_id + partitions {
            let pu = usize::try_from(p).unwrap_or(0);
            if pu > 0 && pu % n == 0 {
                next_replica_shift += 1;
            }
            let first = (pu + start_index) % n;
            replicas.clear();
            replicas.push(first);
            match &self.racks {
                None => {
                    for j in 0..rf - 1 {
                        replicas.push(replica_index(first, next_replica_shift, j, n));
                    }
                }
                Some(racks) => {
                    used_racks.iter_mut().for_each(|u| *u = false);
                    used_brokers.iter_mut().for_each(|u| *u = false);
                    used_racks[racks[first]] = true;
                    used_brokers[first] = true;
                    let (mut racks_used, mut brokers_used) = (1, 1);
                    let rack_shift = next_replica_shift * self.num_racks;
                    let mut k = 0;
                    for _ in 0..rf - 1 {
                        loop {
                            let pos = replica_index(first, rack_shift, k, n);
                            k += 1;
                            let rack = racks[pos];
                            // Skip a broker whose rack already has a replica while some rack has
                            // none, or that already has a replica while some broker has none.
                            let rack_ok = !used_racks[rack] || racks_used == self.num_racks;
                            let broker_ok = !used_brokers[pos] || brokers_used == n;
                            if rack_ok && broker_ok {
                                replicas.push(pos);
                                if !used_racks[rack] {
                                    used_racks[rack] = true;
                                    racks_used += 1;
                                }
                                if !used_brokers[pos] {
                                    used_brokers[pos] = true;
                                    brokers_used += 1;
                                }
                                break;
                            }
                            debug_assert!(
                                k <= 4 * n,
                                "rack-aware placement must find a broker within a few turns"
                            );
                        }
                    }
                }
            }
            sink(p, &replicas);
        }
    }

    /// The start index and shift whose placement of partitions `0..existing.len()` equals
    /// `existing`, if any (see [`assign_added_partitions`]).
    fn find_pattern(
        &self,
        existing: &Assignment,
        replication_factor: i16,
    ) -> Option<(usize, usize)> {
        let count = i32::try_from(existing.len()).ok()?;
        if existing.keys().copied().ne(0..count) {
            return None;
        }
        let leader = existing.get(&0)?.first()?;
        let start = self.brokers.iter().position(|b| b == leader)?;
        // Shifts are taken modulo n - 1 inside the loop, so 0..n-1 covers every distinct
        // pattern (for rack-aware layouts too: shift * racks only takes those residues).
        (0..self.len().saturating_sub(1).max(1)).find_map(|shift| {
            let mut matches = true;
            self.place_each(
                count,
                replication_factor,
                start,
                shift,
                0,
                |p, positions| {
                    matches &= existing.get(&p).is_some_and(|e| {
                        e.iter()
                            .copied()
                            .eq(positions.iter().map(|i| self.brokers[*i]))
                    });
                },
            );
            matches.then_some((start, shift))
        })
    }
}

/// Kafka's `replicaIndex`: the position of replica `j + 1` of the partition whose first
/// replica is at `first`.
fn replica_index(first: usize, second_replica_shift: usize, j: usize, n: usize) -> usize {
    let shift = 1 + (second_replica_shift + j) % (n - 1);
    (first + shift) % n
}

#[cfg(test)]
mod tests;
