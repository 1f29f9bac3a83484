"""Topic lifecycle driven by librdkafka's admin API (confluent-kafka, newest librdkafka)."""

import os
import re

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

from conftest import wait_until


def admin(g):
    return AdminClient({"bootstrap.servers": g.bootstrap})


def create(a, *topics, validate_only=False):
    fs = a.create_topics(list(topics), validate_only=validate_only, operation_timeout=30, request_timeout=30)
    return {name: f for name, f in fs.items()}


def error_of(future):
    with pytest.raises(KafkaException) as e:
        future.result(timeout=30)
    return e.value.args[0]


def partitions_of(a, topic):
    # Ask for all topics: a Metadata request naming a topic may auto-create it.
    md = a.list_topics(timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in t.partitions.values()}


def wait_online(a, topic, count):
    def online():
        parts = partitions_of(a, topic)
        return parts if parts and len(parts) == count and all(v[0] >= 0 for v in parts.values()) else None

    return wait_until(online, what=f"{topic} online with {count} partitions")


def log_dirs(g, topic):
    logs = os.path.join(g.data_dir, "logs")
    if not os.path.isdir(logs):
        return []
    return sorted(d for d in os.listdir(logs) if d.startswith(topic + "-"))


def test_create_with_broker_defaults(make_server):
    g = make_server("num.partitions=3")
    a = admin(g)
    create(a, NewTopic("defaults"))["defaults"].result(timeout=30)
    parts = wait_online(a, "defaults", 3)
    assert parts == {p: (0, [0], [0]) for p in range(3)}
    wait_until(lambda: log_dirs(g, "defaults") == ["defaults-0", "defaults-1", "defaults-2"], what="log dirs")
    meta = open(os.path.join(g.data_dir, "logs", "defaults-0", "partition.metadata")).read()
    assert re.fullmatch(r"version: 0\ntopic_id: [A-Za-z0-9_-]{22}\n", meta), meta


def test_create_with_counts_assignment_and_configs(server):
    a = admin(server)
    fs = create(
        a,
        NewTopic("counted", num_partitions=10, replication_factor=1),
        NewTopic("assigned", num_partitions=2, replica_assignment=[[0], [0]]),
        NewTopic("configured", num_partitions=1, replication_factor=1, config={"retention.ms": "600001"}),
    )
    for f in fs.values():
        f.result(timeout=30)
    assert len(wait_online(a, "counted", 10)) == 10
    assert wait_online(a, "assigned", 2) == {0: (0, [0], [0]), 1: (0, [0], [0])}
    wait_online(a, "configured", 1)
    res = ConfigResource(ConfigResource.Type.TOPIC, "configured")
    configs = a.describe_configs([res])[res].result(timeout=30)
    assert configs["retention.ms"].value == "600001"
    assert not configs["retention.ms"].is_default
    assert configs["segment.bytes"].is_default
    # The store holds Kafka's exact JSON shapes.
    assert server.meta("/config/topics/configured")["data"] == {"version": 1, "config": {"retention.ms": "600001"}}
    assignment = server.meta("/brokers/topics/assigned")["data"]
    assert assignment["version"] == 3
    assert assignment["partitions"] == {"0": [0], "1": [0]}
    assert assignment["adding_replicas"] == {} and assignment["removing_replicas"] == {}
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", assignment["topic_id"])
    state = server.meta("/brokers/topics/assigned/partitions/0/state")["data"]
    assert state == {"controller_epoch": state["controller_epoch"], "leader": 0, "version": 1, "leader_epoch": 0, "isr": [0]}
    assert state["controller_epoch"] >= 1


@pytest.mark.parametrize(
    "topic,code",
    [
        (NewTopic("bad/name", num_partitions=1, replication_factor=1), KafkaError.TOPIC_EXCEPTION),
        (NewTopic("..", num_partitions=1, replication_factor=1), KafkaError.TOPIC_EXCEPTION),
        (NewTopic("x" * 250, num_partitions=1, replication_factor=1), KafkaError.TOPIC_EXCEPTION),
        (NewTopic("zero-partitions", num_partitions=0, replication_factor=1), KafkaError.INVALID_PARTITIONS),
        (NewTopic("rf-too-big", num_partitions=1, replication_factor=2), KafkaError.INVALID_REPLICATION_FACTOR),
        (NewTopic("rf-zero", num_partitions=1, replication_factor=0), KafkaError.INVALID_REPLICATION_FACTOR),
        (NewTopic("dup-replica", num_partitions=1, replica_assignment=[[0, 0]]), KafkaError.INVALID_REPLICA_ASSIGNMENT),
        (NewTopic("bad-config", num_partitions=1, replication_factor=1, config={"retention.ms": "abc"}), KafkaError.INVALID_CONFIG),
        (NewTopic("unknown-config", num_partitions=1, replication_factor=1, config={"no.such.key": "1"}), KafkaError.INVALID_CONFIG),
    ],
    ids=lambda v: v.topic[:20] if isinstance(v, NewTopic) else str(v),
)
def test_create_refusals_carry_code_and_message(server, topic, code):
    a = admin(server)
    err = error_of(create(a, topic)[topic.topic])
    assert err.code() == code, err
    assert err.str(), "every refusal carries a message"
    # A refused request changes nothing.
    assert server.meta("/brokers/topics")["children"] == []
    assert server.meta("/config/topics")["children"] == []


