"""Jepsen's queue workload, adapted to Kafka, and its checker.

Producers send unique values ("<producer>-<seq>") to keys spread over the topic's partitions:
two with acks=all and enable.idempotence=true, one with acks=1 (no idempotence), whose
anomalies are counted apart (losing acks=1 writes at a leader change is Kafka's documented
behaviour). Two consumers read while the faults run, one with `assign` (every partition from
the beginning) and one with `subscribe` (a consumer group); at the end, after every fault is
healed, a fresh consumer reads every partition up to its high watermark.

The checker, per producer class:
  lost        acknowledged, never read back
  duplicated  read at two or more offsets
  reordered   one producer's values out of send order within a partition
  unexpected  read but never sent
  moved       read back at an offset other than the one its acknowledgement gave
and across consumers:
  inconsistent  two reads of one (partition, offset) that disagree
  nonmonotonic  the assign consumer's offsets in a partition going back or skipping
"""

import bisect
import logging
import os
import threading
import time
from collections import defaultdict

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 6
KEYS = 24
STRICT_PRODUCERS = ("a1", "a2")  # acks=all + idempotence
ACKS1_PRODUCERS = ("b1",)  # acks=1, no idempotence


def create_topic(bootstrap, topic, deadline_s=60):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.time() + deadline_s
    while True:
        fut = admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[topic]
        try:
            fut.result(timeout=30)
            break
        except KafkaException as e:
            code = e.args[0].code()
            if code == KafkaError.TOPIC_ALREADY_EXISTS:
                break
            if time.time() > deadline:
                raise
            time.sleep(1)
    # Every partition has a leader and a full ISR before the run starts.
    while time.time() < deadline:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md and md.error is None and len(md.partitions) == PARTITIONS and all(
            p.leader >= 0 and len(p.isrs) == 3 for p in md.partitions.values()
        ):
            return
        time.sleep(0.5)
    raise RuntimeError(f"topic {topic} did not get leaders and full ISRs within {deadline_s} s")


class ProducerThread(threading.Thread):
    def __init__(self, name, bootstrap, topic, strict, stop, rate=60, log_dir=None):
        super().__init__(daemon=True, name=f"producer-{name}")
        self.pname, self.topic, self.strict, self.stop_event, self.rate = name, topic, strict, stop, rate
        conf = {
            "bootstrap.servers": bootstrap,
            "acks": "all" if strict else "1",
            "enable.idempotence": strict,
            "linger.ms": 5,
            "message.timeout.ms": 60000,
            "request.timeout.ms": 10000,
            "socket.timeout.ms": 10000,
            "metadata.max.age.ms": 5000,
            "topic.metadata.refresh.interval.ms": 2000,
        }
        if strict and log_dir:
            # librdkafka's idempotence log (epoch bumps and their reasons) into the run's dir.
            logger = logging.getLogger(f"gf.{topic}.{name}")
            logger.propagate = False
            handler = logging.FileHandler(os.path.join(log_dir, f"{topic}-producer-{name}.log"))
            handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
            logger.addHandler(handler)
            logger.setLevel(logging.DEBUG)
            conf.update({"debug": "eos", "logger": logger})
        self.producer = Producer(conf)
        self.sent = {}  # value -> send time
        self.acked = {}  # value -> (partition, offset, time)
        self.failed = {}  # value -> error string
        self.fatal = None
        self.lock = threading.Lock()

    def _report(self, err, msg):
        v = msg.value().decode()
        with self.lock:
            if err is None:
                self.acked[v] = (msg.partition(), msg.offset(), time.time())
            else:
                self.failed[v] = str(err)
                if err.fatal():
                    self.fatal = str(err)

    def run(self):
        seq = 0
        interval = 1.0 / self.rate
        while not self.stop_event.is_set() and self.fatal is None:
            if len(self.producer) < 5000:
                v = f"{self.pname}-{seq}"
                key = f"k{seq % KEYS}"
                try:
                    self.producer.produce(self.topic, v.encode(), key.encode(), on_delivery=self._report)
                    with self.lock:
                        self.sent[v] = time.time()
                    seq += 1
                except BufferError:
                    pass
            self.producer.poll(interval)

    def finish(self, timeout):
        left = self.producer.flush(timeout)
        return left


