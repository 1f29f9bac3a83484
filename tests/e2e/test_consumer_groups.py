"""Consumer groups with real clients against `gregor server`: range assignment with the
classic protocol (librdkafka, kafka-python) and the KIP-848 consumer protocol (librdkafka
`group.protocol=consumer`), rebalances when a member leaves, committed offsets that survive
a restart of every member and of the broker, no loss or duplicate across a rebalance,
`gregor consumer-groups`, and offsets dropped with their topic."""

import json
import multiprocessing
import os
import queue
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import gregor_cli, wait_until

GROUP_OVERRIDES = ("group.initial.rebalance.delay.ms=0",)


@pytest.fixture
def broker(make_server):
    return make_server(*GROUP_OVERRIDES)


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap, name, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(timeout=30)

    def leaders_known():
        md = admin.list_topics(name, timeout=10).topics.get(name)
        return md is not None and md.error is None and len(md.partitions) == partitions and all(
            p.leader >= 0 for p in md.partitions.values()
        )

    wait_until(leaders_known, what=f"{name} has leaders")
    return admin


def produce(bootstrap, topic, count, partitions, start=0):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        p.produce(topic, value=f"m{i}".encode(), partition=i % partitions)
    assert p.flush(30) == 0


def rdkafka_consumer(bootstrap, group, protocol, **extra):
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **extra,
    }
    if protocol == "consumer":
        config.update({"group.protocol": "consumer", "group.remote.assignor": "range"})
    else:
        config.update({"partition.assignment.strategy": "range", "session.timeout.ms": 6000,
                       "heartbeat.interval.ms": 500})
    return Consumer(config)


def assignments(consumers):
    return sorted(sorted(tp.partition for tp in c.assignment()) for c in consumers)


def poll_until(consumers, predicate, timeout=60, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        for c in consumers:
            c.poll(0.05)
        if predicate():
            return
    raise AssertionError(f"timed out waiting for {what}: {assignments(consumers)}")


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_three_librdkafka_consumers_get_range_then_rebalance_when_one_leaves(broker, protocol):
    topic, group = unique("range"), unique("g")
    create_topic(broker.bootstrap, topic, 4)
    consumers = [rdkafka_consumer(broker.bootstrap, group, protocol) for _ in range(3)]
    for c in consumers:
        c.subscribe([topic])
    poll_until(consumers, lambda: assignments(consumers) == [[0, 1], [2], [3]],
               what="range assignment [P0,P1],[P2],[P3]")
    # The leaving member's partitions move to the others, still by range.
    leaving = next(c for c in consumers if len(c.assignment()) == 1)
    leaving.close()
    rest = [c for c in consumers if c is not leaving]
    poll_until(rest, lambda: assignments(rest) == [[0, 1], [2, 3]], what="rebalance to two members")
    for c in rest:
        c.close()


def kafka_python_member(bootstrap, topic, group, index, reports, stop):
    """One kafka-python group member in its own process (two consumers in one process share
    kafka-python's IO thread, which can stall a rebalance): reports (index, assignment,
    values) after every poll, commits and leaves when `stop` is set."""
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                      auto_offset_reset="earliest", enable_auto_commit=False,
                      partition_assignment_strategy=[RangePartitionAssignor],
                      session_timeout_ms=6000, heartbeat_interval_ms=500)
    while not stop.is_set():
        values = [r.value for records in c.poll(timeout_ms=100).values() for r in records]
        reports.put((index, sorted(tp.partition for tp in c.assignment()), values))
    c.commit()
    c.close()


