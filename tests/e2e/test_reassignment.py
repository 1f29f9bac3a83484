"""Partition reassignment (issue 11, KIP-455) on a real 4-broker cluster of `gregor server`
processes on a real ZooKeeper, driven by `gregor reassign-partitions`
(kafka-reassign-partitions.sh) and by the legacy `/admin/reassign_partitions` znode written
with kazoo:

- {1,2,3} -> {2,3,4} under an idempotent acks=all producer and a consumer group committing
  offsets: nothing acknowledged is lost, nothing is consumed twice, the old replica's log
  directory is gone afterwards;
- a throttled move cancelled mid-way (`--describe` shows Adding/Removing Replicas while it
  runs; afterwards the added replica's log is gone and `--verify` clears the throttles);
- the controller killed (-9) mid-reassignment: the next controller resumes it from the znodes;
- a target on a broker that is down: the move waits (and `--list` says so) until it starts;
- `/admin/reassign_partitions` written by hand: run, and deleted when done.
"""

import json
import os
import threading
import time
import uuid

from confluent_kafka import Consumer, Producer

from conftest import gregor_cli, wait_until
from replication import NumberedProducer, read_back, verify
from test_replication_faults import cluster, producers  # noqa: F401 (fixtures)


def reassign(c, *args):
    return gregor_cli("reassign-partitions", "--bootstrap-server", c.bootstrap, *args)


def write_plan(tmp_path, name, moves):
    """moves: {(topic, partition): [replicas]} -> a --reassignment-json-file."""
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({
        "version": 1,
        "partitions": [
            {"topic": t, "partition": p, "replicas": r} for (t, p), r in sorted(moves.items())
        ],
    }))
    return str(path)


def replicas(c, topic, partition):
    data, _ = c.zk.get(f"/brokers/topics/{topic}")
    return json.loads(data)["partitions"][str(partition)]


def assignment_znode(c, topic):
    return json.loads(c.zk.get(f"/brokers/topics/{topic}")[0])


def log_dir(c, broker, topic, partition):
    return os.path.join(c.brokers[broker].data_dir, "logs", f"{topic}-{partition}")


def fill(c, topic, megabytes):
    producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 20,
                         "batch.size": 1_000_000, "message.max.bytes": 2_000_000})
    payload = os.urandom(100_000)
    for _ in range(megabytes * 10):
        producer.produce(topic, payload, partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0


def topic_config(c, topic):
    data, _ = c.zk.get(f"/config/topics/{topic}")
    return json.loads(data)["config"]


def broker_config(c, broker):
    if not c.zk.exists(f"/config/brokers/{broker}"):
        return {}
    return json.loads(c.zk.get(f"/config/brokers/{broker}")[0])["config"]


class GroupConsumer:
    """A consumer group member reading `topic` from a thread, committing each message's offset
    synchronously; records (partition, offset, value) of everything it consumed."""

    def __init__(self, bootstrap, topic):
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": f"reassign-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 2,
        })
        self.consumer.subscribe([topic])
        self.seen = []
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while self.running:
            msg = self.consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            self.seen.append((msg.partition(), msg.offset(), msg.value()))
            try:
                self.consumer.commit(message=msg, asynchronous=False)
            except Exception:
                pass

    def stop(self):
        self.running = False
        self.thread.join()
        self.consumer.close()


