"""Brokers on a real 3-node ZooKeeper ensemble that loses servers (issue 32).

Each ZooKeeper node is a process of its own (`scripts/zk.sh ensemble`). The brokers list all
three in `zookeeper.connect`; when the node a broker's session sits on dies, the session moves
to another node, and everything the brokers learn from watches (new, changed and deleted
topics, added partitions, topic configs, ACLs, broker registrations) must keep arriving. So
after each fault the tests change the cluster through the Kafka API and check that each change
takes effect within seconds, and at the end that no acknowledged record was lost.
"""

import json
import os
import signal
import socket
import subprocess
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kazoo.client import KazooClient

from conftest import free_port, wait_until

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
ZK_SH = os.path.join(ROOT, "scripts", "zk.sh")
# Each change must take effect within this many seconds of being made.
TAKES_EFFECT_S = 20


def zk_sh(*args):
    subprocess.run(["bash", ZK_SH, *args], check=True, capture_output=True, timeout=120)


def four_letter(port, word):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(word.encode())
            chunks = []
            while True:
                data = s.recv(65536)
                if not data:
                    break
                chunks.append(data)
        return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


class Ensemble:
    """Three ZooKeeper nodes, node i (1-based) in dir/i."""

    def __init__(self, base):
        self.dir = str(base)
        ports = [free_port() for _ in range(9)]
        self.client_ports = ports[:3]
        spec = ",".join(f"{ports[i]}:{ports[i + 3]}:{ports[i + 6]}" for i in range(3))
        zk_sh("ensemble", self.dir, spec)

    @property
    def connect(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.client_ports)

    def node_dir(self, node):
        return os.path.join(self.dir, str(node))

    def kill(self, node):
        zk_sh("kill", self.node_dir(node))

    def start(self, node, wait=True):
        zk_sh("start-node", self.node_dir(node), *([] if wait else ["--no-wait"]))

    def stop(self, node):
        zk_sh("stop", self.node_dir(node))

    def node_of_session(self, session_id):
        """The node (1-based) whose connections include this session, or None."""
        needle = "sid=0x%x" % session_id
        for i, port in enumerate(self.client_ports, start=1):
            if needle in four_letter(port, "cons"):
                return i
        return None

    def leader(self):
        for i, port in enumerate(self.client_ports, start=1):
            if "Mode: leader" in four_letter(port, "srvr"):
                return i
        return None

    def teardown(self):
        subprocess.run(["bash", ZK_SH, "kill", self.dir], capture_output=True)


@pytest.fixture
def ensemble(tmp_path):
    e = Ensemble(tmp_path / "zk")
    yield e
    e.teardown()


def broker_overrides(ensemble, chroot, broker_id):
    return (
        f"broker.id={broker_id}",
        f"zookeeper.connect={ensemble.connect}{chroot}",
        "zookeeper.session.timeout.ms=10000",
        "file.delete.delay.ms=1000",
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found=true",
    )