def test_kafka_python_consumers_share_a_group_by_range(broker):
    topic, group = unique("kp"), unique("g")
    create_topic(broker.bootstrap, topic, 4)
    produce(broker.bootstrap, topic, 40, 4)
    ctx = multiprocessing.get_context("spawn")
    reports, stop = ctx.Queue(), ctx.Event()
    members = [ctx.Process(target=kafka_python_member, args=(broker.bootstrap, topic, group, i, reports, stop))
               for i in range(2)]
    parts, seen = {}, set()

    def drain_until(done, what):
        deadline = time.time() + 60
        while not done():
            assert time.time() < deadline, f"{what}: assignments {parts}, {len(seen)} of 40 messages"
            try:
                index, assignment, values = reports.get(timeout=1)
            except queue.Empty:
                continue
            parts[index] = assignment
            seen.update(values)

    try:
        # The first member owns everything, then the second joins and range splits the topic.
        members[0].start()
        drain_until(lambda: parts.get(0) == [0, 1, 2, 3], "first member owns every partition")
        members[1].start()
        drain_until(lambda: sorted(parts.values()) == [[0, 1], [2, 3]] and len(seen) == 40,
                    "range assignment [P0,P1],[P2,P3] and every message")
    finally:
        stop.set()
        # Keep draining, or a member blocks on exit flushing its reports into a full pipe.
        deadline = time.time() + 30
        while any(m.is_alive() for m in members) and time.time() < deadline:
            try:
                reports.get(timeout=0.2)
            except queue.Empty:
                pass
        for m in members:
            if m.pid is not None:
                m.join(timeout=5)
    assert sorted(seen) == sorted(f"m{i}".encode() for i in range(40))
    # The commits are visible to a librdkafka client of the same group.
    probe = rdkafka_consumer(broker.bootstrap, group, "classic")
    committed = probe.committed([TopicPartition(topic, p) for p in range(4)], timeout=10)
    assert [tp.offset for tp in committed] == [10, 10, 10, 10]
    probe.close()


def consume_committing(consumer, out, until_count, timeout=60):
    """Polls, records each message, then commits it synchronously (commit after processing)."""
    deadline = time.time() + timeout
    while len(out) < until_count and time.time() < deadline:
        m = consumer.poll(0.1)
        if m is None or m.error():
            continue
        out.append((m.partition(), m.offset(), m.value()))
        consumer.commit(message=m, asynchronous=False)


def test_group_resumes_from_committed_offsets_after_members_and_broker_restart(broker):
    topic, group = unique("resume"), unique("g")
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, 10, 2)
    c = rdkafka_consumer(broker.bootstrap, group, "classic")
    c.subscribe([topic])
    first = []
    consume_committing(c, first, 10)
    assert len(first) == 10
    c.close()

    broker.restart()
    produce(broker.bootstrap, topic, 6, 2, start=10)
    c = rdkafka_consumer(broker.bootstrap, group, "classic")
    c.subscribe([topic])
    second = []
    consume_committing(c, second, 6, timeout=60)
    # Nothing more arrives: the group resumed exactly after what it had committed.
    extra_deadline = time.time() + 2
    while time.time() < extra_deadline:
        m = c.poll(0.1)
        if m is not None and not m.error():
            second.append((m.partition(), m.offset(), m.value()))
    c.close()
    assert sorted(v for _, _, v in second) == sorted(f"m{i}".encode() for i in range(10, 16))


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_no_message_lost_or_consumed_twice_across_a_rebalance(broker, protocol):
    topic, group = unique("exactly"), unique("g")
    total = 1000
    create_topic(broker.bootstrap, topic, 4)
    produce(broker.bootstrap, topic, total, 4)
    a = rdkafka_consumer(broker.bootstrap, group, protocol)
    a.subscribe([topic])
    seen = []
    consume_committing(a, seen, 100)
    assert len(seen) >= 100
    # A second member joins mid-stream; both keep committing after each message, and
    # processing is slow enough (a few ms a message) that partitions move with work left.
    b = rdkafka_consumer(broker.bootstrap, group, protocol)
    b.subscribe([topic])
    by_b = 0
    deadline = time.time() + 120
    while len(seen) < total and time.time() < deadline:
        for c in (a, b):
            m = c.poll(0.05)
            if m is None or m.error():
                continue
            time.sleep(0.003)
            seen.append((m.partition(), m.offset(), m.value()))
            c.commit(message=m, asynchronous=False)
            by_b += c is b
    a.close()
    b.close()
    values = [v for _, _, v in seen]
    assert len(values) == len(set(values)), "a message was consumed twice"
    assert sorted(values) == sorted(f"m{i}".encode() for i in range(total)), "a message was lost"
    assert by_b > 0, "the rebalance gave the second member nothing to do"