def test_exists_and_collision(server):
    a = admin(server)
    create(a, NewTopic("my.topic", num_partitions=1, replication_factor=1))["my.topic"].result(timeout=30)
    err = error_of(create(a, NewTopic("my.topic", num_partitions=1, replication_factor=1))["my.topic"])
    assert err.code() == KafkaError.TOPIC_ALREADY_EXISTS
    err = error_of(create(a, NewTopic("my_topic", num_partitions=1, replication_factor=1))["my_topic"])
    assert err.code() == KafkaError.TOPIC_EXCEPTION
    assert "collide" in err.str()


def test_validate_only_changes_nothing(server):
    a = admin(server)
    create(a, NewTopic("dry", num_partitions=4, replication_factor=1), validate_only=True)["dry"].result(timeout=30)
    assert server.meta("/brokers/topics/dry") is None
    assert partitions_of(a, "dry") is None
    assert log_dirs(server, "dry") == []


def test_add_partitions(server):
    a = admin(server)
    create(a, NewTopic("grow", num_partitions=2, replication_factor=1))["grow"].result(timeout=30)
    before = server.meta("/brokers/topics/grow")["data"]["partitions"]
    a.create_partitions([NewPartitions("grow", 5)])["grow"].result(timeout=30)
    wait_online(a, "grow", 5)
    after = server.meta("/brokers/topics/grow")["data"]["partitions"]
    assert {k: after[k] for k in before} == before, "existing partitions never move"
    wait_until(lambda: len(log_dirs(server, "grow")) == 5, what="5 log dirs")
    # with an explicit assignment for the new partitions
    a.create_partitions([NewPartitions("grow", 6, replica_assignment=[[0]])])["grow"].result(timeout=30)
    wait_online(a, "grow", 6)
    # refusals
    err = error_of(a.create_partitions([NewPartitions("grow", 3)])["grow"])
    assert err.code() == KafkaError.INVALID_PARTITIONS
    err = error_of(a.create_partitions([NewPartitions("nope", 3)])["nope"])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    err = error_of(a.create_partitions([NewPartitions("grow", 7, replica_assignment=[[5]])])["grow"])
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "Unknown broker" in err.str()


def test_delete_renames_then_removes_and_name_is_reusable(server):
    a = admin(server)
    create(a, NewTopic("doomed", num_partitions=2, replication_factor=1))["doomed"].result(timeout=30)
    wait_online(a, "doomed", 2)
    wait_until(lambda: log_dirs(server, "doomed") == ["doomed-0", "doomed-1"], what="log dirs")
    a.delete_topics(["doomed"], operation_timeout=30)["doomed"].result(timeout=30)
    # The znodes are gone once the deletion completed.
    wait_until(lambda: server.meta("/brokers/topics/doomed") is None, what="assignment znode removed")
    assert server.meta("/config/topics/doomed") is None
    assert server.meta("/admin/delete_topics/doomed") is None
    # Directories are renamed to <topic>-<p>.<uuid>-delete, then removed after file.delete.delay.ms (1 s here).
    names = log_dirs(server, "doomed")
    assert all(re.fullmatch(r"doomed-[01]\.[0-9a-f]{32}-delete", n) for n in names), names
    wait_until(lambda: log_dirs(server, "doomed") == [], timeout=20, what="-delete dirs removed")
    # Re-create with the same name.
    create(a, NewTopic("doomed", num_partitions=1, replication_factor=1))["doomed"].result(timeout=30)
    wait_online(a, "doomed", 1)
    err = error_of(a.delete_topics(["never-was"], operation_timeout=30)["never-was"])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_delete_disabled(make_server):
    g = make_server("delete.topic.enable=false")
    a = admin(g)
    create(a, NewTopic("kept", num_partitions=1, replication_factor=1))["kept"].result(timeout=30)
    err = error_of(a.delete_topics(["kept"], operation_timeout=30)["kept"])
    assert err.code() == KafkaError.TOPIC_DELETION_DISABLED
    assert g.meta("/brokers/topics/kept") is not None
    assert g.meta("/admin/delete_topics/kept") is None


def test_create_topic_policy(make_server):
    g = make_server("create.topic.policy.min.partitions=3")
    a = admin(g)
    err = error_of(create(a, NewTopic("small", num_partitions=2, replication_factor=1))["small"])
    assert err.code() == KafkaError.POLICY_VIOLATION
    assert err.str()
    create(a, NewTopic("big", num_partitions=3, replication_factor=1))["big"].result(timeout=30)


def test_restart_keeps_every_topic(server):
    a = admin(server)
    create(a, NewTopic("durable", num_partitions=3, replication_factor=1, config={"retention.ms": "700000"}))[
        "durable"
    ].result(timeout=30)
    wait_online(a, "durable", 3)
    topic_id = server.meta("/brokers/topics/durable")["data"]["topic_id"]
    server.restart()
    a = admin(server)
    assert wait_online(a, "durable", 3) == {p: (0, [0], [0]) for p in range(3)}
    assert server.meta("/brokers/topics/durable")["data"]["topic_id"] == topic_id
    assert log_dirs(server, "durable") == ["durable-0", "durable-1", "durable-2"]
    res = ConfigResource(ConfigResource.Type.TOPIC, "durable")
    assert a.describe_configs([res])[res].result(timeout=30)["retention.ms"].value == "700000"
