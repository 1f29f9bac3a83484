"""Security with real clients: TLS listeners (rustls on the broker) read by librdkafka
(confluent-kafka) and kafka-python.

Certificates are made by the test itself with Debian's `openssl`: a CA, a broker certificate
it signs (SAN 127.0.0.1 and localhost), and a second, unrelated CA that clients must not trust.
"""

import os
import re
import subprocess
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import Gregor, free_port, gregor_cli, wait_until


def openssl(*args, cwd):
    out = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
            "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=d)
    return os.path.join(d, f"{name}.pem")


def make_leaf(d, ca, name, cn):
    """A certificate for `cn` signed by `ca`; returns (cert chain path, key path)."""
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}/OU=eng/O=gregor",
            "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=d)
    return os.path.join(d, f"{name}.pem"), os.path.join(d, f"{name}.key")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("certs"))
    ca = make_ca(d, "ca")
    other_ca = make_ca(d, "other-ca")
    cert, key = make_leaf(d, "ca", "broker", "broker0")
    keystore = os.path.join(d, "broker-keystore.pem")
    with open(keystore, "w") as out:
        out.write(open(key).read() + open(cert).read())
    return {"dir": d, "ca": ca, "other_ca": other_ca, "cert": cert, "key": key, "keystore": keystore}


def start_broker(tmp_path, listeners, extra=(), name="secure"):
    """A broker with a PLAINTEXT listener (inter-broker) plus `listeners`
    ({NAME: protocol}); returns (Gregor, {NAME: port})."""
    ports = {"PLAINTEXT": free_port(), **{n: free_port() for n in listeners}}
    admin = free_port()
    spec = ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items())
    protocol_map = ",".join(["PLAINTEXT:PLAINTEXT", *(f"{n}:{proto}" for n, proto in listeners.items())])
    args = [
        "server", "--data-dir", str(tmp_path / name),
        "--override", f"listeners={spec}",
        "--override", f"listener.security.protocol.map={protocol_map}",
        "--override", "inter.broker.listener.name=PLAINTEXT",
        "--override", f"admin.listener=127.0.0.1:{admin}",
        "--override", "offsets.topic.replication.factor=1",
    ]
    for o in extra:
        args += ["--override", o]
    g = Gregor(args, tmp_path / name, list(ports.values()), admin, tmp_path / f"{name}.log")
    return g.start(), ports


@pytest.fixture
def ssl_broker(tmp_path, certs):
    g, ports = start_broker(tmp_path, {"SSL": "SSL"}, [
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={certs['keystore']}",
    ])
    yield g, ports
    g.stop()


def produce_consume(conf, topic, n=20):
    """Creates `topic`, produces n messages and reads them back, all with client config `conf`."""
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=30)
    p = Producer({**conf, "acks": "all"})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": "g-" + topic, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    deadline_polls = 300
    while len(got) < n and deadline_polls:
        deadline_polls -= 1
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [b"v%d" % i for i in range(n)]


def test_librdkafka_over_ssl_produces_and_consumes(ssl_broker, certs):
    g, ports = ssl_broker
    conf = {
        "bootstrap.servers": f"127.0.0.1:{ports['SSL']}",
        "security.protocol": "SSL",
        "ssl.ca.location": certs["ca"],
    }
    produce_consume(conf, "tls-" + uuid.uuid4().hex[:8])
    # Metadata over SSL answers the SSL listener's endpoint, not the PLAINTEXT one.
    md = AdminClient(conf).list_topics(timeout=10)
    assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", ports["SSL"])]


def test_client_trusting_another_ca_fails_the_handshake(ssl_broker, certs):
    g, ports = ssl_broker
    a = AdminClient({
        "bootstrap.servers": f"127.0.0.1:{ports['SSL']}",
        "security.protocol": "SSL",
        "ssl.ca.location": certs["other_ca"],
    })
    with pytest.raises(KafkaException):
        a.list_topics(timeout=5)
    wait_until(lambda: "SSL handshake failed" in g.log_text(), what="the broker logs the failed handshake")
    # A plaintext client on the SSL port does not get Kafka answers either.
    with pytest.raises(KafkaException):
        AdminClient({"bootstrap.servers": f"127.0.0.1:{ports['SSL']}"}).list_topics(timeout=3)


