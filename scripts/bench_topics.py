#!/usr/bin/env python3
"""Control-plane figures of BENCHMARKS.md (issue 10): fresh `gregor server` processes, then
`gregor bench topics` against them.

    scripts/bench_topics.py single --runs 3                  # 1 topic x 10,000 partitions
    scripts/bench_topics.py many                             # 1,000 topics x 100, then restarts
    scripts/bench_topics.py single --zookeeper 127.0.0.1:2181 --delete

`single` creates one topic of --partitions partitions on a fresh broker per run. `many`
creates --topics topics of --partitions-per-topic partitions, then stops the broker cleanly
(SIGTERM) and starts it again, timing until every partition is online (`--no-create`), then
kills it (SIGKILL) and does the same. Each run prints `gregor bench topics`' lines, prefixed
with the run. The broker's log stays in the temporary directory with --keep.

Needs the gregor binary built with `--features bench` (default: target/release/gregor) and
the Python packages of tests/e2e (confluent-kafka).
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from conftest import free_port, wait_for_port  # noqa: E402


class Server:
    def __init__(self, gregor, data_dir, zookeeper):
        self.gregor, self.data_dir = gregor, data_dir
        self.port, self.admin = free_port(), free_port()
        self.args = [gregor, "server", "--data-dir", data_dir,
                     "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
                     "--override", f"admin.listener=127.0.0.1:{self.admin}"]
        if zookeeper:
            self.args += ["--override", f"zookeeper.connect={zookeeper}/bench-topics-{uuid.uuid4().hex[:8]}"]
        self.proc = None

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def start(self, wait=True):
        log = open(os.path.join(self.data_dir, "server.log"), "ab")
        # The server's own log level (info) unless RUST_LOG says otherwise.
        self.proc = subprocess.Popen(self.args, stdout=log, stderr=log)
        if wait:
            wait_for_port(self.port, self.proc, timeout=120)
        return self

    def stop(self, sig):
        started = time.time()
        self.proc.send_signal(sig)
        self.proc.wait(timeout=1800)
        return time.time() - started


def bench(gregor, *args):
    r = subprocess.run([gregor, "bench", "topics", *args], capture_output=True, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr)
        raise SystemExit(f"gregor bench topics failed ({r.returncode})")
    return r.stdout


def show(label, out):
    for line in out.splitlines():
        print(f"[{label}] {line}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", choices=["single", "many"])
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--partitions", type=int, default=10000, help="single: partitions of the topic")
    ap.add_argument("--topics", type=int, default=1000, help="many: topics")
    ap.add_argument("--partitions-per-topic", type=int, default=100, help="many: partitions per topic")
    ap.add_argument("--zookeeper", help="host:port of a ZooKeeper (a fresh chroot per run)")
    ap.add_argument("--delete", action="store_true", help="delete the topics at the end and time it")
    ap.add_argument("--gregor", default=os.path.join(ROOT, "target", "release", "gregor"))
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()

    for run in range(1, a.runs + 1):
        data_dir = tempfile.mkdtemp(prefix="bench-topics-")
        s = Server(a.gregor, data_dir, a.zookeeper).start()
        try:
            pid = str(s.proc.pid)
            common = ["--bootstrap-server", s.bootstrap, "--broker-pid", pid]
            if a.scenario == "single":
                args = common + ["--partitions", str(a.partitions), "--topics", "1"]
                if a.delete:
                    args.append("--delete")
                show(f"run {run} create", bench(a.gregor, *args))
            else:
                shape = ["--topics", str(a.topics), "--partitions", str(a.partitions_per_topic)]
                show(f"run {run} create", bench(a.gregor, *common, *shape, "--poll-ms", "500"))
                for sig, name in ((signal.SIGTERM, "clean"), (signal.SIGKILL, "unclean")):
                    took = s.stop(sig)
                    print(f"[run {run} {name}] stopped in {took:.3f} s", flush=True)
                    s.start(wait=False)
                    out = bench(a.gregor, "--bootstrap-server", s.bootstrap, "--broker-pid", str(s.proc.pid),
                                *shape, "--no-create", "--settle-secs", "5", "--poll-ms", "500")
                    show(f"run {run} {name} restart", out)
                if a.delete:
                    show(f"run {run} delete", bench(a.gregor, "--bootstrap-server", s.bootstrap, *shape,
                                                    "--no-create", "--delete", "--settle-secs", "0"))
        finally:
            if s.proc and s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait()
            if a.keep:
                print(f"[run {run}] kept {data_dir}")
            else:
                shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
