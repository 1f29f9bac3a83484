"""Transactions (issue 26), the coordinator side: `__transaction_state`, InitProducerId with a
transactional id, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn and the
COMMIT/ABORT markers the coordinator sends to every partition of a transaction. Real
confluent-kafka (librdkafka) producers and read_committed consumers against real `gregor`
processes."""

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import wait_until

TXN_STATE = "__transaction_state"


def create_topic(bootstrap, name, partitions=1, rf=1):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=rf)])[name].result(30)
    # Ready once every partition has a leader.
    def ready():
        md = admin.list_topics(name, timeout=5)
        t = md.topics.get(name)
        return t is not None and t.error is None and len(t.partitions) == partitions and all(
            p.leader >= 0 for p in t.partitions.values())
    wait_until(ready, timeout=30, what=f"{name} has leaders")


def txn_producer(bootstrap, txn_id, **extra):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **extra})
    p.init_transactions(60)
    return p


def read_all(bootstrap, topic, partitions=1, isolation="read_committed", expect=None, timeout=30):
    """Every value of `topic` from the beginning at `isolation`; with `expect`, reads until that
    many arrived (and a little more, to catch extras), else until the end offsets."""
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
        "isolation.level": isolation, "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values = []
    deadline = time.time() + timeout
    quiet_since = None
    while time.time() < deadline:
        msg = c.poll(0.2)
        if msg is None:
            if expect is not None and len(values) >= expect:
                quiet_since = quiet_since or time.time()
                if time.time() - quiet_since > 1.0:
                    break
            continue
        if msg.error():
            continue
        quiet_since = None
        values.append(msg.value().decode())
    c.close()
    return values


def test_commit_and_abort_with_a_read_committed_consumer(make_server):
    server = make_server("transaction.state.log.num.partitions=5")
    create_topic(server.bootstrap, "tx-out", partitions=2)
    p = txn_producer(server.bootstrap, "tx-basic")

    p.begin_transaction()
    for i in range(10):
        p.produce("tx-out", f"committed-{i}".encode(), partition=i % 2)
    p.commit_transaction(30)

    p.begin_transaction()
    for i in range(10):
        p.produce("tx-out", f"aborted-{i}".encode(), partition=i % 2)
    p.flush(10)
    p.abort_transaction(30)

    p.begin_transaction()
    for i in range(5):
        p.produce("tx-out", f"again-{i}".encode(), partition=i % 2)
    p.commit_transaction(30)

    committed = read_all(server.bootstrap, "tx-out", partitions=2, expect=15)
    assert sorted(committed) == sorted([f"committed-{i}" for i in range(10)] + [f"again-{i}" for i in range(5)])
    uncommitted = read_all(server.bootstrap, "tx-out", partitions=2, isolation="read_uncommitted", expect=25)
    assert len(uncommitted) == 25, uncommitted

    # The coordinator's log: the topic exists, internal, one partition per the override.
    md = AdminClient({"bootstrap.servers": server.bootstrap}).list_topics(TXN_STATE, timeout=10)
    assert len(md.topics[TXN_STATE].partitions) == 5
    log = server.log_text()
    assert "loaded transactional ids of transaction log partition" in log


def test_a_new_producer_of_the_same_id_fences_the_old_one_and_aborts_its_transaction(make_server):
    server = make_server()
    create_topic(server.bootstrap, "fence-out")
    old = txn_producer(server.bootstrap, "tx-fence")
    old.begin_transaction()
    old.produce("fence-out", b"from-the-old-producer")
    old.flush(10)

    new = txn_producer(server.bootstrap, "tx-fence")  # fences `old`, aborting its transaction
    new.begin_transaction()
    new.produce("fence-out", b"from-the-new-producer")
    new.commit_transaction(30)

    with pytest.raises(KafkaException) as refused:
        old.commit_transaction(10)
    assert refused.value.args[0].fatal() or not refused.value.args[0].retriable(), refused.value
    assert read_all(server.bootstrap, "fence-out", expect=1) == ["from-the-new-producer"]


def test_a_transaction_past_its_timeout_is_aborted_and_its_producer_fenced(make_server):
    server = make_server("transaction.abort.timed.out.transaction.cleanup.interval.ms=300")
    create_topic(server.bootstrap, "timeout-out")
    p = txn_producer(server.bootstrap, "tx-timeout", **{"transaction.timeout.ms": 1500})
    p.begin_transaction()
    p.produce("timeout-out", b"too-late")
    p.flush(10)
    # The coordinator aborts it (epoch bumped) while the producer waits.
    wait_until(lambda: "aborting a transaction past its timeout" in server.log_text(), timeout=15,
               what="the coordinator aborting the timed-out transaction")
    with pytest.raises(KafkaException):
        p.commit_transaction(10)
    assert read_all(server.bootstrap, "timeout-out", expect=0, timeout=3) == []