class Cluster:
    """Two brokers on the ensemble, a kazoo view of the chroot, and what was acknowledged."""

    def __init__(self, ensemble, make_server):
        self.ensemble = ensemble
        self.chroot = f"/ens-{uuid.uuid4().hex[:8]}"
        self.brokers = [
            make_server(*broker_overrides(ensemble, self.chroot, i), name=f"broker{i}") for i in range(2)
        ]
        self.zk = KazooClient(
            hosts=ensemble.connect + self.chroot,
            command_retry={"max_tries": 30, "delay": 0.2, "max_delay": 2},
            connection_retry={"max_tries": -1, "delay": 0.2, "max_delay": 2},
        )
        self.zk.start(timeout=30)
        wait_until(lambda: sorted(self.children("/brokers/ids")) == ["0", "1"], timeout=30, what="both brokers registered")
        self.acked = {}  # topic -> set of values
        self.step = 0

    @property
    def bootstrap(self):
        return ",".join(b.bootstrap for b in self.brokers)

    def admin(self, broker=None):
        servers = self.brokers[broker].bootstrap if broker is not None else self.bootstrap
        return AdminClient({"bootstrap.servers": servers})

    # The test's own ZooKeeper reads retry while kazoo's connection moves between nodes.
    def get(self, path):
        return self.zk.retry(self.zk.get, path)

    def children(self, path):
        return self.zk.retry(self.zk.get_children, path)

    def to_controller(self, call):
        """Runs an admin call that goes to the controller; a client that still knows the old
        controller is told NOT_CONTROLLER (librdkafka does not retry that), so ask again with
        a fresh client, as a user would."""
        deadline = time.time() + TAKES_EFFECT_S
        while True:
            try:
                return call(self.admin())
            except KafkaException as e:
                if e.args[0].code() != KafkaError.NOT_CONTROLLER or time.time() > deadline:
                    raise
                time.sleep(0.5)

    def controller(self):
        return json.loads(self.get("/controller")[0])["brokerid"]

    def session_of(self, broker_id):
        return self.get(f"/brokers/ids/{broker_id}")[1].ephemeralOwner

    def node_of(self, broker_id):
        return wait_until(
            lambda: self.ensemble.node_of_session(self.session_of(broker_id)), timeout=30, what=f"broker {broker_id}'s ZooKeeper node"
        )

    def wait_session_moved(self, broker_id, dead_node):
        wait_until(
            lambda: self.ensemble.node_of_session(self.session_of(broker_id)) not in (None, dead_node),
            timeout=30,
            what=f"broker {broker_id}'s session on a live node",
        )

    def produce(self, topic, n):
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True, "message.timeout.ms": 60000})
        acked = self.acked.setdefault(topic, set())
        errors = []

        def report(err, msg):
            if err is None:
                acked.add(msg.value().decode())
            else:
                errors.append(err)

        for i in range(n):
            p.produce(topic, value=f"{topic}-{self.step}-{i}".encode(), partition=i % 2, on_delivery=report)
        assert p.flush(60) == 0
        assert not errors, errors

    def topic_online(self, topic, partitions, broker):
        md = self.admin(broker).list_topics(topic=topic, timeout=10).topics.get(topic)
        return (
            md is not None
            and md.error is None
            and len(md.partitions) == partitions
            and all(p.leader in (0, 1) for p in md.partitions.values())
        )

    def topic_gone(self, topic, broker):
        md = self.admin(broker).list_topics(timeout=10)
        return topic not in md.topics

    def exercise(self, what):
        """Changes the cluster every way the brokers learn from watches; each takes effect."""
        self.step += 1
        s = self.step
        a = self.admin()
        t = f"after-{s}"
        # A new topic comes online on both brokers.
        self.to_controller(lambda a: a.create_topics([NewTopic(t, num_partitions=2, replication_factor=2)])[t].result(timeout=30))
        for b in (0, 1):
            wait_until(lambda: self.topic_online(t, 2, b), timeout=TAKES_EFFECT_S, what=f"{what}: topic {t} online on broker {b}")
        self.produce(t, 20)
        # Added partitions appear.
        self.to_controller(lambda a: a.create_partitions([NewPartitions(t, 3)])[t].result(timeout=30))
        for b in (0, 1):
            wait_until(lambda: self.topic_online(t, 3, b), timeout=TAKES_EFFECT_S, what=f"{what}: {t} has 3 partitions on broker {b}")
        # A topic config change reaches the leaders: records above max.message.bytes are refused.
        res = ConfigResource(ResourceType.TOPIC, t, incremental_configs=[ConfigEntry("max.message.bytes", "200", incremental_operation=AlterConfigOpType.SET)])
        list(a.incremental_alter_configs([res]).values())[0].result(timeout=30)

        def big_refused():
            p = Producer({"bootstrap.servers": self.bootstrap, "message.timeout.ms": 5000, "message.max.bytes": 100000})
            outcome = []
            for part in range(3):
                p.produce(t, value=b"x" * 1000, partition=part, on_delivery=lambda err, msg: outcome.append(err))
            p.flush(10)
            return len(outcome) == 3 and all(err is not None and err.name() == "MSG_SIZE_TOO_LARGE" for err in outcome)

        wait_until(big_refused, timeout=TAKES_EFFECT_S, interval=1, what=f"{what}: max.message.bytes applied by every leader of {t}")
        # An ACL reaches both brokers: a denied Describe hides the topic from ANONYMOUS.
        acl = AclBinding(ResourceType.TOPIC, t, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*", AclOperation.DESCRIBE, AclPermissionType.DENY)
        list(a.create_acls([acl]).values())[0].result(timeout=30)

        def denied(b):
            md = self.admin(b).list_topics(topic=t, timeout=10).topics.get(t)
            return md is not None and md.error is not None and "AUTHORIZATION" in md.error.name()

        for b in (0, 1):
            wait_until(lambda: denied(b), timeout=TAKES_EFFECT_S, what=f"{what}: the ACL on {t} applies on broker {b}")
        acl_filter = AclBindingFilter(ResourceType.TOPIC, t, ResourcePatternType.LITERAL, "User:ANONYMOUS", "*", AclOperation.DESCRIBE, AclPermissionType.DENY)
        list(a.delete_acls([acl_filter]).values())[0].result(timeout=30)
        for b in (0, 1):
            wait_until(lambda: self.topic_online(t, 3, b), timeout=TAKES_EFFECT_S, what=f"{what}: the ACL on {t} removed on broker {b}")
        # A deleted topic disappears (the previous step's topic, its records read back first).
        if s > 1:
            old = f"after-{s - 1}"
            self.check_acked(old)
            self.to_controller(lambda a: a.delete_topics([old])[old].result(timeout=30))
            for b in (0, 1):
                wait_until(lambda: self.topic_gone(old, b), timeout=TAKES_EFFECT_S, what=f"{what}: topic {old} deleted on broker {b}")
            del self.acked[old]
        # A restarted broker registers again and takes its replicas back into the ISR.
        other = 1 - self.controller()
        self.brokers[other].restart()
        wait_until(lambda: str(other) in self.children("/brokers/ids"), timeout=TAKES_EFFECT_S, what=f"{what}: broker {other} registered again")

        def isr_full():
            for p in range(3):
                state = json.loads(self.get(f"/brokers/topics/{t}/partitions/{p}/state")[0])
                if sorted(state["isr"]) != [0, 1]:
                    return False
            return True

        wait_until(isr_full, timeout=TAKES_EFFECT_S * 2, what=f"{what}: broker {other} back in every ISR of {t}")

    def check_acked(self, topic):
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"check-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest", "enable.auto.commit": False})
        md = self.admin().list_topics(topic=topic, timeout=10).topics[topic]
        c.assign([TopicPartition(topic, p, 0) for p in md.partitions])
        seen = set()
        deadline = time.time() + 60
        want = self.acked.get(topic, set())
        while not want <= seen and time.time() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                seen.add(m.value().decode())
        c.close()
        missing = want - seen
        assert not missing, f"{len(missing)} acknowledged records of {topic} lost, e.g. {sorted(missing)[:3]}"