def test_gregor_cli_over_ssl_with_command_config(ssl_broker, certs, tmp_path):
    """`gregor topics` and `gregor configs` over the SSL listener with a librdkafka-style and a
    Java-style --command-config; a client trusting another CA, or naming no CA, is refused
    with a message and exits non-zero."""
    g, ports = ssl_broker
    bootstrap = f"127.0.0.1:{ports['SSL']}"
    rdkafka_style = tmp_path / "ssl.properties"
    rdkafka_style.write_text(f"security.protocol=SSL\nssl.ca.location={certs['ca']}\n")
    java_style = tmp_path / "java-ssl.properties"
    java_style.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={certs['ca']}\n")
    topic = "cli-tls-" + uuid.uuid4().hex[:6]
    out = gregor_cli("topics", "--bootstrap-server", bootstrap, "--command-config", str(rdkafka_style),
                     "--create", "--topic", topic, "--partitions", "2", "--replication-factor", "1")
    assert out.returncode == 0, out.stderr
    out = wait_until(lambda: (lambda o: o.returncode == 0 and o.stdout.count("Partition: ") == 2 and o)(
        gregor_cli("topics", "--bootstrap-server", bootstrap, "--command-config", str(java_style),
                   "--describe", "--topic", topic)), what="the topic described over TLS")
    assert f"Topic: {topic}" in out.stdout
    out = gregor_cli("configs", "--bootstrap-server", bootstrap, "--command-config", str(rdkafka_style),
                     "--entity-type", "users", "--entity-name", "tls-user", "--alter",
                     "--add-config", "SCRAM-SHA-256=[password=pw]")
    assert out.returncode == 0, out.stderr
    other = tmp_path / "other.properties"
    other.write_text(f"security.protocol=SSL\nssl.ca.location={certs['other_ca']}\n")
    out = gregor_cli("topics", "--bootstrap-server", bootstrap, "--command-config", str(other), "--list")
    assert out.returncode != 0 and "TLS handshake failed" in out.stdout + out.stderr, (out.stdout, out.stderr)
    none = tmp_path / "none.properties"
    none.write_text("security.protocol=SSL\n")
    out = gregor_cli("topics", "--bootstrap-server", bootstrap, "--command-config", str(none), "--list")
    assert out.returncode != 0 and "ssl.ca.location" in out.stdout + out.stderr, (out.stdout, out.stderr)


def test_kafka_python_over_ssl(ssl_broker, certs):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic as KNewTopic

    g, ports = ssl_broker
    conf = {
        "bootstrap_servers": f"127.0.0.1:{ports['SSL']}",
        "security_protocol": "SSL",
        "ssl_cafile": certs["ca"],
    }
    topic = "kp-tls-" + uuid.uuid4().hex[:8]
    admin = KafkaAdminClient(**conf)
    admin.create_topics([KNewTopic(topic, 1, 1)])
    admin.close()
    p = KafkaProducer(acks="all", **conf)
    for i in range(10):
        p.send(topic, b"m%d" % i)
    p.flush(30)
    p.close()
    c = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, **conf)
    got = [m.value for m in c]
    c.close()
    assert got == [b"m%d" % i for i in range(10)]
    # A client that verifies against another CA is refused.
    bad = dict(conf, ssl_cafile=certs["other_ca"])
    with pytest.raises(Exception):
        KafkaAdminClient(request_timeout_ms=3000, bootstrap_timeout_ms=3000, **bad)


def test_mutual_tls_principal_and_refusal(tmp_path, certs):
    g, ports = start_broker(tmp_path, {"MTLS": "SSL"}, [
        f"listener.name.mtls.ssl.keystore.location={certs['keystore']}",
        f"listener.name.mtls.ssl.truststore.location={certs['ca']}",
        "listener.name.mtls.ssl.client.auth=required",
    ], name="mtls")
    try:
        client_cert, client_key = make_leaf(certs["dir"], "ca", "client-alice", "alice")
        conf = {
            "bootstrap.servers": f"127.0.0.1:{ports['MTLS']}",
            "security.protocol": "SSL",
            "ssl.ca.location": certs["ca"],
        }
        ok = dict(conf, **{"ssl.certificate.location": client_cert, "ssl.key.location": client_key})
        assert AdminClient(ok).list_topics(timeout=10).brokers
        # Without a client certificate the handshake fails (ssl.client.auth=required).
        with pytest.raises(KafkaException):
            AdminClient(conf).list_topics(timeout=5)
    finally:
        g.stop()


def pem_continued(text):
    """KIP-651's form in server.properties: the PEM's lines joined by ' \\' continuations,
    the next lines indented (Java's Properties.load joins them, spaces where newlines were)."""
    return " \\\n    ".join(text.strip().splitlines())


def pem_escaped(text):
    """The same value on one line, its newlines written as \\n escapes."""
    return text.strip().replace("\n", "\\n")


def start_with_properties(tmp_path, name, ssl_lines):
    """A broker started from a server.properties file with a PLAINTEXT and an SSL listener
    plus `ssl_lines`; returns (Gregor, SSL port)."""
    plain, ssl, admin = free_port(), free_port(), free_port()
    props = tmp_path / f"{name}.properties"
    props.write_text(
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl}\n"
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL\n"
        "inter.broker.listener.name=PLAINTEXT\n"
        f"admin.listener=127.0.0.1:{admin}\n"
        # One broker: the offsets topic's replicas as the shipped file sets them.
        "offsets.topic.replication.factor=1\n"
        "ssl.keystore.type=PEM\n" + ssl_lines + "\n")
    args = ["server", "--data-dir", str(tmp_path / name), "--config", str(props)]
    return Gregor(args, tmp_path / name, [plain, ssl], admin, tmp_path / f"{name}.log"), ssl


