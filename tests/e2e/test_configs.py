"""`gregor configs --entity-type topics|brokers` (kafka-configs.sh) against a broker on a real
ZooKeeper: what it sets is what librdkafka's and kafka-python's DescribeConfigs read back, and
it lands in the znodes Kafka writes (`/config/topics/<t>`, `/config/brokers/<id>`,
`/config/brokers/<default>`, a `/config/changes` notification), JSON as Kafka's. A dynamic
broker config written straight into ZooKeeper as Kafka's tools write it reads the same."""

import json
import os
import uuid

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic, ResourceType
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType
from kazoo.client import KazooClient

from conftest import gregor_cli, wait_until

ZK = os.environ.get("GREGOR_TEST_ZOOKEEPER")


@pytest.fixture
def zk_server(make_server):
    if not ZK:
        pytest.fail("GREGOR_TEST_ZOOKEEPER is not set: run the tests through scripts/test.sh")
    chroot = f"/gregor-e2e-{uuid.uuid4().hex[:8]}"
    g = make_server(f"zookeeper.connect={ZK}{chroot}")
    zk = KazooClient(hosts=ZK + chroot)
    zk.start(timeout=10)
    yield g, zk
    zk.stop()


def configs(g, *args):
    return gregor_cli("configs", "--bootstrap-server", g.bootstrap, *args)


def ok(p):
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    return p.stdout


def znode(zk, path):
    return json.loads(zk.get(path)[0])


def notified(zk, entity_path):
    """Whether a `/config/changes` notification names `entity_path` (Kafka's version 2)."""
    if not zk.exists("/config/changes"):
        return False
    return any(
        znode(zk, f"/config/changes/{c}") == {"version": 2, "entity_path": entity_path}
        for c in zk.get_children("/config/changes")
    )


