"""The data plane with real clients: Produce, Fetch, ListOffsets, DeleteRecords and
InitProducerId against `gregor server`, via librdkafka (confluent-kafka, kcat) and
kafka-python. Consumers read with explicit partition assignments (no consumer group)."""

import os
import subprocess
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import wait_until


def create_topic(bootstrap, name, partitions=1, config=None, replication_factor=1):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=config or {})
    admin.create_topics([topic])[name].result(timeout=30)

    def leaders_known():
        md = admin.list_topics(name, timeout=10).topics.get(name)
        return md is not None and md.error is None and len(md.partitions) == partitions and all(
            p.leader >= 0 for p in md.partitions.values()
        )

    wait_until(leaders_known, what=f"{name} has leaders")
    return admin


def produce_all(bootstrap, topic, messages, **config):
    """Produces (key, value, headers, partition) tuples; returns the delivered offsets."""
    delivered = []
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            delivered.append((msg.partition(), msg.offset()))

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    for key, value, headers, partition in messages:
        p.produce(topic, value=value, key=key, headers=headers, partition=partition, on_delivery=on_delivery)
    assert p.flush(30) == 0
    assert not errors, errors
    return delivered


def consume_assigned(bootstrap, topic, partition, offset, count, timeout=30):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "data-plane-test",
        "enable.auto.commit": False,
        "enable.partition.eof": False,
    })
    c.assign([TopicPartition(topic, partition, offset)])
    out = []
    deadline = time.time() + timeout
    while len(out) < count and time.time() < deadline:
        msg = c.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        out.append(msg)
    c.close()
    return out


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("acks", ["1", "all"])
def test_librdkafka_round_trip_every_codec(server, codec, acks):
    topic = f"rt-{codec}-{acks}"
    create_topic(server.bootstrap, topic)
    messages = [
        (f"k{i}".encode(), os.urandom(16) + f"value-{i}".encode() * (i % 7 + 1), [("h", f"{i}".encode()), ("n", None)], 0)
        for i in range(500)
    ]
    delivered = produce_all(server.bootstrap, topic, messages, acks=acks, **{"compression.type": codec})
    assert sorted(o for _, o in delivered) == list(range(500))
    got = consume_assigned(server.bootstrap, topic, 0, 0, 500)
    assert [m.offset() for m in got] == list(range(500))
    for (key, value, headers, _), m in zip(messages, got):
        assert m.key() == key
        assert m.value() == value
        assert m.headers() == headers


def test_acks_zero_is_not_answered_but_stored(server):
    topic = "acks0"
    create_topic(server.bootstrap, topic)
    messages = [(None, f"m{i}".encode(), None, 0) for i in range(200)]
    produce_all(server.bootstrap, topic, messages, acks="0")
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "acks0"})
    wait_until(lambda: c.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1] == 200,
               what="200 records stored")
    c.close()
    got = consume_assigned(server.bootstrap, topic, 0, 0, 200)
    assert [m.value() for m in got] == [v for _, v, _, _ in messages]


def test_watermarks_offsets_for_times_and_delete_records(server):
    topic = "offsets"
    admin = create_topic(server.bootstrap, topic)
    base = int(time.time() * 1000) - 100_000
    p = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(10):
        p.produce(topic, value=f"v{i}".encode(), partition=0, timestamp=base + i * 1000)
        p.flush(10)
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "offsets"})
    tp = TopicPartition(topic, 0)
    assert c.get_watermark_offsets(tp, timeout=10) == (0, 10)
    found = c.offsets_for_times([TopicPartition(topic, 0, base + 4500)], timeout=10)
    assert found[0].offset == 5
    found = c.offsets_for_times([TopicPartition(topic, 0, base + 999_999)], timeout=10)
    assert found[0].offset == -1  # no record that late: end of log (librdkafka's OFFSET_END)
    result = admin.delete_records([TopicPartition(topic, 0, 4)])
    for fut in result.values():
        deleted = fut.result(timeout=10)
        assert deleted.low_watermark == 4
    assert c.get_watermark_offsets(tp, timeout=10) == (4, 10)
    c.close()
    got = consume_assigned(server.bootstrap, topic, 0, 4, 6)
    assert [m.value() for m in got] == [f"v{i}".encode() for i in range(4, 10)]


