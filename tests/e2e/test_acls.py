"""ACLs with real clients (issue 13): two brokers on a real ZooKeeper with the ACL authorizer,
clients on a SASL_PLAINTEXT listener (PLAIN users alice and admin; admin is a super user, and so
is User:ANONYMOUS, the brokers' own PLAINTEXT connections, as in a Kafka deployment whose
inter-broker listener is PLAINTEXT). librdkafka (confluent-kafka) and kafka-python; ACLs are
managed with `gregor acls` (kafka-acls.sh) and, for one test, written into ZooKeeper by hand
in Kafka's JSON, as Kafka's tools write them."""

import json
import os
import tempfile
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from conftest import gregor_cli, wait_until
from test_security import start_broker

ZK = os.environ.get("GREGOR_TEST_ZOOKEEPER")
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret" user_admin="admin-secret" user_carol="carol-secret";')


@pytest.fixture
def cluster(tmp_path):
    """Two brokers sharing one ZooKeeper chroot; yields (brokers, kazoo client)."""
    if not ZK:
        pytest.fail("GREGOR_TEST_ZOOKEEPER is not set: run the tests through scripts/test.sh")
    chroot = f"/gregor-acls-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=ZK + chroot)
    zk.start(timeout=10)
    zk.ensure_path("/")
    brokers = []
    try:
        for broker_id in (1, 2):
            g, ports = start_broker(tmp_path, {"SASL": "SASL_PLAINTEXT"}, [
                f"broker.id={broker_id}",
                f"zookeeper.connect={ZK}{chroot}",
                "sasl.enabled.mechanisms=PLAIN",
                f"sasl.jaas.config={JAAS}",
                "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                "super.users=User:admin;User:ANONYMOUS",
                "auto.create.topics.enable=true",
            ], name=f"broker{broker_id}")
            brokers.append((g, ports))
        yield brokers, zk
    finally:
        for g, _ in brokers:
            g.stop()
        zk.stop()


def conf(ports, user):
    return {
        "bootstrap.servers": f"127.0.0.1:{ports['SASL']}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": f"{user}-secret",
    }


