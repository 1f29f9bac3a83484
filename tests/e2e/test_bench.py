"""Smoke test of `gregor bench` (built with `--features bench`) against a real `gregor server`:
small runs whose printed figures must parse and whose message counts must be exact, checked
independently with confluent-kafka."""

import re

import pytest
from confluent_kafka import Consumer, TopicPartition

from conftest import gregor_cli

FIGURES = re.compile(
    r"^(?P<kind>[a-z-]+): messages=(?P<messages>\d+) bytes=(?P<bytes>\d+) seconds=(?P<seconds>[\d.]+) "
    r"MB/s=(?P<mbs>[\d.]+) msgs/s=(?P<msgs>\d+) errors=(?P<errors>\d+)$",
    re.M,
)
LATENCY = re.compile(
    r"^(?P<kind>[a-z-]+): latency_ms p50=(?P<p50>[\d.]+) p99=(?P<p99>[\d.]+) p999=(?P<p999>[\d.]+) "
    r"max=(?P<max>[\d.]+) samples=(?P<samples>\d+)$",
    re.M,
)
BROKER = re.compile(
    r"^(?P<kind>[a-z-]+): broker cpu_s=(?P<cpu>[\d.]+) cpu_s_per_GB=[\d.]+ cpu_us_per_request=[\d.]+ "
    r"peak_rss_MiB=(?P<rss>[\d.]+) hwm_rss_MiB=(?P<hwm>[\d.]+)$",
    re.M,
)


def bench(*args):
    r = gregor_cli("bench", *args, timeout=120)
    if r.returncode != 0 and "unrecognized subcommand 'bench'" in r.stderr:
        pytest.skip("gregor was built without --features bench")
    assert r.returncode == 0, r.stdout + r.stderr
    return r


def by_kind(pattern, text):
    return {m["kind"]: m for m in pattern.finditer(text)}


def high_watermarks(bootstrap, topic, partitions):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-check"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions))
    finally:
        c.close()


def test_produce_then_consume_counts_and_figures(server):
    pid = str(server.proc.pid)
    common = ["--bootstrap-server", server.bootstrap, "--topic", "bench", "--message-size", "200"]
    p = bench("produce", *common, "--messages", "3000", "--partitions", "3", "--compression", "lz4",
              "--producer-property", "linger.ms=1", "--broker-pid", pid)
    figures = by_kind(FIGURES, p.stdout)["produce"]
    assert int(figures["messages"]) == 3000
    assert int(figures["bytes"]) == 3000 * 200
    assert int(figures["errors"]) == 0
    assert float(figures["mbs"]) > 0 and int(figures["msgs"]) > 0
    lat = by_kind(LATENCY, p.stdout)["produce"]
    assert int(lat["samples"]) == 3000
    assert 0 <= float(lat["p50"]) <= float(lat["p99"]) <= float(lat["p999"]) <= float(lat["max"])
    broker = by_kind(BROKER, p.stdout)["produce"]
    assert float(broker["hwm"]) > 1, "the broker's peak RSS was read from /proc"
    assert "produce: t=" in p.stderr or float(figures["seconds"]) < 1.0, "a progress line while it runs"
    # The broker holds exactly what the tool says it delivered, over the 3 created partitions.
    assert high_watermarks(server.bootstrap, "bench", 3) == 3000

    c = bench("consume", *common, "--messages", "3000", "--broker-pid", pid)
    figures = by_kind(FIGURES, c.stdout)["consume"]
    assert int(figures["messages"]) == 3000
    assert int(figures["bytes"]) == 3000 * 200


def test_end_to_end_at_a_fixed_rate_reports_both_latencies(server):
    r = bench("end-to-end", "--bootstrap-server", server.bootstrap, "--topic", "e2e", "--partitions", "1",
              "--message-size", "100", "--messages", "500", "--rate", "1000", "--acks", "all",
              "--producer-property", "linger.ms=0")
    figures = by_kind(FIGURES, r.stdout)
    assert int(figures["produce"]["messages"]) == 500
    assert int(figures["end-to-end"]["messages"]) == 500
    # 500 messages at 1000/s take about half a second, not much less.
    assert float(figures["produce"]["seconds"]) >= 0.45
    lat = by_kind(LATENCY, r.stdout)
    assert int(lat["produce"]["samples"]) == 500
    assert int(lat["end-to-end"]["samples"]) == 500
    assert float(lat["end-to-end"]["p50"]) < 1000, "end-to-end latency is measured from the send time"


def test_bad_arguments_are_refused(server):
    r = gregor_cli("bench", "produce", "--bootstrap-server", server.bootstrap, "--topic", "x",
                   "--messages", "1", "--producer-property", "novalue")
    if "unrecognized subcommand 'bench'" in r.stderr:
        pytest.skip("gregor was built without --features bench")
    assert r.returncode != 0
    assert "KEY=VALUE" in r.stderr


