//! The proposal of `reassign-partitions --generate`: each topic spread over the listed
//! brokers, moving as few replicas as that takes.
//!
//! Per topic, every listed broker ends with floor or ceil of the topic's replicas over the
//! brokers (its share), and leads floor or ceil of its partitions. Balancing the union of
//! the topics is not enough: a topic whose leaders all avoid one broker is the skew users
//! run `--generate` to fix, even when another topic makes the totals look even.
//!
//! Each topic is one min-cost flow (`flow.rs`): partitions send their replicas to brokers,
//! a broker's share is an edge of large negative cost (so every broker gets its floor) plus
//! one more unit, and keeping a replica where it is costs nothing while placing it anywhere
//! else costs one move. The flow's optimum is therefore the fewest moves that balance the
//! topic: exact, where a greedy pass can paint itself into a corner (a replica that must
//! leave an unlisted broker, in a partition that already holds every broker still short of
//! its share). Ties go to the brokers with the fewest replicas of the topics already placed,
//! so the totals stay even too. Rack-aware, each partition also takes as many racks as there
//! are (ranked above moves, below the per-broker balance). Leaders are then chosen the same
//! way among each partition's new replicas (no data moves), keeping the current leader where
//! the balance allows, and put first.

use std::collections::{BTreeMap, BTreeSet};

use model::BrokerId;

use crate::flow::MinCostFlow;
use crate::Assignment;

/// Topic -> its partitions' replica lists.
pub type TopicAssignments = BTreeMap<String, Assignment>;

/// A `--generate` proposal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReassignmentProposal {
    /// The new replica lists of every partition (the first replica is the preferred leader).
    pub assignment: TopicAssignments,
    /// Replicas placed on a broker that does not hold them now.
    pub moves: usize,
}

/// Proposes a reassignment of every partition of `current` over `brokers`; `racks` holds
/// every listed broker's rack, or is empty (not rack-aware). Deterministic.
pub fn propose_reassignment(
    current: &TopicAssignments,
    brokers: &[BrokerId],
    racks: &BTreeMap<BrokerId, String>,
) -> Result<ReassignmentProposal, String> {
    let listed: Vec<BrokerId> = brokers
        .iter()
        .copied()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if listed.is_empty() {
        return Err("The broker list is empty".to_owned());
    }
    if let Some(rf) = current
        .values()
        .flat_map(|t| t.values())
        .map(Vec::len)
        .max()
    {
        if rf > listed.len() {
            return Err(format!(
                "Replication factor: {rf} larger than available brokers: {}.",
                listed.len()
            ));
        }
    }
    // Replicas and leaders per broker over the topics placed so far (ties go to the lowest).
    let mut replicas_so_far: BTreeMap<BrokerId, usize> = listed.iter().map(|&b| (b, 0)).collect();
    let mut leaders_so_far = replicas_so_far.clone();
    let mut assignment = TopicAssignments::new();
    let mut moves = 0;
    for (topic, partitions) in current {
        let sets = place_replicas(partitions, &listed, racks, &replicas_so_far);
        let leaders = choose_leaders(partitions, &sets, &listed, &leaders_so_far);
        let mut placed = Assignment::new();
        for (partition, old) in partitions {
            let new = &sets[partition];
            moves += new.iter().filter(|b| !old.contains(b)).count();
            let list = order(old, new, leaders[partition]);
            for b in &list {
                *replicas_so_far.entry(*b).or_default() += 1;
            }
            *leaders_so_far.entry(list[0]).or_default() += 1;
            placed.insert(*partition, list);
        }
        assignment.insert(topic.clone(), placed);
    }
    Ok(ReassignmentProposal { assignment, moves })
}

/// Each broker's rank by `load` (fewest first, then lowest id): the cost of giving it the
/// unit above its floor, so that the brokers loaded least by earlier topics take the extras.
fn ranks(listed: &[BrokerId], load: &BTreeMap<BrokerId, usize>) -> BTreeMap<BrokerId, i128> {
    let mut by_load: Vec<BrokerId> = listed.to_vec();
    by_load.sort_by_key(|b| (load.get(b).copied().unwrap_or(0), *b));
    by_load
        .into_iter()
        .enumerate()
        .map(|(i, b)| (b, i as i128))
        .collect()
}

