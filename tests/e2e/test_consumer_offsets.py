"""Committed offsets in `__consumer_offsets` (issue 25): the internal topic, coordinators
spread over the brokers by the leadership of its partitions, Kafka's record formats byte for
byte, and groups that survive a restart and a kill -9 of their coordinator. Real clients
(confluent-kafka, kafka-python, kcat) against real `gregor` processes."""

import os
import signal
import socket
import struct
import subprocess
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from conftest import gregor_cli, wait_until

OFFSETS = "__consumer_offsets"
NOT_COORDINATOR = 16
COORDINATOR_NOT_AVAILABLE = 15


# ---- Kafka's rules, written out independently of the broker ----


def java_hash(s):
    """Java's String.hashCode: over UTF-16 code units, 32-bit wrapping."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (h * 31 + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group, partitions=50):
    """Kafka's Utils.abs(group.hashCode) % partitions (Integer.MIN_VALUE maps to 0)."""
    h = java_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class Reader:
    """Kafka's non-flexible schema types: int16/32/64, string (int16 length, -1 null),
    bytes (int32 length)."""

    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        assert self.pos + n <= len(self.data), f"truncated at {self.pos}: {self.data!r}"
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self):
        return struct.unpack(">h", self.take(2))[0]

    def i32(self):
        return struct.unpack(">i", self.take(4))[0]

    def i64(self):
        return struct.unpack(">q", self.take(8))[0]

    def string(self, nullable=False):
        n = self.i16()
        if n < 0:
            assert nullable, "a non-nullable string is null"
            return None
        return self.take(n).decode()

    def bytes(self):
        n = self.i32()
        return b"" if n < 0 else self.take(n)

    def done(self):
        assert self.pos == len(self.data), f"{len(self.data) - self.pos} bytes left over"


def decode_record(key, value):
    """Kafka's OffsetCommitKey v0-1 / GroupMetadataKey v2 and OffsetCommitValue v1,v3 /
    GroupMetadataValue v3 (group-coordinator/src/main/resources/common/message/*.json)."""
    k = Reader(key)
    version = k.i16()
    if version in (0, 1):
        out = {"type": "offset", "key_version": version, "group": k.string(), "topic": k.string(), "partition": k.i32()}
        k.done()
        if value is None:
            out["tombstone"] = True
            return out
        v = Reader(value)
        out["value_version"] = v.i16()
        assert out["value_version"] in (1, 3), out
        out["offset"] = v.i64()
        out["leader_epoch"] = v.i32() if out["value_version"] == 3 else -1
        out["metadata"] = v.string()
        out["commit_timestamp"] = v.i64()
        if out["value_version"] == 1:
            out["expire_timestamp"] = v.i64()
        v.done()
        return out
    assert version == 2, f"unexpected key version {version}"
    out = {"type": "group", "key_version": 2, "group": k.string()}
    k.done()
    if value is None:
        out["tombstone"] = True
        return out
    v = Reader(value)
    out["value_version"] = v.i16()
    assert out["value_version"] == 3, out
    out["protocol_type"] = v.string()
    out["generation"] = v.i32()
    out["protocol"] = v.string(nullable=True)
    out["leader"] = v.string(nullable=True)
    out["current_state_timestamp"] = v.i64()
    members = []
    for _ in range(v.i32()):
        members.append({
            "member_id": v.string(),
            "group_instance_id": v.string(nullable=True),
            "client_id": v.string(),
            "client_host": v.string(),
            "rebalance_timeout": v.i32(),
            "session_timeout": v.i32(),
            "subscription": v.bytes(),
            "assignment": v.bytes(),
        })
    out["members"] = members
    v.done()
    return out


def find_coordinator(address, group):
    """FindCoordinator v0 on a raw socket to `address` (the first of a bootstrap list):
    (error code, node id)."""
    host, port = address.split(",")[0].split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        client_id = b"e2e-offsets"
        body = struct.pack(">h", len(group.encode())) + group.encode()
        msg = struct.pack(">hhih", 10, 0, 7, len(client_id)) + client_id + body
        s.sendall(struct.pack(">i", len(msg)) + msg)
        size = struct.unpack(">i", recv_exact(s, 4))[0]
        r = Reader(recv_exact(s, size))
        assert r.i32() == 7
        error, node = r.i16(), r.i32()
        return error, node


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return out


def coordinator_of(address, group, timeout=60):
    """The coordinator's id, once the offsets topic exists and the partition has a leader."""
    found = {}

    def ready():
        error, node = find_coordinator(address, group)
        found["node"] = node
        return error == 0

    wait_until(ready, timeout=timeout, interval=0.3, what=f"a coordinator for {group}")
    return found["node"]