def describe_rows(bootstrap, group):
    out = gregor_cli("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group)
    assert out.returncode == 0, out.stderr
    lines = [l for l in out.stdout.splitlines() if l.strip()]
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                                "CONSUMER-ID", "HOST", "CLIENT-ID"], out.stdout
    return {int(cols[2]): cols for cols in (l.split() for l in lines[1:])}, out


def test_cli_describes_the_lag_of_a_live_group_lists_resets_and_deletes(broker):
    topic, group = unique("lag"), unique("g")
    create_topic(broker.bootstrap, topic, 2)
    produce(broker.bootstrap, topic, 10, 2)  # 5 per partition
    c = rdkafka_consumer(broker.bootstrap, group, "classic", **{"client.id": "lag-client"})
    c.subscribe([topic])
    poll_until([c], lambda: len(c.assignment()) == 2, what="assignment")
    c.commit(offsets=[TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 5)], asynchronous=False)

    rows, _ = describe_rows(broker.bootstrap, group)
    assert rows[0][:6] == [group, topic, "0", "2", "5", "3"]
    assert rows[1][:6] == [group, topic, "1", "5", "5", "0"]
    assert rows[0][6].startswith("lag-client-") and rows[0][7] == "/127.0.0.1" and rows[0][8] == "lag-client"

    listed = gregor_cli("consumer-groups", "--bootstrap-server", broker.bootstrap, "--list")
    assert group in listed.stdout.split()

    # A live group cannot be reset.
    refused = gregor_cli("consumer-groups", "--bootstrap-server", broker.bootstrap, "--reset-offsets",
                         "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert "can only be reset if the group" in refused.stdout + refused.stderr
    c.close()

    rows, out = describe_rows(broker.bootstrap, group)
    assert f"Consumer group '{group}' has no active members." in out.stderr
    assert rows[0][3:] == ["2", "5", "3", "-", "-", "-"]

    dry = gregor_cli("consumer-groups", "--bootstrap-server", broker.bootstrap, "--reset-offsets",
                     "--group", group, "--topic", f"{topic}:1", "--to-offset", "1", "--dry-run")
    assert dry.returncode == 0, dry.stdout
    assert dry.stdout.splitlines()[-1].split() == [group, topic, "1", "1"]
    rows, _ = describe_rows(broker.bootstrap, group)
    assert rows[1][3] == "5", "a dry run changes nothing"

    reset = gregor_cli("consumer-groups", "--bootstrap-server", broker.bootstrap, "--reset-offsets",
                       "--group", group, "--topic", topic, "--to-earliest", "--execute")
    assert reset.returncode == 0, reset.stdout
    rows, _ = describe_rows(broker.bootstrap, group)
    assert [rows[0][3], rows[1][3]] == ["0", "0"]

    deleted = gregor_cli("consumer-groups", "--bootstrap-server", broker.bootstrap, "--delete", "--group", group)
    assert deleted.stdout.strip() == f"Deletion of requested consumer groups ('{group}') was successful."
    # The member and owner znodes are informational, removed in the background.
    wait_until(lambda: broker.meta(f"/consumers/{group}") is None, timeout=15, what="/consumers znodes removed")


def test_offsets_of_a_deleted_topic_are_dropped(broker):
    topic, group = unique("gone"), unique("g")
    admin = create_topic(broker.bootstrap, topic, 2)
    c = rdkafka_consumer(broker.bootstrap, group, "classic")
    c.commit(offsets=[TopicPartition(topic, 0, 1), TopicPartition(topic, 1, 1)], asynchronous=False)
    assert [tp.offset for tp in c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)] == [1, 1]
    admin.delete_topics([topic])[topic].result(timeout=30)
    # Every coordinator drops the deleted topic's offsets (tombstones in __consumer_offsets),
    # so they stay gone after a restart too.
    wait_until(lambda: c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset < 0, timeout=30,
               what="offsets of the deleted topic dropped")
    c.close()
    broker.restart()
    probe = rdkafka_consumer(broker.bootstrap, group, "classic")
    assert probe.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=30)[1].offset < 0
    probe.close()


