"""Topic lifecycle driven by an independent client implementation: kafka-python's admin client."""

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewPartitions, NewTopic
from kafka.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    TopicAlreadyExistsError,
)

from conftest import wait_until


@pytest.fixture
def kp_admin(server):
    a = KafkaAdminClient(bootstrap_servers=server.bootstrap, client_id="e2e", request_timeout_ms=30000)
    yield a
    a.close()


def test_create_describe_alter_delete(server, kp_admin):
    kp_admin.create_topics([NewTopic("kp", num_partitions=2, replication_factor=1, topic_configs={"retention.ms": "600001"})])
    wait_until(lambda: "kp" in kp_admin.list_topics(), what="kp listed")
    desc = kp_admin.describe_topics(["kp"])[0]
    assert desc["error_code"] == 0
    assert sorted(p["partition_index"] for p in desc["partitions"]) == [0, 1]
    kp_admin.create_partitions({"kp": NewPartitions(total_count=4)})
    wait_until(lambda: len(kp_admin.describe_topics(["kp"])[0]["partitions"]) == 4, what="4 partitions")
    assert server.meta("/config/topics/kp")["data"]["config"] == {"retention.ms": "600001"}
    kp_admin.delete_topics(["kp"], timeout_ms=30000)
    wait_until(lambda: "kp" not in kp_admin.list_topics(), what="kp gone")


def test_errors(server, kp_admin):
    kp_admin.create_topics([NewTopic("kp-dup", num_partitions=1, replication_factor=1)])
    with pytest.raises(TopicAlreadyExistsError):
        kp_admin.create_topics([NewTopic("kp-dup", num_partitions=1, replication_factor=1)])
    with pytest.raises(InvalidReplicationFactorError):
        kp_admin.create_topics([NewTopic("kp-rf", num_partitions=1, replication_factor=3)])
    with pytest.raises(InvalidPartitionsError):
        kp_admin.create_partitions({"kp-dup": NewPartitions(total_count=1)})