/// The new replica set of each partition of one topic (see the module docs).
fn place_replicas(
    partitions: &Assignment,
    listed: &[BrokerId],
    racks: &BTreeMap<BrokerId, String>,
    load: &BTreeMap<BrokerId, usize>,
) -> BTreeMap<i32, Vec<BrokerId>> {
    let n = listed.len();
    let total: usize = partitions.values().map(Vec::len).sum();
    let floor = total / n;
    let extra = total % n;
    let rack_names: Vec<&String> = racks
        .values()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let rack_count = rack_names.len();
    // Costs, each rank of goal above everything below it can add up to.
    let tie_total = (n * n) as i128;
    let move_cost = tie_total + 1;
    let rack_bonus = move_cost * (total as i128 + 1) + tie_total + 1;
    let balance = (rack_bonus + move_cost) * (total as i128 + 1) * 2 + tie_total + 1;
    let rank = ranks(listed, load);

    // Nodes: source, sink, brokers, partitions, (partition, rack) pairs.
    let source = 0;
    let sink = 1;
    let broker_node: BTreeMap<BrokerId, usize> = listed
        .iter()
        .enumerate()
        .map(|(i, &b)| (b, 2 + i))
        .collect();
    let mut next_node = 2 + n;
    let mut slots: Vec<(i32, usize, usize)> = Vec::new(); // (partition, edge, broker index)
    let mut edges_to_add: Vec<(usize, usize, i64, i128)> = Vec::new();
    for (&partition, old) in partitions {
        let p = next_node;
        next_node += 1;
        edges_to_add.push((source, p, old.len() as i64, 0));
        let cost_on = |b: BrokerId| if old.contains(&b) { 0 } else { move_cost };
        if rack_count == 0 {
            for (i, &b) in listed.iter().enumerate() {
                slots.push((partition, edges_to_add.len(), i));
                edges_to_add.push((p, broker_node[&b], 1, cost_on(b)));
            }
            continue;
        }
        // Rack-aware: at most one replica per rack while there are racks to spare, else an
        // even share per rack with a bonus for the first replica on each.
        let rf = old.len();
        let per_rack = if rf <= rack_count {
            1
        } else {
            rf.div_ceil(rack_count)
        };
        for rack in &rack_names {
            let r = next_node;
            next_node += 1;
            if rf <= rack_count {
                edges_to_add.push((p, r, 1, 0));
            } else {
                edges_to_add.push((p, r, 1, -rack_bonus));
                edges_to_add.push((p, r, per_rack as i64 - 1, 0));
            }
            for (i, &b) in listed.iter().enumerate() {
                if racks.get(&b) == Some(*rack) {
                    slots.push((partition, edges_to_add.len(), i));
                    edges_to_add.push((r, broker_node[&b], 1, cost_on(b)));
                }
            }
        }
    }
    for &b in listed {
        let node = broker_node[&b];
        if floor > 0 {
            edges_to_add.push((node, sink, floor as i64, -balance));
        }
        if extra > 0 {
            edges_to_add.push((node, sink, 1, rank[&b]));
        }
        // Past its share only when nothing else fits (racks can force it).
        edges_to_add.push((node, sink, total as i64, balance));
    }
    let mut flow = MinCostFlow::new(next_node);
    let ids: Vec<usize> = edges_to_add
        .iter()
        .map(|&(from, to, cap, cost)| flow.add_edge(from, to, cap, cost))
        .collect();
    flow.run(source, sink, total as i64);
    let mut sets: BTreeMap<i32, Vec<BrokerId>> =
        partitions.keys().map(|&p| (p, Vec::new())).collect();
    for (partition, edge, broker) in slots {
        if flow.flow_on(ids[edge]) > 0 {
            sets.get_mut(&partition)
                .expect("every partition has a set")
                .push(listed[broker]);
        }
    }
    sets
}

