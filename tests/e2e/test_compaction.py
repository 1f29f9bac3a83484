"""Records the broker looks inside, with real clients: log compaction (librdkafka and
kafka-python, compressed and not), retention on compacted topics, keyless records refused
on a compacted topic (librdkafka delivery reports), exact ListOffsets by time on every codec
(librdkafka, kafka-python, kcat -Q), and old message formats (kafka-python speaking
message format v1 through the converting produce and fetch paths)."""

import json
import os
import subprocess
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition

from conftest import wait_until
from test_data_plane import create_topic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

# The cleaner checks often, and retention too, so the tests need not wait long.
CLEANER = ["log.cleaner.backoff.ms=200", "log.retention.check.interval.ms=200"]


def compacted_config(**extra):
    config = {
        "cleanup.policy": "compact",
        "segment.bytes": "2048",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "1000",
    }
    config.update({k.replace("_", "."): v for k, v in extra.items()})
    return config


def produce(bootstrap, topic, messages, **config):
    """Produces (key, value) pairs in order; returns their offsets."""
    offsets = [None] * len(messages)
    errors = []

    def on_delivery(i):
        def cb(err, msg):
            if err is not None:
                errors.append(err)
            else:
                offsets[i] = msg.offset()
        return cb

    # Small batches, so segments roll (a segment holds at least one batch).
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10,
                  "enable.idempotence": False, **config})
    for i, (k, v) in enumerate(messages):
        p.produce(topic, key=k, value=v, partition=0, on_delivery=on_delivery(i))
        p.poll(0)
    assert p.flush(30) == 0
    assert not errors, errors
    return offsets


