//! Property tests of the placement invariants, for both strategies, with and without racks:
//! broker counts 1..50, replication factors 1..=n, partitions 1..1000.

use std::collections::{BTreeMap, BTreeSet};

use assignment::{
    assign_added_partitions, assign_balanced, assign_replicas_to_brokers, Assignment,
    BrokerMetadata, ClusterLoad, Fixed, Strategy as Placement,
};
use model::BrokerId;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

/// A cluster: distinct broker ids in a random order, each in one of `racks` racks (or none).
#[derive(Debug, Clone)]
struct Cluster {
    brokers: Vec<BrokerMetadata>,
    racks: usize,
}

fn cluster(max_brokers: usize) -> impl Strategy<Value = Cluster> {
    (1..=max_brokers, 0usize..=6, any::<u64>()).prop_map(|(n, racks, seed)| {
        use rand::seq::SliceRandom;
        let mut rng = StdRng::seed_from_u64(seed);
        // Sparse, shuffled ids: positions must never be confused with ids.
        let mut ids: Vec<BrokerId> = (0..n as BrokerId).map(|i| i * 3 + 100).collect();
        ids.shuffle(&mut rng);
        let racks = racks.min(n);
        let brokers = ids
            .iter()
            .enumerate()
            .map(|(i, id)| BrokerMetadata {
                id: *id,
                rack: (racks > 0).then(|| format!("rack-{}", (i * 7 + 3) % racks)),
            })
            .collect();
        Cluster { brokers, racks }
    })
}