/// The leader of each partition among its new replicas (see the module docs).
fn choose_leaders(
    partitions: &Assignment,
    sets: &BTreeMap<i32, Vec<BrokerId>>,
    listed: &[BrokerId],
    load: &BTreeMap<BrokerId, usize>,
) -> BTreeMap<i32, BrokerId> {
    let n = listed.len();
    let total = partitions.len();
    let floor = total / n;
    let extra = total % n;
    let tie_total = (n * n) as i128;
    let change_cost = tie_total + 1;
    let balance = change_cost * (total as i128 + 1) * 2 + tie_total + 1;
    let rank = ranks(listed, load);
    let source = 0;
    let sink = 1;
    let broker_node: BTreeMap<BrokerId, usize> = listed
        .iter()
        .enumerate()
        .map(|(i, &b)| (b, 2 + i))
        .collect();
    let mut flow = MinCostFlow::new(2 + n + total);
    let mut choices: Vec<(i32, BrokerId, usize)> = Vec::new();
    for (i, (&partition, old)) in partitions.iter().enumerate() {
        let p = 2 + n + i;
        flow.add_edge(source, p, 1, 0);
        for &b in &sets[&partition] {
            let cost = if old.first() == Some(&b) {
                0
            } else {
                change_cost
            };
            choices.push((partition, b, flow.add_edge(p, broker_node[&b], 1, cost)));
        }
    }
    for &b in listed {
        let node = broker_node[&b];
        if floor > 0 {
            flow.add_edge(node, sink, floor as i64, -balance);
        }
        if extra > 0 {
            flow.add_edge(node, sink, 1, rank[&b]);
        }
        flow.add_edge(node, sink, total as i64, balance);
    }
    flow.run(source, sink, total as i64);
    let mut leaders = BTreeMap::new();
    for (partition, b, edge) in choices {
        if flow.flow_on(edge) > 0 {
            leaders.insert(partition, b);
        }
    }
    leaders
}

