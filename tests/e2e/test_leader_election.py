"""Preferred and unclean leader elections and replication throttles (issue 11) on a real
3-broker cluster on a real ZooKeeper: `gregor leader-election` (kafka-leader-election.sh), the legacy
`/admin/preferred_replica_election` znode written with kazoo, and the controller's own
leader-imbalance check (`auto.leader.rebalance.enable`); and the follower throttle
(`follower.replication.throttled.rate`) measured on a catching-up follower's log. Leaders are
read back through Metadata (librdkafka's admin client)."""

import json
import os
import time

import pytest

from conftest import gregor_cli, wait_until
from test_replication_faults import cluster  # noqa: F401 (fixture)

# Preferred leader first: every broker prefers one partition.
ASSIGNMENT = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]


def metadata_leaders(c, topic):
    md = c.admin().list_topics(topic, timeout=30).topics[topic]
    return {p: md.partitions[p].leader for p in md.partitions}


def preferred(assignment):
    return {p: replicas[0] for p, replicas in enumerate(assignment)}


def restart(c, broker, topic, partitions):
    """SIGTERM (its leaderships move away), start again, wait until it is back in every ISR."""
    c.brokers[broker].terminate()
    wait_until(
        lambda: all(c.leader(topic, p) != broker for p in range(partitions)),
        timeout=30,
        what=f"leaders move off broker {broker}",
    )
    c.brokers[broker].start()
    c.wait_isr(topic, partitions, 3, timeout=60)


def leader_election(c, *args):
    return gregor_cli("leader-election", "--bootstrap-server", c.bootstrap, *args)


def test_preferred_election_by_command_and_by_znode_and_unclean_election(cluster, tmp_path):  # noqa: F811
    c = cluster(overrides=("auto.leader.rebalance.enable=false",))
    topic = "pref"
    c.create_topic(topic, assignment=ASSIGNMENT)
    c.wait_isr(topic, 3, 3)
    assert metadata_leaders(c, topic) == preferred(ASSIGNMENT)

    # A restart moves broker 1's leadership away; nothing moves it back by itself here.
    restart(c, 1, topic, 3)
    moved = metadata_leaders(c, topic)
    assert moved[0] != 1, moved
    time.sleep(1)
    assert c.leader(topic, 0) != 1

    run = leader_election(c, "--election-type", "PREFERRED", "--all-topic-partitions")
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"Successfully completed leader election (PREFERRED) for partitions {topic}-0" in run.stdout, run.stdout
    assert "Valid replica already elected for partitions" in run.stdout, run.stdout
    # The answer comes once the controller wrote the leaders (as Kafka's); the brokers'
    # metadata follows with UpdateMetadata.
    wait_until(lambda: metadata_leaders(c, topic) == preferred(ASSIGNMENT), timeout=30, what="Metadata shows it")

    # Nothing left to do: every named partition says so, exit 0.
    spec = tmp_path / "election.json"
    spec.write_text(json.dumps({"partitions": [{"topic": topic, "partition": p} for p in range(3)]}))
    run = leader_election(c, "--election-type", "preferred", "--path-to-json-file", str(spec))
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == f"Valid replica already elected for partitions {topic}-0, {topic}-1, {topic}-2"

    # Unknown partition: Kafka's failure line and exit code 1.
    run = leader_election(c, "--election-type", "PREFERRED", "--topic", topic, "--partition", "9")
    assert run.returncode == 1
    assert (
        f"Error completing leader election (PREFERRED) for partition: {topic}-9: "
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException"
    ) in run.stdout, run.stdout

    # The legacy znode, written by hand: the controller runs it and deletes it.
    restart(c, 2, topic, 3)
    assert c.leader(topic, 1) != 2
    c.zk.create(
        "/admin/preferred_replica_election",
        json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 1}]}).encode(),
    )
    wait_until(lambda: c.leader(topic, 1) == 2, timeout=20, what="the znode's election runs")
    wait_until(
        lambda: c.zk.exists("/admin/preferred_replica_election") is None,
        timeout=20,
        what="the controller deletes /admin/preferred_replica_election",
    )
    wait_until(lambda: metadata_leaders(c, topic) == preferred(ASSIGNMENT), timeout=10, what="Metadata shows it")

    # librdkafka's own ElectLeaders (AdminClient.elect_leaders), after broker 3 restarted.
    from confluent_kafka import ElectionType, KafkaError, TopicPartition

    restart(c, 3, topic, 3)
    assert c.leader(topic, 2) != 3
    admin = c.admin()
    results = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 2), TopicPartition(topic, 0)]).result(
        timeout=30
    )
    by_partition = {tp.partition: err for tp, err in results.items()}
    assert by_partition[2] is None, by_partition
    assert by_partition[0].code() == KafkaError.ELECTION_NOT_NEEDED, by_partition
    wait_until(lambda: metadata_leaders(c, topic) == preferred(ASSIGNMENT), timeout=30, what="Metadata shows it")

    # UNCLEAN: the only in-sync replica dies; the out-of-sync one may lead only when asked.
    dirty = "dirty"
    c.create_topic(dirty, assignment=[[2, 3]])
    c.wait_isr(dirty, 1, 2)
    c.brokers[3].kill()
    wait_until(lambda: c.isr(dirty, 0) == [2], timeout=30, what="broker 3 leaves the ISR")
    c.brokers[2].kill()
    wait_until(lambda: c.leader(dirty, 0) == -1, timeout=30, what="the partition loses its leader")
    c.brokers[3].start()
    wait_until(lambda: 3 in c.registered(), timeout=30, what="broker 3 registers again")
    time.sleep(1)
    assert c.leader(dirty, 0) == -1, "unclean.leader.election.enable is false: no leader by itself"

    run = leader_election(c, "--election-type", "PREFERRED", "--topic", dirty, "--partition", "0")
    assert run.returncode == 1, run.stdout
    assert "PreferredLeaderNotAvailableException" in run.stdout, run.stdout

    run = leader_election(c, "--election-type", "UNCLEAN", "--topic", dirty, "--partition", "0")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == f"Successfully completed leader election (UNCLEAN) for partitions {dirty}-0"
    assert c.leader(dirty, 0) == 3
    assert c.isr(dirty, 0) == [3]
    run = leader_election(c, "--election-type", "UNCLEAN", "--topic", dirty, "--partition", "0")
    assert run.stdout.strip() == f"Valid replica already elected for partitions {dirty}-0"