@pytest.fixture
def cluster(ensemble, make_server):
    c = Cluster(ensemble, make_server)
    yield c
    c.zk.stop()


def test_the_controller_keeps_hearing_through_ensemble_failures(cluster):
    ens = cluster.ensemble
    a = cluster.admin()
    a.create_topics([NewTopic("before", num_partitions=2, replication_factor=2)])["before"].result(timeout=30)
    wait_until(lambda: cluster.topic_online("before", 2, 0), timeout=TAKES_EFFECT_S, what="topic before online")
    cluster.produce("before", 50)
    cluster.exercise("with every ZooKeeper node up")

    # 1. The node the controller's session is on dies.
    ctl = cluster.controller()
    node = cluster.node_of(ctl)
    ens.kill(node)
    cluster.wait_session_moved(ctl, node)
    cluster.exercise(f"ZooKeeper node {node} (the controller's) killed")
    ens.start(node)

    # 2. The node the other broker's session is on dies.
    other = 1 - cluster.controller()
    node = cluster.node_of(other)
    ens.kill(node)
    cluster.wait_session_moved(other, node)
    cluster.exercise(f"ZooKeeper node {node} (broker {other}'s) killed")
    ens.start(node)

    # 3. The ensemble loses its majority (the leader among the lost), then gets it back.
    leader = ens.leader()
    lost = [leader] + [n for n in (1, 2, 3) if n != leader][:1]
    for n in lost:
        ens.kill(n)
    time.sleep(3)
    for n in lost:
        ens.start(n, wait=False)
    for n in lost:
        wait_until(lambda: "Mode:" in four_letter(ens.client_ports[n - 1], "srvr"), timeout=60, what=f"ZooKeeper node {n} serving again")
    cluster.exercise("the ensemble's majority lost and back")

    # 4. The controller is paused past its session timeout: its session expires; it registers
    # again on a new session, re-reads, and the cluster carries on.
    ctl = cluster.controller()
    old_session = cluster.session_of(ctl)
    victim = cluster.brokers[ctl].proc
    victim.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: str(ctl) not in cluster.children("/brokers/ids"), timeout=30, what=f"broker {ctl}'s session expired")
    finally:
        victim.send_signal(signal.SIGCONT)
    wait_until(
        lambda: str(ctl) in cluster.children("/brokers/ids") and cluster.session_of(ctl) != old_session,
        timeout=TAKES_EFFECT_S,
        what=f"broker {ctl} registered again on a new session",
    )
    cluster.exercise(f"broker {ctl}'s session expired")

    for topic in list(cluster.acked):
        cluster.check_acked(topic)