def read_offsets_partition(bootstrap, partition, timeout=30):
    """Every record of one `__consumer_offsets` partition up to its high watermark."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader-unused", "enable.auto.commit": False})
    try:
        _, high = c.get_watermark_offsets(TopicPartition(OFFSETS, partition), timeout=10)
        c.assign([TopicPartition(OFFSETS, partition, 0)])
        out = []
        deadline = time.time() + timeout
        while (not out or out[-1].offset() < high - 1) and time.time() < deadline:
            m = c.poll(1.0)
            if m is None or m.error():
                continue
            out.append(m)
        assert not out or out[-1].offset() == high - 1, "could not read the partition to its end"
        return out
    finally:
        c.close()


def committed(bootstrap, group, topic, partitions, timeout=30):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, p) for p in partitions], timeout=timeout)
        return {tp.partition: (tp.offset, tp.metadata or "") for tp in got}
    finally:
        c.close()


def commit(bootstrap, group, offsets, metadata=None):
    """Simple commits (no group membership): {(topic, partition): offset}."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = [
            TopicPartition(t, p, o, metadata=metadata) if metadata is not None else TopicPartition(t, p, o)
            for (t, p), o in offsets.items()
        ]
        for tp in c.commit(offsets=tps, asynchronous=False):
            assert tp.error is None, tp.error
    finally:
        c.close()


def create_topic(bootstrap, name, partitions, rf=1):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=rf)])[name].result(timeout=60)


# ---- One broker ----


def test_java_hash_matches_kafkas_published_values():
    # The test's own rule, checked against values Java prints.
    assert java_hash("group") == 98629247
    assert java_hash("polygenelubricants") == -(1 << 31)
    assert partition_for("polygenelubricants") == 0
    assert java_hash("zzzzzzzzzz") == -1580979136


