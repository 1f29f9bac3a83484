"""Replication fault scenarios that need the leader to take caught-up followers back into
the ISR (AlterPartition, repl-broker's side of issue 9): (a) kill -9 of a leader then of the
controller, (b) SIGSTOP past the session timeout, (c) rolling restart under load, and
acks=all below min.insync.replicas. Same harness as test_replication_faults.py."""

import time

import pytest

from conftest import wait_until
from replication import NumberedProducer, read_back, verify
from test_replication_faults import RESUME_WITHIN_S, cluster, producers  # noqa: F401 (fixtures)


def test_kill_leader_then_controller_production_resumes_and_nothing_is_lost(cluster, producers):
    """Scenario (a): 3 brokers, RF 3, min.insync.replicas=2, acks=all. kill -9 a partition
    leader mid-stream and let it return, then kill -9 the controller and let it return:
    production resumes within seconds each time, every ISR is back to 3, and nothing
    acknowledged is lost."""
    c = cluster()
    topic, partitions = "orders", 3
    c.create_topic(topic, partitions, 3, {"min.insync.replicas": "2"})
    producer = producers(NumberedProducer(c.bootstrap, topic, partitions))
    producer.wait_progress(time.time() - 1, what="first acknowledgements")
    stalls = {}

    leader = next(c.leader(topic, p) for p in range(partitions) if c.leader(topic, p) != c.controller())
    for victim_of in ("leader", "controller"):
        victim = leader if victim_of == "leader" else c.controller()
        killed = time.time()
        c.brokers[victim].kill()
        stalls[victim_of] = producer.wait_progress(
            killed, timeout=RESUME_WITHIN_S, what=f"production after kill -9 of the {victim_of} ({victim})"
        )
        c.brokers[victim].start()
        c.wait_isr(topic, partitions, 3, timeout=60)
    producer.stop()
    summary = verify(producer, read_back(c.bootstrap, topic, partitions))
    assert not producer.failed, producer.failed[:5]
    print(f"stalls after kill -9: {stalls}; {summary}")


def test_paused_leader_is_fenced_and_catches_up_without_divergence(cluster, producers):
    """Scenario (b): SIGSTOP a leader past its session timeout, then SIGCONT. Its partitions
    move meanwhile; it notices its session ended, stops acting as leader (writes it still
    takes are never acknowledged), registers again and catches up; the replicas' logs are
    identical afterwards."""
    c = cluster()
    topic, partitions = "paused", 3
    c.create_topic(topic, partitions, 3, {"min.insync.replicas": "2"})
    producer = producers(NumberedProducer(c.bootstrap, topic, partitions))
    producer.wait_progress(time.time() - 1, what="first acknowledgements")
    victim = next(c.leader(topic, p) for p in range(partitions) if c.leader(topic, p) != c.controller())
    led = [p for p in range(partitions) if c.leader(topic, p) == victim]
    c.brokers[victim].pause()
    paused = time.time()
    wait_until(
        lambda: all(c.leader(topic, p) not in (victim, -1) for p in led),
        timeout=RESUME_WITHIN_S,
        what="the paused broker's partitions move",
    )
    producer.wait_progress(paused, timeout=RESUME_WITHIN_S, what="production while the leader is paused")
    time.sleep(1)
    c.brokers[victim].resume()
    wait_until(lambda: victim in c.registered(), timeout=30, what="the paused broker registers again")
    assert "session expired: stopped acting as leader" in c.brokers[victim].log_text()
    assert all(c.leader(topic, p) != victim for p in led), c.describe(topic, partitions)
    c.wait_isr(topic, partitions, 3, timeout=60)
    producer.wait_progress(time.time(), timeout=RESUME_WITHIN_S, what="production after the broker came back")
    producer.stop()
    verify(producer, read_back(c.bootstrap, topic, partitions))
    assert not producer.failed, producer.failed[:5]
    assert_replicas_identical(c, topic, partitions)


def test_rolling_restart_under_load_fails_no_send(cluster, producers):
    """Scenario (c): SIGTERM each broker in turn under load (controlled shutdown moves its
    leaderships first), restart it and wait for the ISRs to be full again: the producer sees
    no failed send."""
    c = cluster()
    topic, partitions = "rolling", 3
    c.create_topic(topic, partitions, 3, {"min.insync.replicas": "2"})
    producer = producers(NumberedProducer(c.bootstrap, topic, partitions))
    producer.wait_progress(time.time() - 1, what="first acknowledgements")
    exits = {}
    for broker in sorted(c.brokers):
        exits[broker] = c.brokers[broker].terminate()
        assert "controlled shutdown succeeded" in c.brokers[broker].log_text()
        # It gave up every leadership and left every ISR before it exited.
        states = c.describe(topic, partitions)
        assert all(leader != broker and broker not in isr for _, leader, isr in states), states
        c.brokers[broker].start()
        c.wait_isr(topic, partitions, 3, timeout=60)
        producer.wait_progress(time.time(), timeout=RESUME_WITHIN_S, what=f"production after restarting {broker}")
    producer.stop()
    verify(producer, read_back(c.bootstrap, topic, partitions))
    assert not producer.failed, f"{len(producer.failed)} failed sends, first: {producer.failed[:5]}"
    print(f"seconds from SIGTERM to exit: {exits}")