def test_automatic_rebalance_restores_preferred_leaders(cluster):  # noqa: F811
    c = cluster(overrides=("leader.imbalance.check.interval.seconds=2",))
    topic = "auto"
    c.create_topic(topic, assignment=ASSIGNMENT)
    c.wait_isr(topic, 3, 3)
    restart(c, 3, topic, 3)
    wait_until(
        lambda: metadata_leaders(c, topic) == preferred(ASSIGNMENT),
        timeout=20,
        interval=0.5,
        what="the leader-imbalance check moves broker 3's leadership back",
    )
    controller = c.brokers[c.controller()].log_text()
    assert "leader imbalance above leader.imbalance.per.broker.percentage" in controller


def partition_log_bytes(broker, topic, partition):
    """Bytes of the .log segments of topic-partition in broker's data directory."""
    total = 0
    for root, _, files in os.walk(broker.data_dir):
        if os.path.basename(root) == f"{topic}-{partition}":
            total += sum(os.path.getsize(os.path.join(root, f)) for f in files if f.endswith(".log"))
    return total


def set_broker_config(c, broker_id, config):
    """What `kafka-configs.sh --zookeeper ... --entity-type brokers --alter` writes."""
    path = f"/config/brokers/{broker_id}"
    data = json.dumps({"version": 1, "config": config}).encode()
    if c.zk.exists(path):
        c.zk.set(path, data)
    else:
        c.zk.create(path, data, makepath=True)
    c.zk.create(
        "/config/changes/config_change_",
        json.dumps({"version": 2, "entity_path": f"brokers/{broker_id}"}).encode(),
        sequence=True,
        makepath=True,
    )


@pytest.mark.parametrize("side", ["follower", "leader"])
def test_throttle_holds_the_catch_up_rate(cluster, side):  # noqa: F811
    """A follower catching up 30 MB under {side}.replication.throttled.rate=10000000 (on the
    follower, broker 2, or on the leader, broker 1, with the topic's
    {side}.replication.throttled.replicas naming that broker) copies at about 10 MB/s;
    removing the rate through the admin API lets it finish."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient

    c = cluster(overrides=("auto.leader.rebalance.enable=false",))
    topic, rate = "slow", 10_000_000
    throttled = 2 if side == "follower" else 1
    c.create_topic(topic, assignment=[[1, 2]], config={f"{side}.replication.throttled.replicas": f"0:{throttled}"})
    c.wait_isr(topic, 1, 2)
    c.brokers[2].kill()
    wait_until(lambda: c.isr(topic, 0) == [1], timeout=30, what="broker 2 leaves the ISR")
    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "1", "linger.ms": 20,
                         "batch.size": 1_000_000, "message.max.bytes": 2_000_000})
    payload = os.urandom(100_000)
    for _ in range(300):
        producer.produce(topic, payload, partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0
    total = partition_log_bytes(c.brokers[1], topic, 0)
    assert total >= 30_000_000, total

    set_broker_config(c, throttled, {f"{side}.replication.throttled.rate": str(rate)})
    if side == "leader":
        wait_until(lambda: "replication throttle changed" in c.brokers[1].log_text(), timeout=10,
                   what="the leader applies its throttle")
    c.brokers[2].start()
    samples = []
    deadline = time.time() + 40
    while time.time() < deadline:
        samples.append((time.time(), partition_log_bytes(c.brokers[2], topic, 0)))
        if samples[-1][1] >= 20_000_000:
            break
        time.sleep(0.2)
    # The rate from the first 2 MB to 20 MB (past the start-up of the fetcher).
    start = next(s for s in samples if s[1] >= 2_000_000)
    end = samples[-1]
    assert end[1] >= 20_000_000, samples[-5:]
    measured = (end[1] - start[1]) / max(end[0] - start[0], 0.2)
    print(f"{side}-throttled catch-up: {measured / 1e6:.2f} MB/s over {end[0] - start[0]:.1f} s (quota {rate / 1e6:.0f} MB/s)")
    assert 0.8 * rate <= measured <= 1.2 * rate, f"{measured / 1e6:.2f} MB/s"
    assert "replication throttle changed" in c.brokers[throttled].log_text()

    # Removed through the admin API (IncrementalAlterConfigs on the BROKER resource, as
    # kafka-configs.sh --bootstrap-server does), live through /config/changes: it finishes.
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    resource = ConfigResource(
        ResourceType.BROKER,
        str(throttled),
        incremental_configs=[
            ConfigEntry(f"{side}.replication.throttled.rate", None, incremental_operation=AlterConfigOpType.DELETE)
        ],
    )
    admin = AdminClient({"bootstrap.servers": c.brokers[throttled].address})
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    c.wait_isr(topic, 1, 2, timeout=30)
    assert json.loads(c.zk.get(f"/config/brokers/{throttled}")[0])["config"] == {}