def test_offsets_topic_is_created_internal_compacted_and_closed_to_producers(make_server):
    g = make_server()
    bootstrap = g.bootstrap
    create_topic(bootstrap, "t", 2)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert OFFSETS not in admin.list_topics(timeout=10).topics
    # The first FindCoordinator creates it; COORDINATOR_NOT_AVAILABLE meanwhile.
    first, _ = find_coordinator(bootstrap, "g1")
    assert first in (0, COORDINATOR_NOT_AVAILABLE)
    assert coordinator_of(bootstrap, "g1") == 0
    md = admin.list_topics(OFFSETS, timeout=10).topics[OFFSETS]
    assert len(md.partitions) == 50, "offsets.topic.num.partitions defaults to 50"
    res = ConfigResource("topic", OFFSETS)
    configs = admin.describe_configs([res])[res].result(timeout=10)
    assert configs["cleanup.policy"].value == "compact"
    assert configs["segment.bytes"].value == str(100 * 1024 * 1024)
    assert configs["compression.type"].value == "producer"

    # Metadata marks it internal (kafka-python reads the flag).
    from kafka.admin import KafkaAdminClient
    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        (described,) = kadmin.describe_topics([OFFSETS])
        assert described["is_internal"] is True
        (plain,) = kadmin.describe_topics(["t"])
        assert plain["is_internal"] is False
    finally:
        kadmin.close()

    # gregor topics --list shows it; --exclude-internal hides it.
    listed = gregor_cli("topics", "--bootstrap-server", bootstrap, "--list")
    assert listed.returncode == 0, listed.stderr
    assert OFFSETS in listed.stdout.split()
    hidden = gregor_cli("topics", "--bootstrap-server", bootstrap, "--list", "--exclude-internal")
    assert OFFSETS not in hidden.stdout.split() and "t" in hidden.stdout.split()

    # gregor topics refuses to delete it or add partitions to it (Kafka's TopicCommand).
    deleted = gregor_cli("topics", "--bootstrap-server", bootstrap, "--delete", "--topic", OFFSETS)
    assert deleted.returncode != 0
    assert f"Topic {OFFSETS} is a kafka internal topic and is not allowed to be marked for deletion." in deleted.stdout + deleted.stderr
    altered = gregor_cli("topics", "--bootstrap-server", bootstrap, "--alter", "--topic", OFFSETS, "--partitions", "60")
    assert altered.returncode != 0
    assert f"The number of partitions for the internal topic {OFFSETS} cannot be changed." in altered.stdout + altered.stderr
    assert len(admin.list_topics(OFFSETS, timeout=10).topics[OFFSETS].partitions) == 50

    # A client's Produce to it is refused (Kafka's ReplicaManager: INVALID_TOPIC_EXCEPTION).
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "retries": 0, "acks": "all"})
    p.produce(OFFSETS, key=b"k", value=b"v", partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_EXCEPTION, errors[0]


def test_commits_survive_a_restart_and_a_kill_9_of_the_broker(make_server):
    import signal

    g = make_server()
    create_topic(g.bootstrap, "t", 3)
    commit(g.bootstrap, "keeper", {("t", 0): 10, ("t", 1): 20, ("t", 2): 30}, metadata="m1")
    commit(g.bootstrap, "keeper", {("t", 1): 21})
    assert committed(g.bootstrap, "keeper", "t", [0, 1, 2]) == {0: (10, "m1"), 1: (21, ""), 2: (30, "m1")}

    g.restart()
    assert committed(g.bootstrap, "keeper", "t", [0, 1, 2], timeout=60) == {0: (10, "m1"), 1: (21, ""), 2: (30, "m1")}

    commit(g.bootstrap, "keeper", {("t", 2): 31})
    g.stop(signal.SIGKILL)
    g.start()
    assert committed(g.bootstrap, "keeper", "t", [0, 1, 2], timeout=60) == {0: (10, "m1"), 1: (21, ""), 2: (31, "")}
    assert "loaded consumer groups of offsets partition" in g.log_text()


def test_records_are_kafkas_bytes_and_kcat_reads_them(make_server):
    g = make_server("group.initial.rebalance.delay.ms=0")
    bootstrap = g.bootstrap
    create_topic(bootstrap, "orders", 2)
    group = "decoder-" + uuid.uuid4().hex[:6]
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "client.id": "decoder-client",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "range",
    })
    assigned = []
    c.subscribe(["orders"], on_assign=lambda _c, parts: assigned.extend(parts))
    deadline = time.time() + 60
    while not assigned and time.time() < deadline:
        c.poll(0.5)
    assert assigned, "no assignment"
    c.commit(offsets=[TopicPartition("orders", 0, 7, metadata="meta-7"), TopicPartition("orders", 1, 9)], asynchronous=False)
    c.close()  # leaves the group: an empty group's metadata follows

    p = partition_for(group)
    records = [decode_record(m.key(), m.value()) for m in read_offsets_partition(bootstrap, p)]
    offsets = [r for r in records if r["type"] == "offset" and r["group"] == group]
    by_partition = {r["partition"]: r for r in offsets}
    assert by_partition[0]["key_version"] == 1 and by_partition[0]["value_version"] == 3
    # confluent-kafka sends the metadata C string with its NUL terminator; stored as sent.
    assert by_partition[0]["offset"] == 7 and by_partition[0]["metadata"].rstrip("\x00") == "meta-7"
    assert by_partition[1]["offset"] == 9 and by_partition[1]["metadata"] == ""
    assert abs(by_partition[0]["commit_timestamp"] - time.time() * 1000) < 120_000
    groups = [r for r in records if r["type"] == "group" and r["group"] == group]
    assert groups, "no group metadata record"
    stable = [r for r in groups if r["members"]]
    assert stable, groups
    first = stable[0]
    assert first["protocol_type"] == "consumer" and first["protocol"] == "range"
    assert first["generation"] >= 1
    (member,) = first["members"]
    assert member["client_id"] == "decoder-client"
    assert member["client_host"] == "/127.0.0.1"
    assert first["leader"] == member["member_id"]
    assert member["assignment"], "the member's assignment is stored"
    # The consumer left: the last record is the empty group at the next generation.
    assert groups[-1]["members"] == [] and groups[-1]["generation"] == first["generation"] + 1

    out = subprocess.run(
        ["kcat", "-b", bootstrap, "-C", "-t", OFFSETS, "-p", str(p), "-o", "beginning", "-e", "-f", "%o %K\n"],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == len(records)


def test_delete_groups_writes_tombstones_and_the_group_stays_gone_after_restart(make_server):
    g = make_server()
    create_topic(g.bootstrap, "t", 1)
    commit(g.bootstrap, "doomed", {("t", 0): 5})
    admin = AdminClient({"bootstrap.servers": g.bootstrap})
    admin.delete_consumer_groups(["doomed"])["doomed"].result(timeout=30)
    records = [decode_record(m.key(), m.value()) for m in read_offsets_partition(g.bootstrap, partition_for("doomed"))]
    mine = [r for r in records if r["group"] == "doomed"]
    assert mine[-1] == {"type": "group", "key_version": 2, "group": "doomed", "tombstone": True}
    assert {"type": "offset", "key_version": 1, "group": "doomed", "topic": "t", "partition": 0, "tombstone": True} in mine
    g.restart()
    assert committed(g.bootstrap, "doomed", "t", [0], timeout=60) == {0: (-1001, "")}


def offset_commit_v2(address, group, topic, offsets, retention_ms):
    """OffsetCommit v2 (a pre-2.1 client's simple commit, generation -1) with an explicit
    retention_time_ms, on a raw socket: the partitions' error codes."""
    host, port = address.split(",")[0].split(":")

    def string(v):
        return struct.pack(">h", len(v.encode())) + v.encode()

    body = string(group) + struct.pack(">i", -1) + string("") + struct.pack(">q", retention_ms)
    body += struct.pack(">i", 1) + string(topic) + struct.pack(">i", len(offsets))
    for partition, offset in sorted(offsets.items()):
        body += struct.pack(">iq", partition, offset) + string("")
    client_id = b"e2e-offsets"
    msg = struct.pack(">hhih", 8, 2, 11, len(client_id)) + client_id + body
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(msg)) + msg)
        r = Reader(recv_exact(s, struct.unpack(">i", recv_exact(s, 4))[0]))
        assert r.i32() == 11
        codes = {}
        for _ in range(r.i32()):
            r.string()
            for _ in range(r.i32()):
                p = r.i32()
                codes[p] = r.i16()
        return codes


