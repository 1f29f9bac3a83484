"""SASL with real clients (issue 13): librdkafka (confluent-kafka) and kafka-python on
SASL_PLAINTEXT and SASL_SSL listeners, with PLAIN (users from the listener's JAAS line) and
SCRAM-SHA-256/512 (credentials in /config/users/<user> of a real ZooKeeper, written here the
way Kafka's tools write them, computed with Python's hashlib, independently of the broker)."""

import base64
import hashlib
import hmac
import json
import logging
import os
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from conftest import gregor_cli, wait_until
from test_security import certs, produce_consume, start_broker  # noqa: F401 (certs is a fixture)

ZK = os.environ.get("GREGOR_TEST_ZOOKEEPER")
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-secret" user_admin="admin-secret";')
SCRAM_USERS = {"bob": "bob-secret"}


def scram_credential(hash_name, password, salt, iterations):
    """Kafka's ScramCredentialUtils.credentialToString of a password."""
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    stored_key = hashlib.new(hash_name, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", hash_name).digest()
    b64 = lambda b: base64.b64encode(b).decode()
    return f"salt={b64(salt)},stored_key={b64(stored_key)},server_key={b64(server_key)},iterations={iterations}"


def write_scram_user(zk, user, password, iterations=4096):
    config = {
        "SCRAM-SHA-256": scram_credential("sha256", password, os.urandom(16), iterations),
        "SCRAM-SHA-512": scram_credential("sha512", password, os.urandom(16), iterations),
    }
    data = json.dumps({"version": 1, "config": config}).encode()
    if zk.exists(f"/config/users/{user}"):
        zk.set(f"/config/users/{user}", data)
    else:
        zk.create(f"/config/users/{user}", data, makepath=True)


@pytest.fixture
def zk():
    if not ZK:
        pytest.fail("GREGOR_TEST_ZOOKEEPER is not set: run the tests through scripts/test.sh")
    chroot = f"/gregor-sasl-{uuid.uuid4().hex[:8]}"
    client = KazooClient(hosts=ZK + chroot)
    client.start(timeout=10)
    client.ensure_path("/")
    yield chroot, client
    client.stop()


def sasl_broker(tmp_path, zk, listeners, extra=(), name="sasl"):
    chroot, client = zk
    for user, password in SCRAM_USERS.items():
        write_scram_user(client, user, password)
    return start_broker(tmp_path, listeners, [
        f"zookeeper.connect={ZK}{chroot}",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        f"sasl.jaas.config={JAAS}",
        *extra,
    ], name=name)


@pytest.fixture
def sasl_plaintext(tmp_path, zk):
    g, ports = sasl_broker(tmp_path, zk, {"SASL": "SASL_PLAINTEXT"})
    yield g, ports, zk[1]
    g.stop()


def rdkafka_conf(port, mechanism, user, password, protocol="SASL_PLAINTEXT"):
    return {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": protocol,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "alice", "alice-secret"),
    ("SCRAM-SHA-256", "bob", "bob-secret"),
    ("SCRAM-SHA-512", "bob", "bob-secret"),
])
def test_librdkafka_authenticates_produces_and_consumes(sasl_plaintext, mechanism, user, password):
    g, ports, _ = sasl_plaintext
    conf = rdkafka_conf(ports["SASL"], mechanism, user, password)
    produce_consume(conf, "sasl-" + mechanism.lower() + "-" + uuid.uuid4().hex[:6], n=10)
    md = AdminClient(conf).list_topics(timeout=10)
    assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", ports["SASL"])]