def test_reassignment_moves_cancels_survives_failover_and_waits_for_a_broker(cluster, producers, tmp_path):  # noqa: F811
    c = cluster(brokers=4, overrides=("auto.leader.rebalance.enable=false",))

    # ---- {1,2,3} -> {2,3,4} under load ----
    topic = "moving"
    c.create_topic(topic, assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"})
    c.wait_isr(topic, 1, 3)
    producer = producers(NumberedProducer(c.bootstrap, topic, 1, rate=200))
    consumer = GroupConsumer(c.bootstrap, topic)
    producer.wait_progress(time.time(), what="first acknowledgements")
    plan = write_plan(tmp_path, "move", {(topic, 0): [2, 3, 4]})
    run = reassign(c, "--execute", "--reassignment-json-file", plan)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Current partition replica assignment" in run.stdout
    assert '"replicas":[1,2,3]' in run.stdout, run.stdout
    assert "Successfully started partition reassignment for moving-0" in run.stdout, run.stdout

    def done():
        out = reassign(c, "--verify", "--reassignment-json-file", plan).stdout
        return "Reassignment of partition moving-0 is complete." in out

    wait_until(done, timeout=30, interval=0.5, what="the move completes")
    assert replicas(c, topic, 0) == [2, 3, 4]
    assert sorted(c.isr(topic, 0)) == [2, 3, 4]
    assert c.leader(topic, 0) in (2, 3, 4)
    assert assignment_znode(c, topic).get("adding_replicas", {}) == {}
    time.sleep(1)
    producer.stop()
    summary = verify(producer, read_back(c.bootstrap, topic, 1))
    wait_until(lambda: len(consumer.seen) >= summary["acked"], timeout=30, what="the consumer catches up")
    consumer.stop()
    offsets = [o for _, o, _ in consumer.seen]
    assert len(offsets) == len(set(offsets)), "a message was consumed twice"
    wait_until(lambda: not os.path.exists(log_dir(c, 1, topic, 0)), timeout=20,
               what="broker 1's replica log deleted")
    assert os.path.isdir(log_dir(c, 4, topic, 0))
    print(f"move under load: {summary}")

    # ---- A throttled move, cancelled mid-way ----
    slow = "slow"
    c.create_topic(slow, assignment=[[1, 2]])
    c.wait_isr(slow, 1, 2)
    fill(c, slow, 20)
    plan = write_plan(tmp_path, "slow", {(slow, 0): [1, 3]})
    run = reassign(c, "--execute", "--reassignment-json-file", plan, "--throttle", "200000")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "The inter-broker throttle limit was set to 200000 B/s" in run.stdout, run.stdout
    assert topic_config(c, slow)["follower.replication.throttled.replicas"] == "0:3"
    assert topic_config(c, slow)["leader.replication.throttled.replicas"] == "0:1,0:2"
    assert broker_config(c, 3)["follower.replication.throttled.rate"] == "200000"
    listed = reassign(c, "--list")
    assert "slow-0: replicas: 1,3,2. adding: 3. removing: 2." in listed.stdout, listed.stdout
    described = gregor_cli("topics", "--bootstrap-server", c.bootstrap, "--describe", "--topic", slow)
    assert "\tAdding Replicas: 3\tRemoving Replicas: 2" in described.stdout, described.stdout
    again = reassign(c, "--execute", "--reassignment-json-file", plan)
    assert again.returncode == 1 and "Cannot execute because there is an existing partition assignment" in again.stdout
    wait_until(lambda: os.path.isdir(log_dir(c, 3, slow, 0)), timeout=20, what="broker 3 creates the new replica")
    verify_run = reassign(c, "--verify", "--reassignment-json-file", plan)
    assert "Reassignment of partition slow-0 is still in progress." in verify_run.stdout, verify_run.stdout
    assert "follower.replication.throttled.rate" in broker_config(c, 3), "throttles stay while it moves"
    cancel = reassign(c, "--cancel", "--reassignment-json-file", plan)
    assert cancel.returncode == 0, cancel.stdout + cancel.stderr
    assert "Successfully cancelled partition reassignment for: slow-0" in cancel.stdout, cancel.stdout
    assert sorted(replicas(c, slow, 0)) == [1, 2]
    assert "No partition reassignments found." in reassign(c, "--list").stdout
    wait_until(lambda: not os.path.exists(log_dir(c, 3, slow, 0)), timeout=20,
               what="the cancelled replica's log deleted")
    assert "follower.replication.throttled.rate" not in broker_config(c, 3), "cancel clears the throttles"
    assert "follower.replication.throttled.replicas" not in topic_config(c, slow)

    # ---- The controller killed mid-reassignment ----
    controller = c.controller()
    others = [b for b in c.brokers if b != controller]
    target = others[:2]
    plan = write_plan(tmp_path, "failover", {(slow, 0): target})
    run = reassign(c, "--execute", "--reassignment-json-file", plan, "--throttle", "200000")
    assert run.returncode == 0, run.stdout + run.stderr
    c.brokers[controller].kill()
    wait_until(lambda: c.controller() not in (None, controller), timeout=30, what="a new controller")
    assert "adding_replicas" in assignment_znode(c, slow) and assignment_znode(c, slow)["adding_replicas"], \
        "the move is still recorded in the znode"
    # Lift the throttle by resubmitting with --additional (as Kafka's tool does it).
    run = reassign(c, "--execute", "--additional", "--reassignment-json-file", plan, "--throttle", "1000000000")
    assert run.returncode == 0, run.stdout + run.stderr
    wait_until(lambda: replicas(c, slow, 0) == target, timeout=40, interval=0.5,
               what="the new controller completes the move")
    assert sorted(c.isr(slow, 0)) == sorted(target)
    out = reassign(c, "--verify", "--reassignment-json-file", plan).stdout
    assert "Clearing broker-level throttles" in out, out
    c.brokers[controller].start()
    wait_until(lambda: controller in c.registered(), timeout=30, what="the old controller back")

    # ---- A target on a broker that is down, then started ----
    c.brokers[4].terminate()
    wait_until(lambda: 4 not in c.registered(), timeout=30, what="broker 4 gone")
    later = "later"
    c.create_topic(later, assignment=[[1, 2]])
    plan = write_plan(tmp_path, "later", {(later, 0): [1, 4]})
    run = reassign(c, "--execute", "--reassignment-json-file", plan)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "not live" in run.stderr, run.stderr
    time.sleep(1)
    assert "later-0: replicas: 1,4,2. adding: 4. removing: 2." in reassign(c, "--list").stdout
    c.brokers[4].start()
    wait_until(lambda: replicas(c, later, 0) == [1, 4], timeout=30, interval=0.5,
               what="the move completes once broker 4 is back")

    # ---- /admin/reassign_partitions written by hand ----
    c.zk.create("/admin/reassign_partitions", json.dumps({
        "version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [3, 2, 1]}],
    }).encode())
    wait_until(lambda: replicas(c, topic, 0) == [3, 2, 1] and not c.zk.exists("/admin/reassign_partitions"),
               timeout=30, interval=0.5, what="the znode's move runs and the znode is deleted")
    # Refusals print Kafka's code name and exit 1.
    bad = write_plan(tmp_path, "bad", {(topic, 0): [1, 99]})
    run = reassign(c, "--execute", "--reassignment-json-file", bad)
    assert run.returncode == 1, run.stdout
    assert "moving-0:" in run.stdout and "99" in run.stdout, run.stdout

    # ---- --generate after the cluster grew: a topic placed on {1,2,3}, broker 4 new ----
    skewed = "skewed"
    current = [[1, 2], [2, 3], [3, 1], [1, 3], [2, 1], [3, 2], [1, 2], [2, 3]]
    c.create_topic(skewed, assignment=current)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": skewed}]}))
    run = reassign(c, "--generate", "--topics-to-move-json-file", str(topics), "--broker-list", "1,2,3,4")
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment", lines
    proposed_at = lines.index("Proposed partition reassignment configuration")
    proposed = json.loads(lines[proposed_at + 1])
    assert proposed["version"] == 1
    new = {e["partition"]: e["replicas"] for e in proposed["partitions"]}
    per_broker = [sum(b in r for r in new.values()) for b in (1, 2, 3, 4)]
    leaders = [sum(r[0] == b for r in new.values()) for b in (1, 2, 3, 4)]
    assert max(per_broker) - min(per_broker) <= 1, per_broker
    assert max(leaders) - min(leaders) <= 1, leaders
    moves = sum(len(set(new[p]) - set(current[p])) for p in range(8))
    kafka = [kafka_moves(current, [1, 2, 3, 4], start, shift) for start in range(4) for shift in range(3)]
    assert moves == 4, new  # the least possible: broker 4's share of 16 replicas
    assert moves < min(kafka), (moves, kafka)
    assert f"Replicas to move: {moves} of 16" in run.stdout, run.stdout
    print(f"--generate moves {moves} replicas; Kafka's generator {min(kafka)}..{max(kafka)} (mean {sum(kafka) / len(kafka):.1f})")


def kafka_moves(current, brokers, start, shift):
    """Replicas Kafka 2.8's generator (AdminUtils.assignReplicasToBrokersRackUnaware, start
    index `start`, first shift `shift`; it draws both at random) would move."""
    n, moved, next_shift = len(brokers), 0, shift
    for p, old in enumerate(current):
        if p > 0 and p % n == 0:
            next_shift += 1
        first = (p + start) % n
        new = [brokers[first]]
        for j in range(len(old) - 1):
            new.append(brokers[(first + 1 + (next_shift + j) % (n - 1)) % n])
        moved += len(set(new) - set(old))
    return moved


def test_generate_is_rack_aware_on_a_racked_cluster(make_cluster, tmp_path):
    """--generate reads each broker's rack from Metadata: a topic whose replicas all sit on
    rack a is proposed with one replica per rack, moving one replica per partition (the
    refusal of mixed racked and unracked brokers is a unit test of cli/src/reassign.rs)."""
    from confluent_kafka.admin import AdminClient

    c = make_cluster(4, broker_ids=[1, 2, 3, 4], racks=["a", "a", "b", "b"])
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    current = [[1, 2], [2, 1], [1, 2], [2, 1]]
    made = gregor_cli("topics", "--bootstrap-server", c.bootstrap, "--create", "--topic", "racked",
                      "--replica-assignment", ",".join(":".join(map(str, r)) for r in current))
    assert made.returncode == 0, made.stdout + made.stderr
    wait_until(lambda: len(admin.list_topics("racked", timeout=10).topics["racked"].partitions) == 4,
               what="racked created")
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "racked"}]}))
    run = gregor_cli("reassign-partitions", "--bootstrap-server", c.bootstrap, "--generate",
                     "--topics-to-move-json-file", str(topics), "--broker-list", "1,2,3,4")
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    proposed = json.loads(lines[lines.index("Proposed partition reassignment configuration") + 1])
    rack = {1: "a", 2: "a", 3: "b", 4: "b"}
    new = {e["partition"]: e["replicas"] for e in proposed["partitions"]}
    for p, replicas in new.items():
        assert {rack[b] for b in replicas} == {"a", "b"}, (p, replicas)
    assert sum(len(set(new[p]) - set(current[p])) for p in range(4)) == 4, new
    assert "Replicas to move: 4 of 8" in run.stdout, run.stdout