def acls(ports, *args, user=None):
    """`gregor acls` on the PLAINTEXT listener (User:ANONYMOUS, a super user), or as `user` on
    the SASL listener through --command-config."""
    if user is None:
        return gregor_cli("acls", "--bootstrap-server", f"127.0.0.1:{ports['PLAINTEXT']}", *args)
    with tempfile.NamedTemporaryFile("w", suffix=".properties", delete=False) as f:
        f.write("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                f"sasl.username={user}\nsasl.password={user}-secret\n")
    try:
        return gregor_cli("acls", "--bootstrap-server", f"127.0.0.1:{ports['SASL']}",
                          "--command-config", f.name, *args)
    finally:
        os.unlink(f.name)


def on_every_broker(brokers, *names):
    """Waits until every broker lists an ACL on each resource name (the change reaches the
    others through the store's notification; clients may ask any broker)."""
    for _, ports in brokers:
        for name in names:
            wait_until(lambda: f"name={name}," in acls(ports, "--list").stdout, timeout=30,
                       what=f"broker {ports['SASL']} lists the ACLs on {name}")


def create_topics(admin_conf, *names):
    admin = AdminClient(admin_conf)
    futures = admin.create_topics([NewTopic(n, num_partitions=1, replication_factor=1) for n in names])
    for f in futures.values():
        f.result(timeout=30)
    wait_until(lambda: set(names) <= set(admin.list_topics(timeout=10).topics), what="topics listed")


def produce(producer_conf, topic, n):
    """Produces n records; returns the delivery errors (None for each success)."""
    results = []
    p = Producer({**producer_conf, "acks": "all", "message.timeout.ms": 15000})
    for i in range(n):
        p.produce(topic, value=b"v%d" % i, on_delivery=lambda err, msg: results.append(err))
    p.flush(30)
    return results


def consume(consumer_conf, topic, group, n):
    c = Consumer({**consumer_conf, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    errors = []
    try:
        wait_until(lambda: _poll(c, got, errors) or len(got) >= n, timeout=60, what=f"{n} records of {topic}")
    finally:
        c.close()
    return got, errors


def _poll(c, got, errors):
    m = c.poll(0.2)
    if m is None:
        return False
    if m.error():
        errors.append(m.error())
    else:
        got.append(m.value())
    return False


def test_read_only_principal_reads_but_cannot_write_see_or_create(cluster):
    brokers, _ = cluster
    (_, p1), _ = brokers
    admin = conf(p1, "admin")
    create_topics(admin, "a", "b")
    assert produce(admin, "a", 5) == [None] * 5, "a super user may do anything"

    out = acls(p1, "--add", "--allow-principal", "User:alice", "--consumer", "--topic", "a", "--group", "ga")
    assert out.returncode == 0, out.stdout + out.stderr
    on_every_broker(brokers, "a", "ga")
    assert ("Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=a, patternType=LITERAL)`: \n"
            " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
            "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW) \n") in out.stdout, out.stdout
    assert ("Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=ga, patternType=LITERAL)`: \n"
            " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n") in out.stdout, out.stdout

    alice = conf(p1, "alice")
    got, _ = consume(alice, "a", "ga", 5)
    assert got == [b"v%d" % i for i in range(5)]
    errors = produce(alice, "a", 1)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED], errors
    topics = AdminClient(alice).list_topics(timeout=10).topics
    assert "a" in topics and "b" not in topics, sorted(topics)
    alice_admin = AdminClient(alice)
    with pytest.raises(KafkaException) as refused:
        alice_admin.create_topics([NewTopic("c", num_partitions=1, replication_factor=1)])["c"].result(timeout=30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "c" not in AdminClient(admin).list_topics(timeout=10).topics
    # Another group is refused.
    _, group_errors = consume_briefly(alice, "a", "other-group")
    assert any(e.code() == KafkaError.GROUP_AUTHORIZATION_FAILED for e in group_errors), group_errors


def consume_briefly(consumer_conf, topic, group):
    c = Consumer({**consumer_conf, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, errors = [], []
    try:
        wait_until(lambda: _poll(c, got, errors) or errors, timeout=30, what="a consumer error")
    finally:
        c.close()
    return got, errors


def test_kafka_python_read_only_principal(cluster):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    brokers, _ = cluster
    (_, p1), _ = brokers
    create_topics(conf(p1, "admin"), "kp")
    assert produce(conf(p1, "admin"), "kp", 3) == [None] * 3
    assert acls(p1, "--add", "--allow-principal", "User:alice", "--consumer", "--topic", "kp",
                "--group", "kpg").returncode == 0
    on_every_broker(brokers, "kp", "kpg")
    common = dict(bootstrap_servers=f"127.0.0.1:{p1['SASL']}", security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-secret")
    consumer = KafkaConsumer("kp", group_id="kpg", auto_offset_reset="earliest",
                             consumer_timeout_ms=20000, **common)
    values = []
    for m in consumer:
        values.append(m.value)
        if len(values) == 3:
            break
    consumer.close()
    assert values == [b"v0", b"v1", b"v2"]
    producer = KafkaProducer(retries=0, **common)
    with pytest.raises(TopicAuthorizationFailedError):
        producer.send("kp", b"no").get(timeout=30)
    producer.close()


def test_prefixed_acls_deny_over_allow_and_cli_round_trip(cluster):
    brokers, _ = cluster
    (_, p1), _ = brokers
    admin = conf(p1, "admin")
    create_topics(admin, "pay-in", "pay-out", "other")
    out = acls(p1, "--add", "--allow-principal", "User:carol", "--producer", "--topic", "pay",
               "--resource-pattern-type", "prefixed")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ResourcePattern(resourceType=TOPIC, name=pay, patternType=PREFIXED)" in out.stdout
    on_every_broker(brokers, "pay")
    carol = conf(p1, "carol")
    assert produce(carol, "pay-in", 2) == [None, None]
    assert [e.code() for e in produce(carol, "other", 1)] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    # DENY on one topic wins over the prefixed ALLOW.
    out = acls(p1, "--add", "--deny-principal", "User:carol", "--operation", "Write", "--topic", "pay-out")
    assert out.returncode == 0, out.stdout + out.stderr
    on_every_broker(brokers, "pay-out")
    assert [e.code() for e in produce(carol, "pay-out", 1)] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert produce(carol, "pay-in", 1) == [None]
    # --list with MATCH shows every pattern that applies to pay-out.
    listed = acls(p1, "--list", "--topic", "pay-out", "--resource-pattern-type", "match")
    assert listed.returncode == 0, listed.stderr
    assert "name=pay, patternType=PREFIXED" in listed.stdout and "name=pay-out, patternType=LITERAL" in listed.stdout
    assert "(principal=User:carol, host=*, operation=WRITE, permissionType=DENY)" in listed.stdout
    # A principal without ALTER on the cluster is refused, and nothing changes.
    refused = acls(p1, "--add", "--allow-principal", "User:carol", "--operation", "All", "--topic", "other",
                   user="carol")
    assert refused.returncode == 1
    assert ("Error while executing ACL command: org.apache.kafka.common.errors.ClusterAuthorizationException"
            in refused.stdout), refused.stdout + refused.stderr
    assert "name=other" not in acls(p1, "--list").stdout
    # A usage error is Kafka's, and nothing is sent.
    bad = acls(p1, "--add", "--allow-principal", "User:carol", "--operation", "Write", "--group", "g")
    assert bad.returncode == 1
    assert "ResourceType GROUP only supports operations READ,DESCRIBE,DELETE,ALL" in bad.stderr
    # --remove --force takes the DENY away: carol writes pay-out again.
    out = acls(p1, "--remove", "--force", "--deny-principal", "User:carol", "--operation", "Write",
               "--topic", "pay-out")
    assert out.returncode == 0, out.stdout + out.stderr
    for _, ports in brokers:
        wait_until(lambda: "name=pay-out" not in acls(ports, "--list").stdout, timeout=30,
                   what="the DENY gone on every broker")
    assert produce(carol, "pay-out", 1) == [None]


def test_acl_changes_reach_the_other_broker_and_hand_written_znodes_are_honoured(cluster):
    brokers, zk = cluster
    (_, p1), (_, p2) = brokers
    # Added through broker 1: broker 2 answers it from its own cache soon after.
    out = acls(p1, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "spread")
    assert out.returncode == 0, out.stdout + out.stderr
    wait_until(lambda: "name=spread" in acls(p2, "--list", "--topic", "spread").stdout, timeout=30,
               what="broker 2 lists the ACL added on broker 1")
    # Stored in Kafka's znode, with Kafka's JSON and its change notification.
    data, _ = zk.get("/kafka-acl/Topic/spread")
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
    assert any(zk.get(f"/kafka-acl-changes/{c}")[0] == b"TOPIC:spread"
               for c in zk.get_children("/kafka-acl-changes"))
    # Written by hand, as Kafka's AclAuthorizer writes it: both brokers pick it up.
    zk.create("/kafka-acl-extended/prefixed/Topic/hand", json.dumps({"version": 1, "acls": [
        {"host": "*", "permissionType": "Allow", "operation": "Describe", "principal": "User:alice"}]}).encode(),
        makepath=True)
    zk.create("/kafka-acl-extended-changes/acl_changes_", json.dumps(
        {"version": 1, "resourceType": "TOPIC", "name": "hand", "patternType": "PREFIXED"}).encode(),
        sequence=True, makepath=True)
    for ports in (p1, p2):
        wait_until(lambda: "name=hand, patternType=PREFIXED" in acls(ports, "--list").stdout, timeout=30,
                   what="a hand-written ACL listed")
    create_topics(conf(p1, "admin"), "hand-1")
    wait_until(lambda: "hand-1" in AdminClient(conf(p2, "alice")).list_topics(timeout=10).topics,
               timeout=30, what="alice sees hand-1 through the hand-written prefixed DESCRIBE")
    # Removed by hand (delete + notification): gone on both brokers.
    zk.delete("/kafka-acl-extended/prefixed/Topic/hand")
    zk.create("/kafka-acl-extended-changes/acl_changes_", json.dumps(
        {"version": 1, "resourceType": "TOPIC", "name": "hand", "patternType": "PREFIXED"}).encode(),
        sequence=True)
    for ports in (p1, p2):
        wait_until(lambda: "name=hand" not in acls(ports, "--list").stdout, timeout=30,
                   what="a hand-removed ACL gone")
