"""Transactions, the partition side (issue 26): transactional batches hold the last stable
offset until the transaction coordinator's marker (WriteTxnMarkers, sent here by hand over a
raw socket, as the coordinator would), READ_COMMITTED consumers (librdkafka) see committed
data only and aborted data never, ListOffsets LATEST at read_committed answers the LSO, and
a `kill -9` with a transaction open keeps its LSO."""

import signal
import socket
import struct
import time

from confluent_kafka import Consumer, TopicPartition
from kafka.record.util import calc_crc32c

from conftest import wait_until
from test_data_plane import create_topic

TRANSACTIONAL = 0x10
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_PRODUCER_EPOCH = 47
TRANSACTION_COORDINATOR_FENCED = 52
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


def varint(n):
    v = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while True:
        byte = v & 0x7F
        v >>= 7
        if v:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def batch(values, producer=(-1, -1, -1), transactional=False):
    """One uncompressed v2 batch of `values`; `producer` = (id, epoch, base sequence)."""
    records = b""
    for i, v in enumerate(values):
        body = b"\0" + varint(0) + varint(i) + varint(-1) + varint(len(v)) + v + varint(0)
        records += varint(len(body)) + body
    now = int(time.time() * 1000)
    n = len(values)
    pid, epoch, seq = producer
    attributes = TRANSACTIONAL if transactional else 0
    after_crc = struct.pack(">hiqqqhii", attributes, n - 1, now, now, pid, epoch, seq, n) + records
    return struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, calc_crc32c(after_crc)) + after_crc


def kstr(s):
    if s is None:
        return struct.pack(">h", -1)
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return out


def call(bootstrap, api_key, version, body):
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    req = struct.pack(">hhi", api_key, version, 7) + kstr("txn-test") + body
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(struct.pack(">i", len(req)) + req)
        (size,) = struct.unpack(">i", recv_exact(s, 4))
        return recv_exact(s, size)[4:]  # past the correlation id


def skip_string(buf, pos):
    (n,) = struct.unpack_from(">h", buf, pos)
    return pos + 2 + max(n, 0)


def produce(bootstrap, topic, records, transactional_id=None):
    """Produce v3, acks=-1, one partition: (error_code, base_offset)."""
    body = kstr(transactional_id) + struct.pack(">hi", -1, 10_000)
    body += struct.pack(">i", 1) + kstr(topic) + struct.pack(">ii", 1, 0)
    body += struct.pack(">i", len(records)) + records
    buf = call(bootstrap, 0, 3, body)
    pos = skip_string(buf, 4)
    _partitions, _index, error, base = struct.unpack_from(">iihq", buf, pos)
    return error, base


def write_marker(bootstrap, topic, pid, epoch, commit, coordinator_epoch, partition=0):
    """WriteTxnMarkers v0 with one marker for one partition: its error code."""
    body = struct.pack(">i", 1) + struct.pack(">qhb", pid, epoch, 1 if commit else 0)
    body += struct.pack(">i", 1) + kstr(topic) + struct.pack(">ii", 1, partition)
    body += struct.pack(">i", coordinator_epoch)
    buf = call(bootstrap, 27, 0, body)
    pos = 4 + 8 + 4  # markers count, producer id, topics count
    pos = skip_string(buf, pos)
    _n, _index, error = struct.unpack_from(">iih", buf, pos)
    return error


def latest(bootstrap, topic, isolation):
    """ListOffsets v2 LATEST of partition 0 at `isolation` (0, 1): (error, offset)."""
    body = struct.pack(">ib", -1, isolation) + struct.pack(">i", 1) + kstr(topic)
    body += struct.pack(">i", 1) + struct.pack(">iq", 0, -1)
    buf = call(bootstrap, 2, 2, body)
    pos = skip_string(buf, 4 + 4)  # throttle, topics count
    _n, _p, error, _ts, offset = struct.unpack_from(">iihqq", buf, pos)
    return error, offset


def consume(bootstrap, topic, isolation, settle=3.0):
    """Every value a librdkafka consumer at `isolation` reads from offset 0 (until nothing
    new came for `settle` seconds)."""
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"txn-{isolation}-{time.time()}",
        "enable.auto.commit": False,
        "isolation.level": isolation,
    })
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    quiet_since = time.time()
    while time.time() - quiet_since < settle:
        msg = c.poll(0.2)
        if msg is None or msg.error() is not None:
            continue
        out.append(msg.value().decode())
        quiet_since = time.time()
    c.close()
    return out


def test_markers_move_the_lso_and_read_committed_consumers_never_see_aborted_data(make_server):
    server = make_server()
    b = server.bootstrap
    create_topic(b, "txn")
    # Transactional batches without a transactional id: refused, nothing written.
    assert produce(b, "txn", batch([b"x"], (900, 0, 0), True))[0] == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert produce(b, "txn", batch([b"before"])) == (0, 0)
    assert produce(b, "txn", batch([b"a0", b"a1"], (1000, 0, 0), True), "tx-a") == (0, 1)
    assert produce(b, "txn", batch([b"b0"], (1001, 0, 0), True), "tx-b") == (0, 3)
    assert produce(b, "txn", batch([b"mid"])) == (0, 4)
    # The LSO stops at the first open transaction.
    assert latest(b, "txn", 1) == (0, 1)
    assert latest(b, "txn", 0) == (0, 5)
    assert consume(b, "txn", "read_committed") == ["before"]
    # The coordinator aborts tx-a: the LSO moves on to tx-b's first offset.
    assert write_marker(b, "txn", 1000, 0, False, 5) == 0
    assert latest(b, "txn", 1) == (0, 3)
    # A zombie coordinator and a fenced producer epoch are refused; an unknown partition too.
    assert write_marker(b, "txn", 1000, 0, True, 4) == TRANSACTION_COORDINATOR_FENCED
    assert produce(b, "txn", batch([b"c0"], (1002, 3, 0), True), "tx-c") == (0, 6)
    assert write_marker(b, "txn", 1002, 2, True, 5) == INVALID_PRODUCER_EPOCH
    assert write_marker(b, "txn", 1001, 0, True, 5, partition=9) == UNKNOWN_TOPIC_OR_PARTITION
    # tx-b commits; tx-c (at 6) is still open.
    assert write_marker(b, "txn", 1001, 0, True, 5) == 0
    assert latest(b, "txn", 1) == (0, 6)
    assert consume(b, "txn", "read_committed") == ["before", "b0", "mid"]
    assert consume(b, "txn", "read_uncommitted") == ["before", "a0", "a1", "b0", "mid", "c0"]

    # kill -9 with tx-c open: the restarted leader rebuilds it from the log.
    server.stop(signal.SIGKILL)
    server.start()
    def restarted():
        try:
            return latest(b, "txn", 0) == (0, 8)
        except OSError:
            return False

    wait_until(restarted, timeout=30, what="the restarted leader")
    assert latest(b, "txn", 1) == (0, 6)
    assert consume(b, "txn", "read_committed") == ["before", "b0", "mid"]
    assert write_marker(b, "txn", 1002, 3, True, 5) == 0
    assert latest(b, "txn", 1) == (0, 9)
    assert consume(b, "txn", "read_committed") == ["before", "b0", "mid", "c0"]