@pytest.mark.parametrize("mechanism,user,message", [
    ("PLAIN", "alice", "Authentication failed: Invalid username or password"),
    ("SCRAM-SHA-256", "bob", "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"),
    ("SCRAM-SHA-512", "nobody", "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512"),
])
def test_librdkafka_wrong_password_is_refused_with_kafkas_message(sasl_plaintext, mechanism, user, message):
    g, ports, _ = sasl_plaintext
    errors = []
    conf = dict(rdkafka_conf(ports["SASL"], mechanism, user, "wrong"), error_cb=errors.append)
    a = AdminClient(conf)
    with pytest.raises(KafkaException):
        a.list_topics(timeout=4)

    def reported():
        a.poll(0.1)  # error_cb runs from poll
        return any(message in e.str() for e in errors)

    wait_until(reported, what=f"librdkafka reports {message!r}")
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), [e.str() for e in errors]
    wait_until(lambda: f"Failed authentication with 127.0.0.1 ({message})" in g.log_text(),
               what="the broker logs the failed authentication")


def test_unauthenticated_client_gets_nothing(sasl_plaintext):
    g, ports, _ = sasl_plaintext
    # A PLAINTEXT client on the SASL port sends Metadata first: the broker closes the connection.
    with pytest.raises(KafkaException):
        AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['SASL']}"}).list_topics(timeout=3)
    wait_until(lambda: "Unexpected Kafka request of type Metadata during SASL authentication" in g.log_text(),
               what="the broker logs the unexpected request")


def test_changed_scram_password_holds_for_the_next_connection(sasl_plaintext):
    g, ports, zk = sasl_plaintext
    write_scram_user(zk, "carol", "first", iterations=8192)
    ok = rdkafka_conf(ports["SASL"], "SCRAM-SHA-256", "carol", "first")
    assert AdminClient(ok).list_topics(timeout=10).brokers
    write_scram_user(zk, "carol", "second")
    with pytest.raises(KafkaException):
        AdminClient(ok).list_topics(timeout=4)
    assert AdminClient(dict(ok, **{"sasl.password": "second"})).list_topics(timeout=10).brokers


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "alice", "alice-secret"),
    ("SCRAM-SHA-256", "bob", "bob-secret"),
    ("SCRAM-SHA-512", "bob", "bob-secret"),
])
def test_kafka_python_over_sasl_plaintext(sasl_plaintext, mechanism, user, password, caplog):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic as KNewTopic

    g, ports, _ = sasl_plaintext
    conf = {
        "bootstrap_servers": f"127.0.0.1:{ports['SASL']}",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }
    topic = "kp-sasl-" + uuid.uuid4().hex[:8]
    admin = KafkaAdminClient(**conf)
    admin.create_topics([KNewTopic(topic, 1, 1)])
    admin.close()
    p = KafkaProducer(acks="all", **conf)
    for i in range(5):
        p.send(topic, b"m%d" % i)
    p.flush(30)
    p.close()
    c = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, **conf)
    got = [m.value for m in c]
    c.close()
    assert got == [b"m%d" % i for i in range(5)]
    # A wrong password: kafka-python reads SASL_AUTHENTICATION_FAILED with the broker's message
    # (logged by its connection manager), then gives up bootstrapping.
    bad = dict(conf, sasl_plain_password="wrong")
    with caplog.at_level(logging.WARNING, logger="kafka"):
        with pytest.raises(Exception):
            KafkaAdminClient(request_timeout_ms=3000, bootstrap_timeout_ms=3000, **bad)
    expected = ("Authentication failed: Invalid username or password" if mechanism == "PLAIN" else
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}")
    assert f"SaslAuthenticationFailedError: {expected}" in caplog.text