def test_offsets_expire_with_tombstones_kip_211(make_server):
    """KIP-211 on a short check interval: an offset committed by OffsetCommit v2 with
    retention_time_ms=2000 is stored as value v1 with its expire timestamp and, its group
    being empty, expires then (offsets.retention.minutes is far away); the coordinator
    writes tombstones for the offset and for the group it forgets, and the offset stays gone
    after a restart (replayed from the log). A v8 commit of another group stays."""
    g = make_server("offsets.retention.check.interval.ms=500")
    create_topic(g.bootstrap, "t", 2)
    coordinator_of(g.bootstrap, "short-lived")
    commit(g.bootstrap, "kept", {("t", 0): 9})
    wait_until(lambda: offset_commit_v2(g.bootstrap, "short-lived", "t", {0: 5, 1: 6}, 2000) == {0: 0, 1: 0},
               timeout=30, interval=0.5, what="the v2 commit")
    committed_at = time.time()
    assert committed(g.bootstrap, "short-lived", "t", [0, 1]) == {0: (5, ""), 1: (6, "")}
    wait_until(lambda: committed(g.bootstrap, "short-lived", "t", [0, 1]) == {0: (-1001, ""), 1: (-1001, "")},
               timeout=30, interval=0.3, what="the offsets to expire")
    assert time.time() - committed_at >= 1.5, "expired before its expire timestamp"
    records = [decode_record(m.key(), m.value()) for m in read_offsets_partition(g.bootstrap, partition_for("short-lived"))]
    mine = [r for r in records if r["group"] == "short-lived"]
    values = [r for r in mine if r["type"] == "offset" and not r.get("tombstone")]
    assert {r["value_version"] for r in values} == {1}, values
    assert all(r["expire_timestamp"] - r["commit_timestamp"] == 2000 for r in values), values
    tombstones = {(r["type"], r.get("partition")) for r in mine if r.get("tombstone")}
    assert tombstones == {("offset", 0), ("offset", 1), ("group", None)}, mine
    g.restart()
    assert committed(g.bootstrap, "short-lived", "t", [0, 1], timeout=60) == {0: (-1001, ""), 1: (-1001, "")}
    assert committed(g.bootstrap, "kept", "t", [0]) == {0: (9, "")}


