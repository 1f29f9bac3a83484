"""Kafka's own command-line tools (kafka-tools 4.x, their main classes in one JVM through
tests/java's gregor.apps.ToolBatch) and gregor's same commands print the same thing against
the same Gregor cluster (issue 27): kafka-topics --describe / --list, kafka-consumer-groups
--list / --describe, kafka-log-dirs --describe and kafka-leader-election. The one allowed
difference: kafka-topics 4.x prints KRaft's `Elr: N/A` and `LastKnownElr: N/A` after each
partition's ISR (eligible leader replicas, KIP-966), which a ZooKeeper-era cluster has none of
and gregor topics does not print (it follows Kafka 3.9's kafka-topics.sh); and Kafka 3.9's
kafka-consumer-groups --describe table ends with a blank line (gregor's does), 4.x's does not;
kafka-log-dirs prints the same JSON with keys and partitions in another order.
"""

import json
import re
import subprocess

from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import gregor_cli
from java_build import java

TOPIC, GROUP = "tools-match", "tools-match-group"


def kafka_tools(tmp_path, commands):
    """Runs each (main class, args) in one JVM; returns [(exit code, stdout)]."""
    spec, out = tmp_path / "commands.tsv", tmp_path / "outputs.txt"
    spec.write_text("\n".join("\t".join([main, *args]) for main, args in commands) + "\n")
    proc = java("gregor.apps.ToolBatch", spec, out, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    log = proc.communicate(timeout=300)[0].decode(errors="replace")
    assert proc.returncode == 0, log[-5000:]
    runs = re.split(r"^=== \d+ EXIT (-?\d+)\n", out.read_text(), flags=re.M)[1:]
    return [(int(runs[i]), runs[i + 1]) for i in range(0, len(runs), 2)]


def normalize_log_dirs(text):
    lines = text.splitlines()
    doc = json.loads(lines[-1])
    for b in doc["brokers"]:
        for d in b["logDirs"]:
            d["partitions"].sort(key=lambda p: p["partition"])
    return "\n".join(lines[:-1] + [json.dumps(doc, sort_keys=True)])


def test_kafka_tools_print_what_gregor_prints(make_cluster, tmp_path):
    cluster = make_cluster(3, broker_ids=[1, 2, 3])
    bs = cluster.bootstrap
    created = gregor_cli("topics", "--bootstrap-server", bs, "--create", "--topic", TOPIC, "--partitions", "3",
                         "--replication-factor", "2", "--config", "retention.ms=86400000")
    assert created.returncode == 0, created.stderr
    p = Producer({"bootstrap.servers": bs})
    for i in range(30):
        p.produce(TOPIC, value=b"v%d" % i, partition=i % 3)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bs, "group.id": GROUP, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(TOPIC, 0, 4), TopicPartition(TOPIC, 1, 10)], asynchronous=False)
    c.close()

    bsa = ["--bootstrap-server", bs]
    pairs = [
        ("org.apache.kafka.tools.TopicCommand", ["topics", *bsa, "--describe", "--topic", TOPIC]),
        ("org.apache.kafka.tools.TopicCommand", ["topics", *bsa, "--list"]),
        ("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", ["consumer-groups", *bsa, "--list"]),
        ("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
         ["consumer-groups", *bsa, "--describe", "--group", GROUP]),
        ("org.apache.kafka.tools.LogDirsCommand", ["log-dirs", *bsa, "--describe", "--topic-list", TOPIC]),
        ("org.apache.kafka.tools.LeaderElectionCommand",
         ["leader-election", *bsa, "--election-type", "preferred", "--topic", TOPIC, "--partition", "0"]),
    ]
    theirs = kafka_tools(tmp_path, [(main, args[1:]) for main, args in pairs])
    assert len(theirs) == len(pairs)
    for (main, args), (code, out) in zip(pairs, theirs):
        ours = gregor_cli(*args)
        assert code == 0, f"{main} {args[1:]} exited {code}:\n{out}"
        assert ours.returncode == 0, f"gregor {args}: {ours.stderr}"
        if main.endswith("TopicCommand"):
            out = out.replace("\tElr: N/A\tLastKnownElr: N/A", "")
        ours_out = ours.stdout
        if main.endswith("ConsumerGroupCommand"):
            # Kafka 3.9's table ends with a blank line (gregor's), 4.x's does not.
            out, ours_out = out.rstrip("\n") + "\n", ours_out.rstrip("\n") + "\n"
        if main.endswith("LogDirsCommand"):
            # The same JSON; the order of keys and of partitions is a map's, in either tool.
            out, ours_out = normalize_log_dirs(out), normalize_log_dirs(ours_out)
        assert out == ours_out, f"gregor {' '.join(args)} differs from Kafka's tool:\n--- Kafka\n{out}\n--- gregor\n{ours_out}"
