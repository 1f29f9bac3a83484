"""Records whose key, value or header value length is a negative number other than -1 (a
flipped byte in a -1): Kafka stores them (it reads any negative length as null), and then
librdkafka takes the batch for a partial message and refetches the same offset forever. The
leader refuses them with INVALID_RECORD (a deliberate difference from Kafka), so librdkafka
consumers read on past a refused produce. The batches are sent over a raw socket (no client
library writes them)."""

import gzip
import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka.record.util import calc_crc32c

from test_data_plane import create_topic, produce_all

INVALID_RECORD = 87


def zigzag(n):
    """A Kafka varint (zigzag, 7 bits a byte)."""
    v = (n << 1) ^ (n >> 31)
    v &= 0xFFFFFFFF
    out = bytearray()
    while True:
        byte = v & 0x7F
        v >>= 7
        if v:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def record(offset_delta, key_len, value_len, header_values=()):
    """A v2 record with the lengths as given; a non-negative length is followed by that
    many bytes."""
    body = b"\0" + zigzag(offset_delta) + zigzag(offset_delta)
    for n in (key_len, value_len):
        body += zigzag(n) + b"x" * max(n, 0)
    body += zigzag(len(header_values))
    for n in header_values:
        body += zigzag(1) + b"h" + zigzag(n) + b"y" * max(n, 0)
    return zigzag(len(body)) + body


def batch(records, codec=0):
    """One v2 batch at base offset 0 (codec 0 none, 1 gzip), its CRC-32C correct."""
    payload = b"".join(records)
    if codec == 1:
        payload = gzip.compress(payload)
    now = int(time.time() * 1000)
    n = len(records)
    after_crc = struct.pack(">hiqqqhii", codec, n - 1, now, now + n - 1, -1, -1, -1, n) + payload
    crc = calc_crc32c(after_crc)
    return struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc) + after_crc


def kstr(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def read_nullable_string(buf, pos):
    (n,) = struct.unpack_from(">h", buf, pos)
    pos += 2
    if n < 0:
        return None, pos
    return buf[pos:pos + n].decode(), pos + n


def produce_v8(bootstrap, topic, records):
    """Produce v8 (acks=-1) of one partition's records over a raw socket: (error_code,
    error_message, [(batch_index, message)])."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    req = struct.pack(">hhi", 0, 8, 42) + kstr("raw-producer")
    req += struct.pack(">hhi", -1, -1, 10_000)  # no transactional id, acks, timeout
    req += struct.pack(">i", 1) + kstr(topic) + struct.pack(">ii", 1, 0)
    req += struct.pack(">i", len(records)) + records
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(struct.pack(">i", len(req)) + req)
        (size,) = struct.unpack(">i", recv_exact(s, 4))
        buf = recv_exact(s, size)
    pos = 4  # correlation id
    (topics,) = struct.unpack_from(">i", buf, pos)
    assert topics == 1
    pos += 4
    _, pos = read_nullable_string(buf, pos)
    (partitions, _index, error_code) = struct.unpack_from(">iih", buf, pos)
    assert partitions == 1
    pos += 10 + 8 + 8 + 8  # base offset, log append time, log start offset
    (n,) = struct.unpack_from(">i", buf, pos)
    pos += 4
    record_errors = []
    for _ in range(max(n, 0)):
        (index,) = struct.unpack_from(">i", buf, pos)
        message, pos = read_nullable_string(buf, pos + 4)
        record_errors.append((index, message))
    message, pos = read_nullable_string(buf, pos)
    return error_code, message, record_errors


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        assert chunk, "connection closed"
        out += chunk
    return out


def read_values(bootstrap, topic, count, isolation):
    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"lengths-{isolation}",
        "enable.auto.commit": False,
        "isolation.level": isolation,
    })
    c.assign([TopicPartition(topic, 0, 0)])
    out = []
    deadline = time.time() + 30
    while len(out) < count and time.time() < deadline:
        msg = c.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        out.append((msg.offset(), msg.value()))
    c.close()
    return out


POISON = [
    ("value length -2", batch([record(0, 1, 1), record(1, -1, -2), record(2, 1, 1)]),
     "Invalid value length -2 in record 1"),
    ("key length -64 in a gzip batch", batch([record(0, -64, 3)], codec=1),
     "Invalid key length -64 in record 0"),
    ("header value length -2", batch([record(0, 1, 1, header_values=(2, -2))]),
     "Invalid header 1 value length -2 in record 0"),
]


def test_a_length_below_minus_one_is_refused_and_consumers_read_around_it(server):
    create_topic(server.bootstrap, "lengths")
    produce_all(server.bootstrap, "lengths", [(None, f"v{i}".encode(), None, 0) for i in range(3)])
    sent = 3
    for what, poison, expected in POISON:
        code, message, _ = produce_v8(server.bootstrap, "lengths", poison)
        assert code == INVALID_RECORD, what
        assert message is not None and message.startswith(expected), (what, message)
        assert "the only negative length allowed is -1 (null)" in message, message
        # Nothing was appended: the next record gets the next offset.
        [(_, offset)] = produce_all(server.bootstrap, "lengths", [(None, f"v{sent}".encode(), None, 0)])
        assert offset == sent, what
        sent += 1
    # The same framing with -1 (null) everywhere is accepted.
    code, message, _ = produce_v8(
        server.bootstrap, "lengths", batch([record(0, -1, -1, header_values=(-1,))]))
    assert (code, message) == (0, None)
    expected = [(i, f"v{i}".encode()) for i in range(sent)] + [(sent, None)]
    for isolation in ["read_uncommitted", "read_committed"]:
        assert read_values(server.bootstrap, "lengths", sent + 1, isolation) == expected, isolation