class FlexReader(Reader):
    """Kafka's flexible schema types: unsigned varints, compact strings and arrays (length + 1,
    0 for null), uuids, and a tagged-field section after every struct."""

    def uvarint(self):
        out, shift = 0, 0
        while True:
            b = self.take(1)[0]
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7

    def cstring(self, nullable=False):
        n = self.uvarint()
        if n == 0:
            assert nullable, "a non-nullable compact string is null"
            return None
        return self.take(n - 1).decode()

    def carray(self, item):
        return [item() for _ in range(self.uvarint() - 1)]

    def uuid(self):
        return uuid.UUID(bytes=self.take(16))

    def tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def decode_consumer_group_record(key, value):
    """Kafka 4.x's ConsumerGroup* coordinator records (types 3-8): key and value v0."""
    k = Reader(key)
    kind = k.i16()
    assert 3 <= kind <= 8, kind
    out = {"type": kind, "group": k.string()}
    if kind in (5, 7, 8):
        out["member"] = k.string()
    k.done()
    if value is None:
        out["tombstone"] = True
        return out
    v = FlexReader(value)
    assert v.i16() == 0

    def assignment():
        def topic():
            t = (v.uuid(), v.carray(v.i32))
            v.tags()
            return t
        return v.carray(topic)

    if kind in (3, 6):
        out["epoch"] = v.i32()
    elif kind == 4:
        def topic():
            t = {"id": v.uuid(), "name": v.cstring(), "partitions": v.i32()}

            def racks():
                p = (v.i32(), v.carray(v.cstring))
                v.tags()
                return p
            t["racks"] = v.carray(racks)
            v.tags()
            return t
        out["topics"] = v.carray(topic)
    elif kind == 5:
        out.update(instance_id=v.cstring(True), rack_id=v.cstring(True), client_id=v.cstring(),
                   client_host=v.cstring(), subscribed=v.carray(v.cstring), regex=v.cstring(True),
                   rebalance_timeout=v.i32(), assignor=v.cstring(True))
    elif kind == 7:
        out["assignment"] = assignment()
    elif kind == 8:
        out.update(member_epoch=v.i32(), previous_epoch=v.i32(), state=v.take(1)[0],
                   assigned=assignment(), revoking=assignment())
    v.tags()
    v.done()
    return out


def test_a_kip_848_group_survives_a_kill_9_of_its_coordinator(make_server):
    """A consumer-protocol group is kept in __consumer_offsets as Kafka's ConsumerGroup* records
    (checked against the published schemas) and replayed on load: after a kill -9 and restart
    of the broker the member goes on heartbeating with its epoch and its partitions, with no
    revocation and no second assignment, and consumes what is produced afterwards."""
    g = make_server()
    create_topic(g.bootstrap, "k", 2)
    events = []
    c = Consumer({"bootstrap.servers": g.bootstrap, "group.id": "kip848", "group.protocol": "consumer",
                  "group.remote.assignor": "range", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe(["k"], on_assign=lambda _c, ps: events.append(("assign", sorted(p.partition for p in ps))),
                on_revoke=lambda _c, ps: events.append(("revoke", sorted(p.partition for p in ps))),
                on_lost=lambda _c, ps: events.append(("lost", sorted(p.partition for p in ps))))
    try:
        p = Producer({"bootstrap.servers": g.bootstrap})
        p.produce("k", b"before", partition=0)
        p.flush(10)
        got = []
        wait_until(lambda: (m := c.poll(0.5)) is not None and not m.error() and got.append(m.value()) is None,
                   timeout=60, what="the first record")
        assert events == [("assign", [0, 1])], events
        records = [decode_consumer_group_record(m.key(), m.value())
                   for m in read_offsets_partition(g.bootstrap, partition_for("kip848"))
                   if struct.unpack(">h", m.key()[:2])[0] >= 3]
        live = {}
        for r in records:
            live[(r["type"], r.get("member"))] = r
        kinds = sorted({t for (t, _), r in live.items() if not r.get("tombstone")})
        assert kinds == [3, 4, 5, 6, 7, 8], live
        (member,) = {m for (_, m) in live if m}
        current = live[(8, member)]
        assert current["state"] == 0 and current["member_epoch"] == live[(3, None)]["epoch"], current
        assert sorted(ps for _, ps in current["assigned"])[0] == [0, 1], current
        assert live[(5, member)]["subscribed"] == ["k"] and live[(5, member)]["assignor"] == "range"
        assert live[(4, None)]["topics"][0]["name"] == "k" and live[(4, None)]["topics"][0]["partitions"] == 2

        g.stop(signal.SIGKILL)
        g.start()
        p = Producer({"bootstrap.servers": g.bootstrap})
        p.produce("k", b"after", partition=1)
        p.flush(30)
        wait_until(lambda: (m := c.poll(0.5)) is not None and not m.error() and m.value() == b"after",
                   timeout=60, what="the record produced after the restart")
        for _ in range(6):  # a few heartbeats on the restarted coordinator
            c.poll(0.5)
        assert events == [("assign", [0, 1])], f"the member rebalanced after the restart: {events}"
        assert "consumer_groups=1" in g.log_text()
    finally:
        c.close()


def raw_request(address, api_key, version, body, correlation=21):
    host, port = address.split(",")[0].split(":")
    client_id = b"e2e-offsets"
    msg = struct.pack(">hhih", api_key, version, correlation, len(client_id)) + client_id + body
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(msg)) + msg)
        r = Reader(recv_exact(s, struct.unpack(">i", recv_exact(s, 4))[0]))
        assert r.i32() == correlation
        return r


