"""Replication that survives failures (issue 9): real `gregor server` processes on a real
ZooKeeper, a real idempotent acks=all producer of numbered messages, real faults (kill -9,
SIGSTOP/SIGCONT, SIGTERM), and a verifier that reads every partition back (replication.py).
Each scenario is bounded in time; together they stay within a few minutes."""

import json
import time

import pytest
from confluent_kafka import Producer

from conftest import gregor_cli, wait_until
from replication import SESSION_TIMEOUT_MS, Cluster, NumberedProducer, read_back, verify

# How long production may stall after a failure: detection (the session timeout) plus the
# election, the client's metadata refresh and retry backoff, on a busy 2-core machine.
RESUME_WITHIN_S = SESSION_TIMEOUT_MS / 1000 + 12


@pytest.fixture
def cluster(tmp_path):
    started = []

    def _make(**kwargs):
        c = Cluster(tmp_path, **kwargs).start()
        started.append(c)
        return c

    yield _make
    for c in started:
        c.stop()


@pytest.fixture
def producers():
    """Starts NumberedProducers and stops the ones a failing test left running."""
    started = []

    def _start(producer):
        started.append(producer)
        return producer.start()

    yield _start
    for p in started:
        p.running = False
        if p.thread is not None:
            p.thread.join()


def describe(cluster, topic):
    out = gregor_cli("topics", "--bootstrap-server", cluster.bootstrap, "--describe", "--topic", topic)
    return out.stdout


def test_leader_with_followers_behind_waits_and_loses_nothing(cluster, producers):
    """Scenario (d): the follower falls behind (down while acks=all with min.insync=1 go
    on), then the leader is killed. With unclean.leader.election.enable=false the partition
    has no leader ("Leader: none") until the old leader returns, even with the follower
    back; nothing acknowledged is lost. The replicas are the two brokers that are not the
    controller, so the controller sees every step."""
    c = cluster()
    leader, follower = [b for b in sorted(c.brokers) if b != c.controller()]
    topic = "behind"
    c.create_topic(topic, config={"min.insync.replicas": "1"}, assignment=[[leader, follower]])
    producer = producers(NumberedProducer(c.bootstrap, topic, 1))
    producer.wait_progress(time.time() - 1, what="first acknowledgements")

    c.brokers[follower].kill()
    wait_until(lambda: c.isr(topic, 0) == [leader], timeout=RESUME_WITHIN_S, what="ISR shrinks to the leader")
    producer.wait_progress(time.time(), timeout=RESUME_WITHIN_S, what="acks with the leader alone in the ISR")
    time.sleep(1)
    acked_before_kill = producer.acked_count()

    c.brokers[leader].kill()
    wait_until(lambda: c.leader(topic, 0) == -1, timeout=RESUME_WITHIN_S, what="Leader none")
    assert c.isr(topic, 0) == [leader], "the last in-sync replica stays in the ISR"
    c.brokers[follower].start()
    wait_until(lambda: follower in c.registered(), timeout=30, what="the follower registered again")
    # The follower is live but out of sync: no clean leader, and unclean election is off.
    deadline = time.time() + 2 * SESSION_TIMEOUT_MS / 1000
    while time.time() < deadline:
        assert c.leader(topic, 0) == -1, f"an out-of-sync replica was elected: {c.describe(topic, 1)}"
        time.sleep(0.2)
    assert "Leader: none" in describe(c, topic), describe(c, topic)

    c.brokers[leader].start()
    back = time.time()
    wait_until(lambda: c.leader(topic, 0) == leader, timeout=30, what="the old leader leads again")
    producer.wait_progress(back, timeout=RESUME_WITHIN_S, what="production after the leader returned")
    producer.stop()
    summary = verify(producer, read_back(c.bootstrap, topic, 1))
    assert summary["acked"] > acked_before_kill
    assert not producer.failed, producer.failed[:5]


def state_text(cluster, topic, partition=0):
    return cluster.zk.get(f"/brokers/topics/{topic}/partitions/{partition}/state")[0].decode()


def test_unclean_election_when_the_topic_allows_it(cluster):
    """The same failure with unclean.leader.election.enable=true on the topic: the live
    out-of-sync replica is elected as soon as it registers, with itself as the ISR, and the
    partition is RECOVERING (KIP-704) in its state znode, in Kafka 3.9's JSON. When the old
    leader returns it follows, catches up and joins the ISR: the new leader's AlterPartition
    carries RECOVERED, and the znode drops the field, as Kafka 3.9 writes a recovered state."""
    c = cluster()
    leader, follower = [b for b in sorted(c.brokers) if b != c.controller()]
    topic = "dirty"
    c.create_topic(topic, config={"unclean.leader.election.enable": "true"}, assignment=[[leader, follower]])
    c.wait_isr(topic, 1, 2)
    assert "leader_recovery_state" not in state_text(c, topic), state_text(c, topic)
    c.brokers[follower].kill()
    wait_until(lambda: c.isr(topic, 0) == [leader], timeout=RESUME_WITHIN_S, what="ISR shrinks")
    # Records only the old leader has: the unclean election loses them.
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(20):
        p.produce(topic, value=f"lost-{i}".encode(), partition=0)
    assert p.flush(30) == 0
    c.brokers[leader].kill()
    wait_until(lambda: c.leader(topic, 0) == -1, timeout=RESUME_WITHIN_S, what="Leader none")
    assert "leader_recovery_state" not in state_text(c, topic), "a leaderless partition is not recovering"
    c.brokers[follower].start()
    wait_until(lambda: c.leader(topic, 0) == follower, timeout=30, what="the out-of-sync replica is elected")
    state = c.state(topic, 0)
    assert state["isr"] == [follower]
    assert state["leader_recovery_state"] == 1, state
    epoch = state["leader_epoch"]
    controller_epoch = state["controller_epoch"]
    assert state_text(c, topic) == (
        f'{{"controller_epoch":{controller_epoch},"leader":{follower},"version":1,'
        f'"leader_recovery_state":1,"leader_epoch":{epoch},"isr":[{follower}]}}'
    )

    # The old leader returns: it truncates to the new leader's log, catches up and is added
    # to the ISR by an AlterPartition that also reports the partition RECOVERED.
    c.brokers[leader].start()
    wait_until(lambda: sorted(c.isr(topic, 0)) == sorted([follower, leader]), timeout=60, what="the ISR grows again")
    state = c.state(topic, 0)
    assert "leader_recovery_state" not in state, state
    assert (state["leader"], state["leader_epoch"]) == (follower, epoch), state
    assert state_text(c, topic) == (
        f'{{"controller_epoch":{controller_epoch},"leader":{follower},"version":1,'
        f'"leader_epoch":{epoch},"isr":{json.dumps(state["isr"], separators=(",", ":"))}}}'
    )

