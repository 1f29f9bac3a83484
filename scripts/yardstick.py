#!/usr/bin/env python3
"""Apache Kafka as the yardstick (issue 27): the same Kafka perf tools against Apache Kafka 4.x
and against Gregor on this machine, in turn (A B A B ...), each run on a fresh data dir, the
page cache dropped before each run.

Kafka is the kafka_2.13 broker from Maven Central (tests/java's pom pins it; Maven resolves it
with its dependencies into ~/.m2), started as one combined KRaft node (process.roles=
broker,controller) from a generated server.properties after StorageTool's `format`. Gregor is
`gregor server` from the given binary (build it with `cargo build --release -p cli`). The load
is Kafka's own kafka-producer-perf-test (org.apache.kafka.tools.ProducerPerformance) and
kafka-consumer-perf-test (ConsumerPerformance), one JVM each, the same for both brokers.

Each row: MB/s as the tool prints it, the broker's CPU seconds (utime+stime of
/proc/<pid>/stat, before/after) per GB moved, the producer's p50/p99 latency, the seconds from
the broker's start to its port open, its RSS idle (after the topic's creation) and at peak
(VmHWM, so far in that round). The machine's load average is recorded before and after every run. A last line gives
Gregor / Kafka of the medians.

Usage: scripts/yardstick.sh [--records N] [--workloads SIZE:ACKS:PARTITIONS,...]
                            [--rounds R] [--gregor-bin PATH] [--out FILE]
Writes a Markdown table to --out (default: print only) and prints it.
"""

import argparse
import base64
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
JAVA_DIR = os.path.join(ROOT, "tests", "java")
CLK_TCK = os.sysconf("SC_CLK_TCK")
# The perf tools and Kafka get the JVM's full JIT here (a benchmark, not a test).
TOOL_JVM = ["-Xms256m", "-Xmx1g"]
KAFKA_JVM = ["-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
             "-XX:InitiatingHeapOccupancyPercent=35", "-Djava.awt.headless=true"]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc, timeout=90):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the broker exited with {proc.returncode} before port {port} opened")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"port {port} did not open in {timeout}s")


