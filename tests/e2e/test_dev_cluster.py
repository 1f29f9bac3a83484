"""The 5-broker dev cluster places partitions as the chosen strategy says."""

import re
import signal
import time

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


def test_a_dev_cluster_refuses_a_servers_data_dir_and_meta_properties_are_checked(tmp_path):
    """Issue 24: `gregor server` then `gregor dev-cluster` in the same --data-dir shared the
    store (same cluster id, every old topic) but looked for broker 0's logs in
    <data-dir>/broker-0/logs, and served every old topic as empty. Now the dev cluster refuses
    to start and says where the logs are; every log dir carries Kafka's meta.properties, and a
    broker refuses one that names another broker or another cluster."""
    import subprocess

    from confluent_kafka import Consumer, Producer

    from conftest import GREGOR_BIN, Gregor, free_port

    data = tmp_path / "data"

    def server(*overrides, name="server"):
        port, admin = free_port(), free_port()
        args = ["server", "--data-dir", str(data),
                "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                "--override", f"admin.listener=127.0.0.1:{admin}"]
        for o in overrides:
            args += ["--override", o]
        return Gregor(args, data, [port], admin, tmp_path / f"{name}.log")

    def refused(*args):
        run = subprocess.run([GREGOR_BIN, *args], capture_output=True, text=True, timeout=60)
        assert run.returncode != 0, run.stdout + run.stderr
        return run.stdout + run.stderr

    g = server().start()
    try:
        p = Producer({"bootstrap.servers": g.bootstrap})
        for i in range(19):
            p.produce("orders", f"m{i}".encode())
        assert p.flush(30) == 0
        cluster_id = AdminClient({"bootstrap.servers": g.bootstrap}).list_topics(timeout=10).cluster_id
    finally:
        assert g.stop() == 0
    meta = (data / "logs" / "meta.properties").read_text()
    lines = meta.splitlines()
    assert lines[0] == "#" and re.fullmatch(r"#\w{3} \w{3} \d\d \d\d:\d\d:\d\d UTC \d{4}", lines[1]), meta
    assert sorted(lines[2:]) == sorted(["version=0", "broker.id=0", f"cluster.id={cluster_id}"]), meta

    # The dev cluster in the same directory: broker 0's logs would be data/broker-0/logs.
    out = refused("dev-cluster", "--brokers", "3", "--port", str(free_port()), "--data-dir", str(data),
                  "--override", f"admin.listener=127.0.0.1:{free_port()}")
    assert f"broker 0's log directories ({data / 'broker-0' / 'logs'}) are new" in out, out
    assert str(data / "metadata") in out and f"Partition logs are in {data / 'logs'}" in out, out
    assert "orders-0" in out, out
    assert not (data / "broker-0" / "logs" / "meta.properties").exists()

    # Another broker id on the server's log dir, then another cluster's id in its file.
    out = refused("server", "--data-dir", str(data), "--override", "broker.id=1",
                  "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
                  "--override", f"admin.listener=127.0.0.1:{free_port()}")
    assert "Configured broker.id 1 doesn't match stored broker.id Some(0) in meta.properties" in out, out
    assert str(data / "logs" / "meta.properties") in out, out
    (data / "logs" / "meta.properties").write_text(meta.replace(cluster_id, "AAAAAAAAAAAAAAAAAAAAAA"))
    out = refused("server", "--data-dir", str(data),
                  "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
                  "--override", f"admin.listener=127.0.0.1:{free_port()}")
    assert (f"The Cluster ID {cluster_id} doesn't match stored clusterId Some(AAAAAAAAAAAAAAAAAAAAAA)"
            in out), out
    (data / "logs" / "meta.properties").write_text(meta)

    # The server again: every record is still there.
    g = server(name="server-again").start()
    try:
        c = Consumer({"bootstrap.servers": g.bootstrap, "group.id": "back", "auto.offset.reset": "earliest"})
        c.subscribe(["orders"])
        seen = []
        deadline = time.time() + 30
        while len(seen) < 19 and time.time() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                seen.append(m.value())
        c.close()
        assert len(seen) == 19, seen
    finally:
        g.stop()