def generated(c, tmp_path, topics, broker_list):
    path = tmp_path / "generate-topics.json"
    path.write_text(json.dumps({"version": 1, "topics": [{"topic": t} for t in topics]}))
    run = gregor_cli("reassign-partitions", "--bootstrap-server", c.bootstrap, "--generate",
                     "--topics-to-move-json-file", str(path), "--broker-list", broker_list)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    proposed = json.loads(lines[lines.index("Proposed partition reassignment configuration") + 1])
    out = {}
    for e in proposed["partitions"]:
        out.setdefault(e["topic"], {})[e["partition"]] = e["replicas"]
    return out, run.stdout


def create_assigned(c, topic, assignment):
    from confluent_kafka.admin import AdminClient

    made = gregor_cli("topics", "--bootstrap-server", c.bootstrap, "--create", "--topic", topic,
                      "--replica-assignment", ",".join(":".join(map(str, r)) for r in assignment))
    assert made.returncode == 0, made.stdout + made.stderr
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    wait_until(lambda: all(p.leader >= 0 for p in
                           admin.list_topics(topic, timeout=10).topics[topic].partitions.values())
               and len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == len(assignment),
               what=f"{topic} created")


def metadata_replicas(c, topic, partition):
    """The replicas a Metadata response (librdkafka's) lists."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    return admin.list_topics(topic, timeout=10).topics[topic].partitions[partition].replicas


def test_generate_balances_each_topic_and_a_move_shows_and_cancels_like_kafka(make_cluster, tmp_path):
    """Issue 24. --generate for a 6-partition RF-3 topic and an 8-partition RF-1 topic on
    brokers 0-2 with --broker-list 0,1,2,3 balances each topic (it balanced their union: the
    first got replicas 3/4/5/6 and leaders 0/1/2/3, the second nothing on broker 3). Right
    after --execute of [0,1,2] to [1,2,3], `topics --describe` shows the full replica set
    (target first, then the removing replicas: 1,2,3,0) as Kafka 2.8 and Metadata do (it
    showed the old 0,1,2 next to Adding/Removing: --execute answered before the brokers had
    the new set). Cancelling restores [0,1,2] in its order (it read [1,2,0], which makes 1 the
    preferred leader)."""
    c = make_cluster(4, overrides=("auto.leader.rebalance.enable=false",))
    wide = [[0, 1, 2], [1, 2, 0], [2, 0, 1], [0, 2, 1], [1, 0, 2], [2, 1, 0]]
    narrow = [[0], [1], [2], [0], [1], [2], [0], [1]]
    create_assigned(c, "wide", wide)
    create_assigned(c, "narrow", narrow)
    proposal, stdout = generated(c, tmp_path, ["wide", "narrow"], "0,1,2,3")
    for topic, current, moves in (("wide", wide, 4), ("narrow", narrow, 2)):
        new = proposal[topic]
        replicas = [sum(b in r for r in new.values()) for b in range(4)]
        leaders = [sum(r[0] == b for r in new.values()) for b in range(4)]
        assert max(replicas) - min(replicas) <= 1, (topic, replicas, new)
        assert max(leaders) - min(leaders) <= 1, (topic, leaders, new)
        moved = sum(len(set(new[p]) - set(current[p])) for p in range(len(current)))
        assert moved == moves, (topic, moved, new)
    assert "Replicas to move: 6 of 26" in stdout, stdout

    # ---- A throttled move: describe shows every replica; a cancel restores the order ----
    slow = "slow"
    create_assigned(c, slow, [[0, 1, 2]])
    fill(c, slow, 20)
    plan = write_plan(tmp_path, "slow", {(slow, 0): [1, 2, 3]})
    run = gregor_cli("reassign-partitions", "--bootstrap-server", c.bootstrap, "--execute",
                     "--reassignment-json-file", plan, "--throttle", "200000")
    assert run.returncode == 0, run.stdout + run.stderr
    # Right after --execute (no waiting: its answer comes once every broker has the new set).
    described = gregor_cli("topics", "--bootstrap-server", c.bootstrap, "--describe", "--topic", slow)
    assert described.returncode == 0, described.stdout + described.stderr
    header, line = described.stdout.splitlines()[:2]
    assert "\tReplicas: 1,2,3,0\t" in line, line
    assert line.endswith("\tAdding Replicas: 3\tRemoving Replicas: 0"), line
    assert "\tReplicationFactor: 3\t" in header, header
    assert metadata_replicas(c, slow, 0) == [1, 2, 3, 0]
    cancel = gregor_cli("reassign-partitions", "--bootstrap-server", c.bootstrap, "--cancel",
                        "--reassignment-json-file", plan)
    assert cancel.returncode == 0, cancel.stdout + cancel.stderr
    assert "Successfully cancelled partition reassignment for: slow-0" in cancel.stdout, cancel.stdout
    znode = c.meta(f"/brokers/topics/{slow}")
    assert znode["data"]["partitions"]["0"] == [0, 1, 2], znode
    assert metadata_replicas(c, slow, 0) == [0, 1, 2]
    described = gregor_cli("topics", "--bootstrap-server", c.bootstrap, "--describe", "--topic", slow)
    assert "\tReplicas: 0,1,2\t" in described.stdout, described.stdout
    assert "Adding Replicas" not in described.stdout, described.stdout
