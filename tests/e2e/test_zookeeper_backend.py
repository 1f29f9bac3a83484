"""A broker on a real ZooKeeper server: Kafka's layout, and topics written straight into the store."""

import json
import os
import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from conftest import wait_until

ZK = os.environ.get("GREGOR_TEST_ZOOKEEPER")


@pytest.fixture
def zk_server(make_server):
    if not ZK:
        pytest.fail("GREGOR_TEST_ZOOKEEPER is not set: run the tests through scripts/test.sh")
    chroot = f"/gregor-e2e-{uuid.uuid4().hex[:8]}"
    g = make_server(f"zookeeper.connect={ZK}{chroot}", "file.delete.delay.ms=1000")
    zk = KazooClient(hosts=ZK + chroot)
    zk.start(timeout=10)
    yield g, zk
    zk.stop()


def test_layout_in_zookeeper(zk_server):
    g, zk = zk_server
    reg = json.loads(zk.get("/brokers/ids/0")[0])
    assert reg["version"] == 5 and reg["port"] == g.kafka_ports[0]
    assert reg["endpoints"] == [f"PLAINTEXT://127.0.0.1:{g.kafka_ports[0]}"]
    assert zk.get("/brokers/ids/0")[1].ephemeralOwner != 0
    assert json.loads(zk.get("/controller")[0])["brokerid"] == 0
    assert int(zk.get("/controller_epoch")[0]) >= 1
    a = AdminClient({"bootstrap.servers": g.bootstrap})
    a.create_topics([NewTopic("zk-topic", num_partitions=2, replication_factor=1)])["zk-topic"].result(timeout=30)
    wait_until(lambda: zk.exists("/brokers/topics/zk-topic/partitions/1/state"), what="partition state znode")
    state = json.loads(zk.get("/brokers/topics/zk-topic/partitions/1/state")[0])
    assert state["leader"] == 0 and state["isr"] == [0] and state["leader_epoch"] == 0


def test_topic_written_straight_into_the_store_comes_online(zk_server):
    g, zk = zk_server
    zk.create("/config/topics/direct", b'{"version":1,"config":{}}', makepath=True)
    zk.create(
        "/brokers/topics/direct",
        b'{"version":3,"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ","partitions":{"0":[0],"1":[0]},"adding_replicas":{},"removing_replicas":{}}',
        makepath=True,
    )
    a = AdminClient({"bootstrap.servers": g.bootstrap})

    def online():
        t = a.list_topics(topic="direct", timeout=10).topics["direct"]
        return t.error is None and len(t.partitions) == 2 and all(p.leader == 0 for p in t.partitions.values())

    wait_until(online, what="direct topic online")
    assert os.path.isdir(os.path.join(g.data_dir, "logs", "direct-1"))
    # Adding a partition straight in the store works too.
    zk.set(
        "/brokers/topics/direct",
        b'{"version":3,"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ","partitions":{"0":[0],"1":[0],"2":[0]},"adding_replicas":{},"removing_replicas":{}}',
    )
    wait_until(lambda: len(a.list_topics(topic="direct", timeout=10).topics["direct"].partitions) == 3, what="3 partitions")