def test_idempotent_producer_writes_each_message_once(server):
    topic = "idem"
    create_topic(server.bootstrap, topic, partitions=2)
    messages = [(f"k{i}".encode(), f"v{i}".encode(), None, i % 2) for i in range(1000)]
    delivered = produce_all(server.bootstrap, topic, messages, **{"enable.idempotence": True, "linger.ms": 1})
    assert len(delivered) == 1000
    for partition in (0, 1):
        got = consume_assigned(server.bootstrap, topic, partition, 0, 500)
        assert [m.value() for m in got] == [v for _, v, _, p in messages if p == partition]
        c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "idem"})
        assert c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10) == (0, 500)
        c.close()


def test_kafka_python_producer_and_consumer(server):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    topic = "kpy"
    create_topic(server.bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all")
    offsets = []
    for i in range(100):
        md = producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0,
                           headers=[("h", b"x")]).get(timeout=30)
        offsets.append(md.offset)
    producer.close()
    assert offsets == list(range(100))
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=10_000)
    consumer.assign([KTP(topic, 0)])
    consumer.seek_to_beginning()
    got = []
    for msg in consumer:
        got.append(msg)
        if len(got) == 100:
            break
    consumer.close()
    assert [m.offset for m in got] == list(range(100))
    assert [m.value for m in got] == [f"v{i}".encode() for i in range(100)]
    assert all(m.headers == [("h", b"x")] for m in got)


def test_errors_for_unknown_partitions_and_offsets_out_of_range(server):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    topic = "errs"
    create_topic(server.bootstrap, topic)
    produce_all(server.bootstrap, topic, [(None, b"x", None, 0)] * 3)
    # A consumer asked to read past the end is reset by its policy (OFFSET_OUT_OF_RANGE).
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    consumer.assign([KTP(topic, 0)])
    consumer.seek(KTP(topic, 0), 50)
    got = [next(consumer) for _ in range(3)]
    consumer.close()
    assert [m.offset for m in got] == [0, 1, 2]
    # Producing to a partition that does not exist fails on the client with an error.
    p = Producer({"bootstrap.servers": server.bootstrap, "message.timeout.ms": 3000})
    errors = []
    p.produce(topic, value=b"x", partition=7, on_delivery=lambda err, msg: errors.append(err))
    p.flush(10)
    assert errors and errors[0] is not None


def test_kcat_round_trips_a_file_byte_for_byte(server, tmp_path):
    topic = "kcat-data"
    create_topic(server.bootstrap, topic)
    payload = os.urandom(200_000)
    src = tmp_path / "blob.bin"
    src.write_bytes(payload)
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"line {i} {'x' * (i % 50)}\n" for i in range(2000)))
    # The whole file as one message, then every line as a message.
    out = subprocess.run(["kcat", "-b", server.bootstrap, "-P", "-t", topic, "-p", "0", str(src)],
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    out = subprocess.run(["kcat", "-b", server.bootstrap, "-P", "-t", topic, "-p", "0", "-l", str(lines)],
                         capture_output=True, timeout=60)
    assert out.returncode == 0, out.stderr
    blob = subprocess.run(["kcat", "-b", server.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "0",
                           "-c", "1", "-e", "-q", "-D", ""], capture_output=True, timeout=60)
    assert blob.returncode == 0, blob.stderr
    assert blob.stdout == payload
    text = subprocess.run(["kcat", "-b", server.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "1",
                           "-e", "-q"], capture_output=True, timeout=60)
    assert text.returncode == 0, text.stderr
    assert text.stdout == lines.read_bytes()


def test_data_survives_a_restart(make_server):
    g = make_server("file.delete.delay.ms=1000")
    topic = "durable"
    create_topic(g.bootstrap, topic)
    messages = [(None, f"v{i}".encode(), None, 0) for i in range(300)]
    produce_all(g.bootstrap, topic, messages, acks="all")
    g.restart()
    got = consume_assigned(g.bootstrap, topic, 0, 0, 300)
    assert [m.value() for m in got] == [v for _, v, _, _ in messages]
    # Clean shutdown wrote the recovery point.
    checkpoint = os.path.join(g.data_dir, "logs", "recovery-point-offset-checkpoint")
    assert f"{topic} 0 300" in open(checkpoint).read()


def test_long_poll_answers_when_data_arrives(server):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    topic = "longpoll"
    create_topic(server.bootstrap, topic)
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, enable_auto_commit=False,
                             fetch_max_wait_ms=5000, fetch_min_bytes=1, consumer_timeout_ms=15_000)
    consumer.assign([KTP(topic, 0)])
    consumer.seek(KTP(topic, 0), 0)
    consumer.poll(timeout_ms=100)  # starts a fetch that parks on the empty log

    def later():
        time.sleep(1.0)
        produce_all(server.bootstrap, topic, [(None, b"wake", None, 0)])

    import threading

    t = threading.Thread(target=later)
    t.start()
    start = time.time()
    msg = next(consumer)
    elapsed = time.time() - start
    t.join()
    consumer.close()
    assert msg.value == b"wake"
    # Answered on the append, well before the 5 s max wait.
    assert elapsed < 4.0, elapsed


