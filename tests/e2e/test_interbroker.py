"""Brokers authenticate to each other (issue 13): a 3-broker cluster of real `gregor server`
processes on a real ZooKeeper whose inter-broker listener is SASL_SSL (SCRAM-SHA-512 inside
TLS, with client certificates required), the ACL authorizer on and only the brokers' own user
in super.users. No User:ANONYMOUS anywhere: if a broker's replica fetcher, the controller's
channel or the AlterPartition sender connected without its login, the follower fetches
would be refused (CLUSTER_ACTION) and the ISR would never grow.

- an RF 3 topic with min.insync.replicas=2 takes acks=all produces from confluent-kafka, and
  its ISR is all three brokers;
- a broker killed with SIGKILL and restarted rejoins the ISR, and nothing acknowledged is lost;
- a broker started with a wrong inter-broker password is refused by the others: its
  followers never join the ISR, it logs why (peer, listener, the leader's answer) and keeps
  retrying at the fetch back-off, not in a busy loop.

Certificates are made by the test with Debian's openssl; SCRAM credentials are written to
/config/users/<user> the way Kafka's tools write them (test_sasl.write_scram_user).
"""

import json
import os
import signal
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)
from kazoo.client import KazooClient

from conftest import GREGOR_BIN, free_port, wait_for_port, wait_until
from test_sasl import write_scram_user
from test_security import make_ca, make_leaf

ZK = os.environ.get("GREGOR_TEST_ZOOKEEPER")
BROKER_USER, BROKER_PASSWORD = "broker", "broker-secret"
APP_USER, APP_PASSWORD = "app", "app-secret"
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{}" password="{}";'
AUTH_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"


class SecureBroker:
    """One `gregor server` with a CLIENT (SASL_PLAINTEXT, SCRAM) and an INTERNAL (SASL_SSL,
    mTLS) listener; brokers talk to each other on INTERNAL."""

    def __init__(self, broker_id, cluster_dir, zk_connect, tls, internal="SASL_SSL"):
        self.broker_id = broker_id
        self.internal = internal
        self.client_port, self.internal_port, self.admin_port = free_port(), free_port(), free_port()
        self.data_dir = os.path.join(cluster_dir, f"broker-{broker_id}")
        self.log_path = os.path.join(cluster_dir, f"broker-{broker_id}.log")
        self.zk_connect = zk_connect
        self.tls = tls
        self.password = BROKER_PASSWORD
        self.proc = None

    def args(self):
        overrides = [
            f"broker.id={self.broker_id}",
            f"listeners=CLIENT://127.0.0.1:{self.client_port},INTERNAL://127.0.0.1:{self.internal_port}",
            f"listener.security.protocol.map=CLIENT:SASL_PLAINTEXT,INTERNAL:{self.internal}",
            "inter.broker.listener.name=INTERNAL",
            f"admin.listener=127.0.0.1:{self.admin_port}",
            f"zookeeper.connect={self.zk_connect}",
            "zookeeper.session.timeout.ms=3000",
            "replica.lag.time.max.ms=4000",
            "controlled.shutdown.retry.backoff.ms=500",
            # Clients: SCRAM users from the store.
            "listener.name.client.sasl.enabled.mechanisms=SCRAM-SHA-512",
            "listener.name.internal.ssl.keystore.type=PEM",
            f"listener.name.internal.ssl.keystore.location={self.tls['keystore']}",
            "listener.name.internal.ssl.truststore.type=PEM",
            f"listener.name.internal.ssl.truststore.location={self.tls['ca']}",
            "listener.name.internal.ssl.client.auth=required",
            # Only the brokers' own user may do everything; nobody is anonymous.
            "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
            f"super.users=User:{BROKER_USER}",
        ]
        if self.internal == "SASL_SSL":
            # Brokers: SCRAM-SHA-512 inside TLS, each presenting its certificate too.
            overrides += [
                "listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512",
                "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
                "listener.name.internal.scram-sha-512.sasl.jaas.config=" + SCRAM_JAAS.format(BROKER_USER, self.password),
            ]
        else:
            # mTLS only: the principal is the certificate's CN (broker), through the rules.
            overrides.append(r"listener.name.internal.ssl.principal.mapping.rules=RULE:^.*CN=([a-z0-9]+).*$/$1/,DEFAULT")
        args = [GREGOR_BIN, "server", "--data-dir", self.data_dir]
        for o in overrides:
            args += ["--override", o]
        return args

    def start(self):
        log = open(self.log_path, "ab")
        log.write(f"\n==== start {time.strftime('%H:%M:%S')} ====\n".encode())
        log.flush()
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")}
        self.proc = subprocess.Popen(self.args(), stdout=log, stderr=log, env=env)
        wait_for_port(self.client_port, self.proc, timeout=60)
        return self

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")


