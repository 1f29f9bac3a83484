#!/usr/bin/env python3
"""Failover figures of BENCHMARKS.md: a cluster of real `gregor server` processes on a real
ZooKeeper, one topic, then `gregor bench failover` kills (SIGKILL) or stops (SIGTERM) the
broker that leads the most partitions (never the controller) under load.

    scripts/bench_failover.py --zookeeper 127.0.0.1:2181 --partitions 1000 --signal kill
    scripts/bench_failover.py --zookeeper 127.0.0.1:2181 --partitions 3000 --signal term
    scripts/bench_failover.py --zookeeper 127.0.0.1:2181 --partitions 30000 --victim controller

It prints what the client saw (`gregor bench failover`'s lines) and, from the controller's
log, where the time went: detection (signal -> the controller's BrokerChange event, i.e.
zookeeper.session.timeout.ms) and the controller's part (the event: elections, state
writes, requests queued); for SIGTERM the controller's ControlledShutdown handling. With
`--victim controller` it kills the controller instead and reports the new controller's
failover: its election after the signal, the whole tree read ("controller failover
complete"), and its handling of the old controller's death (elections, state writes,
every LeaderAndIsr/UpdateMetadata queued).

Needs the gregor binary built with `--features bench` (default: target/release/gregor) and
the Python packages of tests/e2e (confluent-kafka, kazoo).
"""

import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))