/// The new replica list: the kept replicas where they were, the new ones in the places of the
/// replicas they replace (lowest id first), and the leader swapped to the front.
fn order(old: &[BrokerId], new: &[BrokerId], leader: BrokerId) -> Vec<BrokerId> {
    let mut incoming = new
        .iter()
        .copied()
        .filter(|b| !old.contains(b))
        .collect::<Vec<_>>();
    incoming.sort_unstable();
    let mut incoming = incoming.into_iter();
    let mut list: Vec<BrokerId> = old
        .iter()
        .filter_map(|b| {
            if new.contains(b) {
                Some(*b)
            } else {
                incoming.next()
            }
        })
        .collect();
    list.extend(incoming);
    if let Some(at) = list.iter().position(|&b| b == leader) {
        list.swap(0, at);
    }
    list
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn topic(lists: &[&[BrokerId]]) -> Assignment {
        lists
            .iter()
            .enumerate()
            .map(|(p, r)| (p as i32, r.to_vec()))
            .collect()
    }

    /// (replicas, leaders) per listed broker in one topic.
    fn counts(a: &Assignment, listed: &[BrokerId]) -> (Vec<usize>, Vec<usize>) {
        let replicas = listed
            .iter()
            .map(|b| a.values().filter(|r| r.contains(b)).count())
            .collect();
        let leaders = listed
            .iter()
            .map(|b| a.values().filter(|r| r.first() == Some(b)).count())
            .collect();
        (replicas, leaders)
    }

    fn within_one(v: &[usize]) -> bool {
        v.iter().max().unwrap() - v.iter().min().unwrap() <= 1
    }

    fn topic_moves(old: &Assignment, new: &Assignment) -> usize {
        old.iter()
            .map(|(p, r)| new[p].iter().filter(|b| !r.contains(b)).count())
            .sum()
    }

    /// The fewest moves that balance `old` over `listed`, by trying every replica set of every
    /// partition (tiny topics only).
    fn brute_force_moves(old: &Assignment, listed: &[BrokerId]) -> usize {
        fn subsets(listed: &[BrokerId], k: usize) -> Vec<Vec<BrokerId>> {
            if k == 0 {
                return vec![Vec::new()];
            }
            let mut out = Vec::new();
            for (i, &b) in listed.iter().enumerate() {
                for mut rest in subsets(&listed[i + 1..], k - 1) {
                    rest.push(b);
                    out.push(rest);
                }
            }
            out
        }
        let options: Vec<(Vec<BrokerId>, Vec<Vec<BrokerId>>)> = old
            .values()
            .map(|r| (r.clone(), subsets(listed, r.len())))
            .collect();
        let total: usize = old.values().map(Vec::len).sum();
        let floor = total / listed.len();
        let mut best = usize::MAX;
        let mut choice = vec![0usize; options.len()];
        loop {
            let mut count: BTreeMap<BrokerId, usize> = BTreeMap::new();
            let mut moves = 0;
            for (i, (r, sets)) in options.iter().enumerate() {
                for b in &sets[choice[i]] {
                    *count.entry(*b).or_default() += 1;
                    moves += usize::from(!r.contains(b));
                }
            }
            if listed.iter().all(|b| {
                let c = count.get(b).copied().unwrap_or(0);
                c == floor || c == floor + 1
            }) {
                best = best.min(moves);
            }
            // Next combination.
            let mut i = 0;
            while i < choice.len() {
                choice[i] += 1;
                if choice[i] < options[i].1.len() {
                    break;
                }
                choice[i] = 0;
                i += 1;
            }
            if i == choice.len() {
                return best;
            }
        }
    }

    /// The cluster: `--broker-list 0,1,2,3` for a 6-partition RF-3 topic and an
    /// 8-partition RF-1 topic, both on brokers 0-2. The old generator balanced the union: the
    /// first topic got replicas {0: 3, 1: 4, 2: 5, 3: 6} and leaders {0: 0, 1: 1, 2: 2, 3: 3},
    /// the second nothing on broker 3.
    #[test]
    fn each_topic_is_balanced_on_its_own() {
        let rf3 = topic(&[
            &[0, 1, 2],
            &[1, 2, 0],
            &[2, 0, 1],
            &[0, 2, 1],
            &[1, 0, 2],
            &[2, 1, 0],
        ]);
        let rf1 = topic(&[&[0], &[1], &[2], &[0], &[1], &[2], &[0], &[1]]);
        let current = TopicAssignments::from([("a".to_owned(), rf3), ("b".to_owned(), rf1)]);
        let listed = [0, 1, 2, 3];
        let p = propose_reassignment(&current, &listed, &BTreeMap::new()).unwrap();
        let (replicas, leaders) = counts(&p.assignment["a"], &listed);
        assert!(
            within_one(&replicas) && replicas.iter().sum::<usize>() == 18,
            "{replicas:?}"
        );
        assert!(within_one(&leaders), "{leaders:?}");
        let (replicas, leaders) = counts(&p.assignment["b"], &listed);
        assert_eq!(replicas, [2, 2, 2, 2]);
        assert_eq!(leaders, [2, 2, 2, 2]);
        // 4 of topic a's replicas go to broker 3 (its floor), 2 of topic b's: nothing more.
        assert_eq!(topic_moves(&current["a"], &p.assignment["a"]), 4);
        assert_eq!(topic_moves(&current["b"], &p.assignment["b"]), 2);
        assert_eq!(p.moves, 6);
        // The totals are even too.
        let total: Vec<usize> = listed
            .iter()
            .map(|b| {
                p.assignment
                    .values()
                    .flat_map(|t| t.values())
                    .filter(|r| r.contains(b))
                    .count()
            })
            .collect();
        assert!(within_one(&total), "{total:?}");
        // Run again on the proposal: nothing moves, nothing is reordered.
        let again = propose_reassignment(&p.assignment, &listed, &BTreeMap::new()).unwrap();
        assert_eq!(again.moves, 0);
        assert_eq!(again.assignment, p.assignment);
    }

    /// A replica on an unlisted broker whose partition already holds the only broker short of
    /// its share: the fewest moves go through a third broker.
    #[test]
    fn a_replica_leaving_an_unlisted_broker_can_go_the_long_way() {
        // Listed {0, 1, 2}; 6 replicas, 2 each. Broker 9 leaves; kept: 0: 2, 1: 1, 2: 2.
        // Broker 1 is short, but partition 0 already has it: 9's replica goes to 0 or 2 and
        // one of theirs moves to 1 (2 moves; no plan does it in 1).
        let old = topic(&[&[9, 1], &[0, 2], &[0, 2]]);
        let current = TopicAssignments::from([("t".to_owned(), old.clone())]);
        let p = propose_reassignment(&current, &[0, 1, 2], &BTreeMap::new()).unwrap();
        assert_eq!(brute_force_moves(&old, &[0, 1, 2]), 2);
        assert_eq!(p.moves, 2, "{:?}", p.assignment);
        let (replicas, leaders) = counts(&p.assignment["t"], &[0, 1, 2]);
        assert_eq!(replicas, [2, 2, 2]);
        assert_eq!(leaders, [1, 1, 1]);
    }

    #[test]
    fn kept_replicas_keep_their_places_and_the_current_leader_stays_where_it_can() {
        // Drain broker 3 from [3, 0, 1]: the new replica takes 3's place, and 0 leads (the
        // only partition, so any broker balances; 0 was not leading either way).
        assert_eq!(order(&[3, 0, 1], &[0, 1, 2], 0), [0, 2, 1]);
        assert_eq!(order(&[0, 3, 1], &[0, 1, 2], 0), [0, 2, 1]);
        assert_eq!(order(&[0, 1, 2], &[0, 1, 2], 2), [2, 1, 0]);
        let current = TopicAssignments::from([("t".to_owned(), topic(&[&[1, 2], &[2, 1]]))]);
        let p = propose_reassignment(&current, &[1, 2], &BTreeMap::new()).unwrap();
        assert_eq!(p.assignment, current, "balanced already: untouched");
        assert_eq!(
            propose_reassignment(&current, &[1], &BTreeMap::new()).unwrap_err(),
            "Replication factor: 2 larger than available brokers: 1."
        );
        assert_eq!(
            propose_reassignment(&current, &[], &BTreeMap::new()).unwrap_err(),
            "The broker list is empty"
        );
    }

    /// Random clusters: 1-3 topics of 1-12 partitions, each topic one replication factor, on
    /// brokers 0-5 (some not listed), listed brokers 1-6 of 0-6.
    fn random_case(seed: u64) -> (TopicAssignments, Vec<BrokerId>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut all: Vec<BrokerId> = (0..7).collect();
        all.shuffle(&mut rng);
        let listed_count = rng.random_range(1..=6);
        let mut listed: Vec<BrokerId> = all[..listed_count].to_vec();
        listed.sort_unstable();
        let hosts: Vec<BrokerId> = (0..rng.random_range(1..=6)).collect();
        let max_rf = listed.len().min(hosts.len()).min(3);
        let mut current = TopicAssignments::new();
        for t in 0..rng.random_range(1..=3) {
            let rf = rng.random_range(1..=max_rf);
            let partitions = rng.random_range(1..=12);
            let mut a = Assignment::new();
            for p in 0..partitions {
                let mut h = hosts.clone();
                h.shuffle(&mut rng);
                a.insert(p, h[..rf].to_vec());
            }
            current.insert(format!("t{t}"), a);
        }
        (current, listed)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Every topic within one per broker for replicas and for leaders, every replica on a
        /// listed broker and none twice in a partition, the fewest moves (the lower bound
        /// when every replica is on a listed broker; brute force for tiny topics), and a
        /// proposal that proposes nothing more when run again.
        #[test]
        fn every_topic_is_balanced_with_the_fewest_moves(seed in any::<u64>()) {
            let (current, listed) = random_case(seed);
            let p = propose_reassignment(&current, &listed, &BTreeMap::new()).unwrap();
            let mut moves = 0;
            for (name, old) in &current {
                let new = &p.assignment[name];
                prop_assert_eq!(old.keys().collect::<Vec<_>>(), new.keys().collect::<Vec<_>>());
                for (part, r) in new {
                    prop_assert_eq!(r.len(), old[part].len());
                    prop_assert!(r.iter().all(|b| listed.contains(b)), "{:?}", r);
                    prop_assert_eq!(r.iter().collect::<BTreeSet<_>>().len(), r.len());
                }
                let (replicas, leaders) = counts(new, &listed);
                prop_assert!(within_one(&replicas), "{} replicas {:?} of {:?}", name, replicas, new);
                prop_assert!(within_one(&leaders), "{} leaders {:?} of {:?}", name, leaders, new);
                let m = topic_moves(old, new);
                moves += m;
                let on_listed = old.values().flatten().all(|b| listed.contains(b));
                if on_listed {
                    // Lower bound: keep min(current, share) on each broker, the larger shares
                    // on the brokers holding most. Reachable: one move at a time from a broker
                    // over its share to one under it (the first is in more partitions).
                    let total: usize = old.values().map(Vec::len).sum();
                    let (floor, extra) = (total / listed.len(), total % listed.len());
                    let mut have: Vec<usize> = counts(old, &listed).0;
                    have.sort_unstable_by(|a, b| b.cmp(a));
                    let kept: usize = have
                        .iter()
                        .enumerate()
                        .map(|(i, &c)| c.min(floor + usize::from(i < extra)))
                        .sum();
                    prop_assert_eq!(m, total - kept, "{}: {:?} -> {:?}", name, old, new);
                }
                if old.len() <= 4 && listed.len() <= 4 {
                    prop_assert_eq!(m, brute_force_moves(old, &listed), "{}: {:?} -> {:?}", name, old, new);
                }
            }
            prop_assert_eq!(p.moves, moves);
            let again = propose_reassignment(&p.assignment, &listed, &BTreeMap::new()).unwrap();
            prop_assert_eq!(again.moves, 0);
        }
    }
}
