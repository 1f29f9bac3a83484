"""CreateTopics answers once the brokers' metadata caches show every new partition with a
leader, so a describe right after the create works: on the broker that took the request and
on another broker of a dev cluster, on both store backends (issue 10). CreatePartitions and
DeleteTopics wait the same way."""

import os
import re
import subprocess
import time
import uuid

import pytest

from conftest import gregor_cli

ZK = os.environ.get("GREGOR_TEST_ZOOKEEPER")
ROUNDS = 100


def store_overrides(backend):
    if backend == "embedded":
        return []
    if not ZK:
        pytest.fail("GREGOR_TEST_ZOOKEEPER is not set: run the tests through scripts/test.sh")
    return [f"zookeeper.connect={ZK}/gregor-e2e-{uuid.uuid4().hex[:8]}"]


def topics(bootstrap, *args):
    return gregor_cli("topics", "--bootstrap-server", bootstrap, *args)


def led_partitions(describe_stdout):
    """Partition index -> leader, from `--describe` partition lines."""
    led = {}
    for m in re.finditer(r"\tPartition: (\d+)\tLeader: (\S+)\t", describe_stdout):
        led[int(m.group(1))] = m.group(2)
    return led


def create_then_describe(create_on, describe_on, prefix, partitions=3):
    for i in range(ROUNDS):
        topic = f"{prefix}-{i}"
        r = topics(create_on, "--create", "--topic", topic, "--partitions", str(partitions))
        assert r.returncode == 0 and f"Created topic {topic}." in r.stdout, r.stdout + r.stderr
        r = topics(describe_on, "--describe", "--topic", topic)
        assert r.returncode == 0, f"round {i}: describe on {describe_on} right after create: {r.stdout}{r.stderr}"
        led = led_partitions(r.stdout)
        assert sorted(led) == list(range(partitions)), f"round {i}: {r.stdout}"
        assert "none" not in led.values(), f"round {i}: a partition without leader: {r.stdout}"


def controller_and_other(bootstrap):
    """(controller address, address of a broker that is not the controller) of a dev cluster."""
    from confluent_kafka.admin import AdminClient

    # Right after the brokers start, the metadata may answer before a controller is elected
    # (controller id -1, as Kafka) or before every broker registered: ask until both are there.
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while True:
        md = admin.list_topics(timeout=10)
        addr = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
        if md.controller_id in addr and len(addr) > 1:
            break
        assert time.monotonic() < deadline, f"no controller among {addr} after 30 s"
        time.sleep(0.2)
    other = next(i for i in sorted(addr) if i != md.controller_id)
    return addr[md.controller_id], addr[other]


@pytest.mark.parametrize("backend", ["embedded", "zookeeper"])
def test_describe_right_after_create_on_the_same_broker(make_server, backend):
    g = make_server(*store_overrides(backend))
    create_then_describe(g.bootstrap, g.bootstrap, "same")
    # kcat lists the topic right after create, too.
    r = topics(g.bootstrap, "--create", "--topic", "for-kcat", "--partitions", "10")
    assert r.returncode == 0, r.stderr
    listing = subprocess.run(["kcat", "-L", "-b", g.bootstrap, "-t", "for-kcat"], capture_output=True, text=True, timeout=30)
    assert listing.returncode == 0, listing.stderr
    assert 'topic "for-kcat" with 10 partitions' in listing.stdout, listing.stdout
    assert listing.stdout.count("leader 0,") == 10, listing.stdout


@pytest.mark.parametrize("backend", ["embedded", "zookeeper"])
def test_describe_right_after_create_on_another_broker(make_cluster, backend):
    g = make_cluster(3, overrides=store_overrides(backend))
    controller, other = controller_and_other(g.bootstrap)
    # Created through a broker that is not the controller (the admin client finds the
    # controller), described on that broker, and the other way round.
    create_then_describe(other, other, "via-other")
    create_then_describe(controller, other, "on-other", partitions=6)


@pytest.mark.parametrize("backend", ["embedded", "zookeeper"])
def test_partitions_and_deletion_are_visible_when_answered(make_cluster, backend):
    g = make_cluster(3, overrides=store_overrides(backend))
    controller, other = controller_and_other(g.bootstrap)
    for i in range(20):
        topic = f"grow-{i}"
        assert topics(controller, "--create", "--topic", topic, "--partitions", "1").returncode == 0
        r = topics(controller, "--alter", "--topic", topic, "--partitions", "4")
        assert r.returncode == 0, r.stdout + r.stderr
        r = topics(other, "--describe", "--topic", topic)
        assert r.returncode == 0 and sorted(led_partitions(r.stdout)) == [0, 1, 2, 3], f"round {i}: {r.stdout}{r.stderr}"
        r = topics(controller, "--delete", "--topic", topic)
        assert r.returncode == 0, r.stdout + r.stderr
        r = topics(other, "--list")
        assert topic not in r.stdout.split(), f"round {i}: {topic} still listed after its deletion was answered"


def test_one_request_cannot_add_unbounded_partitions(make_server):
    """max.partitions.per.request bounds CreateTopics and CreatePartitions (INVALID_PARTITIONS,
    with a message naming the setting); nothing is created by a refused request."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    g = make_server("max.partitions.per.request=1000")
    a = AdminClient({"bootstrap.servers": g.bootstrap})
    futures = a.create_topics([NewTopic("huge", num_partitions=50_000, replication_factor=1)])
    try:
        futures["huge"].result(timeout=30)
        raise AssertionError("a 50,000-partition topic was accepted")
    except Exception as e:  # confluent_kafka.KafkaException
        err = e.args[0]
        assert err.code() == KafkaError.INVALID_PARTITIONS, err
        assert "max.partitions.per.request (1000)" in err.str(), err.str()
    assert "huge" not in a.list_topics(timeout=10).topics
    a.create_topics([NewTopic("grows", num_partitions=10, replication_factor=1)])["grows"].result(timeout=30)
    try:
        a.create_partitions([NewPartitions("grows", 1011)])["grows"].result(timeout=30)
        raise AssertionError("1,001 new partitions in one request were accepted")
    except Exception as e:
        err = e.args[0]
        assert err.code() == KafkaError.INVALID_PARTITIONS, err
        assert "max.partitions.per.request" in err.str(), err.str()
    assert len(a.list_topics(topic="grows", timeout=10).topics["grows"].partitions) == 10
    a.create_partitions([NewPartitions("grows", 1010)])["grows"].result(timeout=60)