def test_offsets_members_and_owners_in_zookeeper(make_server):
    zk_connect = os.environ.get("GREGOR_TEST_ZOOKEEPER")
    if not zk_connect:
        pytest.skip("GREGOR_TEST_ZOOKEEPER is not set (scripts/zk.sh starts a server)")
    from kazoo.client import KazooClient

    chroot = f"/gregor-groups-{uuid.uuid4().hex[:8]}"
    broker = make_server(f"zookeeper.connect={zk_connect}{chroot}", *GROUP_OVERRIDES)
    zk = KazooClient(hosts=zk_connect + chroot)
    zk.start(timeout=10)
    try:
        topic, group = unique("zk"), unique("g")
        create_topic(broker.bootstrap, topic, 2)
        c = rdkafka_consumer(broker.bootstrap, group, "classic")
        c.subscribe([topic])
        poll_until([c], lambda: len(c.assignment()) == 2, what="assignment")
        c.commit(offsets=[TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 7)], asynchronous=False)
        # Offsets live in __consumer_offsets (issue 25); the /consumers/<g>/offsets mirror of
        # the seed's layout is not written yet. Members and owners are.
        members = wait_until(lambda: zk.get_children(f"/consumers/{group}/ids"), what="member znode")
        data, stat = zk.get(f"/consumers/{group}/ids/{members[0]}")
        assert stat.ephemeralOwner != 0
        assert json.loads(data)["subscription"] == {topic: 1}
        owners = wait_until(lambda: zk.exists(f"/consumers/{group}/owners/{topic}/1")
                            and zk.get(f"/consumers/{group}/owners/{topic}/1")[0], what="owner znode")
        assert owners.decode() == members[0]
        c.close()

        broker.restart()
        probe = rdkafka_consumer(broker.bootstrap, group, "classic")
        committed = probe.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=30)
        assert [tp.offset for tp in committed] == [5, 7]
        probe.close()
    finally:
        zk.stop()


def test_any_string_is_a_group_id_and_stays_under_consumers(make_server):
    """Issue 14: group ids are any string in Kafka. Ids with '/', '..' or a path in them form
    groups, commit and read back their offsets (across a restart), list and describe by their
    own name, and nothing is written outside /consumers."""
    server = make_server(*GROUP_OVERRIDES)
    topic = unique("odd")
    create_topic(server.bootstrap, topic, 1)
    produce(server.bootstrap, topic, 5, 1)
    groups = ["a/b", "..", "a/../../brokers", "100% odd id"]
    for i, group in enumerate(groups):
        c = rdkafka_consumer(server.bootstrap, group, "classic")
        c.subscribe([topic])
        got = 0
        deadline = time.time() + 30
        while got < i + 1 and time.time() < deadline:
            m = c.poll(1)
            if m is not None and not m.error():
                got += 1
                last = m
        assert got == i + 1, group
        c.commit(message=last, asynchronous=False)
        committed = c.committed([TopicPartition(topic, 0)], timeout=10)
        assert committed[0].offset == i + 1, (group, committed)
        c.close()
    server.restart()

    def listed_all():
        listed = gregor_cli("consumer-groups", "--bootstrap-server", server.bootstrap, "--list")
        assert listed.returncode == 0, listed.stderr
        return set(groups) <= set(listed.stdout.splitlines())

    # Right after the restart the groups' offsets partition may not be led (and loaded) yet.
    wait_until(listed_all, timeout=30, what="every group listed after the restart")
    for i, group in enumerate(groups):
        out = gregor_cli("consumer-groups", "--bootstrap-server", server.bootstrap, "--describe", "--group", group)
        assert out.returncode == 0 and topic in out.stdout, (group, out.stdout, out.stderr)
        probe = rdkafka_consumer(server.bootstrap, group, "classic")
        committed = probe.committed([TopicPartition(topic, 0)], timeout=10)
        probe.close()
        assert committed[0].offset == i + 1, (group, committed)
    tree = gregor_cli("meta", "ls", "/brokers", "--admin", f"http://127.0.0.1:{server.admin_port}")
    assert tree.returncode == 0, tree.stderr
    assert "offsets" not in tree.stdout.split(), tree.stdout