class ConsumerThread(threading.Thread):
    """Records every (partition, offset, value) it polls, and the order it polled them in."""

    def __init__(self, name, bootstrap, topic, mode, stop):
        super().__init__(daemon=True, name=f"consumer-{name}")
        self.cname, self.topic, self.mode, self.stop_event = name, topic, mode, stop
        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": f"gf-{topic}-{name}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": mode == "subscribe",
            "session.timeout.ms": 10000,
            "metadata.max.age.ms": 5000,
            "topic.metadata.refresh.interval.ms": 2000,
        }
        self.consumer = Consumer(conf)
        self.reads = []  # (partition, offset, value)
        self.next = {}  # partition -> highest offset read + 1
        self.errors = []

    def behind(self, highs):
        return {p: h - self.next.get(p, 0) for p, h in highs.items() if self.next.get(p, 0) < h}

    def caught_up(self, highs):
        return not self.behind(highs)

    def run(self):
        if self.mode == "assign":
            self.consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        else:
            self.consumer.subscribe([self.topic])
        try:
            while not self.stop_event.is_set():
                msg = self.consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        self.errors.append(str(msg.error()))
                    continue
                self.reads.append((msg.partition(), msg.offset(), msg.value().decode()))
                self.next[msg.partition()] = max(self.next.get(msg.partition(), 0), msg.offset() + 1)
        finally:
            self.consumer.close()