def test_sasl_ssl_with_both_clients(tmp_path, zk, certs):
    from kafka.admin import KafkaAdminClient

    g, ports = sasl_broker(tmp_path, zk, {"SASL_SSL": "SASL_SSL"}, [
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={certs['keystore']}",
    ], name="sasl-ssl")
    try:
        conf = dict(rdkafka_conf(ports["SASL_SSL"], "SCRAM-SHA-512", "bob", "bob-secret", "SASL_SSL"),
                    **{"ssl.ca.location": certs["ca"]})
        produce_consume(conf, "sasl-ssl-" + uuid.uuid4().hex[:6], n=5)
        with pytest.raises(KafkaException):
            AdminClient(dict(conf, **{"sasl.password": "wrong"})).list_topics(timeout=4)
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{ports['SASL_SSL']}", security_protocol="SASL_SSL",
                                 ssl_cafile=certs["ca"], sasl_mechanism="PLAIN",
                                 sasl_plain_username="alice", sasl_plain_password="alice-secret")
        assert admin.list_topics() is not None
        admin.close()
        # The gregor CLI over SASL_SSL (TLS and a SCRAM login), Java client keys.
        command_config = tmp_path / "sasl-ssl.properties"
        command_config.write_text(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
            f"ssl.truststore.type=PEM\nssl.truststore.location={certs['ca']}\n"
            'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="bob-secret";\n')
        out = gregor_cli("topics", "--bootstrap-server", f"127.0.0.1:{ports['SASL_SSL']}",
                         "--command-config", str(command_config), "--list", timeout=90)
        assert out.returncode == 0, (out.stdout, out.stderr)
        assert any(line.startswith("sasl-ssl-") for line in out.stdout.splitlines()), out.stdout
    finally:
        g.stop()


def test_gregor_configs_manages_scram_credentials(sasl_plaintext, tmp_path):
    """kafka-configs.sh's shape: --alter --add-config 'SCRAM-SHA-256=[...]', --describe,
    --delete-config, over a SASL listener with --command-config (Java client keys)."""
    g, ports, zk = sasl_plaintext
    cfg = tmp_path / "admin.properties"
    login = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";'
    cfg.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config={login}\n")
    base = ["configs", "--bootstrap-server", f"127.0.0.1:{ports['SASL']}", "--command-config", str(cfg),
            "--entity-type", "users"]
    out = gregor_cli(*base, "--entity-name", "dave", "--alter",
                     "--add-config", "SCRAM-SHA-256=[iterations=8192,password=dave-secret],SCRAM-SHA-512=[password=dave-secret]")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Completed updating config for user dave."
    # Stored as Kafka stores it, and a notification for the other brokers.
    stored = json.loads(zk.get("/config/users/dave")[0])["config"]
    assert stored["SCRAM-SHA-256"].startswith("salt=") and stored["SCRAM-SHA-256"].endswith(",iterations=8192")
    assert any(json.loads(zk.get(f"/config/changes/{c}")[0])["entity_path"] == "users/dave"
               for c in zk.get_children("/config/changes"))
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"]:
        assert AdminClient(rdkafka_conf(ports["SASL"], mechanism, "dave", "dave-secret")).list_topics(timeout=10).brokers
    out = gregor_cli(*base, "--entity-name", "dave", "--describe")
    assert out.stdout.strip() == "SCRAM credential configs for user-principal 'dave' are SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096", out
    out = gregor_cli(*base, "--describe")
    assert "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=4096, SCRAM-SHA-512=iterations=4096" in out.stdout
    assert out.stdout.index("'bob'") < out.stdout.index("'dave'")
    out = gregor_cli(*base, "--entity-name", "dave", "--alter", "--delete-config", "SCRAM-SHA-512")
    assert out.returncode == 0, out.stderr
    with pytest.raises(KafkaException):
        AdminClient(rdkafka_conf(ports["SASL"], "SCRAM-SHA-512", "dave", "dave-secret")).list_topics(timeout=4)
    # Kafka's refusals.
    out = gregor_cli(*base, "--entity-name", "dave", "--alter", "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]")
    assert out.returncode != 0 and "Iterations 100 is less than the minimum 4096 required for SCRAM-SHA-256" in out.stderr
    out = gregor_cli(*base, "--entity-name", "dave", "--alter", "--delete-config", "SCRAM-SHA-512")
    assert out.returncode != 0 and "ResourceNotFoundException: Attempt to delete a user credential that does not exist" in out.stderr
    out = gregor_cli(*base, "--entity-name", "nobody", "--describe")
    assert out.stdout.strip() == ("Error retrieving SCRAM credential configs for user-principal 'nobody': "
                                  "ResourceNotFoundException: Attempt to describe a user credential that does not exist: nobody")
    # Without credentials the SASL listener refuses the tool.
    out = gregor_cli("configs", "--bootstrap-server", f"127.0.0.1:{ports['SASL']}", "--entity-type", "users", "--describe", timeout=90)
    assert out.returncode != 0


