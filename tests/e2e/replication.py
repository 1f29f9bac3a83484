"""Harness of the replication fault tests: a cluster of real `gregor server` processes on a
real ZooKeeper (each cluster in its own chroot), an idempotent acks=all producer of numbered
messages running in a thread, and a verifier that reads every partition back.

The verifier's rules (issue 9): every acknowledged message is present exactly once, at the
offset its acknowledgement gave, in send order within its partition; nothing is read that
was never sent; nothing is duplicated.
"""

import json
import os
import signal
import subprocess
import threading
import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from conftest import GREGOR_BIN, free_port, wait_for_port, wait_until

ZK = os.environ.get("GREGOR_TEST_ZOOKEEPER")

# Fast failure detection for the tests: ZooKeeper (scripts/zk.sh, tickTime 500 ms) grants
# session timeouts from 1 s; 3 s keeps a loaded CI machine from expiring healthy sessions.
SESSION_TIMEOUT_MS = 3000
BROKER_DEFAULTS = (
    f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
    "controlled.shutdown.retry.backoff.ms=500",
    "replica.lag.time.max.ms=4000",
    "file.delete.delay.ms=1000",
)


class BrokerProcess:
    """One `gregor server` process of a cluster."""

    def __init__(self, broker_id, cluster_dir, zk_connect, overrides):
        self.broker_id = broker_id
        self.port = free_port()
        self.admin_port = free_port()
        self.data_dir = os.path.join(cluster_dir, f"broker-{broker_id}")
        self.log_path = os.path.join(cluster_dir, f"broker-{broker_id}.log")
        self.args = [
            GREGOR_BIN, "server", "--data-dir", self.data_dir,
            "--override", f"broker.id={broker_id}",
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "--override", f"admin.listener=127.0.0.1:{self.admin_port}",
            "--override", f"zookeeper.connect={zk_connect}",
        ]
        for o in list(BROKER_DEFAULTS) + list(overrides):
            self.args += ["--override", o]
        self.proc = None

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def start(self):
        log = open(self.log_path, "ab")
        log.write(f"\n==== start {time.strftime('%H:%M:%S')} ====\n".encode())
        log.flush()
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")}
        self.proc = subprocess.Popen(self.args, stdout=log, stderr=log, env=env)
        wait_for_port(self.port, self.proc, timeout=60)
        return self

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """kill -9."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def terminate(self, timeout=60):
        """SIGTERM (controlled shutdown first); returns the seconds until it exited."""
        started = time.time()
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError(f"broker {self.broker_id} did not exit within {timeout} s of SIGTERM")
        return time.time() - started

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")


class Cluster:
    """N brokers (ids 1..N) sharing a ZooKeeper chroot, plus a kazoo session to read it."""

    def __init__(self, tmp_path, brokers=3, overrides=()):
        if not ZK:
            raise AssertionError("GREGOR_TEST_ZOOKEEPER is not set: run the tests through scripts/test.sh")
        self.chroot = f"/gregor-faults-{uuid.uuid4().hex[:8]}"
        self.dir = str(tmp_path)
        self.brokers = {
            i: BrokerProcess(i, self.dir, ZK + self.chroot, overrides) for i in range(1, brokers + 1)
        }
        self.zk = None

    def start(self):
        for b in self.brokers.values():
            b.start()
        self.zk = KazooClient(hosts=ZK + self.chroot)
        self.zk.start(timeout=15)
        wait_until(lambda: self.registered() == set(self.brokers), timeout=30, what="every broker registered")
        wait_until(lambda: self.controller() is not None, timeout=30, what="a controller")
        wait_until(self.metadata_complete, timeout=60, interval=0.5, what="every broker's metadata names all brokers and the controller")
        return self

    def metadata_complete(self):
        """Whether every broker's own Metadata names all brokers and the controller. A broker
        answers from its cache, which the controller's first UpdateMetadata fills; until then it
        says ControllerId -1, and librdkafka's admin client, told there is no controller, waits
        long for one. So a test creates its topics only once every cache is filled."""
        for b in self.brokers.values():
            try:
                md = AdminClient({"bootstrap.servers": b.address}).list_topics(timeout=10)
            except Exception:
                return False
            if len(md.brokers) != len(self.brokers) or md.controller_id < 0:
                return False
        return True

    def stop(self):
        for b in self.brokers.values():
            b.kill()
        if self.zk is not None:
            self.zk.stop()
            self.zk.close()

    @property
    def bootstrap(self):
        return ",".join(b.address for b in self.brokers.values())

    def admin(self):
        # librdkafka's socket.timeout.ms (60 s), not the request's timeout, is what cuts a long
        # CreateTopics (10,000 partitions on three loaded brokers take longer).
        return AdminClient({"bootstrap.servers": self.bootstrap, "socket.timeout.ms": 300000})

    # ---- What the store says ----

    def registered(self):
        try:
            return {int(i) for i in self.zk.get_children("/brokers/ids")}
        except Exception:
            return set()

    def controller(self):
        try:
            return json.loads(self.zk.get("/controller")[0])["brokerid"]
        except Exception:
            return None

    def state(self, topic, partition):
        data, _ = self.zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        return json.loads(data)

    def leader(self, topic, partition):
        return self.state(topic, partition)["leader"]

    def isr(self, topic, partition):
        return self.state(topic, partition)["isr"]

    # ---- Helpers ----

    def create_topic(self, name, partitions=None, rf=None, config=None, assignment=None, timeout=120):
        """Creates `name` with `partitions` x `rf`, or with an explicit `assignment`
        (replica lists, preferred leader first), and waits (up to `timeout` s for each step)
        for its partition states."""
        admin = self.admin()
        if assignment is not None:
            new = NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment, config=config or {})
            partitions = len(assignment)
        else:
            new = NewTopic(name, num_partitions=partitions, replication_factor=rf, config=config or {})
        admin.create_topics([new], request_timeout=timeout)[name].result(timeout=timeout)

        def online():
            md = admin.list_topics(name, timeout=30).topics.get(name)
            return (
                md is not None
                and md.error is None
                and len(md.partitions) == partitions
                and all(p.leader >= 0 for p in md.partitions.values())
            )

        wait_until(online, timeout=timeout, interval=0.5, what=f"every partition of {name} has a leader")

    def wait_isr(self, topic, partitions, size, timeout=60):
        wait_until(
            lambda: all(len(self.isr(topic, p)) == size for p in range(partitions)),
            timeout=timeout,
            interval=0.2,
            what=f"every ISR of {topic} has {size} members",
        )

    def describe(self, topic, partitions):
        """[(partition, leader, isr)] from the store, for failure messages."""
        return [(p, self.leader(topic, p), self.isr(topic, p)) for p in range(partitions)]

    def logs(self):
        return "\n".join(f"---- broker {i} ----\n{b.log_text()[-20000:]}" for i, b in self.brokers.items())


class NumberedProducer:
    """An idempotent acks=all producer sending numbered messages round-robin over the
    partitions from a thread, at about `rate` messages per second. Records every
    acknowledgement (partition, offset, number) and every failed delivery."""

    def __init__(self, bootstrap, topic, partitions, rate=300, **config):
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.producer = Producer({
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 120000,
            "topic.metadata.refresh.interval.ms": 1000,
            "retry.backoff.ms": 100,
            # Connection refusals to a killed broker are expected here; keep stderr readable.
            "log_level": 2,
            **config,
        })
        self.lock = threading.Lock()
        self.acked = []  # (partition, offset, number, ack time)
        self.failed = []  # (number, error)
        self.sent = set()
        self.next_number = 0
        self.running = False
        self.thread = None

    def _on_delivery(self, err, msg):
        number = int(msg.value().decode())
        with self.lock:
            if err is None:
                self.acked.append((msg.partition(), msg.offset(), number, time.time()))
            else:
                self.failed.append((number, str(err)))

    def _run(self):
        interval = 1.0 / self.rate
        next_at = time.time()
        while self.running:
            number = self.next_number
            self.next_number += 1
            with self.lock:
                self.sent.add(number)
            while True:
                try:
                    self.producer.produce(
                        self.topic,
                        value=str(number).encode(),
                        partition=number % self.partitions,
                        on_delivery=self._on_delivery,
                    )
                    break
                except BufferError:
                    self.producer.poll(0.1)
            self.producer.poll(0)
            next_at += interval
            delay = next_at - time.time()
            if delay > 0:
                time.sleep(delay)
            else:
                next_at = time.time()

    def start(self):
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def stop(self, flush_timeout=150):
        self.running = False
        self.thread.join()
        remaining = self.producer.flush(flush_timeout)
        assert remaining == 0, f"{remaining} messages still unacknowledged {flush_timeout} s after the end"

    def acked_count(self):
        with self.lock:
            return len(self.acked)

    def wait_progress(self, since, partitions=None, timeout=30, what="production"):
        """Waits until every partition (or those given) has an acknowledgement received after
        `since`; returns the seconds from `since` to the last of those first acks."""
        wanted = set(range(self.partitions) if partitions is None else partitions)

        def firsts():
            with self.lock:
                seen = {}
                for partition, _, _, at in self.acked:
                    if at > since and partition in wanted and partition not in seen:
                        seen[partition] = at
                return seen if set(seen) == wanted else None

        seen = wait_until(firsts, timeout=timeout, interval=0.1, what=what)
        return max(seen.values()) - since


def watermarks(consumer, topic, partition, timeout=30):
    """(low, high) of a partition. A leader elected just now answers OFFSET_NOT_AVAILABLE
    until its high watermark reaches the start of its epoch (as Kafka); librdkafka hands that
    to the caller instead of retrying, so retry here."""
    deadline = time.time() + timeout
    while True:
        try:
            return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.OFFSET_NOT_AVAILABLE or time.time() > deadline:
                raise
            time.sleep(0.2)


def read_back(bootstrap, topic, partitions, timeout=60):
    """Every record of every partition, from the log start to the high watermark:
    {partition: [(offset, number)]}."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"verifier-{uuid.uuid4().hex[:6]}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": "read_uncommitted",
    })
    try:
        ends = {p: watermarks(consumer, topic, p)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        records = {p: [] for p in range(partitions)}
        done = {p for p in range(partitions) if ends[p] == 0}
        deadline = time.time() + timeout
        while len(done) < partitions:
            if time.time() > deadline:
                counts = {p: len(r) for p, r in records.items()}
                raise AssertionError(f"read back incomplete after {timeout} s: {counts} of {ends}")
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == -191:  # _PARTITION_EOF
                    if msg.offset() >= ends[msg.partition()]:
                        done.add(msg.partition())
                    continue
                raise AssertionError(f"consumer error: {msg.error()}")
            p = msg.partition()
            if msg.offset() < ends[p]:
                records[p].append((msg.offset(), int(msg.value().decode())))
            if msg.offset() + 1 >= ends[p]:
                done.add(p)
        return records
    finally:
        consumer.close()


def verify(producer, records):
    """The verifier: raises with a precise message when a rule is broken; returns a summary."""
    by_number = {}
    for p, recs in records.items():
        offsets = [o for o, _ in recs]
        assert offsets == sorted(set(offsets)), f"p{p}: offsets repeat or go backwards"
        numbers = [n for _, n in recs]
        dup = len(numbers) - len(set(numbers))
        assert dup == 0, f"p{p}: {dup} duplicated messages"
        assert numbers == sorted(numbers), f"p{p}: messages out of send order"
        for o, n in recs:
            assert n in producer.sent, f"p{p} offset {o}: message {n} was never sent (invented)"
            assert n % producer.partitions == p, f"p{p} offset {o}: message {n} belongs to another partition"
            by_number[n] = (p, o)
    lost = []
    moved = []
    for p, o, n, _ in producer.acked:
        where = by_number.get(n)
        if where is None:
            lost.append((p, o, n))
        elif where != (p, o):
            moved.append((n, (p, o), where))
    assert not lost, f"{len(lost)} acknowledged messages lost, first: {lost[:5]}"
    assert not moved, f"{len(moved)} acknowledged messages at another offset than acknowledged, first: {moved[:5]}"
    return {
        "acked": len(producer.acked),
        "failed": len(producer.failed),
        "read": sum(len(r) for r in records.values()),
    }