@pytest.fixture
def cluster(tmp_path, request):
    if not ZK:
        pytest.fail("GREGOR_TEST_ZOOKEEPER is not set: run the tests through scripts/test.sh")
    d = str(tmp_path)
    ca = make_ca(d, "ca")
    cert, key = make_leaf(d, "ca", "broker", "broker")
    keystore = os.path.join(d, "broker-keystore.pem")
    with open(keystore, "w") as out:
        out.write(open(key).read() + open(cert).read())
    chroot = f"/gregor-interbroker-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=ZK + chroot)
    zk.start(timeout=15)
    zk.ensure_path("/")
    # Kafka's documented order: the brokers' SCRAM credentials exist before they start.
    write_scram_user(zk, BROKER_USER, BROKER_PASSWORD)
    write_scram_user(zk, APP_USER, APP_PASSWORD)
    brokers = {i: SecureBroker(i, d, ZK + chroot, {"ca": ca, "keystore": keystore},
                               internal=getattr(request, "param", "SASL_SSL")) for i in (1, 2, 3)}
    yield brokers, zk
    for b in brokers.values():
        b.kill()
    zk.stop()
    zk.close()


def sasl_conf(brokers, user, password):
    return {
        "bootstrap.servers": ",".join(f"127.0.0.1:{b.client_port}" for b in brokers.values()),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
    }


