#!/usr/bin/env python3
"""The web console's render time at scale (issue 15: "every page renders with 10,000
partitions in under 1 s of server time"), for BENCHMARKS.md.

    scripts/bench_console.py --partitions 10000 --runs 5 [--gregor target/release/gregor]

Starts a fresh `gregor server` (embedded store) in a temporary directory, creates one topic of
--partitions partitions (RF 1) and a consumer group committed on all of them, waits until
every partition has a leader, then GETs each console page --runs times over loopback and
prints the median and the worst time to the last byte. On loopback with keep-alive off, that
is the server's time to answer (the client only reads). The topic page is paged (its first
page, and its last), as a browser gets it.
"""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from conftest import free_port, wait_for_port  # noqa: E402


def timed_get(url):
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as r:
        body = r.read()
        assert r.status == 200, (url, r.status)
    return time.perf_counter() - started, len(body)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gregor", default=os.path.join(ROOT, "target", "release", "gregor"))
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = ap.parse_args()

    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    tmp = tempfile.mkdtemp(prefix="gregor-bench-console-")
    port, admin_port = free_port(), free_port()
    log = open(os.path.join(tmp, "server.log"), "ab")
    proc = subprocess.Popen(
        [args.gregor, "server", "--data-dir", os.path.join(tmp, "data"),
         "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
         "--override", f"admin.listener=127.0.0.1:{admin_port}"],
        stdout=log, stderr=log)
    try:
        wait_for_port(port, proc, timeout=120)
        wait_for_port(admin_port, proc, timeout=120)
        bootstrap = f"127.0.0.1:{port}"
        topic, group = f"console-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        started = time.time()
        admin.create_topics([NewTopic(topic, num_partitions=args.partitions, replication_factor=1)],
                            request_timeout=600)[topic].result(timeout=600)
        deadline = time.time() + 600
        while True:
            md = admin.list_topics(topic, timeout=60).topics[topic]
            if len(md.partitions) == args.partitions and all(p.leader >= 0 for p in md.partitions.values()):
                break
            assert time.time() < deadline, "partitions not online in 600 s"
            time.sleep(1)
        print(f"{args.partitions} partitions online in {time.time() - started:.1f} s")
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(topic, p, 0) for p in range(args.partitions)], asynchronous=False)
        c.close()

        base = f"http://127.0.0.1:{admin_port}"
        pages = {
            "cluster": "/",
            "topics": "/topics",
            "topic (first page)": f"/topics/{topic}",
            "topic (last page)": f"/topics/{topic}?page=1000000",
            "topic (live fragment)": f"/topics/{topic}?fragment=1",
            "groups": "/groups",
            "group": f"/groups/{group}",
            "znodes /brokers/topics": "/znodes/brokers/topics",
        }
        print(f"{'page':<24} {'median s':>9} {'worst s':>8} {'bytes':>10}")
        for name, path in pages.items():
            timed_get(base + path)  # warm-up
            times, size = [], 0
            for _ in range(args.runs):
                t, size = timed_get(base + path)
                times.append(t)
            print(f"{name:<24} {statistics.median(times):>9.3f} {max(times):>8.3f} {size:>10}")
        del admin
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