def high_watermarks(bootstrap, topic, timeout=120):
    """{partition: high watermark}; None for a partition whose watermark could not be read
    within the timeout (no leader answering: a hang the report names)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"gf-hw-{topic}"})
    deadline = time.time() + timeout
    highs = {}
    try:
        for p in range(PARTITIONS):
            highs[p] = None
            while True:
                try:
                    highs[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                    break
                except KafkaException:
                    if time.time() > deadline:
                        break
                    time.sleep(1)
    finally:
        c.close()
    return highs


def read_all(bootstrap, topic, timeout=120):
    """Every record of every partition, up to each partition's high watermark (read after the
    faults are healed). Returns ({partition: [(offset, value)]}, complete, highs)."""
    highs = high_watermarks(bootstrap, topic, timeout)
    readable = [p for p, h in highs.items() if h is not None]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"gf-final-{topic}", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "enable.partition.eof": True})
    deadline = time.time() + timeout
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in readable])
    out = defaultdict(list)
    pos = {p: 0 for p in readable}
    while time.time() < deadline and any(pos[p] < highs[p] for p in readable):
        msg = c.poll(0.5)
        if msg is None or msg.error():
            continue
        out[msg.partition()].append((msg.offset(), msg.value().decode()))
        pos[msg.partition()] = msg.offset() + 1
    complete = len(readable) == PARTITIONS and all(pos[p] >= highs[p] for p in readable)
    c.close()
    return dict(out), complete, highs


def producer_of(value):
    return value.rsplit("-", 1)[0]


def seq_of(value):
    return int(value.rsplit("-", 1)[1])


def check(producers, consumers, final, final_complete, sample=20, explain=None, tolerate_client_resends=False):
    """The checker's verdict: a dict with a section per producer class, the cross-consumer
    anomalies and `ok` (false on any anomaly of the acks=all idempotent class, inconsistent
    offsets or an incomplete final read)."""
    sent = {}
    for pr in producers:
        for v in pr.sent:
            sent[v] = pr
    # Final read: value -> offsets; (partition, offset) -> value.
    where = defaultdict(list)
    at = {}
    for p, recs in final.items():
        for off, v in recs:
            where[v].append((p, off))
            at[(p, off)] = v
    result = {}
    for cls, names in (("acks_all_idempotent", STRICT_PRODUCERS), ("acks_1", ACKS1_PRODUCERS)):
        prs = [pr for pr in producers if pr.pname in names]
        acked = {v: a for pr in prs for v, a in pr.acked.items()}
        lost = sorted((v for v in acked if v not in where), key=lambda v: (producer_of(v), seq_of(v)))
        dup = {v: locs for v, locs in where.items() if producer_of(v) in names and len(locs) > 1}
        moved = {v: (acked[v][:2], where[v]) for v in acked if v in where and (acked[v][0], acked[v][1]) not in where[v]}
        reordered = []
        for p, recs in final.items():
            last = {}
            for off, v in recs:
                pn = producer_of(v)
                if pn not in names:
                    continue
                s = seq_of(v)
                if pn in last and s < last[pn][1]:
                    reordered.append({"partition": p, "offset": off, "value": v, "after": last[pn][0]})
                if pn not in last or s > last[pn][1]:
                    last[pn] = (v, s)
        n_sent = sum(len(pr.sent) for pr in prs)
        n_failed = sum(len(pr.failed) for pr in prs)
        result[cls] = {
            "sent": n_sent,
            "acked": len(acked),
            "failed": n_failed,
            "indeterminate": n_sent - len(acked) - n_failed,
            "read": sum(len(locs) for v, locs in where.items() if producer_of(v) in names),
            "lost": len(lost),
            "duplicated": len(dup),
            "reordered": len(reordered),
            "moved": len(moved),
            "lost_sample": lost[:sample],
            "lost_acks_sample": {v: acked[v][:2] for v in lost[:sample]},
            "duplicated_sample": dict(list(dup.items())[:sample]),
            "_duplicated_all": dup,
            "_reordered_all": reordered,
            "reordered_sample": reordered[:sample],
            "moved_sample": dict(list(moved.items())[:sample]),
            "fatal_errors": [pr.fatal for pr in prs if pr.fatal],
        }
    unexpected = sorted(v for v in where if v not in sent)
    inconsistent = []
    nonmonotonic = []
    for c in consumers:
        for p, off, v in c.reads:
            if (p, off) in at and at[(p, off)] != v:
                inconsistent.append({"consumer": c.cname, "partition": p, "offset": off, "read": v, "final": at[(p, off)]})
            elif (p, off) not in at:
                inconsistent.append({"consumer": c.cname, "partition": p, "offset": off, "read": v, "final": None})
        if c.mode == "assign":
            last = {}
            for p, off, v in c.reads:
                if p in last and off != last[p] + 1:
                    nonmonotonic.append({"consumer": c.cname, "partition": p, "from": last[p], "to": off})
                last[p] = off
    strict = result["acks_all_idempotent"]
    result["unexpected"] = len(unexpected)
    result["unexpected_sample"] = unexpected[:sample]
    result["inconsistent"] = len(inconsistent)
    result["inconsistent_sample"] = inconsistent[:sample]
    result["nonmonotonic"] = len(nonmonotonic)
    result["nonmonotonic_sample"] = nonmonotonic[:sample]
    result["consumer_reads"] = {c.cname: len(c.reads) for c in consumers}
    result["final_read_complete"] = final_complete
    # Duplicates (and the reorderings they make) explained as the client's re-sends under a
    # newer producer epoch (librdkafka's epoch bump, its issue 4953) are counted apart; they fail
    # the run unless tolerate_client_resends.
    for cls in ("acks_all_idempotent", "acks_1"):
        x = result[cls]
        dup, reordered = x.pop("_duplicated_all"), x.pop("_reordered_all")
        resent = set()
        if explain and dup:
            x["duplicated_explained"] = explain(dup)
            resent = {v for v, e in x["duplicated_explained"].items() if e["cause"].startswith("client")}
        x["duplicated_by_client_resend"] = len(resent)
        x["duplicated_other"] = len(dup) - len(resent)
        x["reordered_other"] = len([r for r in reordered if r["value"] not in resent])
    blamed_dups = strict["duplicated"] if not tolerate_client_resends else strict["duplicated_other"]
    blamed_reorders = strict["reordered"] if not tolerate_client_resends else strict["reordered_other"]
    result["ok"] = bool(
        final_complete
        and strict["acked"] > 0
        and not (strict["lost"] or blamed_dups or blamed_reorders or strict["moved"] or strict["fatal_errors"])
        and not result["unexpected"]
        and not result["inconsistent"]
        and not result["nonmonotonic"]
    )
    return result


def availability(producers, events, horizon):
    """For each fault: the longest stretch with no acks=all acknowledgement from its start
    until the first acknowledgement after its heal, and how long after the heal that came."""
    times = sorted(a[2] for pr in producers if pr.pname in STRICT_PRODUCERS for a in pr.acked.values())
    out = []
    for e in events:
        if "started" not in e:
            continue
        start, healed = e["started"], e.get("healed", horizon)
        i = bisect.bisect_left(times, healed)
        after = times[i] if i < len(times) else None
        window = [start] + times[bisect.bisect_left(times, start):i] + ([after] if after is not None else [])
        gap = max((b - a for a, b in zip(window, window[1:])), default=None)
        out.append({"fault": e["name"], "max_gap_s": round(gap, 2) if gap is not None else None,
                    "resumed_after_heal_s": round(after - healed, 2) if after is not None else None})
    return out