def read_all(bootstrap, topic):
    """Every record a fresh consumer reads from the start: [(offset, key, value)]."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"reader-{time.time()}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    })
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.time() + 30
    while time.time() < deadline:
        msg = c.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                break
            raise AssertionError(msg.error())
        out.append((msg.offset(), msg.key(), msg.value()))
    c.close()
    return out


def versions(n_keys, rounds, tombstone_every=None):
    """Keys k0..k{n-1}, each written `rounds` times; some keys end with a tombstone."""
    msgs = []
    for r in range(rounds):
        for k in range(n_keys):
            value = f"k{k}-v{r}-".encode() + os.urandom(40)
            if tombstone_every and r == rounds - 1 and k % tombstone_every == 0:
                value = None
            msgs.append((f"k{k}".encode(), value))
    return msgs


def filler(bootstrap, topic, n, tag, **config):
    """Unique keys, so the test keys leave the active segment and get cleaned."""
    return produce(bootstrap, topic, [(f"f-{tag}-{i}".encode(), os.urandom(200)) for i in range(n)], **config)


def check_compacted(records, messages, offsets, tombstones_gone):
    """A fresh consumer sees each test key once, at the offset of its latest write."""
    latest = {}
    for (k, v), o in zip(messages, offsets):
        latest[k] = (o, v)
    seen = {}
    last = -1
    for o, k, v in records:
        assert o > last, f"offsets increase ({o} after {last})"
        last = o
        if k in latest:
            assert k not in seen, f"{k} appears twice after cleaning: {seen[k]} and {o}"
            seen[k] = (o, v)
    for k, (o, v) in latest.items():
        if v is None and tombstones_gone:
            assert k not in seen, f"tombstone of {k} survived delete.retention.ms"
        else:
            assert seen.get(k) == (o, v), f"{k}: expected {(o, v)!r:.80}, read {seen.get(k)!r:.80}"
    offsets_read = [o for o, _, _ in records]
    assert offsets_read != list(range(len(offsets_read))), "cleaning left gaps in the offsets"


def compacted_once(bootstrap, topic, messages, offsets):
    def done():
        records = read_all(bootstrap, topic)
        try:
            check_compacted(records, messages, offsets, tombstones_gone=False)
            return records
        except AssertionError:
            return None
    return wait_until(done, timeout=60, interval=1, what=f"{topic} compacted")


@pytest.mark.parametrize("codec", CODECS)
def test_compaction_with_librdkafka(make_server, codec):
    server = make_server(*CLEANER)
    topic = f"compact-{codec}"
    create_topic(server.bootstrap, topic, config=compacted_config())
    messages = versions(20, 8, tombstone_every=5)
    offsets = produce(server.bootstrap, topic, messages, **{"compression.type": codec})
    filler(server.bootstrap, topic, 60, "a", **{"compression.type": codec})
    compacted_once(server.bootstrap, topic, messages, offsets)
    # Tombstones go once data written delete.retention.ms after them has been cleaned (the
    # delete horizon is the last cleaned segment's time minus delete.retention.ms): traffic
    # goes on, and within a few cleanings they are gone.
    time.sleep(1.5)
    rounds = iter(range(1000))

    def tombstones_gone():
        filler(server.bootstrap, topic, 30, f"b{next(rounds)}", **{"compression.type": codec})
        records = read_all(server.bootstrap, topic)
        try:
            check_compacted(records, messages, offsets, tombstones_gone=True)
            return True
        except AssertionError:
            return False
    wait_until(tombstones_gone, timeout=60, interval=1, what="tombstones removed")
    assert "cleaned log" in server.log_text()


@pytest.mark.parametrize("codec", [None, "gzip", "lz4", "snappy", "zstd"])
def test_compaction_with_kafka_python(make_server, codec):
    server = make_server(*CLEANER)
    topic = f"compact-kp-{codec}"
    create_topic(server.bootstrap, topic, config=compacted_config())
    p = KafkaProducer(bootstrap_servers=server.bootstrap, compression_type=codec, linger_ms=20, batch_size=600)
    messages = versions(15, 6, tombstone_every=4)
    futures = [p.send(topic, key=k, value=v, partition=0) for k, v in messages]
    p.flush()
    offsets = [f.get(timeout=30).offset for f in futures]
    for i in range(60):
        p.send(topic, key=f"f{i}".encode(), value=os.urandom(200), partition=0)
    p.flush()
    p.close()
    compacted_once(server.bootstrap, topic, messages, offsets)
    # kafka-python reads the cleaned log the same way.
    c = KafkaConsumer(bootstrap_servers=server.bootstrap, auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=3000)
    c.assign([KTopicPartition(topic, 0)])
    got = [(m.offset, m.key, m.value) for m in c]
    c.close()
    check_compacted(got, messages, offsets, tombstones_gone=False)


def test_retention_never_deletes_from_a_compacted_topic(make_server):
    server = make_server(*CLEANER)
    create_topic(server.bootstrap, "keep", config={
        "cleanup.policy": "compact", "retention.ms": "100", "retention.bytes": "100", "segment.bytes": "1024",
    })
    create_topic(server.bootstrap, "both", config={
        "cleanup.policy": "compact,delete", "retention.ms": "100", "segment.bytes": "1024",
    })
    for topic in ["keep", "both"]:
        produce(server.bootstrap, topic, [(f"u{i}".encode(), b"z" * 100) for i in range(100)])
    time.sleep(2)
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "wm"})
    low, high = c.get_watermark_offsets(TopicPartition("keep", 0), timeout=10)
    assert (low, high) == (0, 100), "a compact-only topic loses nothing to retention.ms"
    assert len(read_all(server.bootstrap, "keep")) == 100
    wait_until(lambda: c.get_watermark_offsets(TopicPartition("both", 0), timeout=10)[0] > 0,
               what="compact,delete applies retention")
    c.close()


def test_retention_ms_applies_under_compact_delete_active_segment_included(make_server):
    """retention.ms=1000 on 300 records (all in the active segment): under `delete` and
    `compact,delete` in any order and spacing Kafka accepts, the segment is rolled and
    deleted, so the earliest offset (ListOffsets) becomes the log end, as in Kafka. Offsets go
    on from there."""
    server = make_server(*CLEANER)
    topics = {"ret-d": "delete", "ret-cd": "compact,delete", "ret-dc": "delete, compact"}
    for topic, policy in topics.items():
        create_topic(server.bootstrap, topic, config={"cleanup.policy": policy, "retention.ms": "1000"})
        produce(server.bootstrap, topic, [(f"k{i}".encode(), b"v") for i in range(300)])
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "retention-wm"})
    try:
        for topic, policy in topics.items():
            tp = TopicPartition(topic, 0)
            wait_until(lambda: c.get_watermark_offsets(tp, timeout=10, cached=False) == (300, 300),
                       timeout=20, what=f"{policy} deletes records past retention.ms")
        assert produce(server.bootstrap, "ret-cd", [(b"k", b"after")]) == [300]
        assert c.get_watermark_offsets(TopicPartition("ret-cd", 0), timeout=10, cached=False) == (300, 301)
        c.assign([TopicPartition("ret-cd", 0, OFFSET_BEGINNING)])
        msg = None
        deadline = time.time() + 30
        while msg is None and time.time() < deadline:
            msg = c.poll(0.5)
        assert msg is not None and msg.error() is None, msg and msg.error()
        assert (msg.offset(), msg.key(), msg.value()) == (300, b"k", b"after")
    finally:
        c.close()


def test_keyless_record_on_a_compacted_topic_fails_per_record(server):
    create_topic(server.bootstrap, "nokeys", config={"cleanup.policy": "compact"})
    reports = []
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 50})
    for i in range(3):
        p.produce("nokeys", value=f"v{i}".encode(), partition=0,
                  on_delivery=lambda err, msg: reports.append(err))
    p.produce("nokeys", key=b"k", value=b"keyed", partition=0,
              on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(30) == 0
    assert len(reports) == 4
    # librdkafka's test 0011 expectation: each keyless record fails with INVALID_RECORD.
    codes = [e.code() if e else None for e in reports]
    assert codes[:3] == [KafkaError.INVALID_RECORD] * 3, codes
    # The keyed record shared the refused batch: librdkafka (KIP-467) fails it with
    # _INVALID_DIFFERENT_RECORD, since record_errors names only the keyless ones.
    assert codes[3] in (None, KafkaError._INVALID_DIFFERENT_RECORD), codes


@pytest.mark.parametrize("codec", CODECS)
def test_offsets_for_times_are_the_exact_record(server, codec):
    topic = f"times-{codec}"
    create_topic(server.bootstrap, topic)
    base = 1_700_000_000_000
    p = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 200, "compression.type": codec})
    # Three batches of ten records, 10 ms apart, so every lookup lands inside a batch.
    for b in range(3):
        for i in range(10):
            n = b * 10 + i
            p.produce(topic, key=f"k{n}".encode(), value=f"v{n}".encode(), partition=0, timestamp=base + 10 * n)
        p.flush(30)
    cases = [
        (base + 130, 13, base + 130),   # at a record
        (base + 125, 13, base + 130),   # between two records of a batch
        (base + 95, 10, base + 100),    # between batches
        (base - 5, 0, base),            # before everything
    ]
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "times"})
    for target, offset, _ in cases:
        got = c.offsets_for_times([TopicPartition(topic, 0, target)], timeout=10)[0]
        assert got.offset == offset, f"librdkafka {codec} {target - base}: {got.offset}"
    after = c.offsets_for_times([TopicPartition(topic, 0, base + 1000)], timeout=10)[0]
    assert after.offset == -1, "after the last record: no offset (librdkafka reports -1)"
    c.close()
    k = KafkaConsumer(bootstrap_servers=server.bootstrap)
    for target, offset, ts in cases:
        got = k.offsets_for_times({KTopicPartition(topic, 0): target})[KTopicPartition(topic, 0)]
        assert (got.offset, got.timestamp) == (offset, ts), f"kafka-python {codec} {target - base}: {got}"
    assert k.offsets_for_times({KTopicPartition(topic, 0): base + 1000})[KTopicPartition(topic, 0)] is None
    k.close()
    for target, offset, _ in cases[:3]:
        out = subprocess.run(["kcat", "-b", server.bootstrap, "-Q", "-t", f"{topic}:0:{target}"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert f"offset {offset}" in out.stdout, f"kcat {codec} {target - base}: {out.stdout}"


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4"])
def test_message_format_v1_round_trips_byte_identical(server, codec):
    """kafka-python as a 0.10 client: Produce v2 with magic 1 message sets (converted up to
    v2 batches), Fetch v2 (down-converted to magic 1)."""
    topic = f"v1-{codec}"
    create_topic(server.bootstrap, topic)
    p = KafkaProducer(bootstrap_servers=server.bootstrap, api_version=(0, 10), compression_type=codec, linger_ms=20)
    sent = [(os.urandom(8) if i % 3 else None, os.urandom(i % 50 + 1)) for i in range(200)]
    futures = [p.send(topic, key=k, value=v, partition=0, timestamp_ms=1_700_000_000_000 + i)
               for i, (k, v) in enumerate(sent)]
    p.flush()
    assert [f.get(timeout=30).offset for f in futures] == list(range(200))
    p.close()
    c = KafkaConsumer(bootstrap_servers=server.bootstrap, api_version=(0, 10), auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=3000)
    c.assign([KTopicPartition(topic, 0)])
    got = [(m.offset, m.key, m.value, m.timestamp) for m in c]
    c.close()
    assert [(o, k, v) for o, k, v, _ in got] == [(i, k, v) for i, (k, v) in enumerate(sent)]
    assert [t for *_, t in got] == [1_700_000_000_000 + i for i in range(200)]
    # A current client reads the same records from the v2 batches stored.
    modern = read_all(server.bootstrap, topic)
    assert [(o, k, v) for o, k, v in modern] == [(i, k, v) for i, (k, v) in enumerate(sent)]


def test_downconversion_disabled_answers_unsupported_version(server):
    create_topic(server.bootstrap, "noconv", config={"message.downconversion.enable": "false"})
    produce(server.bootstrap, "noconv", [(b"k", b"v")])
    c = KafkaConsumer(bootstrap_servers=server.bootstrap, api_version=(0, 10), auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=2000)
    c.assign([KTopicPartition("noconv", 0)])
    with pytest.raises(Exception) as raised:
        list(c)
    c.close()
    assert "UnsupportedVersion" in type(raised.value).__name__ or "UnsupportedVersion" in str(raised.value)