def test_a_rolling_restart_of_the_ensemble_under_load(cluster):
    ens = cluster.ensemble
    a = cluster.admin()
    a.create_topics([NewTopic("load", num_partitions=2, replication_factor=2)])["load"].result(timeout=30)
    wait_until(lambda: cluster.topic_online("load", 2, 0), timeout=TAKES_EFFECT_S, what="topic load online")
    stop = threading.Event()
    acked, failed, consumed = set(), [], set()

    def produce():
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})

        def report(err, msg):
            if err is None:
                acked.add(msg.value().decode())
            else:
                failed.append(err)

        i = 0
        while not stop.is_set():
            p.produce("load", value=f"load-{i}".encode(), on_delivery=report)
            p.poll(0)
            i += 1
            time.sleep(0.002)
        p.flush(60)

    def consume():
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "rolling", "auto.offset.reset": "earliest"})
        c.subscribe(["load"])
        while not stop.is_set():
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                consumed.add(m.value().decode())
        c.close()

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    try:
        for node in (1, 2, 3):
            ens.stop(node)
            time.sleep(2)
            ens.start(node)
            time.sleep(2)
            # The controller still hears: a topic created now comes online.
            t = f"rolled-{node}"
            a.create_topics([NewTopic(t, num_partitions=1, replication_factor=2)])[t].result(timeout=30)
            wait_until(lambda: cluster.topic_online(t, 1, 0) and cluster.topic_online(t, 1, 1), timeout=TAKES_EFFECT_S, what=f"topic {t} online after node {node} restarted")
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=90)
    assert not failed, f"{len(failed)} produce requests failed, first: {failed[0]}"
    assert len(acked) > 100
    cluster.acked["load"] = acked
    cluster.check_acked("load")


def test_sigterm_exits_promptly_with_the_ensemble_down(ensemble, make_server):
    chroot = f"/ens-{uuid.uuid4().hex[:8]}"
    g = make_server(*broker_overrides(ensemble, chroot, 0), name="lonely")
    a = AdminClient({"bootstrap.servers": g.bootstrap})
    a.create_topics([NewTopic("t", num_partitions=1, replication_factor=1)])["t"].result(timeout=30)
    ensemble.teardown()  # every node killed
    time.sleep(1)
    started = time.time()
    g.proc.send_signal(signal.SIGTERM)
    g.proc.wait(timeout=30)
    took = time.time() - started
    assert took < 15, f"SIGTERM took {took:.1f} s with ZooKeeper down"
    log = g.log_text()
    assert "controlled shutdown skipped: the metadata store is unreachable" in log, log[-3000:]


def test_a_topic_created_the_moment_the_broker_listens(ensemble, make_server):
    """librdkafka's admin client asks Metadata for the controller once; a broker that answered
    before the controller's first UpdateMetadata (no controller yet) left CreateTopics waiting
    for librdkafka's next periodic refresh, minutes later. It now waits for that first update."""
    for i in range(3):
        chroot = f"/fresh-{uuid.uuid4().hex[:8]}"
        g = make_server(*broker_overrides(ensemble, chroot, 0), name=f"fresh{i}")
        a = AdminClient({"bootstrap.servers": g.bootstrap})
        a.create_topics([NewTopic("t", num_partitions=1, replication_factor=1)])["t"].result(timeout=15)
        g.stop()