def test_dev_cluster_replicates_to_every_follower(make_cluster):
    g = make_cluster(3)
    topic = "replicated"
    create_topic(g.bootstrap, topic, partitions=2, replication_factor=3)
    messages = [(f"k{i}".encode(), f"v{i}".encode() * 10, None, i % 2) for i in range(400)]
    delivered = produce_all(g.bootstrap, topic, messages, acks="all")
    assert len(delivered) == 400
    for partition in (0, 1):
        got = consume_assigned(g.bootstrap, topic, partition, 0, 200)
        assert [m.value() for m in got] == [v for _, v, _, p in messages if p == partition]

    # acks=all answered means every in-sync follower has the records; their segment files
    # are byte-identical copies of the leader's.
    def segments(partition):
        out = []
        for broker in range(3):
            path = os.path.join(g.data_dir, f"broker-{broker}", "logs", f"{topic}-{partition}",
                                "00000000000000000000.log")
            out.append(open(path, "rb").read() if os.path.exists(path) else None)
        return out

    for partition in (0, 1):
        files = wait_until(lambda: (lambda f: f if f[0] and f[0] == f[1] == f[2] else None)(segments(partition)),
                           what=f"{topic}-{partition} replicated to all three brokers")
        assert len(files[0]) > 200 * 20


@pytest.mark.parametrize("fallback", ["0.10.0", "0.11.0", "2.0.0"])
def test_librdkafka_without_api_version_request(server, fallback):
    """librdkafka with `api.version.request=false` (issue 16: "librdkafka with
    api.version.request on and off"): it never asks ApiVersions and speaks the versions of
    `broker.version.fallback`, old message formats included (0.10.0: magic 1, no headers).
    Produce, fetch by assignment, and a group's commit all work at those versions."""
    topic = f"nover-{fallback.replace('.', '-')}"
    create_topic(server.bootstrap, topic)
    old = {"api.version.request": False, "broker.version.fallback": fallback}
    with_headers = fallback != "0.10.0"
    messages = [(f"k{i}".encode(), f"v{i}".encode(), [("h", f"{i}".encode())] if with_headers else None, 0)
                for i in range(100)]
    delivered = produce_all(server.bootstrap, topic, messages, **old)
    assert sorted(o for _, o in delivered) == list(range(100))
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": f"nover-{fallback}",
                  "enable.auto.commit": False, **old})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.time() + 30
    while len(got) < 100 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(m)
    assert [(m.offset(), m.key(), m.value()) for m in got] == [(i, k, v) for i, (k, v, _, _) in enumerate(messages)]
    if with_headers:
        assert [m.headers() for m in got] == [h for _, _, h, _ in messages]
    c.commit(offsets=[TopicPartition(topic, 0, 100)], asynchronous=False)
    assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 100
    c.close()
