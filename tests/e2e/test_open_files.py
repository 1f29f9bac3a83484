"""Open files stay bounded (issue 10): a broker whose open-file limit is 1,024 (soft and
hard, as `ulimit -n 1024`) hosts 5,000 partitions, about 15,000 segment and index files,
and acknowledges a record on every one of them, before and after a crash and restart. The broker logs
the limit it runs under, and never holds more descriptors than the limit allows."""

import os
import resource
import signal
import subprocess
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import GREGOR_BIN, Gregor, free_port, wait_for_port, wait_until

LIMIT = 1024
PARTITIONS = 5000


class LimitedGregor(Gregor):
    """`gregor server` started under RLIMIT_NOFILE = LIMIT."""

    def start(self):
        def limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))

        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [GREGOR_BIN] + self.args,
            stdout=log,
            stderr=log,
            env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")},
            preexec_fn=limit,
        )
        for p in self.kafka_ports:
            wait_for_port(p, self.proc, timeout=120)
        wait_for_port(self.admin_port, self.proc, timeout=120)
        return self


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def all_led(bootstrap, topic):
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=30)
    t = md.topics.get(topic)
    if t is None or t.error is not None or len(t.partitions) != PARTITIONS:
        return False
    return all(p.leader >= 0 and p.error is None for p in t.partitions.values())


def produce_to_every_partition(bootstrap, topic, tag, pid):
    failed, delivered = [], set()

    def report(err, msg):
        if err is not None:
            failed.append((msg.partition(), str(err)))
        else:
            delivered.add(msg.partition())

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "acks": "1",
        "linger.ms": 20,
        "message.timeout.ms": 120000,
    })
    peak = 0
    for p in range(PARTITIONS):
        producer.produce(topic, value=f"{tag}-{p}".encode(), partition=p, on_delivery=report)
        if p % 500 == 0:
            producer.poll(0)
            peak = max(peak, open_fds(pid))
    deadline = time.time() + 180
    while producer.flush(1) > 0 and time.time() < deadline:
        peak = max(peak, open_fds(pid))
    assert producer.flush(0) == 0, "records still in flight after 180 s"
    assert not failed, f"{len(failed)} partitions failed, e.g. {failed[:5]}"
    assert delivered == set(range(PARTITIONS))
    return peak


def test_5000_partitions_under_a_1024_descriptor_limit(tmp_path):
    port, admin = free_port(), free_port()
    data_dir = tmp_path / "server"
    args = [
        "server",
        "--data-dir", str(data_dir),
        "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
        "--override", f"admin.listener=127.0.0.1:{admin}",
    ]
    g = LimitedGregor(args, data_dir, [port], admin, tmp_path / "server.log")
    g.start()
    try:
        topic = "many"
        admin_client = AdminClient({"bootstrap.servers": g.bootstrap})
        futures = admin_client.create_topics(
            [NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)],
            request_timeout=120, operation_timeout=120,
        )
        futures[topic].result(timeout=180)
        wait_until(lambda: all_led(g.bootstrap, topic), timeout=180, interval=1,
                   what="every partition led")

        peak = produce_to_every_partition(g.bootstrap, topic, "first", g.proc.pid)
        assert peak < LIMIT, f"{peak} descriptors open under a limit of {LIMIT}"
        log = g.log_text()
        assert "open-file limit" in log and "log_files_open_at_most" in log, log[-3000:]
        assert "Too many open files" not in log

        # After a crash (SIGKILL: a clean stop fsyncs 5,000 logs one by one, which takes a
        # minute on a busy debug build) every log is recovered under the same limit.
        g.stop(signal.SIGKILL)
        g.start()
        wait_until(lambda: all_led(g.bootstrap, topic), timeout=180, interval=1,
                   what="every partition led after the restart")
        peak = produce_to_every_partition(g.bootstrap, topic, "second", g.proc.pid)
        assert peak < LIMIT, f"{peak} descriptors open after the restart"
        assert "Too many open files" not in g.log_text()
    finally:
        g.stop(signal.SIGKILL)