def test_below_min_insync_acks_all_is_refused_then_resumes_by_itself(cluster, producers):
    """acks=all with min.insync.replicas=2 (issue 9): with both followers killed the ISR is
    the leader alone, so an acks=all send is refused NOT_ENOUGH_REPLICAS (nothing appended)
    and the idempotent producer's sends wait; when one follower returns and catches up, the
    leader takes it back into the ISR and production resumes by itself; nothing acknowledged
    is lost. Four brokers, so the controller is none of the partition's replicas."""
    from confluent_kafka import KafkaError, Producer

    c = cluster(brokers=4)
    leader, f1, f2 = [b for b in sorted(c.brokers) if b != c.controller()]
    topic = "guarded"
    c.create_topic(topic, config={"min.insync.replicas": "2"}, assignment=[[leader, f1, f2]])
    producer = producers(NumberedProducer(c.bootstrap, topic, 1))
    producer.wait_progress(time.time() - 1, what="first acknowledgements")

    c.brokers[f1].kill()
    c.brokers[f2].kill()
    wait_until(lambda: c.isr(topic, 0) == [leader], timeout=RESUME_WITHIN_S, what="ISR shrinks to the leader")
    time.sleep(1)
    stalled_at = producer.acked_count()

    errors = []
    strict = Producer({
        "bootstrap.servers": c.bootstrap,
        "acks": "all",
        "retries": 0,
        "message.timeout.ms": 10000,
        "log_level": 2,
    })
    # Numbered -1: were it appended, the verifier would report it as invented.
    strict.produce(topic, value=b"-1", partition=0, on_delivery=lambda err, msg: errors.append(err))
    assert strict.flush(30) == 0
    assert errors and errors[0] is not None, "an acks=all send below min.insync.replicas was acknowledged"
    assert errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS, errors[0]

    time.sleep(2)
    assert producer.acked_count() == stalled_at, "acks=all sends were acknowledged with the ISR below 2"

    c.brokers[f1].start()
    back = time.time()
    wait_until(lambda: sorted(c.isr(topic, 0)) == sorted([leader, f1]), timeout=60, what="the follower rejoins the ISR")
    producer.wait_progress(back, timeout=RESUME_WITHIN_S + 30, what="production once the ISR is 2 again")
    c.brokers[f2].start()
    c.wait_isr(topic, 1, 3, timeout=60)
    producer.stop()
    summary = verify(producer, read_back(c.bootstrap, topic, 1))
    assert not producer.failed, producer.failed[:5]
    print(f"below min.insync: {summary}")


def test_dev_cluster_replicates_acks_all_and_survives_a_restart(make_cluster, producers):
    """The same replication on `gregor dev-cluster` (3 brokers in one process, embedded
    store): RF 3, min.insync.replicas=2, the idempotent acks=all producer; every ISR is full,
    the whole cluster is restarted (SIGTERM) under load, the ISRs are full again, production
    resumes and the verifier finds every acknowledged message. Faults of one broker need one
    process per broker: those run on ZooKeeper above."""
    from confluent_kafka.admin import AdminClient, NewTopic

    g = make_cluster(3)
    topic, partitions = "embedded", 3
    admin = AdminClient({"bootstrap.servers": g.bootstrap})
    new = NewTopic(topic, num_partitions=partitions, replication_factor=3, config={"min.insync.replicas": "2"})
    admin.create_topics([new])[topic].result(timeout=60)

    def isrs():
        states = [g.meta(f"/brokers/topics/{topic}/partitions/{p}/state") for p in range(partitions)]
        return states if all(s and len(s["data"]["isr"]) == 3 for s in states) else None

    wait_until(isrs, timeout=60, interval=0.5, what="every ISR full")
    producer = producers(NumberedProducer(g.bootstrap, topic, partitions))
    producer.wait_progress(time.time() - 1, what="first acknowledgements")
    g.restart()
    producer.wait_progress(time.time(), timeout=60, what="production after the restart")
    wait_until(isrs, timeout=60, interval=0.5, what="every ISR full after the restart")
    producer.stop()
    summary = verify(producer, read_back(g.bootstrap, topic, partitions))
    assert not producer.failed, producer.failed[:5]
    print(f"dev-cluster restart: {summary}")


def assert_replicas_identical(c, topic, partitions, timeout=30):
    """Every replica's log of every partition has the same bytes (followers append the
    leader's batches unchanged), once replication has caught up."""
    import glob
    import os

    def contents(broker, p):
        d = os.path.join(c.brokers[broker].data_dir, "logs", f"{topic}-{p}")
        return b"".join(open(f, "rb").read() for f in sorted(glob.glob(os.path.join(d, "*.log"))))

    def identical():
        return all(len({contents(b, p) for b in c.brokers}) == 1 for p in range(partitions))

    wait_until(identical, timeout=timeout, interval=0.5, what="identical replica logs")