@pytest.mark.parametrize("form", ["continued", "escaped", "encrypted"])
def test_inline_pem_keys_in_server_properties(tmp_path, certs, form):
    """KIP-651: ssl.keystore.key and ssl.keystore.certificate.chain written inline in
    server.properties, as continuation lines, as \\n escapes, and an ENCRYPTED PRIVATE KEY
    with ssl.key.password; librdkafka then produces and consumes over the SSL listener."""
    key = open(certs["key"]).read()
    chain = open(certs["cert"]).read()
    extra = ""
    if form == "encrypted":
        openssl("pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", certs["key"], "-passout", "pass:s3cret",
                "-out", "broker-enc.key", cwd=certs["dir"])
        key = open(os.path.join(certs["dir"], "broker-enc.key")).read()
        assert "ENCRYPTED PRIVATE KEY" in key
        extra = "ssl.key.password=s3cret\n"
    encode = pem_escaped if form == "escaped" else pem_continued
    lines = (extra + f"ssl.keystore.key={encode(key)}\n"
             f"ssl.keystore.certificate.chain={encode(chain)}")
    g, ssl_port = start_with_properties(tmp_path, form, lines)
    g.start()
    try:
        conf = {
            "bootstrap.servers": f"127.0.0.1:{ssl_port}",
            "security.protocol": "SSL",
            "ssl.ca.location": certs["ca"],
        }
        produce_consume(conf, f"inline-{form}-" + uuid.uuid4().hex[:6])
    finally:
        g.stop()


def test_a_bad_inline_key_names_its_setting(tmp_path, certs):
    """A key that is not one, or an encrypted key without its password: the error names the
    setting and says what is wrong in words (no '(inline)' location, no byte dump)."""
    chain = pem_continued(open(certs["cert"]).read())
    openssl("pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", certs["key"], "-passout", "pass:pw",
            "-out", "bad-enc.key", cwd=certs["dir"])
    encrypted = pem_continued(open(os.path.join(certs["dir"], "bad-enc.key")).read())
    for name, lines, key, words in [
        ("cert-as-key", f"ssl.keystore.key={chain}\nssl.keystore.certificate.chain={chain}",
         "ssl.keystore.key", "not a PEM private key"),
        ("no-password", f"ssl.keystore.key={encrypted}\nssl.keystore.certificate.chain={chain}",
         "ssl.keystore.key", "ssl.key.password"),
        ("wrong-password", f"ssl.key.password=nope\nssl.keystore.key={encrypted}\n"
         f"ssl.keystore.certificate.chain={chain}", "ssl.keystore.key", "cannot decrypt"),
        ("cut-chain", "ssl.keystore.key=" + pem_continued(open(certs["key"]).read()) +
         "\nssl.keystore.certificate.chain=-----BEGIN CERTIFICATE----- MIIB",
         "ssl.keystore.certificate.chain", "has no matching -----END CERTIFICATE-----"),
    ]:
        g, _ = start_with_properties(tmp_path, name, lines)
        out = subprocess.run([os.environ.get("GREGOR_BIN") or "target/debug/gregor", *g.args],
                             capture_output=True, text=True, timeout=30)
        err = out.stderr + out.stdout
        assert out.returncode != 0, name
        assert f"for {key}:" in err and words in err, (name, err)
        assert "(inline)" not in err and not re.search(r"\[\d+, \d+", err), (name, err)
        assert "MII" not in err, ("no PEM text in the error", name, err)


def test_bad_tls_settings_refuse_to_start(tmp_path, certs):
    for overrides, message in [
        ([], "needs ssl.keystore.location"),
        (["ssl.keystore.type=JKS", f"ssl.keystore.location={certs['keystore']}"], "only PEM is supported"),
        ([f"ssl.keystore.location={certs['cert']}"], "not a PEM private key"),
        ([f"ssl.keystore.location={certs['keystore']}", "ssl.enabled.protocols=TLSv1.1"], "not supported"),
        ([f"ssl.keystore.location={certs['keystore']}", "ssl.client.auth=required"], "ssl.truststore"),
    ]:
        ports = [free_port(), free_port()]
        out = subprocess.run(
            [os.environ.get("GREGOR_BIN") or "target/debug/gregor", "server", "--data-dir", str(tmp_path / "bad"),
             "--override", f"listeners=PLAINTEXT://127.0.0.1:{ports[0]},SSL://127.0.0.1:{ports[1]}",
             "--override", f"admin.listener=127.0.0.1:{free_port()}",
             *sum((["--override", o] for o in overrides), [])],
            capture_output=True, text=True, timeout=30)
        assert out.returncode != 0, overrides
        assert message in out.stderr + out.stdout, (overrides, out.stderr)
