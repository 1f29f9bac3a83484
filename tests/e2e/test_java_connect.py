"""Kafka Connect (connect-runtime 4.x from Maven Central) on Gregor (issue 27): Connect's own
main classes (ConnectStandalone, ConnectDistributed) on the classpath Maven resolved, with a
file source and a file sink connector (gregor.apps.LineFileSource / LineFileSink in tests/java:
FileStreamSource/Sink's behaviour; Maven Central here serves no connect-file jar).

- Standalone: lines of a file go through a Gregor topic into another file; the worker is
  stopped, more lines are written, and the restarted worker resumes from its offsets file
  (each line arrives once, in order).
- Distributed: the worker creates its compacted config, offset and status topics on Gregor
  (and checks they are compacted with DescribeConfigs), joins its group (the classic protocol
  with Connect's own protocol type), takes both connectors over its REST API, and after a
  restart finds them again in the config topic and resumes from the offsets topic.
"""

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request

from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from conftest import free_port, wait_until
from java_build import java

CONVERTERS = {
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": "org.apache.kafka.connect.storage.StringConverter",
    # Our connectors are found through their META-INF/services entries: no classpath scan.
    "plugin.discovery": "service_load",
    "offset.flush.interval.ms": "500",
}


def write_props(path, props):
    with open(path, "w") as f:
        for k, v in props.items():
            f.write(f"{k}={v}\n")
    return path


def append_lines(path, start, end):
    with open(path, "a") as f:
        for i in range(start, end):
            f.write(f"line {i}\n")


def lines(path):
    try:
        with open(path) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def want(n):
    return [f"line {i}" for i in range(n)]


class Worker:
    def __init__(self, main, args, log_path, port):
        self.main, self.args, self.log_path, self.port = main, args, log_path, port
        self.proc = None

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = java(self.main, *self.args, stdout=log, stderr=subprocess.STDOUT)
        return self

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("the Connect worker did not stop within 60 s of SIGTERM")

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")[-10000:]

    def rest(self, method, path, body=None):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")
        except OSError as e:
            return None, str(e)

    def running(self, name):
        status, body = self.rest("GET", f"/connectors/{name}/status")
        return (status == 200 and body["connector"]["state"] == "RUNNING"
                and body["tasks"] and all(t["state"] == "RUNNING" for t in body["tasks"]))


def wait_lines(worker, sink, n, what):
    try:
        wait_until(lambda: len(lines(sink)) >= n, timeout=120, interval=0.3, what=what)
    except AssertionError as e:
        raise AssertionError(f"{e}: {len(lines(sink))} lines\n{worker.log()}") from None
    assert lines(sink) == want(n), f"{what}: the sink file is not the source's lines once in order"


def make_topic(bootstrap, name):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=3)])[name].result(30)


def test_connect_standalone(make_cluster, tmp_path):
    cluster = make_cluster(3, broker_ids=[1, 2, 3])
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    topic = "connect-standalone-lines"
    make_topic(cluster.bootstrap, topic)
    append_lines(source, 0, 100)
    port = free_port()
    worker_props = write_props(tmp_path / "worker.properties", {
        "bootstrap.servers": cluster.bootstrap,
        "offset.storage.file.filename": tmp_path / "offsets",
        "listeners": f"http://127.0.0.1:{port}",
        **CONVERTERS,
    })
    source_props = write_props(tmp_path / "source.properties", {
        "name": "file-source", "connector.class": "gregor.apps.LineFileSource", "tasks.max": 1,
        "file": source, "topic": topic,
    })
    sink_props = write_props(tmp_path / "sink.properties", {
        "name": "file-sink", "connector.class": "gregor.apps.LineFileSink", "tasks.max": 1,
        "file": sink, "topics": topic,
    })
    worker = Worker("org.apache.kafka.connect.cli.ConnectStandalone",
                    [worker_props, source_props, sink_props], tmp_path / "worker.log", port)
    try:
        worker.start()
        wait_lines(worker, sink, 100, "the first 100 lines in the sink")
        append_lines(source, 100, 150)
        wait_lines(worker, sink, 150, "150 lines in the sink")
        worker.stop()
        append_lines(source, 150, 200)
        worker.start()
        wait_lines(worker, sink, 200, "200 lines after the restart")
        time.sleep(1.5)
        assert lines(sink) == want(200), "lines arrived twice after the restart"
    finally:
        worker.stop()


def test_connect_distributed(make_cluster, tmp_path):
    cluster = make_cluster(3, broker_ids=[1, 2, 3])
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    topic = "connect-distributed-lines"
    make_topic(cluster.bootstrap, topic)
    append_lines(source, 0, 100)
    port = free_port()
    worker_props = write_props(tmp_path / "worker.properties", {
        "bootstrap.servers": cluster.bootstrap,
        "group.id": "gregor-connect",
        "config.storage.topic": "gregor-connect-configs",
        "offset.storage.topic": "gregor-connect-offsets",
        "status.storage.topic": "gregor-connect-status",
        "config.storage.replication.factor": 3,
        "offset.storage.replication.factor": 3,
        "status.storage.replication.factor": 3,
        "listeners": f"http://127.0.0.1:{port}",
        "rest.advertised.host.name": "127.0.0.1",
        "scheduled.rebalance.max.delay.ms": 1000,
        **CONVERTERS,
    })
    worker = Worker("org.apache.kafka.connect.cli.ConnectDistributed", [worker_props],
                    tmp_path / "worker.log", port)
    try:
        worker.start()
        try:
            wait_until(lambda: worker.rest("GET", "/connectors")[0] == 200, timeout=120, interval=0.5,
                       what="the worker's REST API")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{worker.log()}") from None

        # Its internal topics, compacted, on Gregor.
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        internal = ["gregor-connect-configs", "gregor-connect-offsets", "gregor-connect-status"]
        described = admin.describe_configs([ConfigResource("topic", t) for t in internal])
        for res, fut in described.items():
            assert fut.result(20)["cleanup.policy"].value == "compact", res
        md = admin.list_topics(timeout=20).topics
        assert len(md["gregor-connect-configs"].partitions) == 1
        assert len(md["gregor-connect-offsets"].partitions) == 25  # Connect's default

        for name, config in (
            ("file-source", {"connector.class": "gregor.apps.LineFileSource", "tasks.max": "1",
                             "file": str(source), "topic": topic}),
            ("file-sink", {"connector.class": "gregor.apps.LineFileSink", "tasks.max": "1",
                           "file": str(sink), "topics": topic}),
        ):
            status, body = worker.rest("POST", "/connectors", {"name": name, "config": config})
            assert status == 201, (status, body)
        for name in ("file-source", "file-sink"):
            wait_until(lambda: worker.running(name), timeout=60, interval=0.5, what=f"{name} RUNNING")
        wait_lines(worker, sink, 100, "the first 100 lines in the sink")

        # A worker restart: the connectors come back from the config topic, the source resumes
        # from the offsets topic and the sink from its group's committed offsets.
        worker.stop()
        append_lines(source, 100, 200)
        worker.start()
        wait_lines(worker, sink, 200, "200 lines after the restart")
        status, body = worker.rest("GET", "/connectors")
        assert sorted(body) == ["file-sink", "file-source"], body
        time.sleep(1.5)
        assert lines(sink) == want(200), "lines arrived twice after the restart"
    finally:
        worker.stop()
