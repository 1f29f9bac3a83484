#!/usr/bin/env python3
"""Produce throughput and broker CPU per GB over PLAINTEXT and SSL listeners of the same
broker, in the same run (issue 13's figure). `gregor bench produce` cannot do it: its
librdkafka is built without TLS, so this uses confluent-kafka's (which has it).

    scripts/bench_tls_produce.py --plaintext 127.0.0.1:9092 --ssl 127.0.0.1:9093 \
        --ca ca.pem --broker-pid PID [--messages 300000] [--size 1024] [--rounds 2]

Each round produces --messages messages of --size bytes with acks=1 to a fresh 1-partition
topic on each listener in turn (PLAINTEXT, then SSL), so both see the same machine load; it
prints one key=value line per run: MB/s (10^6 bytes of values per second), msgs/s, and the
broker's utime+stime from /proc/<pid>/stat per GB (10^9 bytes of values) produced.
"""

import argparse
import os
import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

USER_HZ = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # fields[0] is the state (3rd field of stat); utime and stime are the 14th and 15th.
    return (int(fields[11]) + int(fields[12])) / USER_HZ


def run(conf, pid, messages, size):
    topic = "tls-bench-" + uuid.uuid4().hex[:8]
    admin = AdminClient(conf)  # kept alive until the result is in
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    p = Producer({**conf, "acks": "1", "linger.ms": 5, "queue.buffering.max.messages": 200000})
    value = os.urandom(size)
    # Warm up: metadata, connection, the TLS session.
    p.produce(topic, value)
    p.flush(30)
    failed = []
    cb = lambda err, _msg: failed.append(err) if err else None
    before = cpu_seconds(pid)
    start = time.perf_counter()
    for _ in range(messages):
        while True:
            try:
                p.produce(topic, value, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        p.poll(0)
    assert p.flush(120) == 0, "messages left unsent"
    elapsed = time.perf_counter() - start
    cpu = cpu_seconds(pid) - before
    assert not failed, failed[:3]
    total = messages * size
    return elapsed, cpu, total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--plaintext", required=True)
    ap.add_argument("--ssl", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--broker-pid", type=int, required=True)
    ap.add_argument("--messages", type=int, default=300000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=2)
    a = ap.parse_args()
    confs = {
        "PLAINTEXT": {"bootstrap.servers": a.plaintext},
        "SSL": {"bootstrap.servers": a.ssl, "security.protocol": "SSL", "ssl.ca.location": a.ca},
    }
    for r in range(a.rounds):
        for name, conf in confs.items():
            elapsed, cpu, total = run(conf, a.broker_pid, a.messages, a.size)
            print(f"round={r} protocol={name} messages={a.messages} size={a.size} "
                  f"mb_per_sec={total / elapsed / 1e6:.1f} msgs_per_sec={a.messages / elapsed:.0f} "
                  f"broker_cpu_s={cpu:.2f} broker_cpu_s_per_gb={cpu / (total / 1e9):.2f}", flush=True)


if __name__ == "__main__":
    main()