def classpath():
    mvn = shutil.which("mvn")
    if not mvn:
        sys.exit("yardstick: Maven is not installed")
    done = subprocess.run([mvn, "-B", "-o", "-q", "-f", os.path.join(JAVA_DIR, "pom.xml"), "test-compile"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit("yardstick: `mvn -o test-compile` of tests/java failed (resolve the artifacts into "
                 "~/.m2 first: the Maven line of scripts/test.sh)\n" + (done.stdout + done.stderr)[-3000:])
    with open(os.path.join(JAVA_DIR, "target", "classpath.txt")) as f:
        return f.read().strip()


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mib(pid, field="VmHWM"):
    """The process's peak (VmHWM) or current (VmRSS) resident memory."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def drop_caches():
    """Drops the page cache (needs root); returns whether it could."""
    subprocess.run(["sync"])
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


class Kafka:
    name = "Kafka"

    def __init__(self, cp, workdir, version):
        self.cp, self.workdir, self.version = cp, workdir, version

    def start(self):
        self.port, cport = free_port(), free_port()
        logs = os.path.join(self.workdir, "kafka-logs")
        props = os.path.join(self.workdir, "server.properties")
        with open(props, "w") as f:
            f.write("\n".join([
                "process.roles=broker,controller",
                "node.id=1",
                f"controller.quorum.voters=1@127.0.0.1:{cport}",
                f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{cport}",
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                "controller.listener.names=CONTROLLER",
                "inter.broker.listener.name=PLAINTEXT",
                "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                f"log.dirs={logs}",
                "num.partitions=1",
                "offsets.topic.replication.factor=1",
                "transaction.state.log.replication.factor=1",
                "transaction.state.log.min.isr=1",
                "group.initial.rebalance.delay.ms=0",
                "",
            ]))
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        fmt = subprocess.run(["java", "-cp", self.cp, "kafka.tools.StorageTool", "format", "-t", cluster_id,
                              "-c", props], capture_output=True, text=True)
        if fmt.returncode != 0:
            raise RuntimeError("kafka-storage format failed:\n" + fmt.stdout + fmt.stderr)
        self.log = open(os.path.join(self.workdir, "kafka.log"), "ab")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(["java", *KAFKA_JVM, "-cp", self.cp, "kafka.Kafka", props],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        wait_port(self.port, self.proc)
        self.startup = time.monotonic() - t0
        return f"127.0.0.1:{self.port}"


class Gregor:
    name = "Gregor"

    def __init__(self, binary, workdir):
        self.binary, self.workdir = binary, workdir

    def start(self):
        self.port, admin = free_port(), free_port()
        self.log = open(os.path.join(self.workdir, "gregor.log"), "ab")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [self.binary, "server", "--data-dir", os.path.join(self.workdir, "data"),
             "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
             "--override", f"admin.listener=127.0.0.1:{admin}"],
            stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, "RUST_LOG": "warn"})
        wait_port(self.port, self.proc)
        self.startup = time.monotonic() - t0
        return f"127.0.0.1:{self.port}"


def stop(broker):
    if broker.proc.poll() is None:
        broker.proc.send_signal(signal.SIGTERM)
        try:
            broker.proc.wait(60)
        except subprocess.TimeoutExpired:
            broker.proc.kill()
            broker.proc.wait()
    broker.log.close()


def tool(cp, main, *args, timeout=900):
    done = subprocess.run(["java", *TOOL_JVM, "-cp", cp, main, *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{main} {' '.join(map(str, args))} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return done.stdout


PRODUCED = re.compile(r"(\d+) records sent, ([0-9.]+) records/sec \(([0-9.]+) MB/sec\), ([0-9.]+) ms avg latency, "
                      r"([0-9.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th")


def parse_workloads(spec):
    """'SIZE:ACKS:PARTITIONS,...' -> [(size, acks, partitions)]."""
    out = []
    for item in spec.split(","):
        size, acks, partitions = item.split(":")
        out.append((int(size), acks, int(partitions)))
    return out


def run_broker(cp, broker, workloads, records, dropped):
    """Starts the broker once and runs every workload on a fresh topic of its own, the page
    cache dropped before each; returns one row per workload."""
    rows = []
    load_before = loadavg()
    bootstrap = broker.start()
    try:
        pid = broker.proc.pid
        idle = None
        for n, (size, acks, partitions) in enumerate(workloads):
            row = {"broker": broker.name, "workload": f"{size} B, acks={acks}, {partitions} p",
                   "load_before": load_before if n == 0 else loadavg()}
            topic = f"yardstick-{n}"
            tool(cp, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--create", "--topic",
                 topic, "--partitions", partitions, "--replication-factor", 1)
            if idle is None:
                idle = rss_mib(pid, "VmRSS")
            row.update(startup_s=broker.startup, idle_rss_mib=idle)
            dropped[0] &= drop_caches()
            cpu0 = cpu_seconds(pid)
            out = tool(cp, "org.apache.kafka.tools.ProducerPerformance", "--topic", topic, "--num-records", records,
                       "--record-size", size, "--throughput", -1, "--producer-props",
                       f"bootstrap.servers={bootstrap}", f"acks={acks}", "linger.ms=5", "batch.size=65536")
            cpu1 = cpu_seconds(pid)
            m = PRODUCED.findall(out)
            if not m:
                raise RuntimeError("no summary from the producer perf test:\n" + out[-2000:])
            sent, _, mbs, _, _, p50, _, p99 = m[-1]
            gb = int(sent) * size / 1e9
            row.update(produce_mbs=float(mbs), produce_cpu_per_gb=(cpu1 - cpu0) / gb, p50=int(p50), p99=int(p99))
            # Consume what was just written, from the page cache.
            out = tool(cp, "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap, "--topic",
                       topic, "--num-records", records, "--timeout", 60000)
            cpu2 = cpu_seconds(pid)
            lines = [line for line in out.splitlines() if line.strip()]
            header = [h.strip() for h in lines[-2].split(",")]
            values = [v.strip() for v in lines[-1].split(",")]
            result = dict(zip(header, values))
            row.update(consume_mbs=float(result["MB.sec"]), consume_cpu_per_gb=(cpu2 - cpu1) / gb,
                       rss_mib=rss_mib(pid), load_after=loadavg())
            rows.append(row)
    finally:
        stop(broker)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000, help="records per workload")
    ap.add_argument("--workloads", default="1024:1:1,1024:1:8,1024:all:8,100:1:8",
                    help="SIZE:ACKS:PARTITIONS,... (default: 1 KiB acks=1 on 1 and 8 partitions, "
                         "1 KiB acks=all, 100 B acks=1)")
    ap.add_argument("--rounds", type=int, default=2, help="A B rounds (default 2: A B A B)")
    ap.add_argument("--gregor-bin", default=os.path.join(ROOT, "target", "release", "gregor"))
    ap.add_argument("--out", help="write the Markdown table to this file")
    args = ap.parse_args()
    if not os.path.exists(args.gregor_bin):
        sys.exit(f"yardstick: no {args.gregor_bin} (cargo build --release -p cli)")

    cp = classpath()
    version = re.search(r"kafka_2\.13-([0-9.]+)\.jar", cp).group(1)
    workloads = parse_workloads(args.workloads)
    rows = []
    dropped = [True]
    for r in range(args.rounds):
        for make in (lambda d: Kafka(cp, d, version), lambda d: Gregor(args.gregor_bin, d)):
            with tempfile.TemporaryDirectory(prefix="yardstick-") as d:
                dropped[0] &= drop_caches()
                broker = make(d)
                print(f"round {r + 1}: {broker.name} ...", file=sys.stderr, flush=True)
                for row in run_broker(cp, broker, workloads, args.records, dropped):
                    row["round"] = r + 1
                    rows.append(row)
                    print(f"  {row}", file=sys.stderr, flush=True)
    dropped = dropped[0]

    workload = (f"{args.records:,} records per workload, RF 1, one broker started once per round, each workload "
                f"on a fresh topic; kafka-producer-perf-test (linger.ms=5, batch.size=65536) then "
                f"kafka-consumer-perf-test of the same records")
    out = [
        f"Run {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on `{socket.gethostname()}`: "
        f"{os.cpu_count()} cores, Apache Kafka {version} (KRaft, one combined node, {' '.join(KAFKA_JVM[:2])}) "
        f"vs `{os.path.relpath(args.gregor_bin, ROOT)}`. Workload: {workload}. "
        f"Page cache dropped before each run: {'yes' if dropped else 'NO (not root)'}.",
        "",
        "| round | broker | workload | produce MB/s | produce p50 / p99 ms | broker CPU-s per GB produced | consume MB/s "
        "| broker CPU-s per GB consumed | start to port open s | idle RSS MiB | peak RSS MiB "
        "| load avg before / after |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        out.append(f"| {r['round']} | {r['broker']} | {r['workload']} | {r['produce_mbs']:.1f} | {r['p50']} / {r['p99']} "
                   f"| {r['produce_cpu_per_gb']:.2f} | {r['consume_mbs']:.1f} | {r['consume_cpu_per_gb']:.2f} "
                   f"| {r['startup_s']:.1f} | {r['idle_rss_mib']:.0f} | {r['rss_mib']:.0f} "
                   f"| {r['load_before']} / {r['load_after']} |")
    # Gregor / Kafka, medians over the rounds.
    cols = [("produce MB/s", "produce_mbs"), ("p99 ms", "p99"), ("CPU-s/GB produced", "produce_cpu_per_gb"),
            ("consume MB/s", "consume_mbs"), ("CPU-s/GB consumed", "consume_cpu_per_gb"),
            ("start s", "startup_s"), ("idle RSS", "idle_rss_mib"), ("peak RSS", "rss_mib")]
    out += ["", "| Gregor / Kafka (medians over rounds) | " + " | ".join(c for c, _ in cols) + " |",
            "| --- |" + " --- |" * len(cols)]
    for w in dict.fromkeys(r["workload"] for r in rows):
        med = {b: {k: statistics.median(r[k] for r in rows if r["broker"] == b and r["workload"] == w)
                   for _, k in cols} for b in ("Kafka", "Gregor")}
        out.append(f"| {w} | " + " | ".join(f"{med['Gregor'][k] / med['Kafka'][k]:.2f}" if med["Kafka"][k] else "-"
                                           for _, k in cols) + " |")
    table = "\n".join(out) + "\n"
    print(table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(table)


if __name__ == "__main__":
    main()
