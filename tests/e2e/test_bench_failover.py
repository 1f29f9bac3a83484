"""Smoke test of `gregor bench failover` (built with `--features bench`) on a small cluster of
real `gregor server` processes: a controlled shutdown (SIGTERM) then a crash (SIGKILL) of
two brokers, each measured; the figures must parse and agree with the store and the
producer's own counts."""

import re
import subprocess

import pytest

from conftest import GREGOR_BIN
from replication import Cluster

LINE = re.compile(
    r"^failover: signal=(?P<signal>KILL|TERM) partitions=(?P<partitions>\d+) moved=(?P<moved>\d+) "
    r"signal_unix_ms=\d+ metadata_s=(?P<metadata>[\d.]+) resumed_s=(?P<resumed>[\d.]+) "
    r"resumed_p50_s=[\d.]+ exit_s=(?P<exit>[\d.]+) sampled=(?P<sampled>\d+) sampled_moved=(?P<sampled_moved>\d+)$",
    re.M,
)
COUNTS = re.compile(
    r"^failover: sent=(?P<sent>\d+) delivered=(?P<delivered>\d+) failed=(?P<failed>\d+) "
    r"producers=(?P<producers>\d+) warm_up_s=[\d.]+",
    re.M,
)


def failover(c, topic, broker, signal):
    r = subprocess.run(
        [GREGOR_BIN, "bench", "failover", "--bootstrap-server", c.bootstrap, "--topic", topic,
         "--broker-id", str(broker), "--broker-pid", str(c.brokers[broker].proc.pid),
         "--signal", signal, "--rate", "300", "--timeout-secs", "60", "--producers", "2"],
        capture_output=True, text=True, timeout=180,
    )
    if r.returncode != 0 and "unrecognized subcommand 'bench'" in r.stderr:
        pytest.skip("gregor was built without --features bench")
    assert r.returncode == 0, r.stdout + r.stderr
    c.brokers[broker].proc.wait(timeout=60)
    line, counts = LINE.search(r.stdout), COUNTS.search(r.stdout)
    assert line and counts, r.stdout
    # Without --sample every partition is produced to.
    assert line["sampled"] == line["partitions"] and line["sampled_moved"] == line["moved"], r.stdout
    return line, counts


def test_failover_figures_for_a_controlled_shutdown_and_a_crash(tmp_path):
    c = Cluster(tmp_path).start()
    try:
        topic = "bench-failover"
        c.create_topic(topic, 6, 3, {"min.insync.replicas": "1"})
        controller = c.controller()
        first, second = [b for b in sorted(c.brokers) if b != controller]
        for broker, signal in ((first, "term"), (second, "kill")):
            led = [p for p in range(6) if c.leader(topic, p) == broker]
            if not led:
                continue
            line, counts = failover(c, topic, broker, signal)
            assert line["signal"] == signal.upper()
            assert int(line["partitions"]) == 6 and int(line["moved"]) == len(led)
            assert all(c.leader(topic, p) not in (broker, -1) for p in led)
            assert int(counts["failed"]) == 0, counts.group(0)
            assert int(counts["delivered"]) == int(counts["sent"])
            assert int(counts["producers"]) == 2
            if signal == "term":
                assert "controlled shutdown succeeded" in c.brokers[broker].log_text()
    finally:
        c.stop()