def isr(zk, topic, partition=0):
    try:
        return sorted(json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")[0])["isr"])
    except Exception:
        return None


def registered(zk):
    try:
        return {int(i) for i in zk.get_children("/brokers/ids")}
    except Exception:
        return set()


def metadata_complete(brokers):
    """Whether every broker's own Metadata names all of them and the controller: a broker
    answers from its cache, which the controller's first UpdateMetadata (over SASL_SSL) fills,
    and librdkafka's admin client waits long for a controller once told there is none."""
    for b in brokers.values():
        conf = sasl_conf({b.broker_id: b}, BROKER_USER, BROKER_PASSWORD)
        try:
            md = AdminClient(conf).list_topics(timeout=10)
        except Exception:
            return False
        if len(md.brokers) != len(brokers) or md.controller_id < 0:
            return False
    return True


def produce(conf, topic, values):
    """acks=all produces of `values`; returns the delivery errors (none expected)."""
    errors = []
    p = Producer({**conf, "acks": "all", "message.timeout.ms": 30000})
    for v in values:
        p.produce(topic, value=v, on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert p.flush(60) == 0, "messages still in flight"
    return errors


def consume_all(conf, topic, n):
    c = Consumer({**conf, "group.id": "g-" + uuid.uuid4().hex[:6], "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got = []
    deadline = time.time() + 60
    while len(got) < n and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    return got


def logs(brokers):
    return "\n".join(f"---- broker {i} ----\n{b.log_text()[-8000:]}" for i, b in brokers.items())


def test_three_brokers_replicate_over_sasl_ssl_with_only_the_broker_user_super(cluster):
    brokers, zk = cluster
    for b in brokers.values():
        b.start()
    wait_until(lambda: registered(zk) == {1, 2, 3}, timeout=60, what="every broker registered")
    wait_until(lambda: metadata_complete(brokers), timeout=60, interval=0.5,
               what="every broker's metadata (sent by the controller over SASL_SSL) names all three")

    # The brokers' user is the only super user: it creates the topic and lets `app` write
    # and read it (over the client listener, as Kafka's tools would).
    admin = AdminClient(sasl_conf(brokers, BROKER_USER, BROKER_PASSWORD))
    topic = "ib-" + uuid.uuid4().hex[:6]
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3,
                                  config={"min.insync.replicas": "2"})])[topic].result(timeout=60)
    acls = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{APP_USER}", "*", op,
                       AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.READ)]
    acls.append(AclBinding(ResourceType.GROUP, "*", ResourcePatternType.LITERAL, f"User:{APP_USER}", "*",
                           AclOperation.READ, AclPermissionType.ALLOW))
    for f in admin.create_acls(acls).values():
        f.result(timeout=30)

    # Followers fetch over SASL_SSL as User:broker: the ISR grows to all three.
    wait_until(lambda: isr(zk, topic) == [1, 2, 3], timeout=60, what="the ISR is all three brokers")
    app = sasl_conf(brokers, APP_USER, APP_PASSWORD)
    first = [b"a%d" % i for i in range(50)]
    assert produce(app, topic, first) == []

    # A follower killed and restarted catches up over SASL_SSL and rejoins the ISR.
    leader = json.loads(zk.get(f"/brokers/topics/{topic}/partitions/0/state")[0])["leader"]
    victim = next(i for i in brokers if i != leader)
    brokers[victim].kill()
    wait_until(lambda: victim not in (isr(zk, topic) or [victim]), timeout=60,
               what=f"broker {victim} leaves the ISR")
    second = [b"b%d" % i for i in range(50)]
    assert produce(app, topic, second) == []  # min.insync.replicas=2 still holds
    brokers[victim].start()
    wait_until(lambda: isr(zk, topic) == [1, 2, 3], timeout=60, what=f"broker {victim} rejoins the ISR")
    got = consume_all(app, topic, len(first) + len(second))
    assert got == first + second

    # A broker whose inter-broker password is wrong: the leaders refuse its fetches, so it
    # never joins the ISR, and it says why.
    bad = next(i for i in brokers if i != leader and i != victim)
    brokers[bad].kill()
    wait_until(lambda: bad not in (isr(zk, topic) or [bad]), timeout=60, what=f"broker {bad} leaves the ISR")
    brokers[bad].password = "not-the-password"
    brokers[bad].start()
    wait_until(lambda: bad in registered(zk), timeout=60, what=f"broker {bad} registered again")
    refused = "failed authentication; retrying"
    wait_until(lambda: refused in brokers[bad].log_text(), timeout=60,
               what=f"broker {bad} logs the refused inter-broker login")
    line = next(l for l in brokers[bad].log_text().splitlines() if refused in l)
    assert "listener INTERNAL" in line and AUTH_FAILED in line and f"127.0.0.1:{brokers[leader].internal_port}" in line, line
    wait_until(lambda: f"Failed authentication with 127.0.0.1 ({AUTH_FAILED})" in brokers[leader].log_text(),
               timeout=30, what="the leader logs the refused login")
    # Retried with back-off (replica.fetch.backoff.ms, 1 s), never in a busy loop; and
    # still out of the ISR after several refusals.
    before = brokers[bad].log_text().count(refused)
    time.sleep(4)
    after = brokers[bad].log_text().count(refused)
    assert after - before <= 20, f"{after - before} refusals in 4 s: not backing off"
    wait_until(lambda: brokers[bad].log_text().count(refused) >= before + 2, timeout=30,
               what="the refused login is retried")
    assert bad not in isr(zk, topic), (isr(zk, topic), logs(brokers))
    assert produce(app, topic, [b"c"]) == []  # the two good brokers still take acks=all
    assert bad not in isr(zk, topic)


@pytest.mark.parametrize("cluster", ["SSL"], indirect=True)
def test_three_brokers_replicate_over_mtls_as_their_certificate_principal(cluster):
    """An SSL inter-broker listener with ssl.client.auth=required: each broker presents its
    keystore, the peers map its certificate to User:broker (ssl.principal.mapping.rules),
    and that principal alone is a super user, so followers fetch and the ISR grows."""
    brokers, zk = cluster
    for b in brokers.values():
        b.start()
    wait_until(lambda: registered(zk) == {1, 2, 3}, timeout=60, what="every broker registered")
    wait_until(lambda: metadata_complete(brokers), timeout=60, interval=0.5,
               what="every broker's metadata (sent by the controller over mTLS) names all three")
    admin = AdminClient(sasl_conf(brokers, BROKER_USER, BROKER_PASSWORD))
    topic = "ib-tls-" + uuid.uuid4().hex[:6]
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=3,
                                  config={"min.insync.replicas": "2"})])[topic].result(timeout=60)
    wait_until(lambda: isr(zk, topic) == [1, 2, 3], timeout=60, what="the ISR is all three brokers")
    assert produce(sasl_conf(brokers, BROKER_USER, BROKER_PASSWORD), topic, [b"x%d" % i for i in range(20)]) == []
    assert "failed authentication" not in logs(brokers)
