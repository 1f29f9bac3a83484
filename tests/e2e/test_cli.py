"""`gregor topics` behaves like kafka-topics.sh."""

import os
import re
import subprocess

from conftest import GREGOR_BIN, gregor_cli, wait_until


def topics(g, *args):
    return gregor_cli("topics", "--bootstrap-server", g.bootstrap, *args)


def test_readme_flow_create_describe_list_alter_delete(server):
    r = topics(server, "--create", "--topic", "t", "--partitions", "10", "--replication-factor", "1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Created topic t."
    # Like Kafka, the create returns after phase 1; the topic is listed once brokers have it.
    wait_until(lambda: "t" in topics(server, "--list").stdout.split(), what="t listed")

    def described():
        r = topics(server, "--describe", "--topic", "t")
        return r if r.returncode == 0 and r.stdout.count("Leader: 0") == 10 else None

    r = wait_until(described, what="10 online partitions in describe")
    lines = r.stdout.strip().splitlines()
    assert re.match(r"Topic: t\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 10\tReplicationFactor: 1\tConfigs: ", lines[0]), lines[0]
    assert lines[1].strip() == "Topic: t\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0"

    r = topics(server, "--alter", "--topic", "t", "--partitions", "12")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: topics(server, "--describe", "--topic", "t").stdout.count("Partition: ") == 12, what="12 partitions")

    r = topics(server, "--delete", "--topic", "t")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: "t" not in topics(server, "--list").stdout.split(), what="t deleted")


def test_errors_exit_non_zero_with_kafka_message(server):
    r = topics(server, "--create", "--topic", "dup", "--partitions", "1", "--replication-factor", "1")
    assert r.returncode == 0, r.stderr
    r = topics(server, "--create", "--topic", "dup", "--partitions", "1", "--replication-factor", "1")
    assert r.returncode != 0
    assert "Error while executing topic command : " in r.stderr + r.stdout
    assert "already exists" in r.stderr + r.stdout
    r = topics(server, "--create", "--if-not-exists", "--topic", "dup", "--partitions", "1", "--replication-factor", "1")
    assert r.returncode == 0, r.stderr
    r = topics(server, "--create", "--topic", "rf", "--partitions", "1", "--replication-factor", "3")
    assert r.returncode != 0 and "Replication factor" in r.stderr + r.stdout
    r = topics(server, "--alter", "--topic", "missing", "--partitions", "3")
    assert r.returncode != 0
    r = topics(server, "--alter", "--if-exists", "--topic", "missing", "--partitions", "3")
    assert r.returncode == 0, r.stderr


def test_validate_name():
    assert gregor_cli("topics", "--validate-name", "good.name-1").returncode == 0
    r = gregor_cli("topics", "--validate-name", "bad name")
    # kafka-topics.sh prints its errors on stdout.
    assert r.returncode != 0 and "illegal" in r.stdout + r.stderr


def test_meta_reads_a_running_server_through_the_admin_listener(server):
    url = f"http://127.0.0.1:{server.admin_port}"
    r = topics(server, "--create", "--topic", "seen", "--partitions", "2", "--replication-factor", "1")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: server.meta("/brokers/topics/seen/partitions/1/state"), what="partition state")
    r = gregor_cli("meta", "ls", "/brokers", "--admin", url)
    assert r.returncode == 0, r.stderr
    listed = r.stdout.strip().strip("[]").split(", ")
    assert {"ids", "topics"} <= set(listed), r.stdout
    r = gregor_cli("meta", "get", "/brokers/ids/0", "--admin", url)
    assert r.returncode == 0, r.stderr
    assert f'"port": {server.kafka_ports[0]}' in r.stdout
    assert "ephemeralOwner = 0x" in r.stdout and "ephemeralOwner = 0x0\n" not in r.stdout
    r = gregor_cli("meta", "tree", "/brokers/topics/seen", "--admin", url)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["/brokers/topics/seen", "  partitions", "    0", "      state", "    1", "      state"]
    r = gregor_cli("meta", "get", "/no/such/node", "--admin", url)
    assert r.returncode != 0 and "no node at /no/such/node" in r.stderr


def test_a_log_written_to_a_file_is_plain_text(server):
    """stderr redirected to a file gets no terminal color codes: grep and log shippers read
    `broker_id=0` as written."""
    wait_until(lambda: "broker started" in server.log_text(), what="the start line")
    text = server.log_text()
    assert "\x1b[" not in text, text[:300]
    assert re.search(r" INFO broker::server: broker started broker_id=\d+ ", text), text[:600]


def test_version_is_the_workspace_version():
    """`gregor --version` prints the workspace's version (Cargo.toml), not 0.0.0."""
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    with open(os.path.join(root, "Cargo.toml")) as f:
        want = re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)
    assert want != "0.0.0"
    r = gregor_cli("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"gregor {want}\n"


def run_into_closed_pipe(*args):
    """Runs `gregor args` with stdout a pipe whose reader is already gone (what
    `gregor ... | head -1` becomes once head exits); returns (exit code, stderr)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        p = subprocess.run([GREGOR_BIN, *args], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    return p.returncode, p.stderr


def test_a_reader_that_goes_away_ends_every_command_quietly(server):
    r = topics(server, "--create", "--topic", "piped", "--partitions", "3", "--replication-factor", "1")
    assert r.returncode == 0, r.stderr
    wait_until(lambda: "piped" in topics(server, "--list").stdout.split(), what="piped listed")
    for args in [
        ["configs", "--bootstrap-server", server.bootstrap, "--entity-type", "brokers", "--entity-name", "0",
         "--describe", "--all"],
        ["log-dirs", "--bootstrap-server", server.bootstrap, "--describe"],
        ["topics", "--bootstrap-server", server.bootstrap, "--describe", "--topic", "piped"],
        ["topics", "--bootstrap-server", server.bootstrap, "--list"],
        ["--help"],
    ]:
        code, err = run_into_closed_pipe(*args)
        assert "panicked" not in err and "Broken pipe" not in err, (args, err)
        assert code == 0, (args, code, err)