def log_events(text, message):
    """(unix seconds, fields) of every tracing line containing `message`."""
    out = []
    for line in text.splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)
        if message not in line:
            continue
        stamp = line.split(" ", 1)[0]
        try:
            at = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            continue
        fields = dict(re.findall(r'(\w+)=("[^"]*"|\S+)', line))
        out.append((at, {k: v.strip('"') for k, v in fields.items()}))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zookeeper", required=True, help="host:port of a ZooKeeper (a fresh chroot is used)")
    ap.add_argument("--partitions", type=int, required=True)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--replication-factor", type=int, default=3)
    ap.add_argument("--signal", choices=["kill", "term"], default="kill")
    ap.add_argument("--session-timeout-ms", type=int, default=6000)
    ap.add_argument("--rate", type=int, default=1000, help="messages per second over all partitions")
    ap.add_argument("--gregor", default=os.path.join(ROOT, "target", "release", "gregor"))
    ap.add_argument("--bench-gregor", default=None, help="the gregor binary that runs `bench failover` (default: --gregor)")
    ap.add_argument("--acks", choices=["1", "all"], default="all")
    ap.add_argument(
        "--producers", type=int, default=None,
        help="librdkafka producers the partitions are spread over (default: one per 250 partitions); "
        "librdkafka sends one partition per ProduceRequest and a broker serves a connection's "
        "requests one at a time, so one producer acknowledges one partition per round trip per broker",
    )
    ap.add_argument(
        "--sample", type=int, default=None,
        help="produce to this many partitions only, spread over the topic (gregor bench failover "
        "--sample); the metadata figure and the controller's still cover every partition",
    )
    ap.add_argument("--timeout-secs", type=int, default=120, help="gregor bench failover's limit per phase")
    ap.add_argument(
        "--victim", choices=["leader", "controller"], default="leader",
        help="the broker stopped: the one leading the most partitions other than the controller "
        "(default), or the controller",
    )
    ap.add_argument(
        "--replica-lag-time-max-ms", type=int, default=30000,
        help="the brokers' replica.lag.time.max.ms (Kafka's default; the tests' 4 s shrinks ISRs "
        "while 10,000 logs are still being created)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the data directory and logs")
    args = ap.parse_args()
    if args.producers is None:
        args.producers = max(1, min(args.partitions, args.sample or args.partitions) // 250)

    os.environ["GREGOR_BIN"] = args.gregor
    os.environ["GREGOR_TEST_ZOOKEEPER"] = args.zookeeper
    import replication  # noqa: E402 (reads the two variables above)

    work = tempfile.mkdtemp(prefix="gregor-bench-failover-")
    cluster = replication.Cluster(
        work,
        brokers=args.brokers,
        overrides=[
            f"zookeeper.session.timeout.ms={args.session_timeout_ms}",
            "controlled.shutdown.retry.backoff.ms=1000",
            f"replica.lag.time.max.ms={args.replica_lag_time_max_ms}",
            # One topic of --partitions partitions in one CreateTopics.
            f"max.partitions.per.request={max(10000, args.partitions)}",
        ],
    )
    try:
        cluster.start()
        topic = "failover"
        started = time.time()
        cluster.create_topic(topic, args.partitions, args.replication_factor, timeout=max(120, args.partitions // 20))
        print(f"topic created with {args.partitions} partitions x {args.replication_factor} in {time.time() - started:.1f} s", file=sys.stderr)
        md = cluster.admin().list_topics(topic, timeout=60).topics[topic]
        controller = cluster.controller()
        led = {}
        for p in md.partitions.values():
            led[p.leader] = led.get(p.leader, 0) + 1
        if args.victim == "controller":
            victim = controller
        else:
            victim = max((b for b in cluster.brokers if b != controller), key=lambda b: led.get(b, 0))
        print(f"controller {controller}; leaders per broker {led}; stopping broker {victim} ({args.signal})", file=sys.stderr)
        time.sleep(2)  # let the followers settle after creation
        load = os.getloadavg()
        bench = subprocess.run(
            [
                args.bench_gregor or args.gregor, "bench", "failover", "--bootstrap-server", cluster.bootstrap, "--topic", topic,
                "--broker-id", str(victim), "--broker-pid", str(cluster.brokers[victim].proc.pid),
                "--signal", args.signal, "--rate", str(args.rate), "--acks", args.acks,
                "--producers", str(args.producers), "--timeout-secs", str(args.timeout_secs),
            ] + (["--sample", str(args.sample)] if args.sample else []),
            capture_output=True, text=True, timeout=4 * args.timeout_secs + 300,
        )
        sys.stdout.write(bench.stdout)
        if bench.returncode != 0:
            sys.stderr.write(bench.stderr)
            raise SystemExit(f"gregor bench failover failed with {bench.returncode}")
        cluster.brokers[victim].proc.wait(timeout=120)
        signal_ms = int(re.search(r"signal_unix_ms=(\d+)", bench.stdout).group(1))
        if victim == controller:
            # The new controller: the survivor elected after the signal.
            elected = sorted(
                (at, b) for b, proc in cluster.brokers.items() if b != victim
                for at, _ in log_events(proc.log_text(), "elected controller") if at * 1000 >= signal_ms
            )
            if not elected:
                print("controller: no survivor was elected controller after the signal")
            else:
                elected_at, controller = elected[0]
                text = cluster.brokers[controller].log_text()
                loaded = [at for at, _ in log_events(text, "controller failover complete") if at >= elected_at]
                queued = [(at, f) for at, f in log_events(text, "controller failover: requests queued") if at >= elected_at]
                line = (
                    f"controller failover: new_controller={controller} elected_s={elected_at - signal_ms / 1000:.3f} "
                    + (f"tree_read_s={loaded[0] - elected_at:.3f} " if loaded else "tree_read_s=none ")
                )
                if queued:
                    at, f = queued[0]
                    line += (
                        f"failover_s={float(f['elapsed_ms']) / 1000:.3f} partitions={f['partitions']} "
                        f"partitions_written={f['partitions_written']} failed={f['failed']}"
                    )
                else:
                    line += "failover_s=none"
                print(line)
        controller_log = cluster.brokers[controller].log_text()
        if args.signal == "kill":
            handled = [
                (at, f) for at, f in log_events(controller_log, "broker change handled")
                if at * 1000 >= signal_ms and str(victim) in f.get("dead", "")
            ]
            if handled:
                at, f = handled[0]
                elapsed = float(f["elapsed_ms"]) / 1000
                print(
                    f"controller: detection_s={at - elapsed - signal_ms / 1000:.3f} "
                    f"event_s={elapsed:.3f} decided_s={float(f['decided_ms']) / 1000:.3f} "
                    f"partitions_written={f['partitions_written']} failed={f['failed']} "
                    f"handled_after_signal_s={at - signal_ms / 1000:.3f}"
                )
            else:
                print("controller: no 'broker change handled' line after the signal")
        else:
            moved = [
                (at, f) for at, f in log_events(controller_log, "controlled shutdown: leaderships moved")
                if at * 1000 >= signal_ms and f.get("broker") == str(victim)
            ]
            for at, f in moved:
                print(f"controller: controlled_shutdown_s={float(f['elapsed_ms']) / 1000:.3f} remaining={f['remaining']} after_signal_s={at - signal_ms / 1000:.3f}")
        # The surviving brokers applying the controller's LeaderAndIsr requests (one
        # "LeaderAndIsr applied" line per request, with its partitions and time taken).
        for b, proc in cluster.brokers.items():
            if b == victim:
                continue
            applied = [
                (at, f) for at, f in log_events(proc.log_text(), "LeaderAndIsr applied")
                if at * 1000 >= signal_ms
            ]
            if applied:
                first_start = min(at - float(f["elapsed_ms"]) / 1000 for at, f in applied)
                print(
                    f"broker {b}: leader_and_isr requests={len(applied)} "
                    f"partitions={sum(int(f['partitions']) for _, f in applied)} "
                    f"became_leader={sum(int(f['leaders']) for _, f in applied)} "
                    f"first_started_s={first_start - signal_ms / 1000:.3f} "
                    f"last_applied_s={max(at for at, _ in applied) - signal_ms / 1000:.3f}"
                )
        print(f"machine: load average before the run {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; session timeout {args.session_timeout_ms} ms")
    finally:
        cluster.stop()
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