def test_topic_configs_read_back_by_librdkafka_kafka_python_and_zookeeper(zk_server):
    g, zk = zk_server
    a = AdminClient({"bootstrap.servers": g.bootstrap})
    a.create_topics([NewTopic("cfg", num_partitions=1, replication_factor=1)])["cfg"].result(timeout=30)

    out = ok(configs(g, "--entity-type", "topics", "--entity-name", "cfg", "--alter", "--add-config",
                     "retention.ms=3600000,cleanup.policy=[compact,delete],max.message.bytes=2000000"))
    assert out == "Completed updating config for topic cfg.\n"

    # Kafka's znode and a change notification.
    assert znode(zk, "/config/topics/cfg") == {
        "version": 1,
        "config": {"retention.ms": "3600000", "cleanup.policy": "compact,delete", "max.message.bytes": "2000000"},
    }
    assert notified(zk, "topics/cfg")

    # librdkafka reads the overrides back, as topic overrides.
    res = ConfigResource(ResourceType.TOPIC, "cfg")
    described = a.describe_configs([res])[res].result(timeout=30)
    for key, value in [("retention.ms", "3600000"), ("cleanup.policy", "compact,delete"), ("max.message.bytes", "2000000")]:
        assert described[key].value == value, key
        assert described[key].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value, key
    assert described["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

    # kafka-python too (its 'modified' filter keeps exactly the overrides).
    kp = KafkaAdminClient(bootstrap_servers=g.bootstrap)
    try:
        got = kp.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, "cfg")])["topic"]["cfg"]
        assert {k: v["value"] for k, v in got.items()} == {
            "retention.ms": "3600000", "cleanup.policy": "compact,delete", "max.message.bytes": "2000000"}
        assert {v["config_source"] for v in got.values()} == {"DYNAMIC_TOPIC_CONFIG"}

        # Deleted with gregor configs: gone for both clients and from the znode.
        out = ok(configs(g, "--topic", "cfg", "--alter", "--delete-config", "max.message.bytes,retention.ms"))
        assert out == "Completed updating config for topic cfg.\n"
        assert znode(zk, "/config/topics/cfg")["config"] == {"cleanup.policy": "compact,delete"}
        got = kp.describe_configs([KpConfigResource(ConfigResourceType.TOPIC, "cfg")])["topic"]["cfg"]
        assert {k: v["value"] for k, v in got.items()} == {"cleanup.policy": "compact,delete"}
    finally:
        kp.close()
    described = a.describe_configs([res])[res].result(timeout=30)
    assert described["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    # A refused change (unknown config) leaves the znode as it was.
    p = configs(g, "--topic", "cfg", "--alter", "--add-config", "retention.ms=1,no.such.config=1")
    assert p.returncode == 1 and "InvalidConfigurationException" in p.stderr, (p.stdout, p.stderr)
    assert znode(zk, "/config/topics/cfg")["config"] == {"cleanup.policy": "compact,delete"}


def test_dynamic_broker_configs_land_in_kafka_znodes(zk_server):
    g, zk = zk_server
    out = ok(configs(g, "--entity-type", "brokers", "--entity-name", "0", "--alter", "--add-config",
                     "follower.replication.throttled.rate=10000000"))
    assert out == "Completed updating config for broker 0.\n"
    assert znode(zk, "/config/brokers/0") == {"version": 1, "config": {"follower.replication.throttled.rate": "10000000"}}
    assert notified(zk, "brokers/0")

    out = ok(configs(g, "--entity-type", "brokers", "--entity-default", "--alter", "--add-config",
                     "leader.replication.throttled.rate=5000000"))
    assert out == "Completed updating default config for brokers in the cluster.\n"
    assert znode(zk, "/config/brokers/<default>") == {"version": 1, "config": {"leader.replication.throttled.rate": "5000000"}}
    assert notified(zk, "brokers/<default>")

    # librdkafka reads them with Kafka's sources.
    a = AdminClient({"bootstrap.servers": g.bootstrap})
    res = ConfigResource(ResourceType.BROKER, "0")
    described = a.describe_configs([res])[res].result(timeout=30)
    assert described["follower.replication.throttled.rate"].value == "10000000"
    assert described["follower.replication.throttled.rate"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert described["leader.replication.throttled.rate"].value == "5000000"
    assert described["leader.replication.throttled.rate"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value

    # The broker applies them live (its data plane logs the new throttle).
    wait_until(lambda: "replication throttle changed" in g.log_text(), timeout=15, what="throttle applied")

    # A config Kafka cannot change dynamically is refused with Kafka's message; nothing is written.
    p = configs(g, "--broker", "0", "--alter", "--add-config", "log.dirs=/tmp/elsewhere")
    assert p.returncode == 1
    assert ("InvalidRequestException: Invalid config value for resource ConfigResource(type=BROKER, name='0'): "
            "Cannot update these configs dynamically: Set(log.dirs)") in p.stderr, p.stderr
    assert znode(zk, "/config/brokers/0") == {"version": 1, "config": {"follower.replication.throttled.rate": "10000000"}}

    # Deleting the last one leaves Kafka's empty config, as kafka-configs.sh's AlterConfigs does.
    ok(configs(g, "--broker", "0", "--alter", "--delete-config", "follower.replication.throttled.rate"))
    assert znode(zk, "/config/brokers/0") == {"version": 1, "config": {}}


def test_broker_default_written_by_kafka_tools_reads_the_same(zk_server):
    g, zk = zk_server
    # What `kafka-configs.sh --zookeeper ... --entity-type brokers --entity-default --alter`
    # writes: the entity znode, then a sequential change notification.
    zk.ensure_path("/config/brokers")
    zk.create("/config/brokers/<default>", b'{"version":1,"config":{"follower.replication.throttled.rate":"4000000"}}')
    zk.ensure_path("/config/changes")
    zk.create("/config/changes/config_change_", b'{"version":2,"entity_path":"brokers/<default>"}', sequence=True)
    wait_until(
        lambda: ok(configs(g, "--describe", "--broker-defaults")) == (
            "Default configs for brokers in the cluster are:\n"
            "  follower.replication.throttled.rate=4000000 sensitive=false "
            "synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:follower.replication.throttled.rate=4000000}\n"),
        what="the default read back")
    # Altering through gregor keeps what Kafka wrote (AlterConfigs sends the whole set).
    ok(configs(g, "--broker-defaults", "--alter", "--add-config", "leader.replication.throttled.rate=3000000"))
    assert znode(zk, "/config/brokers/<default>")["config"] == {
        "follower.replication.throttled.rate": "4000000", "leader.replication.throttled.rate": "3000000"}
