"""The 5-broker dev cluster places partitions as the chosen strategy says."""

import signal

from confluent_kafka.admin import AdminClient, NewTopic

from conftest import gregor_cli, wait_until

IDS = [1000, 1001, 1002, 1003, 1004]


def online_assignment(a, topic, count):
    def get():
        t = a.list_topics(topic=topic, timeout=10).topics[topic]
        if t.error is not None or len(t.partitions) != count:
            return None
        if any(p.leader < 0 or sorted(p.isrs) != sorted(p.replicas) for p in t.partitions.values()):
            return None
        return {p.id: list(p.replicas) for p in t.partitions.values()}

    return wait_until(get, timeout=30, what=f"{topic} online")


def test_kafka_strategy_matches_offline_planner(make_cluster):
    g = make_cluster(5, broker_ids=IDS, overrides=["placement.strategy=kafka"])
    a = AdminClient({"bootstrap.servers": g.bootstrap})
    md = a.list_topics(timeout=10)
    assert sorted(md.brokers) == IDS
    a.create_topics([NewTopic("spread", num_partitions=10, replication_factor=3)])["spread"].result(timeout=30)
    placed = online_assignment(a, "spread", 10)
    leaders = [placed[p][0] for p in range(10)]
    assert sorted(leaders) == sorted(IDS * 2), "each broker leads two of ten partitions"
    for p, replicas in placed.items():
        assert len(set(replicas)) == 3
    # The same layout is one of Kafka's: find the start index and shift with the offline planner.
    matches = []
    for start in range(5):
        for shift in range(5):
            r = gregor_cli("assign", "--brokers", ",".join(map(str, IDS)), "--partitions", "10", "--replication-factor", "3",
                           "--strategy", "kafka", "--start-index", str(start), "--replica-shift", str(shift))
            assert r.returncode == 0, r.stderr
            import json
            if {int(k): v for k, v in json.loads(r.stdout)["partitions"].items()} == placed:
                matches.append((start, shift))
    assert matches, f"placement {placed} is not one of Kafka's"


def test_balanced_strategy_spreads_single_partition_topics(make_cluster):
    g = make_cluster(5, broker_ids=IDS)
    a = AdminClient({"bootstrap.servers": g.bootstrap})
    names = [f"single-{i}" for i in range(10)]
    for f in a.create_topics([NewTopic(n, num_partitions=1, replication_factor=1) for n in names]).values():
        f.result(timeout=30)
    leaders = [online_assignment(a, n, 1)[0][0] for n in names]
    counts = [leaders.count(b) for b in IDS]
    assert max(counts) - min(counts) <= 1, counts


def test_rack_aware_placement(make_cluster):
    g = make_cluster(5, broker_ids=IDS, racks=["a", "a", "b", "b", "c"])
    a = AdminClient({"bootstrap.servers": g.bootstrap})
    a.create_topics([NewTopic("racked", num_partitions=6, replication_factor=3)])["racked"].result(timeout=30)
    placed = online_assignment(a, "racked", 6)
    rack = dict(zip(IDS, ["a", "a", "b", "b", "c"]))
    for replicas in placed.values():
        assert len({rack[b] for b in replicas}) == 3, placed


def test_a_whole_cluster_stop_logs_no_error(make_cluster):
    """SIGTERM stops every broker of a dev cluster; partitions left with no replica to lead
    while every broker shuts down are the expected end of a whole-cluster stop, not errors."""
    g = make_cluster(3)
    a = AdminClient({"bootstrap.servers": g.bootstrap})
    topics = [NewTopic("stop-rf1", num_partitions=9, replication_factor=1),
              NewTopic("stop-rf3", num_partitions=5, replication_factor=3)]
    for f in a.create_topics(topics).values():
        f.result(timeout=30)
    online_assignment(a, "stop-rf1", 9)
    online_assignment(a, "stop-rf3", 5)
    assert g.stop(signal.SIGTERM) == 0
    with open(g.log_path, errors="replace") as f:
        errors = [line for line in f if " ERROR " in line]
    assert not errors, "".join(errors[:20])