def test_init_transactions_refuses_a_timeout_above_the_maximum(make_server):
    server = make_server("transaction.max.timeout.ms=5000")
    p = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": "tx-too-long",
                  "transaction.timeout.ms": 10000})
    with pytest.raises(KafkaException) as refused:
        p.init_transactions(20)
    assert "INVALID_TRANSACTION_TIMEOUT" in str(refused.value) or "timeout" in str(refused.value).lower()


def consume_transform_produce(bootstrap, group, txn_id, inputs, out_topic, in_topic, abort_every=0, deadline_s=60):
    """Reads `in_topic` in a group, writes each value upper-cased to `out_topic`, and commits the
    consumed offsets in the same transaction; every `abort_every`-th transaction is aborted
    (and the consumer rewound to the committed offsets, as an application does)."""
    c = Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "isolation.level": "read_committed",
    })
    c.subscribe([in_topic])
    p = txn_producer(bootstrap, txn_id)
    done = 0
    txns = 0
    deadline = time.time() + deadline_s
    while done < inputs and time.time() < deadline:
        msgs = c.consume(20, 0.5)
        msgs = [m for m in msgs if not m.error()]
        if not msgs:
            continue
        txns += 1
        p.begin_transaction()
        for m in msgs:
            p.produce(out_topic, m.value().upper(), partition=m.partition())
        positions = c.position(c.assignment())
        p.send_offsets_to_transaction(positions, c.consumer_group_metadata(), 30)
        if abort_every and txns % abort_every == 0:
            p.abort_transaction(30)
            committed = c.committed(c.assignment(), 10)
            for tp in committed:
                c.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
            continue
        p.commit_transaction(30)
        done += len(msgs)
    c.close()
    return done


def test_consume_transform_produce_is_exactly_once(make_server):
    server = make_server("group.initial.rebalance.delay.ms=0")
    create_topic(server.bootstrap, "ctp-in")
    create_topic(server.bootstrap, "ctp-out")
    feeder = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(100):
        feeder.produce("ctp-in", f"v{i}".encode())
    feeder.flush(10)

    done = consume_transform_produce(server.bootstrap, "ctp", "tx-ctp", 100, "ctp-out", "ctp-in", abort_every=3)
    assert done == 100
    out = read_all(server.bootstrap, "ctp-out", expect=100)
    assert sorted(out) == sorted(f"V{i}" for i in range(100)), f"{len(out)} outputs"
    # The group's committed offset came with the transactions.
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": "ctp", "isolation.level": "read_committed"})
    committed = c.committed([TopicPartition("ctp-in", 0)], 10)
    c.close()
    assert committed[0].offset == 100


def test_kill_9_of_the_transaction_coordinator_keeps_every_input_exactly_once(tmp_path):
    from replication import Cluster

    cluster = Cluster(tmp_path, overrides=[
        "transaction.state.log.num.partitions=3", "transaction.state.log.replication.factor=3",
        "offsets.topic.num.partitions=3", "offsets.topic.replication.factor=3",
        "group.initial.rebalance.delay.ms=0",
    ]).start()
    try:
        cluster.create_topic("k-in", partitions=1, rf=3)
        cluster.create_topic("k-out", partitions=1, rf=3)
        feeder = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for i in range(300):
            feeder.produce("k-in", f"v{i}".encode())
        feeder.flush(30)
        txn_id = "tx-kill"

        import threading
        result = {}

        def run():
            result["done"] = consume_transform_produce(cluster.bootstrap, "k-group", txn_id, 300, "k-out", "k-in",
                                                       deadline_s=150)

        worker = threading.Thread(target=run)
        worker.start()
        # Once transactions are flowing, kill -9 the coordinator of the transactional id.
        wait_until(lambda: len(read_all(cluster.bootstrap, "k-out", timeout=2)) >= 40, timeout=60,
                   what="transactions committing")
        coordinator = cluster.leader(TXN_STATE, partition_for(txn_id, 3))
        cluster.brokers[coordinator].kill()
        worker.join(180)
        assert not worker.is_alive()
        assert result.get("done") == 300
        out = read_all(cluster.bootstrap, "k-out", expect=300, timeout=60)
        assert sorted(out) == sorted(f"V{i}" for i in range(300)), f"{len(out)} outputs, {len(set(out))} distinct"
    finally:
        cluster.stop()


def java_hash(s):
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (h * 31 + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key, partitions):
    h = java_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions
