"""Fixtures that start real `gregor` processes for the end-to-end tests.

Every test talks to the broker only through real Kafka clients (librdkafka via
confluent-kafka, kafka-python, kcat), the `gregor` CLI, and the HTTP admin listener.
"""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

GREGOR_BIN = os.environ.get("GREGOR_BIN") or os.path.join(
    os.path.dirname(__file__), "..", "..", "target", "debug", "gregor"
)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(n):
    """n distinct free ports; consecutive ones are needed by dev-cluster."""
    for _ in range(200):
        base = free_port()
        ports = list(range(base, base + n))
        ok = True
        for p in ports:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return ports
    raise RuntimeError("no free consecutive ports")


def wait_for_port(port, proc, timeout=30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gregor exited early with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"port {port} did not open within {timeout}s")


class Gregor:
    """A running `gregor server` or `gregor dev-cluster` process."""

    def __init__(self, args, data_dir, kafka_ports, admin_port, log_path):
        self.args = args
        self.data_dir = str(data_dir)
        self.kafka_ports = kafka_ports
        self.admin_port = admin_port
        self.log_path = log_path
        self.proc = None

    @property
    def bootstrap(self):
        return ",".join(f"127.0.0.1:{p}" for p in self.kafka_ports)

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [GREGOR_BIN] + self.args, stdout=log, stderr=log, env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")}
        )
        for p in self.kafka_ports:
            wait_for_port(p, self.proc)
        wait_for_port(self.admin_port, self.proc)
        return self

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("gregor did not stop within 20 s of SIGTERM")
        return self.proc.returncode if self.proc else None

    def restart(self):
        self.stop()
        return self.start()

    def meta(self, path):
        """GET /v1/meta/<path> from the admin listener; None for a missing node."""
        url = f"http://127.0.0.1:{self.admin_port}/v1/meta{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return None
            raise

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")


def wait_until(predicate, timeout=15.0, interval=0.1, what="condition"):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what} (last value: {last!r})")


def gregor_cli(*args, timeout=60):
    return subprocess.run([GREGOR_BIN, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def make_server(tmp_path):
    started = []

    def _make(*overrides, name="server"):
        port, admin = free_port(), free_port()
        data_dir = tmp_path / name
        args = [
            "server",
            "--data-dir", str(data_dir),
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"admin.listener=127.0.0.1:{admin}",
        ]
        for o in overrides:
            args += ["--override", o]
        g = Gregor(args, data_dir, [port], admin, tmp_path / f"{name}.log")
        started.append(g)
        return g.start()

    yield _make
    for g in started:
        g.stop(signal.SIGKILL) if g.proc and g.proc.poll() is None else None


@pytest.fixture
def server(make_server):
    return make_server("file.delete.delay.ms=1000")


@pytest.fixture
def make_cluster(tmp_path):
    started = []

    def _make(n, broker_ids=None, racks=None, overrides=()):
        ports = free_ports(n)
        admin = free_port()
        data_dir = tmp_path / "cluster"
        args = [
            "dev-cluster",
            "--brokers", str(n),
            "--port", str(ports[0]),
            "--data-dir", str(data_dir),
            "--override", f"admin.listener=127.0.0.1:{admin}",
        ]
        if broker_ids:
            args += ["--broker-ids", ",".join(map(str, broker_ids))]
        if racks:
            args += ["--racks", ",".join(racks)]
        for o in overrides:
            args += ["--override", o]
        g = Gregor(args, data_dir, ports, admin, tmp_path / "cluster.log")
        started.append(g)
        return g.start()

    yield _make
    for g in started:
        if g.proc and g.proc.poll() is None:
            g.stop(signal.SIGKILL)