/// The invariants every placement keeps, whatever the strategy.
fn check_invariants(
    c: &Cluster,
    a: &Assignment,
    partitions: i32,
    rf: usize,
    first_id: i32,
) -> Result<(), TestCaseError> {
    let ids: BTreeSet<BrokerId> = c.brokers.iter().map(|b| b.id).collect();
    let rack_of: BTreeMap<BrokerId, &str> = c
        .brokers
        .iter()
        .filter_map(|b| Some((b.id, b.rack.as_deref()?)))
        .collect();
    prop_assert_eq!(
        a.keys().copied().collect::<Vec<_>>(),
        (first_id..first_id + partitions).collect::<Vec<_>>()
    );
    for (p, replicas) in a {
        prop_assert_eq!(replicas.len(), rf, "partition {}", p);
        let distinct: BTreeSet<_> = replicas.iter().collect();
        prop_assert_eq!(
            distinct.len(),
            rf,
            "duplicate broker in partition {}: {:?}",
            p,
            replicas
        );
        prop_assert!(
            replicas.iter().all(|b| ids.contains(b)),
            "unknown broker in {:?}",
            replicas
        );
        if c.racks > 0 {
            let racks: BTreeSet<_> = replicas.iter().map(|b| rack_of[b]).collect();
            prop_assert_eq!(
                racks.len(),
                rf.min(c.racks),
                "partition {} racks {:?}",
                p,
                replicas
            );
        }
    }
    // Leaders go round the (arranged) list one partition at a time: counts within 1, and
    // exactly equal when the partitions divide evenly.
    let mut leaders: BTreeMap<BrokerId, usize> = ids.iter().map(|b| (*b, 0)).collect();
    for replicas in a.values() {
        *leaders.get_mut(&replicas[0]).unwrap() += 1;
    }
    let (min, max) = (
        leaders.values().min().unwrap(),
        leaders.values().max().unwrap(),
    );
    prop_assert!(max - min <= 1, "leaders {:?}", leaders);
    if (partitions as usize).is_multiple_of(ids.len()) {
        prop_assert_eq!(min, max);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn kafka_strategy_invariants(
        c in cluster(50),
        rf_seed in any::<usize>(),
        partitions in 1i32..1000,
        first_id in 0i32..50,
        seed in any::<u64>(),
    ) {
        let rf = 1 + rf_seed % c.brokers.len();
        let mut rng = StdRng::seed_from_u64(seed);
        let a = assign_replicas_to_brokers(&c.brokers, partitions, rf as i16, Fixed::RANDOM, first_id, false, &mut rng).unwrap();
        check_invariants(&c, &a, partitions, rf, first_id)?;
        // Rack-unaware with a whole number of rounds from id 0: every broker holds the same
        // number of replicas, not just leaders.
        if c.racks == 0 && first_id == 0 && (partitions as usize).is_multiple_of(c.brokers.len()) {
            let mut replicas: BTreeMap<BrokerId, usize> = BTreeMap::new();
            for b in a.values().flatten() {
                *replicas.entry(*b).or_default() += 1;
            }
            let counts: BTreeSet<usize> = replicas.values().copied().collect();
            prop_assert_eq!(counts.len(), 1, "replicas {:?}", replicas);
        }
    }

    #[test]
    fn balanced_strategy_invariants(
        c in cluster(50),
        rf_seed in any::<usize>(),
        partitions in 1i32..1000,
        first_id in 0i32..50,
        load_seed in any::<u64>(),
    ) {
        let rf = 1 + rf_seed % c.brokers.len();
        // Some existing load on a few brokers.
        let mut load = ClusterLoad::new();
        for (i, b) in c.brokers.iter().enumerate() {
            let extra = ((load_seed >> (i % 60)) & 7) as u32;
            load.leaders.insert(b.id, extra);
            load.replicas.insert(b.id, extra * 2);
        }
        let a = assign_balanced(&c.brokers, partitions, rf as i16, first_id, false, &load).unwrap();
        check_invariants(&c, &a, partitions, rf, first_id)?;
        // The broker list order never matters.
        let mut reversed = c.brokers.clone();
        reversed.reverse();
        prop_assert_eq!(assign_balanced(&reversed, partitions, rf as i16, first_id, false, &load).unwrap(), a);
    }

    #[test]
    fn ignoring_racks_keeps_the_unaware_invariants(c in cluster(20), partitions in 1i32..200, seed in any::<u64>()) {
        let rf = 1 + (seed as usize) % c.brokers.len();
        let mut rng = StdRng::seed_from_u64(seed);
        let a = assign_replicas_to_brokers(&c.brokers, partitions, rf as i16, Fixed::RANDOM, 0, true, &mut rng).unwrap();
        let unaware = Cluster { racks: 0, ..c.clone() };
        check_invariants(&unaware, &a, partitions, rf, 0)?;
    }

    #[test]
    fn added_partitions_keep_the_invariants(
        c in cluster(30),
        rf_seed in any::<usize>(),
        existing in 1i32..100,
        more in 1i32..200,
        balanced in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let rf = 1 + rf_seed % c.brokers.len();
        let mut rng = StdRng::seed_from_u64(seed);
        let old = assign_replicas_to_brokers(&c.brokers, existing, rf as i16, Fixed::RANDOM, 0, false, &mut rng).unwrap();
        let strategy = if balanced { Placement::Balanced } else { Placement::Kafka };
        let load = ClusterLoad::from_assignments([&old]);
        let added = assign_added_partitions(&c.brokers, &old, existing + more, strategy, false, &load).unwrap();
        // The new partitions alone: ids existing.., RF distinct brokers, racks spread.
        let ids: BTreeSet<BrokerId> = c.brokers.iter().map(|b| b.id).collect();
        prop_assert_eq!(added.keys().copied().collect::<Vec<_>>(), (existing..existing + more).collect::<Vec<_>>());
        for replicas in added.values() {
            prop_assert_eq!(replicas.iter().collect::<BTreeSet<_>>().len(), rf);
            prop_assert!(replicas.iter().all(|b| ids.contains(b)));
        }
    }

    #[test]
    fn balanced_growth_equals_creating_the_topic_at_full_size(
        n in 2usize..20,
        rf_seed in any::<usize>(),
        existing in 1i32..60,
        more in 1i32..60,
        start in 0usize..20,
        shift in 0usize..20,
    ) {
        // A topic Kafka created over the id-sorted brokers (what its controller passes).
        let rf = 2 + rf_seed % (n - 1).max(1);
        let rf = rf.min(n);
        let brokers: Vec<BrokerMetadata> = (0..n as BrokerId).map(BrokerMetadata::new).collect();
        let fixed = Fixed { start_index: Some(start % n), replica_shift: Some(shift) };
        let mut rng = StdRng::seed_from_u64(0);
        let full = assign_replicas_to_brokers(&brokers, existing + more, rf as i16, fixed, 0, false, &mut rng).unwrap();
        let old: Assignment = full.range(..existing).map(|(p, r)| (*p, r.clone())).collect();
        let added = assign_added_partitions(&brokers, &old, existing + more, Placement::Balanced, false, &ClusterLoad::new()).unwrap();
        let tail: Assignment = full.range(existing..).map(|(p, r)| (*p, r.clone())).collect();
        prop_assert_eq!(added, tail);
    }
}
