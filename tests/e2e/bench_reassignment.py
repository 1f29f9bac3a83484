"""Benchmark (not collected by pytest): the time to move 1 GB of partition data to another
broker with `gregor reassign-partitions`, without and with `--throttle`.

    GREGOR_TEST_ZOOKEEPER=127.0.0.1:PORT GREGOR_BIN=target/release/gregor \
        .venv/bin/python tests/e2e/bench_reassignment.py [--gb 1] [--throttle 50000000]

Two brokers on a real ZooKeeper: a topic with one partition on broker 1 is filled with
--gb GB (100 kB records, acks=1), moved to broker 2 unthrottled, then back to broker 1 with
--throttle B/s; each move is timed from `--execute` to `--verify` reporting it complete.
At most two copies of the data exist at any time.
"""

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))

from confluent_kafka import Producer  # noqa: E402

from conftest import gregor_cli, wait_until  # noqa: E402
from replication import Cluster  # noqa: E402


def move(c, tmp, name, target, throttle=None):
    plan = os.path.join(tmp, f"{name}.json")
    with open(plan, "w") as f:
        json.dump({"version": 1, "partitions": [{"topic": "bulk", "partition": 0, "replicas": target}]}, f)
    args = ["reassign-partitions", "--bootstrap-server", c.bootstrap, "--execute", "--reassignment-json-file", plan]
    if throttle is not None:
        args += ["--throttle", str(throttle)]
    started = time.time()
    run = gregor_cli(*args)
    assert run.returncode == 0, run.stdout + run.stderr

    def done():
        out = gregor_cli("reassign-partitions", "--bootstrap-server", c.bootstrap, "--verify",
                         "--reassignment-json-file", plan).stdout
        return "Reassignment of partition bulk-0 is complete." in out

    wait_until(done, timeout=3600, interval=0.5, what=f"move {name}")
    return time.time() - started


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--throttle", type=int, default=50_000_000)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        c = Cluster(tmp, brokers=2, overrides=("auto.leader.rebalance.enable=false",)).start()
        try:
            c.create_topic("bulk", assignment=[[1]])
            producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "1", "linger.ms": 20,
                                 "batch.size": 1_000_000, "message.max.bytes": 2_000_000})
            payload = os.urandom(100_000)
            count = int(opts.gb * 10_000)
            for _ in range(count):
                while True:
                    try:
                        producer.produce("bulk", payload, partition=0)
                        break
                    except BufferError:
                        producer.poll(0.1)
                producer.poll(0)
            assert producer.flush(300) == 0
            size = count * len(payload)
            plain = move(c, tmp, "to-2", [2])
            throttled = move(c, tmp, "to-1", [1], opts.throttle)
            print(f"moved {size / 1e9:.2f} GB: unthrottled {plain:.1f} s ({size / plain / 1e6:.0f} MB/s); "
                  f"--throttle {opts.throttle} {throttled:.1f} s ({size / throttled / 1e6:.1f} MB/s)")
        finally:
            c.stop()


if __name__ == "__main__":
    main()
