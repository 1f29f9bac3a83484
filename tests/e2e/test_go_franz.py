"""franz-go (github.com/twmb/franz-go's kgo and kadm, the most complete Go client) against a
three-broker Gregor dev-cluster (issue 27). tests/go-franz is a small Go module (go.mod and
go.sum pinned) whose `go test` covers: an idempotent acks=all producer with each codec read
back record by record; a two-member consumer group with the classic protocol and with KIP-848
(kgo.ServerSideBalancer: ConsumerGroupHeartbeat), committing and reading the commits back;
kadm's create/delete topics, describe and alter configs, list offsets (start, end, by time),
DeleteRecords, CreatePartitions, ListBrokers, ApiVersions, ListGroups, DescribeGroups, ACLs,
client quotas, SCRAM credentials, ElectLeaders, DescribeLogDirs, ListPartitionReassignments.

The modules come from Go's per-machine module cache, which scripts/test.sh fills once
(`go mod download`), like ~/.m2 for Maven: the test runs with GOPROXY=off, so it never
downloads. Franz-go needs Go 1.26 (/usr/local/go on these machines, else `go` on PATH).
"""

import os
import shutil
import subprocess

import pytest

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "go-franz")
BROKERS = [1, 2, 3]


def go_binary():
    for candidate in ("/usr/local/go/bin/go", shutil.which("go")):
        if candidate and os.path.exists(candidate):
            return candidate
    return None


@pytest.fixture
def franz_cluster(make_cluster):
    # The ACL authorizer, every PLAINTEXT client (User:ANONYMOUS) a super user, so the ACL
    # APIs answer.
    return make_cluster(len(BROKERS), broker_ids=BROKERS, overrides=[
        "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
        "super.users=User:ANONYMOUS",
        "file.delete.delay.ms=1000",
    ])


def test_franz_go(franz_cluster, tmp_path):
    go = go_binary()
    assert go, "Go is not installed"
    env = {
        **os.environ,
        "GREGOR_BOOTSTRAP": franz_cluster.bootstrap,
        "GOFLAGS": "-mod=mod",
        "GOPROXY": "off",
        "GOTOOLCHAIN": "local",
    }
    done = subprocess.run(
        [go, "test", "-count=1", "-v", "-timeout", "300s", "."],
        cwd=SRC, env=env, capture_output=True, text=True, timeout=600,
    )
    out = done.stdout + done.stderr
    if "GOPROXY=off" in out or "module lookup disabled" in out:
        pytest.fail("franz-go's modules are not in Go's module cache: run the install step of "
                    "scripts/test.sh (`go mod download` in tests/go-franz)\n" + out[-3000:])
    assert done.returncode == 0, f"the franz-go tests failed:\n{out[-12000:]}"
    # Every test ran and passed (a compile error or a skipped test would not say so).
    for name in ("TestProduceEachCodec", "TestGroupClassic", "TestGroupKIP848", "TestAdmin",
                 "TestAdminSecurityAndPlacement"):
        assert f"--- PASS: {name} " in out, f"{name} did not pass:\n{out[-6000:]}"