TOPICS = re.compile(
    r"^topics: topics=(?P<topics>\d+) partitions=(?P<partitions>\d+) create_requests=(?P<requests>\d+) "
    r"answered_s=(?P<answered>[\d.]+) online_s=(?P<online>[\d.]+) create_errors=(?P<errors>\d+)$",
    re.M,
)
PROBE = re.compile(
    r"^topics: (?P<kind>metadata|produce)_ms p50=(?P<p50>[\d.]+) p99=(?P<p99>[\d.]+) max=(?P<max>[\d.]+) "
    r"samples=(?P<samples>\d+) failed=(?P<failed>\d+)$",
    re.M,
)


def test_topics_mode_creates_measures_and_deletes(server):
    from confluent_kafka.admin import AdminClient

    pid = str(server.proc.pid)
    r = bench("topics", "--bootstrap-server", server.bootstrap, "--topics", "3", "--partitions", "10",
              "--topics-per-request", "2", "--prefix", "smoke", "--settle-secs", "1",
              "--broker-pid", pid, "--timeout-secs", "60")
    m = TOPICS.search(r.stdout)
    assert m, r.stdout
    assert (int(m["topics"]), int(m["partitions"]), int(m["requests"]), int(m["errors"])) == (3, 30, 2, 0)
    assert 0 < float(m["answered"]) <= float(m["online"])
    probes = {p["kind"]: p for p in PROBE.finditer(r.stdout)}
    assert set(probes) == {"metadata", "produce"}, r.stdout
    assert all(int(p["samples"]) > 0 and int(p["failed"]) == 0 for p in probes.values()), r.stdout
    assert re.search(r"^topics: broker rss_online_MiB=[\d.]+ rss_idle_MiB=[\d.]+ hwm_rss_MiB=[\d.]+ cpu_s=[\d.]+$",
                     r.stdout, re.M), r.stdout
    md = AdminClient({"bootstrap.servers": server.bootstrap}).list_topics(timeout=10)
    for i in range(3):
        t = md.topics[f"smoke-{i}"]
        assert len(t.partitions) == 10 and all(p.leader >= 0 for p in t.partitions.values())

    # --no-create waits for the same topics; --delete removes them.
    r = bench("topics", "--bootstrap-server", server.bootstrap, "--topics", "3", "--partitions", "10",
              "--prefix", "smoke", "--no-create", "--delete", "--settle-secs", "0")
    m = TOPICS.search(r.stdout.replace("answered_s=none", "answered_s=0"))
    assert m and int(m["requests"]) == 0, r.stdout
    assert re.search(r"^topics: delete answered_s=[\d.]+ gone_s=[\d.]+$", r.stdout, re.M), r.stdout
    md = AdminClient({"bootstrap.servers": server.bootstrap}).list_topics(timeout=10)
    assert not any(name.startswith("smoke-") for name in md.topics), sorted(md.topics)


def test_connect_mode_opens_authenticated_connections(tmp_path):
    """`gregor bench connect` over SASL_PLAINTEXT/PLAIN: every connection authenticates and is
    counted; a wrong password fails every connection and the run exits non-zero."""
    from test_security import start_broker

    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="bench-secret";'
    g, ports = start_broker(tmp_path, {"SASL": "SASL_PLAINTEXT"},
                            ["sasl.enabled.mechanisms=PLAIN", f"sasl.jaas.config={jaas}"], name="connect")
    try:
        good = tmp_path / "good.properties"
        good.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                        "sasl.username=bench\nsasl.password=bench-secret\n")
        r = bench("connect", "--bootstrap-server", f"127.0.0.1:{ports['SASL']}", "--command-config", str(good),
                  "--connections", "20", "--concurrency", "2", "--broker-pid", str(g.proc.pid))
        figures = dict(line.split("=", 1) for line in r.stdout.split())
        assert figures["protocol"] == "SASL_PLAINTEXT" and figures["mechanism"] == "PLAIN", r.stdout
        assert figures["connections"] == "20" and figures["failed"] == "0", r.stdout
        assert float(figures["connections_per_sec"]) > 0 and "broker_cpu_ms_per_connection" in figures
        bad = tmp_path / "bad.properties"
        bad.write_text(good.read_text().replace("bench-secret", "wrong"))
        r = gregor_cli("bench", "connect", "--bootstrap-server", f"127.0.0.1:{ports['SASL']}",
                       "--command-config", str(bad), "--connections", "3", "--concurrency", "1")
        assert r.returncode != 0 and "3 of 3 connections failed" in r.stderr, r.stdout + r.stderr
        assert "Invalid username or password" in r.stderr, r.stderr
    finally:
        g.stop()
