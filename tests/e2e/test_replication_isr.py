"""The leader's ISR management with real clients (issue 9): a follower that stops fetching
leaves the ISR after `replica.lag.time.max.ms` (the leader's AlterPartition, at the same
leader epoch) while acks=all with min.insync.replicas=2 keeps working, and rejoins when it is
back and caught up; `gregor topics --describe` shows the ISR moving. Three `gregor server`
processes on a real ZooKeeper (the fault harness in replication.py), and a 3-broker
`gregor dev-cluster`.
"""

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import gregor_cli, wait_until
from replication import Cluster, NumberedProducer, read_back, verify

LAG_MS = 3000
# Longer than the lag time, so the leader drops the killed follower before its session
# ends (ZooKeeper with tickTime 500 ms allows up to 10 s).
SESSION_MS = 10000


@pytest.fixture
def cluster(tmp_path):
    started = []

    def _make(**kwargs):
        c = Cluster(tmp_path, **kwargs).start()
        started.append(c)
        return c

    yield _make
    for c in started:
        c.stop()


def describe_isrs(bootstrap, topic):
    """{partition: [isr]} from `gregor topics --describe`."""
    out = gregor_cli("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", topic)
    assert out.returncode == 0, out.stderr
    isrs = {}
    for line in out.stdout.splitlines():
        fields = dict(f.split(": ", 1) for f in line.strip().split("\t") if ": " in f)
        if "Partition" in fields:
            isr = fields.get("Isr", "")
            isrs[int(fields["Partition"])] = sorted(int(b) for b in isr.split(",") if b)
    return isrs


def test_a_killed_follower_leaves_the_isr_after_the_lag_time_and_rejoins(cluster):
    c = cluster(overrides=(f"replica.lag.time.max.ms={LAG_MS}", f"zookeeper.session.timeout.ms={SESSION_MS}"))
    controller = c.controller()
    victim, leader = [b for b in sorted(c.brokers) if b != controller]
    topic, partitions = "isr-moves", 2
    # The victim follows in both partitions; neither it nor the controller leads.
    c.create_topic(topic, assignment=[[leader, controller, victim]] * partitions,
                   config={"min.insync.replicas": "2"})
    c.wait_isr(topic, partitions, 3)
    wait_until(lambda: all(len(i) == 3 for i in describe_isrs(c.bootstrap, topic).values()),
               what="describe shows three in-sync replicas")
    epochs = {p: c.state(topic, p)["leader_epoch"] for p in range(partitions)}

    producer = NumberedProducer(c.bootstrap, topic, partitions, rate=200).start()
    try:
        producer.wait_progress(time.time(), what="production before the kill")

        # kill -9 a follower: the leader drops it once it has not caught up for the lag time.
        c.brokers[victim].kill()
        killed = time.time()
        c.wait_isr(topic, partitions, 2, timeout=SESSION_MS / 1000 + 20)
        for p in range(partitions):
            state = c.state(topic, p)
            assert victim not in state["isr"], c.describe(topic, partitions)
            assert state["leader"] == leader
            # The leader's own change (AlterPartition), not an election: same leader epoch.
            assert state["leader_epoch"] == epochs[p], (state, epochs)
        wait_until(lambda: all(victim not in i and len(i) == 2 for i in describe_isrs(c.bootstrap, topic).values()),
                   what="describe shows the ISR without the killed follower")
        # acks=all with min.insync.replicas=2 goes on with two in-sync replicas.
        producer.wait_progress(time.time(), timeout=30, what="production with two in-sync replicas")
        assert not producer.failed, producer.failed[:5]

        # The follower comes back (once its old session is gone), catches up and rejoins.
        wait_until(lambda: victim not in c.registered(), timeout=SESSION_MS / 1000 + 20,
                   what="the killed broker's session ends")
        c.brokers[victim].start()
        c.wait_isr(topic, partitions, 3, timeout=60)
        wait_until(lambda: all(len(i) == 3 for i in describe_isrs(c.bootstrap, topic).values()),
                   what="describe shows three in-sync replicas again")
        producer.wait_progress(time.time(), timeout=30, what="production with three in-sync replicas")
        print(f"ISR 3 -> 2 -> 3; killed {time.time() - killed:.1f} s ago")
    finally:
        producer.stop()
    summary = verify(producer, read_back(c.bootstrap, topic, partitions))
    assert summary["failed"] == 0, producer.failed[:5]
    assert summary["acked"] > 0


def test_dev_cluster_acks_all_with_three_in_sync_replicas(make_cluster):
    g = make_cluster(3, overrides=(f"replica.lag.time.max.ms={LAG_MS}",))
    topic = "isr-dev"
    admin = AdminClient({"bootstrap.servers": g.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3,
                                  config={"min.insync.replicas": "2"})])[topic].result(timeout=30)
    wait_until(lambda: len(describe_isrs(g.bootstrap, topic)) == 3
               and all(len(i) == 3 for i in describe_isrs(g.bootstrap, topic).values()),
               what="three in-sync replicas per partition")
    delivered, errors = [], []
    p = Producer({"bootstrap.servers": g.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for i in range(3000):
        p.produce(topic, value=str(i).encode(), partition=i % 3,
                  on_delivery=lambda err, msg: (errors if err else delivered).append(err or msg.offset()))
        p.poll(0)
    assert p.flush(60) == 0
    assert not errors, errors[:5]
    assert len(delivered) == 3000
    # Every acknowledged record is readable (below the high watermark of all three replicas),
    # and the ISR stayed whole under load (followers keep up within the lag time).
    c = Consumer({"bootstrap.servers": g.bootstrap, "group.id": "isr-dev", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, part, 0) for part in range(3)])
    got = set()
    deadline = time.time() + 30
    while len(got) < 3000 and time.time() < deadline:
        msg = c.poll(0.5)
        if msg is not None and msg.error() is None:
            got.add(int(msg.value()))
    c.close()
    assert got == set(range(3000))
    assert all(len(i) == 3 for i in describe_isrs(g.bootstrap, topic).values())