def kstr(v):
    return struct.pack(">h", len(v.encode())) + v.encode()


def offset_commit_v0(address, group, topic, offsets):
    """OffsetCommit v0 (Kafka 2.8 keeps these in ZooKeeper): {partition: error code}."""
    body = kstr(group) + struct.pack(">i", 1) + kstr(topic) + struct.pack(">i", len(offsets))
    for partition, offset in sorted(offsets.items()):
        body += struct.pack(">iq", partition, offset) + kstr("")
    r = raw_request(address, 8, 0, body)
    codes = {}
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            p = r.i32()
            codes[p] = r.i16()
    return codes


def offset_fetch_v0(address, group, topic, partitions):
    """OffsetFetch v0 (read from ZooKeeper): {partition: (offset, error code)}."""
    body = kstr(group) + struct.pack(">i", 1) + kstr(topic) + struct.pack(">i", len(partitions))
    body += b"".join(struct.pack(">i", p) for p in partitions)
    r = raw_request(address, 9, 0, body)
    out = {}
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            p, offset = r.i32(), r.i64()
            r.string(nullable=True)
            out[p] = (offset, r.i16())
    return out


def metric(g, name):
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{g.admin_port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{") or line.startswith(name + " "):
                return float(line.rsplit(" ", 1)[1])
    return None


def test_committed_offsets_are_mirrored_to_consumers_and_v0_uses_the_store(make_server):
    """The seed's /consumers/<group>/offsets/<topic>/<partition> follows the commits made
    through the coordinators within a few seconds (batched, off the commit's path), deletions
    included, with the mirror's lag on /metrics; OffsetCommit v0 and OffsetFetch v0 write and
    read that view directly, as Kafka 2.8 does with ZooKeeper."""
    g = make_server()
    create_topic(g.bootstrap, "t", 2)
    commit(g.bootstrap, "mirrored", {("t", 0): 5, ("t", 1): 7})
    committed_at = time.time()
    path = "/consumers/mirrored/offsets/t/{}"

    def mirrored():
        nodes = [g.meta(path.format(p)) for p in (0, 1)]
        return [n and n["data"] for n in nodes] == [5, 7]

    wait_until(mirrored, timeout=10, interval=0.1, what="the mirror of the commit")
    assert time.time() - committed_at < 4, "the mirror is more than a few seconds behind"
    commit(g.bootstrap, "mirrored", {("t", 0): 6})
    wait_until(lambda: (g.meta(path.format(0)) or {}).get("data") == 6, timeout=10, what="the next commit mirrored")
    assert metric(g, "gregor_consumer_offsets_zk_mirror_lag_ms") == 0
    assert metric(g, "gregor_consumer_offsets_zk_mirror_pending") == 0
    # v0 reads the view: the coordinator's commits, as mirrored; -1 where there is none.
    assert offset_fetch_v0(g.bootstrap, "mirrored", "t", [0, 1]) == {0: (6, 0), 1: (7, 0)}
    assert offset_fetch_v0(g.bootstrap, "nobody", "t", [0]) == {0: (-1, 0)}
    # v0 writes the view at once, not __consumer_offsets (Kafka 2.8).
    assert offset_commit_v0(g.bootstrap, "old-client", "t", {0: 42, 5: 1}) == {0: 0, 5: 3}
    assert g.meta("/consumers/old-client/offsets/t/0")["data"] == 42
    assert offset_fetch_v0(g.bootstrap, "old-client", "t", [0]) == {0: (42, 0)}
    assert committed(g.bootstrap, "old-client", "t", [0]) == {0: (-1001, "")}
    # Deleting the group removes its mirrored offsets too.
    admin = AdminClient({"bootstrap.servers": g.bootstrap})
    admin.delete_consumer_groups(["mirrored"])["mirrored"].result(timeout=30)
    wait_until(lambda: g.meta(path.format(0)) is None and g.meta(path.format(1)) is None,
               timeout=10, what="the mirrored offsets deleted")


# ---- Three brokers ----


def test_coordinators_are_spread_over_the_brokers_by_partition_leadership(make_cluster):
    cluster = make_cluster(3, overrides=["offsets.topic.num.partitions=12", "group.initial.rebalance.delay.ms=0"])
    bootstrap = cluster.bootstrap
    create_topic(bootstrap, "t", 3, rf=3)
    groups = [f"spread-{i}" for i in range(30)]
    coordinator_of(bootstrap, groups[0], timeout=90)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    md = admin.list_topics(OFFSETS, timeout=10).topics[OFFSETS]
    assert len(md.partitions) == 12
    assert all(len(p.replicas) == 3 for p in md.partitions.values()), "a dev cluster's offsets RF is min(3, brokers)"
    leaders = {i: p.leader for i, p in md.partitions.items()}
    answers = {}
    for group in groups:
        expected = leaders[partition_for(group, 12)]
        # Every broker gives the same answer: the leader of the group's partition.
        for address in bootstrap.split(","):
            error, node = find_coordinator(address, group)
            assert (error, node) == (0, expected), (group, address)
        answers[group] = expected
    assert len(set(answers.values())) == 3, f"coordinators not spread: {answers}"

    # Commits land on each coordinator and read back through the others' FindCoordinator.
    for group in groups[:6]:
        commit(bootstrap, group, {("t", 0): len(group), ("t", 1): 3})
    for group in groups[:6]:
        assert committed(bootstrap, group, "t", [0, 1]) == {0: (len(group), ""), 1: (3, "")}
    # ListGroups on each broker lists the groups it coordinates.
    listed = gregor_cli("consumer-groups", "--bootstrap-server", bootstrap, "--list")
    assert listed.returncode == 0, listed.stderr
    assert set(groups[:6]) <= set(listed.stdout.split())


ZK = os.environ.get("GREGOR_TEST_ZOOKEEPER")


@pytest.mark.skipif(not ZK, reason="needs GREGOR_TEST_ZOOKEEPER (scripts/zk.sh)")
def test_kill_9_of_the_coordinator_loses_no_acknowledged_commit_and_the_group_resumes(tmp_path):
    from replication import SESSION_TIMEOUT_MS, Cluster

    cluster = Cluster(tmp_path, overrides=["offsets.topic.num.partitions=6", "offsets.topic.replication.factor=3",
                                           "group.initial.rebalance.delay.ms=0"]).start()
    try:
        cluster.create_topic("work", partitions=2, rf=3)
        group = "survivor"
        coordinator = coordinator_of(cluster.bootstrap, group, timeout=120)
        wait_until(lambda: len(cluster.isr(OFFSETS, partition_for(group, 6))) == 3, timeout=60, what="offsets partition fully in sync")

        assignments = []
        c = Consumer({
            "bootstrap.servers": cluster.bootstrap, "group.id": group, "enable.auto.commit": False,
            "session.timeout.ms": 30000, "heartbeat.interval.ms": 1000,
        })
        c.subscribe(["work"], on_assign=lambda _c, parts: assignments.append([p.partition for p in parts]))
        deadline = time.time() + 60
        while not assignments and time.time() < deadline:
            c.poll(0.3)
        assert assignments == [[0, 1]]

        acknowledged = {"value": 0}
        failures = []
        stop = threading.Event()
        resumed_at = {}

        def committer():
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    c.commit(offsets=[TopicPartition("work", 0, n), TopicPartition("work", 1, n)], asynchronous=False)
                    acknowledged["value"] = n
                    if failures and "t" not in resumed_at:
                        resumed_at["t"] = time.time()
                except KafkaException as e:
                    failures.append((time.time(), e.args[0].code()))
                    n -= 1
                    time.sleep(0.2)
                c.poll(0)

        t = threading.Thread(target=committer)
        t.start()
        wait_until(lambda: acknowledged["value"] >= 20, timeout=30, what="commits going")
        before_kill = acknowledged["value"]
        killed_at = time.time()
        cluster.brokers[coordinator].kill()
        resume_within = SESSION_TIMEOUT_MS / 1000 + 20
        wait_until(lambda: acknowledged["value"] >= before_kill + 20, timeout=resume_within + 30, what="commits resumed on the new coordinator")
        stop.set()
        t.join(timeout=30)
        last = acknowledged["value"]
        print(f"killed broker {coordinator} after {before_kill} commits; {len(failures)} failed commits "
              f"({sorted(set(code for _, code in failures))}); {last} acknowledged in all")
        if "t" in resumed_at:
            assert resumed_at["t"] - killed_at < resume_within, f"resumed after {resumed_at['t'] - killed_at:.1f} s"
        survivor = next(b for b in cluster.brokers.values() if b.alive())
        new_coordinator = coordinator_of(survivor.address, group)
        assert new_coordinator != coordinator
        # The member was never asked to rebalance: the new coordinator loaded the group with
        # its member, generation and assignment.
        assert assignments == [[0, 1]], assignments
        c.close()
        assert committed(survivor.address, group, "work", [0, 1], timeout=60) == {0: (last, ""), 1: (last, "")}
    finally:
        cluster.stop()


@pytest.mark.skipif(not ZK, reason="needs GREGOR_TEST_ZOOKEEPER (scripts/zk.sh)")
def test_offsets_of_the_old_store_are_imported_once(make_server):
    """A store written by Gregor before issue 25 keeps offsets at /consumers/<g>/offsets/<t>/<p>.
    The broker that loads an empty offsets partition imports its groups' offsets from there, so
    an upgrade keeps every group's position; the imported records are in the log, so they stay
    after a restart (and later commits win)."""
    from kazoo.client import KazooClient

    chroot = f"/gregor-upgrade-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=ZK + chroot)
    zk.start(timeout=10)
    try:
        zk.create("/consumers/old-group/offsets/t/0", b"42", makepath=True)
        zk.create("/consumers/old-group/offsets/t/1", b"7", makepath=True)
        g = make_server(f"zookeeper.connect={ZK}{chroot}")
        create_topic(g.bootstrap, "t", 2)
        assert committed(g.bootstrap, "old-group", "t", [0, 1], timeout=60) == {0: (42, ""), 1: (7, "")}
        records = [decode_record(m.key(), m.value()) for m in read_offsets_partition(g.bootstrap, partition_for("old-group"))]
        assert {(r["partition"], r["offset"]) for r in records if r["group"] == "old-group"} == {(0, 42), (1, 7)}
        commit(g.bootstrap, "old-group", {("t", 1): 8})
        g.restart()
        assert committed(g.bootstrap, "old-group", "t", [0, 1], timeout=60) == {0: (42, ""), 1: (8, "")}
        assert "imported committed offsets from /consumers" in g.log_text()
    finally:
        zk.stop()
        zk.close()


@pytest.mark.skipif(os.environ.get("GREGOR_BENCH_FAILOVER") != "1",
                    reason="benchmark: set GREGOR_BENCH_FAILOVER=1 (BENCHMARKS.md, coordinator failover)")
def test_bench_coordinator_failover_at_1000_groups(tmp_path):
    """Coordinator failover time at 1,000 groups: three brokers, __consumer_offsets with 50
    partitions at RF 3, 1,000 groups with a committed offset each; kill -9 of the broker
    coordinating the most groups; prints how long until every one of its groups took a commit
    on its new coordinator (found through FindCoordinator, as clients do), and checks that no
    group lost its offset."""
    from replication import SESSION_TIMEOUT_MS, Cluster

    groups = [f"bench-{i}" for i in range(int(os.environ.get("GREGOR_BENCH_GROUPS", "1000")))]
    cluster = Cluster(tmp_path, overrides=["offsets.topic.replication.factor=3"]).start()
    try:
        cluster.create_topic("work", partitions=1, rf=3)
        coordinator_of(cluster.bootstrap, groups[0], timeout=120)
        wait_until(lambda: all(len(cluster.isr(OFFSETS, p)) == 3 for p in range(50)), timeout=120,
                   what="offsets partitions fully in sync")
        where = {}
        for g in groups:
            where[g] = coordinator_of(cluster.bootstrap, g)
            assert offset_commit_v2(cluster.brokers[where[g]].address, g, "work", {0: 1}, -1) == {0: 0}
        victim = max(set(where.values()), key=lambda n: sum(1 for v in where.values() if v == n))
        moved = [g for g in groups if where[g] == victim]
        survivor = next(b for n, b in cluster.brokers.items() if n != victim)
        load = open("/proc/loadavg").read().split()[:3]
        killed_at = time.time()
        cluster.brokers[victim].kill()
        pending = set(moved)
        while pending and time.time() - killed_at < SESSION_TIMEOUT_MS / 1000 + 120:
            for g in sorted(pending):
                error, node = find_coordinator(survivor.address, g)
                if error or node == victim or node not in cluster.brokers:
                    continue
                try:
                    if offset_commit_v2(cluster.brokers[node].address, g, "work", {0: 2}, -1) == {0: 0}:
                        pending.discard(g)
                except (OSError, AssertionError):
                    pass
            time.sleep(0.05)
        elapsed = time.time() - killed_at
        print(f"\nfailover: {len(moved)} of {len(groups)} groups moved from broker {victim}; all committing on "
              f"their new coordinator {elapsed:.1f} s after kill -9 (session timeout {SESSION_TIMEOUT_MS} ms; "
              f"load average before {' '.join(load)})")
        assert not pending, f"{len(pending)} groups never resumed"
        assert committed(survivor.address, moved[0], "work", [0], timeout=60) == {0: (2, "")}
        assert committed(survivor.address, groups[-1], "work", [0], timeout=60)[0][0] in (1, 2)
    finally:
        cluster.stop()
