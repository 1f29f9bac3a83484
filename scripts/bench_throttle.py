#!/usr/bin/env python3
"""Catch-up time of a follower with and without a replication throttle (issue 11).

A real 2-broker cluster (`gregor server` processes, tests/e2e/replication.py's harness) on
the ZooKeeper named by GREGOR_TEST_ZOOKEEPER: a partition on brokers [1, 2]; broker 2 is
killed, --megabytes MB are produced to broker 1 (acks=1, 100 kB messages), then broker 2
starts, optionally with follower.replication.throttled.rate=--throttle (bytes/s) in
/config/brokers/2 and the topic's follower.replication.throttled.replicas naming it. The
figure is the time from broker 2's start until it is back in the ISR, and the bytes per second
it copied.

    d=$(mktemp -d); scripts/zk.sh start $d 2199
    GREGOR_TEST_ZOOKEEPER=127.0.0.1:2199 GREGOR_BIN=target/release/gregor \\
        .venv/bin/python scripts/bench_throttle.py --megabytes 1000 --throttle 0 --throttle 50000000
    scripts/zk.sh stop $d
"""

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "e2e"))

from confluent_kafka import Producer  # noqa: E402

from conftest import wait_until  # noqa: E402
from replication import Cluster  # noqa: E402


def log_bytes(broker, topic):
    total = 0
    for root, _, files in os.walk(broker.data_dir):
        if os.path.basename(root) == f"{topic}-0":
            total += sum(os.path.getsize(os.path.join(root, f)) for f in files if f.endswith(".log"))
    return total


def run(megabytes, throttle):
    with tempfile.TemporaryDirectory() as tmp:
        c = Cluster(tmp, brokers=2, overrides=("auto.leader.rebalance.enable=false",)).start()
        try:
            topic = "catchup"
            config = {"follower.replication.throttled.replicas": "0:2"} if throttle else {}
            c.create_topic(topic, assignment=[[1, 2]], config=config)
            c.wait_isr(topic, 1, 2)
            c.brokers[2].kill()
            wait_until(lambda: c.isr(topic, 0) == [1], timeout=30, what="broker 2 leaves the ISR")
            producer = Producer({"bootstrap.servers": c.brokers[1].address, "acks": "1", "linger.ms": 20,
                                 "batch.size": 1_000_000, "message.max.bytes": 2_000_000,
                                 "queue.buffering.max.kbytes": 200_000})
            payload = os.urandom(100_000)
            produced = time.time()
            for _ in range(megabytes * 10):
                while True:
                    try:
                        producer.produce(topic, payload, partition=0)
                        break
                    except BufferError:
                        producer.poll(0.05)
                producer.poll(0)
            assert producer.flush(300) == 0
            produce_s = time.time() - produced
            size = log_bytes(c.brokers[1], topic)
            if throttle:
                c.zk.create("/config/brokers/2", json.dumps(
                    {"version": 1, "config": {"follower.replication.throttled.rate": str(throttle)}}).encode(),
                    makepath=True)
            started = time.time()
            c.brokers[2].start()
            wait_until(lambda: c.isr(topic, 0) == [1, 2] or sorted(c.isr(topic, 0)) == [1, 2],
                       timeout=3600, interval=0.2, what="broker 2 back in the ISR")
            elapsed = time.time() - started
            copied = log_bytes(c.brokers[2], topic)
            label = f"{throttle / 1e6:.0f} MB/s" if throttle else "none"
            print(f"throttle {label}: {copied / 1e6:.0f} MB caught up in {elapsed:.1f} s "
                  f"({copied / elapsed / 1e6:.1f} MB/s; leader log {size / 1e6:.0f} MB produced in {produce_s:.1f} s)",
                  flush=True)
        finally:
            c.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=1000)
    parser.add_argument("--throttle", type=int, action="append", help="bytes/s; 0 = none (repeatable)")
    args = parser.parse_args()
    for throttle in args.throttle or [0, 50_000_000]:
        run(args.megabytes, throttle)


if __name__ == "__main__":
    main()