def test_gregor_consumer_groups_over_sasl_plaintext(sasl_plaintext, tmp_path):
    """kafka-consumer-groups.sh's --command-config: --list and --describe over a SASL
    listener with a librdkafka-style file; without it the SASL listener refuses the tool."""
    g, ports, _ = sasl_plaintext
    conf = rdkafka_conf(ports["SASL"], "SCRAM-SHA-256", "bob", "bob-secret")
    topic = "sasl-groups-" + uuid.uuid4().hex[:6]
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=30)
    producer = Producer(conf)
    for i in range(5):
        producer.produce(topic, f"m{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": "sasl-group", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen = 0
    deadline = time.time() + 60
    while seen < 5 and time.time() < deadline:
        m = consumer.poll(1.0)
        if m is not None and m.error() is None:
            seen += 1
    assert seen == 5
    consumer.commit(asynchronous=False)
    consumer.close()

    cfg = tmp_path / "groups.properties"
    cfg.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                   "sasl.username=bob\nsasl.password=bob-secret\n")
    base = ["consumer-groups", "--bootstrap-server", f"127.0.0.1:{ports['SASL']}", "--command-config", str(cfg)]
    out = gregor_cli(*base, "--list", timeout=90)
    assert out.returncode == 0, out.stderr
    assert "sasl-group" in out.stdout.split(), out.stdout
    out = gregor_cli(*base, "--describe", "--group", "sasl-group", timeout=90)
    assert out.returncode == 0, out.stderr
    row = next(line.split() for line in out.stdout.splitlines() if topic in line)
    assert row[:5] == ["sasl-group", topic, "0", "5", "5"], out.stdout
    # A wrong password fails with the broker's SASL refusal; no file, no answer.
    cfg.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                   "sasl.username=bob\nsasl.password=wrong\n")
    out = gregor_cli(*base, "--list", timeout=90)
    assert out.returncode != 0 and "Authentication failed" in (out.stdout + out.stderr), out
    out = gregor_cli("consumer-groups", "--bootstrap-server", f"127.0.0.1:{ports['SASL']}", "--list", timeout=90)
    assert out.returncode != 0


def test_gregor_console_tools_and_get_offsets_over_sasl_plaintext(sasl_plaintext, tmp_path):
    """console-producer's --producer.config, console-consumer's --consumer.config and
    get-offsets' --command-config log in over a SASL listener."""
    g, ports, _ = sasl_plaintext
    conf = rdkafka_conf(ports["SASL"], "SCRAM-SHA-256", "bob", "bob-secret")
    topic = "sasl-console-" + uuid.uuid4().hex[:6]
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=30)
    cfg = tmp_path / "client.properties"
    cfg.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                   "sasl.username=bob\nsasl.password=bob-secret\n")
    bootstrap = f"127.0.0.1:{ports['SASL']}"
    import subprocess

    from conftest import GREGOR_BIN

    produced = subprocess.run([GREGOR_BIN, "console-producer", "--bootstrap-server", bootstrap, "--topic", topic,
                               "--producer.config", str(cfg)], input="one\ntwo\n", capture_output=True, text=True,
                              timeout=90)
    assert produced.returncode == 0, produced.stderr
    out = gregor_cli("console-consumer", "--bootstrap-server", bootstrap, "--topic", topic, "--partition", "0",
                     "--offset", "earliest", "--max-messages", "2", "--consumer.config", str(cfg), timeout=90)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["one", "two"]
    out = gregor_cli("get-offsets", "--bootstrap-server", bootstrap, "--topic", topic, "--command-config", str(cfg),
                     timeout=90)
    assert out.stdout == f"{topic}:0:2\n", out.stderr
    out = gregor_cli("get-offsets", "--bootstrap-server", bootstrap, "--topic", topic, timeout=90)
    assert out.returncode != 0
