//! Table tests: SPEC section 3's worked examples, Kafka's rack-aware expectations, added
//! partitions, errors, and the balanced strategy's cluster-wide evenness.

use super::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

fn brokers(ids: &[BrokerId]) -> Vec<BrokerMetadata> {
    ids.iter().map(|id| BrokerMetadata::new(*id)).collect()
}

fn racked(pairs: &[(BrokerId, &str)]) -> Vec<BrokerMetadata> {
    pairs
        .iter()
        .map(|(id, rack)| BrokerMetadata::with_rack(*id, *rack))
        .collect()
}

/// `p0 [0,1,2] p1 [1,2,3] ...`, the SPEC's notation.
fn render(assignment: &Assignment) -> String {
    assignment
        .iter()
        .map(|(p, r)| {
            format!(
                "p{p} [{}]",
                r.iter()
                    .map(|b| b.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn kafka(
    brokers: &[BrokerMetadata],
    partitions: i32,
    rf: i16,
    start: usize,
    shift: usize,
    start_partition_id: i32,
) -> String {
    let fixed = Fixed {
        start_index: Some(start),
        replica_shift: Some(shift),
    };
    let mut rng = StdRng::seed_from_u64(0);
    render(
        &assign_replicas_to_brokers(
            brokers,
            partitions,
            rf,
            fixed,
            start_partition_id,
            false,
            &mut rng,
        )
        .unwrap(),
    )
}

#[test]
fn spec_five_brokers_ten_partitions_rf3() {
    assert_eq!(
        kafka(&brokers(&[0, 1, 2, 3, 4]), 10, 3, 0, 0, 0),
        "p0 [0,1,2] p1 [1,2,3] p2 [2,3,4] p3 [3,4,0] p4 [4,0,1] \
         p5 [0,2,3] p6 [1,3,4] p7 [2,4,0] p8 [3,0,1] p9 [4,1,2]"
    );
}

#[test]
fn spec_twelve_partitions_extend_the_pattern() {
    let twelve = kafka(&brokers(&[0, 1, 2, 3, 4]), 12, 3, 0, 0, 0);
    assert!(
        twelve.ends_with("p9 [4,1,2] p10 [0,3,4] p11 [1,4,0]"),
        "{twelve}"
    );
    assert!(twelve.starts_with(&kafka(&brokers(&[0, 1, 2, 3, 4]), 10, 3, 0, 0, 0)));
}

#[test]
fn spec_rf4_keeps_the_first_three_replicas() {
    let b = brokers(&[0, 1, 2, 3, 4]);
    let fixed = Fixed {
        start_index: Some(0),
        replica_shift: Some(0),
    };
    let mut rng = StdRng::seed_from_u64(0);
    let rf3 = assign_replicas_to_brokers(&b, 12, 3, fixed, 0, false, &mut rng).unwrap();
    let rf4 = assign_replicas_to_brokers(&b, 12, 4, fixed, 0, false, &mut rng).unwrap();
    for (p, replicas) in &rf4 {
        assert_eq!(replicas.len(), 4);
        assert_eq!(&replicas[..3], &rf3[p][..], "partition {p}");
    }
    assert_eq!(rf4[&0], vec![0, 1, 2, 3]);
    assert_eq!(rf4[&5], vec![0, 2, 3, 4]);
}

#[test]
fn positions_index_the_list_in_the_given_order() {
    // The same positions as the SPEC example, translated through the list order.
    assert_eq!(
        kafka(&brokers(&[1, 2, 0, 4, 3]), 5, 3, 0, 0, 0),
        "p0 [1,2,0] p1 [2,0,4] p2 [0,4,3] p3 [4,3,1] p4 [3,1,2]"
    );
}

#[test]
fn start_partition_id_counts_shift_bumps_from_itself() {
    assert_eq!(
        kafka(&brokers(&[0, 1, 2, 3, 4]), 2, 3, 0, 0, 10),
        // Kafka bumps the shift only at the multiples of n this call passes: p10 gets
        // shift 1 here, not the 2 it has when all 12 partitions are placed in one go.
        "p10 [0,2,3] p11 [1,3,4]"
    );
    // Negative start ids mean "from 0", as in Kafka.
    assert_eq!(kafka(&brokers(&[0, 1, 2]), 1, 2, 0, 0, -1), "p0 [0,1]");
}

#[test]
fn fixed_start_index_alone_also_fixes_the_shift() {
    let b = brokers(&[0, 1, 2, 3, 4]);
    let mut rng = StdRng::seed_from_u64(7);
    let only_start =
        assign_replicas_to_brokers(&b, 10, 3, Fixed::start_index(2), 0, false, &mut rng).unwrap();
    assert_eq!(render(&only_start), kafka(&b, 10, 3, 2, 2, 0));
}

#[test]
fn random_choices_come_from_the_rng() {
    let b = brokers(&[0, 1, 2, 3, 4, 5, 6]);
    let run = |seed| {
        let mut rng = StdRng::seed_from_u64(seed);
        assign_replicas_to_brokers(&b, 20, 3, Fixed::RANDOM, 0, false, &mut rng).unwrap()
    };
    assert_eq!(run(1), run(1));
    assert!(
        (0..20)
            .map(run)
            .collect::<std::collections::HashSet<_>>()
            .len()
            > 1
    );
}

#[test]
fn kafka_rack_alternated_list() {
    // Kafka's AdminRackAwareTest expectations.
    let b = racked(&[
        (0, "rack1"),
        (1, "rack3"),
        (2, "rack3"),
        (3, "rack2"),
        (4, "rack2"),
        (5, "rack1"),
    ]);
    assert_eq!(rack_alternated_broker_list(&b), vec![0, 3, 1, 5, 4, 2]);
    assert_eq!(rack_alternated_broker_list(&b[..5]), vec![0, 3, 1, 4, 2]);
    let uneven = racked(&[(0, "a"), (3, "a"), (1, "b"), (2, "c"), (4, "c"), (5, "c")]);
    assert_eq!(rack_alternated_broker_list(&uneven), vec![0, 1, 2, 3, 4, 5]);
}

#[test]
fn kafka_rack_aware_assignment() {
    // Kafka's AdminRackAwareTest: 6 brokers in 3 racks, 7 partitions, RF 3, fixed index 0.
    let b = racked(&[
        (0, "rack1"),
        (1, "rack3"),
        (2, "rack3"),
        (3, "rack2"),
        (4, "rack2"),
        (5, "rack1"),
    ]);
    assert_eq!(
        kafka(&b, 7, 3, 0, 0, 0),
        "p0 [0,3,1] p1 [3,1,5] p2 [1,5,4] p3 [5,4,2] p4 [4,2,0] p5 [2,0,3] p6 [0,4,2]"
    );
}

#[test]
fn rack_aware_skips_used_racks_while_others_are_free() {
    // Two racks of unequal size: every partition must still span both racks.
    let b = racked(&[(0, "a"), (1, "a"), (2, "a"), (3, "b")]);
    let mut rng = StdRng::seed_from_u64(3);
    for shift in 0..4 {
        let fixed = Fixed {
            start_index: Some(shift),
            replica_shift: Some(shift),
        };
        let a = assign_replicas_to_brokers(&b, 8, 2, fixed, 0, false, &mut rng).unwrap();
        for replicas in a.values() {
            assert!(replicas.contains(&3), "{replicas:?} must use rack b");
        }
    }
}

#[test]
fn ignoring_racks_uses_the_plain_list() {
    let b = racked(&[(1, "a"), (2, "b"), (0, "a"), (4, "b"), (3, "c")]);
    let fixed = Fixed {
        start_index: Some(0),
        replica_shift: Some(0),
    };
    let mut rng = StdRng::seed_from_u64(0);
    let a = assign_replicas_to_brokers(&b, 5, 3, fixed, 0, true, &mut rng).unwrap();
    assert_eq!(render(&a), kafka(&brokers(&[1, 2, 0, 4, 3]), 5, 3, 0, 0, 0));
}

#[test]
fn errors() {
    use AssignmentError::*;
    let b = brokers(&[0, 1, 2]);
    let mut rng = StdRng::seed_from_u64(0);
    let mut run = |b: &[BrokerMetadata], partitions, rf| {
        assign_replicas_to_brokers(b, partitions, rf, Fixed::RANDOM, 0, false, &mut rng)
            .unwrap_err()
    };
    assert_eq!(run(&b, 0, 1), InvalidPartitions(0));
    assert_eq!(run(&b, 1, 0), ReplicationFactorNotPositive(0));
    assert_eq!(
        run(&b, 1, 4),
        InvalidReplicationFactor {
            requested: 4,
            available: 3
        }
    );
    assert_eq!(
        InvalidReplicationFactor {
            requested: 4,
            available: 3
        }
        .to_string(),
        "Replication factor: 4 larger than available brokers: 3."
    );
    assert_eq!(run(&[], 1, 1), NoBrokers);
    assert_eq!(run(&brokers(&[0, 1, 0]), 1, 1), DuplicateBroker(0));
    let partial = vec![
        BrokerMetadata::with_rack(0, "a"),
        BrokerMetadata::new(1),
        BrokerMetadata::new(2),
    ];
    assert_eq!(
        run(&partial, 1, 1),
        PartialRacks {
            without_rack: vec![1, 2]
        }
    );
    let mut rng = StdRng::seed_from_u64(0);
    assert_eq!(
        assign_replicas_to_brokers(&b, 10, 1, Fixed::RANDOM, i32::MAX - 3, false, &mut rng)
            .unwrap_err(),
        TooManyPartitions {
            start: i32::MAX - 3,
            partitions: 10
        }
    );
    assert_eq!(
        "round-robin".parse::<Strategy>().unwrap_err(),
        UnknownStrategy("round-robin".into())
    );
    assert_eq!(
        assign(
            Strategy::Balanced,
            &b,
            1,
            1,
            Fixed::start_index(0),
            0,
            false,
            &ClusterLoad::new(),
            &mut rng
        )
        .unwrap_err(),
        FixedWithBalanced
    );
}

#[test]
fn strategy_parses_and_defaults_to_balanced() {
    assert_eq!("kafka".parse::<Strategy>().unwrap(), Strategy::Kafka);
    assert_eq!("balanced".parse::<Strategy>().unwrap(), Strategy::Balanced);
    assert_eq!(Strategy::default(), Strategy::Balanced);
    assert_eq!(Strategy::Kafka.to_string(), "kafka");
}

// ---- added partitions (SPEC section 4) ----

fn existing(pairs: &[(i32, &[BrokerId])]) -> Assignment {
    pairs.iter().map(|(p, r)| (*p, r.to_vec())).collect()
}

#[test]
fn added_partitions_kafka_matches_create_partitions() {
    // Created with start 3, shift 1 on brokers 0..4: p0 [3,0,1], p1 [4,1,2].
    let b = brokers(&[4, 2, 0, 3, 1]); // map order must not matter: Kafka sorts by id
    let old = existing(&[(0, &[3, 0, 1]), (1, &[4, 1, 2])]);
    let added =
        assign_added_partitions(&b, &old, 4, Strategy::Kafka, false, &ClusterLoad::new()).unwrap();
    // start index = position of the first id >= 3 in [0,1,2,3,4] = 3, shift 3, ids from 2.
    assert_eq!(
        render(&added),
        kafka(&brokers(&[0, 1, 2, 3, 4]), 2, 3, 3, 3, 2)
    );
    assert_eq!(render(&added), "p2 [0,4,1] p3 [1,0,2]");
}

#[test]
fn added_partitions_kafka_when_leader_id_is_above_every_broker() {
    // Partition 0 led by a broker that has left: no id >= 9, so the start index is 0.
    let b = brokers(&[0, 1, 2]);
    let old = existing(&[(0, &[9, 1])]);
    let added =
        assign_added_partitions(&b, &old, 2, Strategy::Kafka, false, &ClusterLoad::new()).unwrap();
    assert_eq!(render(&added), kafka(&b, 1, 2, 0, 0, 1));
}

#[test]
fn added_partitions_balanced_continues_the_original_pattern() {
    let b = brokers(&[0, 1, 2, 3, 4]);
    let old = existing(&[(0, &[3, 0, 1]), (1, &[4, 1, 2])]);
    let added =
        assign_added_partitions(&b, &old, 4, Strategy::Balanced, false, &ClusterLoad::new())
            .unwrap();
    // As if the topic had been created with 4 partitions, start 3, shift 1.
    assert_eq!(render(&added), kafka(&b, 2, 3, 3, 1, 2));
    assert_eq!(render(&added), "p2 [0,2,3] p3 [1,3,4]");
}

#[test]
fn added_partitions_balanced_continues_past_a_shift_bump() {
    let b = brokers(&[0, 1, 2, 3, 4]);
    let full = assign_replicas_to_brokers(
        &b,
        13,
        3,
        Fixed {
            start_index: Some(3),
            replica_shift: Some(1),
        },
        0,
        false,
        &mut StdRng::seed_from_u64(0),
    )
    .unwrap();
    for current in [1, 4, 5, 6, 10, 11] {
        let old: Assignment = full
            .range(..current)
            .map(|(p, r)| (*p, r.clone()))
            .collect();
        let added =
            assign_added_partitions(&b, &old, 13, Strategy::Balanced, false, &ClusterLoad::new())
                .unwrap();
        let expected: Assignment = full
            .range(current..)
            .map(|(p, r)| (*p, r.clone()))
            .collect();
        assert_eq!(added, expected, "growing from {current}");
    }
}

#[test]
fn added_partitions_balanced_follows_the_blogs_original_list_order() {
    // Seed 003: brokers {0,1,4,2,3}, start 0, shift 2 gave p0 (0,2,3) and p1 (1,3,0); the
    // blog computes P2 = (4,0,1) from that pattern, where Kafka gives (2,3,4).
    let b = brokers(&[0, 1, 4, 2, 3]);
    let old = existing(&[(0, &[0, 2, 3]), (1, &[1, 3, 0])]);
    let load = ClusterLoad::new();
    let balanced = assign_added_partitions(&b, &old, 3, Strategy::Balanced, false, &load).unwrap();
    assert_eq!(render(&balanced), "p2 [4,0,1]");
    let kafka = assign_added_partitions(&b, &old, 3, Strategy::Kafka, false, &load).unwrap();
    assert_eq!(render(&kafka), "p2 [2,3,4]");
}

#[test]
fn added_partitions_balanced_reads_the_list_order_from_the_leaders() {
    // Created over [3,1,4,0,2] with 6 partitions; today's brokers arrive in another order.
    let original = brokers(&[3, 1, 4, 0, 2]);
    let fixed = Fixed {
        start_index: Some(2),
        replica_shift: Some(3),
    };
    let full = assign_replicas_to_brokers(
        &original,
        9,
        3,
        fixed,
        0,
        false,
        &mut StdRng::seed_from_u64(0),
    )
    .unwrap();
    let old: Assignment = full.range(..6).map(|(p, r)| (*p, r.clone())).collect();
    let added = assign_added_partitions(
        &brokers(&[0, 1, 2, 3, 4]),
        &old,
        9,
        Strategy::Balanced,
        false,
        &ClusterLoad::new(),
    )
    .unwrap();
    let expected: Assignment = full.range(6..).map(|(p, r)| (*p, r.clone())).collect();
    assert_eq!(added, expected);
}

#[test]
fn added_partitions_balanced_falls_back_to_load_when_no_pattern_fits() {
    let b = brokers(&[0, 1, 2, 3]);
    let old = existing(&[(0, &[0, 1]), (1, &[0, 2])]); // a manual assignment
    let mut load = ClusterLoad::from_assignments([&old]);
    load.add(&existing(&[(0, &[1, 3]), (1, &[3, 2])]));
    let added = assign_added_partitions(&b, &old, 3, Strategy::Balanced, false, &load).unwrap();
    assert_eq!(added.keys().copied().collect::<Vec<_>>(), vec![2]);
    // Leaders so far: 0 twice, 1 once, 3 once; broker 2 leads nothing, so it leads p2.
    assert_eq!(added[&2][0], 2);
}

#[test]
fn added_partitions_errors() {
    use AssignmentError::*;
    let b = brokers(&[0, 1, 2]);
    let load = ClusterLoad::new();
    let old = existing(&[(0, &[0, 1]), (1, &[1, 2])]);
    assert_eq!(
        assign_added_partitions(&b, &old, 2, Strategy::Kafka, false, &load).unwrap_err(),
        PartitionsNotIncreased {
            current: 2,
            requested: 2
        }
    );
    assert_eq!(
        assign_added_partitions(&b, &Assignment::new(), 2, Strategy::Kafka, false, &load)
            .unwrap_err(),
        MissingPartitionZero { existing: vec![] }
    );
    assert_eq!(
        assign_added_partitions(&b[..1], &old, 3, Strategy::Balanced, false, &load).unwrap_err(),
        InvalidReplicationFactor {
            requested: 2,
            available: 1
        }
    );
}

// ---- balanced strategy (SPEC section 9) ----

/// Creates `topics` single-partition topics one after another, feeding each result into the
/// load, and returns the final load.
fn create_many(
    strategy: Strategy,
    b: &[BrokerMetadata],
    topics: usize,
    rf: i16,
    seed: u64,
) -> ClusterLoad {
    let mut load = ClusterLoad::new();
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..topics {
        let a = assign(strategy, b, 1, rf, Fixed::RANDOM, 0, false, &load, &mut rng).unwrap();
        load.add(&a);
    }
    load
}

fn spread(counts: &BTreeMap<BrokerId, u32>, b: &[BrokerMetadata]) -> u32 {
    let values: Vec<u32> = b
        .iter()
        .map(|x| counts.get(&x.id).copied().unwrap_or(0))
        .collect();
    values.iter().max().unwrap() - values.iter().min().unwrap()
}

#[test]
fn balanced_100_single_partition_topics_rf1_and_rf3() {
    let b = brokers(&[3, 0, 4, 1, 2]);
    for rf in [1, 3] {
        let load = create_many(Strategy::Balanced, &b, 100, rf, 0);
        assert!(
            spread(&load.leaders, &b) <= 1,
            "rf {rf} leaders {:?}",
            load.leaders
        );
        assert!(
            spread(&load.replicas, &b) <= 1,
            "rf {rf} replicas {:?}",
            load.replicas
        );
        assert_eq!(load.leaders.values().sum::<u32>(), 100);
    }
}

#[test]
fn balanced_even_with_racks() {
    let b = racked(&[(0, "a"), (1, "a"), (2, "b"), (3, "b"), (4, "c"), (5, "c")]);
    let load = create_many(Strategy::Balanced, &b, 60, 3, 0);
    assert!(spread(&load.leaders, &b) <= 1, "leaders {:?}", load.leaders);
    assert!(
        spread(&load.replicas, &b) <= 1,
        "replicas {:?}",
        load.replicas
    );
}

#[test]
fn kafka_random_start_piles_up_leaders() {
    // The weakness balanced fixes: with random starts some seed leaves a spread above 1.
    let b = brokers(&[0, 1, 2, 3, 4]);
    let worst = (0..10)
        .map(|seed| spread(&create_many(Strategy::Kafka, &b, 100, 1, seed).leaders, &b))
        .max();
    assert!(worst.unwrap() > 1);
}

#[test]
fn balanced_ignores_broker_order() {
    let load = ClusterLoad::from_assignments([&existing(&[(0, &[2, 3]), (1, &[2, 4])])]);
    let a = assign_balanced(&brokers(&[0, 1, 2, 3, 4]), 7, 2, 0, false, &load).unwrap();
    let b = assign_balanced(&brokers(&[4, 2, 3, 0, 1]), 7, 2, 0, false, &load).unwrap();
    assert_eq!(a, b);
}

#[test]
fn balanced_avoids_loaded_brokers() {
    let mut load = ClusterLoad::new();
    load.leaders.insert(0, 10);
    load.replicas.insert(0, 10);
    let a = assign_balanced(&brokers(&[0, 1, 2, 3]), 3, 1, 0, false, &load).unwrap();
    assert!(a.values().all(|r| r[0] != 0), "{a:?}");
}

/// Worst leader and replica spreads seen while creating `topics` single-partition topics one
/// after another on `n` brokers with the balanced strategy.
fn worst_spreads(n: i32, rf: i16, topics: usize) -> (u32, u32) {
    let b = brokers(&(0..n).collect::<Vec<_>>());
    let mut load = ClusterLoad::new();
    let (mut worst_leaders, mut worst_replicas) = (0, 0);
    for _ in 0..topics {
        let a = assign_balanced(&b, 1, rf, 0, false, &load).unwrap();
        load.add(&a);
        worst_leaders = worst_leaders.max(spread(&load.leaders, &b));
        worst_replicas = worst_replicas.max(spread(&load.replicas, &b));
    }
    (worst_leaders, worst_replicas)
}

#[test]
fn balanced_single_partition_topics_stay_within_one_on_small_clusters() {
    for n in 1..=9 {
        for rf in 1..=n as i16 {
            let (leaders, replicas) = worst_spreads(n, rf, 60);
            assert!(
                leaders <= 1 && replicas <= 1,
                "n {n} rf {rf}: spreads {leaders} {replicas}"
            );
        }
    }
}

#[test]
fn balanced_mixed_topics_keep_leaders_close() {
    // Topics of 1..=7 partitions and RF 1..=3 on 6 brokers: leader counts stay within 2 at
    // every step (a topic of k < n partitions leads on a contiguous arc of k brokers, so
    // exactly 1 is not always reachable).
    let b = brokers(&[0, 1, 2, 3, 4, 5]);
    let mut load = ClusterLoad::new();
    for i in 0..200 {
        let partitions = 1 + (i * 5 % 7);
        let rf = 1 + (i % 3) as i16;
        let a = assign_balanced(&b, partitions, rf, 0, false, &load).unwrap();
        load.add(&a);
        assert!(
            spread(&load.leaders, &b) <= 2,
            "step {i}: {:?}",
            load.leaders
        );
    }
}

#[test]
#[ignore = "measurement: prints the worst spreads for 1..=16 brokers and every RF"]
fn balanced_sweep() {
    let mut failures = 0;
    for n in 1..=16 {
        for rf in 1..=n as i16 {
            let (leaders, replicas) = worst_spreads(n, rf, 200);
            if leaders > 1 || replicas > 1 {
                failures += 1;
                println!("n {n} rf {rf}: worst leader spread {leaders}, replica spread {replicas}");
            }
        }
    }
    println!("{failures} of 136 (n, rf) pairs exceed a spread of 1");
}

#[test]
#[ignore = "measurement: prints Kafka's random placement against balanced for mixed topics"]
fn kafka_versus_balanced_measurement() {
    let b = brokers(&[0, 1, 2, 3, 4, 5, 6, 7]);
    for strategy in [Strategy::Kafka, Strategy::Balanced] {
        let (mut worst_leaders, mut worst_replicas) = (0, 0);
        for seed in 0..20 {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut load = ClusterLoad::new();
            for i in 0..300u64 {
                let partitions = 1 + ((i * 7 + seed) % 5) as i32;
                let rf = 1 + ((i + seed) % 3) as i16;
                let a = assign(
                    strategy,
                    &b,
                    partitions,
                    rf,
                    Fixed::RANDOM,
                    0,
                    false,
                    &load,
                    &mut rng,
                )
                .unwrap();
                load.add(&a);
            }
            worst_leaders = worst_leaders.max(spread(&load.leaders, &b));
            worst_replicas = worst_replicas.max(spread(&load.replicas, &b));
        }
        println!("{strategy}: after 300 mixed topics on 8 brokers, worst of 20 seeds: leader spread {worst_leaders}, replica spread {worst_replicas}");
    }
}
