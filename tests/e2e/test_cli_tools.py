"""The kafka-*.sh tools an operator reaches for, as `gregor` subcommands against a running
`gregor server`: get-offsets, delete-records, broker-api-versions, dump-log,
console-producer / console-consumer, with Kafka's flags, output lines and errors."""

import glob
import json
import os
import re
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import gregor_cli, wait_until


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap, name, partitions=1):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(timeout=30)

    def leaders_known():
        md = admin.list_topics(name, timeout=10).topics.get(name)
        return md is not None and md.error is None and len(md.partitions) == partitions and all(
            p.leader >= 0 for p in md.partitions.values()
        )

    wait_until(leaders_known, what=f"{name} has leaders")


def produce(bootstrap, topic, messages):
    """messages: (partition, key, value, timestamp_ms, headers) tuples, one batch each."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for partition, key, value, ts, headers in messages:
        p.produce(topic, key=key, value=value, partition=partition, timestamp=ts or 0, headers=headers)
        p.flush(10)
    assert p.flush(30) == 0


def test_get_offsets_latest_earliest_by_time_and_bad_input(server):
    b = server.bootstrap
    t = unique("offsets")
    create_topic(b, t, 2)
    produce(b, t, [(0, None, b"a", 1000, None), (0, None, b"b", 2000, None), (0, None, b"c", 3000, None), (1, None, b"d", 1000, None)])

    r = gregor_cli("get-offsets", "--bootstrap-server", b, "--topic", t)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{t}:0:3\n{t}:1:1\n"
    r = gregor_cli("get-offsets", "--bootstrap-server", b, "--topic", t, "--time", "-2")
    assert r.stdout == f"{t}:0:0\n{t}:1:0\n"
    r = gregor_cli("get-offsets", "--bootstrap-server", b, "--topic-partitions", f"{t}:0", "--time", "2000")
    assert r.stdout == f"{t}:0:1\n", r.stderr
    r = gregor_cli("get-offsets", "--bootstrap-server", b, "--topic", t, "--partitions", "1", "--time", "max-timestamp")
    assert r.stdout == f"{t}:1:0\n", r.stderr
    # A timestamp after the last record has no offset: the partition is left out, as Kafka.
    r = gregor_cli("get-offsets", "--bootstrap-server", b, "--topic", t, "--time", "99999999")
    assert r.returncode == 0 and r.stdout == ""

    r = gregor_cli("get-offsets", "--bootstrap-server", b, "--topic", t, "--time", "yesterday")
    assert r.returncode == 1
    assert r.stderr.startswith("Error occurred: Malformed time argument yesterday.")
    r = gregor_cli("get-offsets", "--bootstrap-server", b, "--topic", t, "--topic-partitions", t)
    assert r.returncode == 1
    assert "--topic-partitions cannot be used with --topic or --partitions" in r.stderr
    r = gregor_cli("get-offsets", "--bootstrap-server", b, "--topic", "no-such-topic")
    assert r.returncode == 1
    assert "Could not match any topic-partitions with the specified filters" in r.stderr


def test_delete_records_moves_the_log_start_and_reports_errors(server, tmp_path):
    b = server.bootstrap
    t = unique("delete")
    create_topic(b, t, 2)
    produce(b, t, [(0, None, f"m{i}".encode(), None, None) for i in range(5)])
    spec = tmp_path / "offsets.json"
    spec.write_text(json.dumps({"partitions": [{"topic": t, "partition": 0, "offset": 3},
                                               {"topic": t, "partition": 1, "offset": 7}], "version": 1}))
    r = gregor_cli("delete-records", "--bootstrap-server", b, "--offset-json-file", str(spec))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Executing records delete operation"
    assert lines[1] == "Records delete operation completed:"
    assert f"partition: {t}-0\tlow_watermark: 3" in lines
    # Partition 1 is empty: offset 7 is past its high watermark (OFFSET_OUT_OF_RANGE).
    assert any(l.startswith(f"partition: {t}-1\terror: ") for l in lines), lines
    r = gregor_cli("get-offsets", "--bootstrap-server", b, "--topic", t, "--partitions", "0", "--time", "earliest")
    assert r.stdout == f"{t}:0:3\n"

    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = gregor_cli("delete-records", "--bootstrap-server", b, "--offset-json-file", str(bad))
    assert r.returncode == 1
    assert r.stderr.startswith("The input string is not a valid JSON")
    r = gregor_cli("delete-records", "--bootstrap-server", b)
    assert r.returncode == 1 and 'Missing required argument "[offset-json-file]"' in r.stderr


def test_broker_api_versions_prints_kafkas_shape(server):
    r = gregor_cli("broker-api-versions", "--bootstrap-server", server.bootstrap)
    assert r.returncode == 0, r.stderr
    port = server.kafka_ports[0]
    first = r.stdout.splitlines()[0]
    assert re.fullmatch(rf"127\.0\.0\.1:{port} \(id: \d+ rack: null\) -> \(", first), first
    assert re.search(r"^\tProduce\(0\): \d+ to \d+ \[usable: \d+\],$", r.stdout, re.M), r.stdout
    assert re.search(r"^\tApiVersions\(18\): 0 to \d \[usable: \d\],$", r.stdout, re.M), r.stdout
    assert r.stdout.rstrip("\n").endswith("\n)")
    r = gregor_cli("broker-api-versions")
    assert r.returncode == 1 and 'Missing required argument "[bootstrap-server]"' in r.stderr


def segment_files(server, topic, partition, suffix):
    found = sorted(glob.glob(os.path.join(server.data_dir, "**", f"{topic}-{partition}", f"*.{suffix}"), recursive=True))
    assert found, f"no .{suffix} file for {topic}-{partition} under {server.data_dir}"
    return found


def test_dump_log_prints_segments_indexes_and_offsets_records(server):
    b = server.bootstrap
    t = unique("dump")
    create_topic(b, t, 1)
    big = b"x" * 1500
    messages = [(0, b"k0", b"hello", 1_700_000_000_000, [("h1", b"v1")])]
    messages += [(0, None, big, 1_700_000_000_000 + i, None) for i in range(1, 8)]
    produce(b, t, messages)

    log = segment_files(server, t, 0, "log")[0]
    r = gregor_cli("dump-log", "--files", log, "--print-data-log")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"Dumping {log}"
    assert lines[1] == "Log starting offset: 0"
    assert re.fullmatch(
        r"baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -?\d+ lastSequence: -?\d+ producerId: -?\d+ producerEpoch: -?\d+ "
        r"partitionLeaderEpoch: \d+ isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        r"position: 0 CreateTime: 1700000000000 size: \d+ magic: 2 compresscodec: none crc: \d+ isvalid: true",
        lines[2],
    ), lines[2]
    assert re.fullmatch(
        r"\| offset: 0 CreateTime: 1700000000000 keySize: 2 valueSize: 5 sequence: -?\d+ headerKeys: \[h1\] key: k0 payload: hello",
        lines[3],
    ), lines[3]
    assert sum(1 for l in lines if l.startswith("baseOffset: ")) == 8
    # Shallow: batches only.
    r = gregor_cli("dump-log", "--files", log)
    assert not any(l.startswith("|") for l in r.stdout.splitlines())

    index = segment_files(server, t, 0, "index")[0]
    timeindex = segment_files(server, t, 0, "timeindex")[0]
    r = gregor_cli("dump-log", "--files", f"{index},{timeindex}")
    assert r.returncode == 0, r.stderr
    assert re.search(r"^offset: \d+ position: \d+$", r.stdout, re.M), r.stdout
    assert re.search(r"^timestamp: 17000000000\d\d offset: \d+$", r.stdout, re.M), r.stdout
    assert "Mismatches" not in r.stderr, r.stderr
    r = gregor_cli("dump-log", "--files", index, "--index-sanity-check")
    assert r.stdout.splitlines()[1] == f"{index} passed sanity check."

    # A group's commit, read back from __consumer_offsets with the offsets decoder.
    group = unique("g")
    c = Consumer({"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(t, 0, 5)], asynchronous=False)
    c.close()
    offsets_logs = [f for f in glob.glob(os.path.join(server.data_dir, "**", "__consumer_offsets-*", "*.log"), recursive=True)
                    if os.path.getsize(f) > 0]
    r = gregor_cli("dump-log", "--offsets-decoder", "--files", ",".join(offsets_logs))
    assert r.returncode == 0, r.stderr
    key = json.dumps({"type": "1", "data": {"group": group, "topic": t, "partition": 0}}, separators=(",", ":"))
    line = next(l for l in r.stdout.splitlines() if f"key: {key}" in l)
    payload = json.loads(line.split(" payload: ", 1)[1])
    assert payload["version"] == "3"
    assert list(payload["data"]) == ["offset", "leaderEpoch", "metadata", "commitTimestamp"]
    assert payload["data"]["offset"] == 5

    r = gregor_cli("dump-log", "--files", os.path.join(server.data_dir, "00000000000000000000.log"))
    assert r.returncode == 1 and "cannot read" in r.stderr
    r = gregor_cli("dump-log")
    assert r.returncode == 1 and 'Missing required argument "[files]"' in r.stderr


def console_produce(bootstrap, topic, text, *flags):
    import subprocess

    from conftest import GREGOR_BIN

    return subprocess.run([GREGOR_BIN, "console-producer", "--bootstrap-server", bootstrap, "--topic", topic, *flags],
                          input=text, capture_output=True, text=True, timeout=60)


def test_console_producer_and_consumer_round_trip_keys_headers_and_positions(make_server):
    # No initial rebalance delay: a group's join would otherwise outlast --timeout-ms.
    server = make_server("group.initial.rebalance.delay.ms=0")
    b = server.bootstrap
    t = unique("console")
    create_topic(b, t, 2)
    r = console_produce(b, t, "h1:a,h2:b\tk1\tone\nNO\tk2\ttwo\n",
                        "--property", "parse.key=true", "--property", "parse.headers=true",
                        "--property", "null.marker=NO")
    assert r.returncode == 0, r.stderr
    r = console_produce(b, t, "k3=three\nk4=four\n", "--property", "parse.key=true", "--property", "key.separator==")
    assert r.returncode == 0, r.stderr

    # Every record, with Kafka's DefaultMessageFormatter columns.
    r = gregor_cli("console-consumer", "--bootstrap-server", b, "--topic", t, "--from-beginning", "--max-messages", "4",
                   "--property", "print.key=true", "--property", "print.headers=true",
                   "--property", "print.partition=true", "--property", "print.offset=true",
                   "--property", "print.timestamp=true")
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().endswith("Processed a total of 4 messages")
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    assert len(rows) == 4
    by_key = {row[4]: row for row in rows}
    assert set(by_key) == {"k1", "k2", "k3", "k4"}
    assert by_key["k1"][3] == "h1:a,h2:b" and by_key["k1"][5] == "one"
    assert by_key["k2"][3] == "NO_HEADERS" and by_key["k2"][5] == "two"
    assert all(re.fullmatch(r"CreateTime:\d{13}", row[0]) for row in rows)
    assert all(re.fullmatch(r"Partition:[01]", row[1]) and re.fullmatch(r"Offset:\d", row[2]) for row in rows)
    # Keys are spread with Kafka's murmur2 partitioner: read back the partition of k1.
    k1_partition = int(by_key["k1"][1].split(":")[1])
    k1_offset = int(by_key["k1"][2].split(":")[1])

    # --include takes a regex over topic names.
    r = gregor_cli("console-consumer", "--bootstrap-server", b, "--include", re.escape(t[:-3]) + ".*",
                   "--from-beginning", "--max-messages", "4")
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == ["four", "one", "three", "two"]

    # --partition/--offset start exactly there; --timeout-ms ends a quiet read with exit 0.
    r = gregor_cli("console-consumer", "--bootstrap-server", b, "--topic", t, "--partition", str(k1_partition),
                   "--offset", str(k1_offset), "--timeout-ms", "1500", "--property", "print.key=true")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "k1\tone"

    # A group: the first run reads 2 and commits them, the second reads the other 2.
    group = unique("console-group")
    first = gregor_cli("console-consumer", "--bootstrap-server", b, "--topic", t, "--group", group,
                       "--from-beginning", "--max-messages", "2")
    assert first.returncode == 0, first.stderr
    second = gregor_cli("console-consumer", "--bootstrap-server", b, "--topic", t, "--group", group,
                        "--from-beginning", "--timeout-ms", "2000")
    assert second.returncode == 0, second.stderr
    assert sorted(first.stdout.splitlines() + second.stdout.splitlines()) == ["four", "one", "three", "two"]
    described = gregor_cli("consumer-groups", "--bootstrap-server", b, "--describe", "--group", group)
    assert described.returncode == 0, described.stderr
    lags = [line.split()[5] for line in described.stdout.splitlines()[2:] if line.strip()]
    assert lags and all(lag == "0" for lag in lags), described.stdout

    # Without --group, the consumer joins a group of its own, as Kafka's does, and commits nothing.
    import subprocess

    from conftest import GREGOR_BIN

    reader = subprocess.Popen([GREGOR_BIN, "console-consumer", "--bootstrap-server", b, "--topic", t, "--timeout-ms", "4000"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def generated_group():
            listed = gregor_cli("consumer-groups", "--bootstrap-server", b, "--list", "--state").stdout
            # The earlier group-less reads left their own groups behind, empty.
            return [l.split() for l in listed.splitlines() if l.startswith("console-consumer-") and "Empty" not in l]
        rows = wait_until(generated_group, timeout=10, what="a live console-consumer-N group")
        assert len(rows) == 1 and rows[0][1] in ("Stable", "CompletingRebalance", "PreparingRebalance"), rows
        name = rows[0][0]
        assert reader.wait(timeout=20) == 0
    finally:
        if reader.poll() is None:
            reader.kill()
    r = gregor_cli("consumer-groups", "--bootstrap-server", b, "--describe", "--group", name, "--offsets")
    assert t not in r.stdout, r.stdout


def test_console_tools_refuse_bad_input_with_kafkas_messages(server):
    b = server.bootstrap
    t = unique("console-bad")
    create_topic(b, t, 1)
    r = console_produce(b, t, "no separator here\n", "--property", "parse.key=true")
    assert r.returncode == 1
    assert "No key separator found on line number 1: 'no separator here'" in r.stderr
    r = gregor_cli("console-consumer", "--bootstrap-server", b, "--topic", t, "--offset", "3")
    assert r.returncode == 1 and "The partition is required when offset is specified." in r.stderr
    r = gregor_cli("console-consumer", "--bootstrap-server", b, "--topic", t, "--partition", "0", "--offset", "-5")
    assert r.returncode == 1 and "The provided offset value '-5' is incorrect." in r.stderr
    r = gregor_cli("console-consumer", "--bootstrap-server", b, "--topic", t, "--group", "g", "--partition", "0")
    assert r.returncode == 1 and "Options group and partition cannot be specified together." in r.stderr
    r = gregor_cli("console-consumer", "--bootstrap-server", b)
    assert r.returncode == 1 and "Exactly one of --include/--topic is required." in r.stderr


def test_consumer_groups_members_state_resets_export_and_delete_offsets(make_server, tmp_path):
    server = make_server("group.initial.rebalance.delay.ms=0")
    b = server.bootstrap
    t = unique("cg")
    create_topic(b, t, 2)
    base = 1_700_000_000_000  # 2023-11-14T22:13:20Z
    produce(b, t, [(0, None, f"a{i}".encode(), base + i * 1000, None) for i in range(5)]
            + [(1, None, f"b{i}".encode(), None, None) for i in range(5)])
    group = unique("cg-group")

    def cg(*args):
        return gregor_cli("consumer-groups", "--bootstrap-server", b, *args)

    c = Consumer({"bootstrap.servers": b, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "partition.assignment.strategy": "range"})
    c.subscribe([t])
    got = 0
    deadline = __import__("time").time() + 30
    while got < 10 and __import__("time").time() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got += 1
    assert got == 10
    c.commit(asynchronous=False)

    r = cg("--describe", "--group", group, "--members", "--verbose")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert re.fullmatch(r"GROUP +CONSUMER-ID +HOST +CLIENT-ID +#PARTITIONS +ASSIGNMENT", lines[1]), lines
    assert lines[2].split()[0] == group and lines[2].split()[4] == "2" and lines[2].endswith(f"{t}(0,1)"), lines
    r = cg("--describe", "--group", group, "--state")
    assert r.returncode == 0, r.stderr
    header, row = r.stdout.strip("\n").splitlines()
    assert header.split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    assert row.split()[0] == group and row.split()[-3:] == ["range", "Stable", "1"], row
    r = cg("--describe", "--all-groups", "--state")
    assert group in r.stdout
    r = cg("--list", "--state", "stable")
    assert r.stdout.splitlines()[0].split() == ["GROUP", "STATE"]
    assert [group, "Stable"] in [l.split() for l in r.stdout.splitlines()], r.stdout
    r = cg("--list", "--state", "Empty")
    assert group not in r.stdout
    r = cg("--reset-offsets", "--group", group, "--topic", t, "--to-earliest", "--execute")
    assert r.returncode == 1 and "can only be reset if the group" in r.stdout
    c.close()

    # dump-log decodes the group's metadata record (key type 2) with its member's assignment.
    offsets_logs = [f for f in glob.glob(os.path.join(server.data_dir, "**", "__consumer_offsets-*", "*.log"), recursive=True)
                    if os.path.getsize(f) > 0]
    r = gregor_cli("dump-log", "--offsets-decoder", "--files", ",".join(offsets_logs))
    key = json.dumps({"type": "2", "data": {"group": group}}, separators=(",", ":"))
    values = [json.loads(l.split(" payload: ", 1)[1]) for l in r.stdout.splitlines() if f"key: {key}" in l]
    stable = [v for v in values if v != "<DELETE>" and v["data"]["members"]]
    assert stable, r.stdout
    data = stable[-1]["data"]
    assert data["protocolType"] == "consumer" and data["protocol"] == "range"
    assert data["members"][0]["subscription"] == {"topics": [t]}
    assert data["members"][0]["assignment"] == {"assignedPartitions": [{"topic": t, "partitions": [0, 1]}]}

    def new_offsets(out):
        return {int(l.split()[2]): int(l.split()[3]) for l in out.splitlines() if l.startswith(group)}

    r = cg("--reset-offsets", "--group", group, "--topic", t, "--shift-by", "-2", "--execute")
    assert r.returncode == 0, r.stdout + r.stderr
    assert new_offsets(r.stdout) == {0: 3, 1: 3}
    r = cg("--reset-offsets", "--group", group, "--topic", f"{t}:0", "--to-datetime", "2023-11-14T22:13:22.000Z", "--dry-run")
    assert new_offsets(r.stdout) == {0: 2}, r.stdout + r.stderr
    r = cg("--reset-offsets", "--group", group, "--topic", t, "--by-duration", "PT1H", "--dry-run")
    assert new_offsets(r.stdout) == {0: 5, 1: 0}, r.stdout + r.stderr
    r = cg("--reset-offsets", "--group", group, "--topic", t, "--to-current", "--dry-run")
    assert new_offsets(r.stdout) == {0: 3, 1: 3}
    r = cg("--reset-offsets", "--group", group, "--topic", t, "--to-earliest", "--dry-run", "--export")
    assert r.stdout.strip().splitlines() == [f"{t},0,0", f"{t},1,0"]
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{t},0,4\n{t},1,1\n")
    r = cg("--reset-offsets", "--group", group, "--from-file", str(plan), "--execute")
    assert new_offsets(r.stdout) == {0: 4, 1: 1}, r.stdout + r.stderr
    described = cg("--describe", "--group", group, "--offsets")
    current = {int(l.split()[2]): int(l.split()[3]) for l in described.stdout.splitlines() if l.startswith(group)}
    assert current == {0: 4, 1: 1}

    r = cg("--delete-offsets", "--group", group, "--topic", t)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[0] == f"Request succeed for deleting offsets with topic {t} group {group}"
    assert re.search(rf"^{re.escape(t)} +0 +Successful *$", r.stdout, re.M), r.stdout
    r = cg("--describe", "--group", group)
    assert t not in r.stdout

    r = cg("--delete-offsets", "--group", group)
    assert r.returncode == 1 and "Option [delete-offsets] takes the following options: [topic], [group]" in r.stderr
    r = cg("--reset-offsets", "--group", group, "--topic", t, "--shift-by", "1", "--to-current")
    assert r.returncode == 1 and "takes exactly one of these options" in r.stderr
    r = cg("--reset-offsets", "--group", group, "--topic", t, "--by-duration", "ten minutes", "--dry-run")
    assert r.returncode == 1 and "Error parsing duration 'ten minutes'" in r.stdout


def test_producer_and_consumer_perf_tests_print_kafkas_lines(server):
    b = server.bootstrap
    t = unique("perf")
    create_topic(b, t, 2)
    r = gregor_cli("producer-perf-test", "--topic", t, "--num-records", "2000", "--record-size", "100",
                   "--throughput", "-1", "--producer-props", f"bootstrap.servers={b}", "acks=all")
    assert r.returncode == 0, r.stderr
    final = r.stdout.splitlines()[-1]
    assert re.fullmatch(
        r"2000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, [\d.]+ ms max latency, "
        r"\d+ ms 50th, \d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th\.", final), final
    r = gregor_cli("get-offsets", "--bootstrap-server", b, "--topic", t)
    assert sum(int(l.rsplit(":", 1)[1]) for l in r.stdout.splitlines()) == 2000

    r = gregor_cli("consumer-perf-test", "--bootstrap-server", b, "--topic", t, "--messages", "2000")
    assert r.returncode == 0, r.stderr
    header, row = r.stdout.splitlines()
    assert header == ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                      "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
    cols = row.split(", ")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}", cols[0]) and cols[4] == "2000", row
    assert cols[2] == "0.1907", row  # 2000 x 100 bytes in MiB

    r = gregor_cli("consumer-perf-test", "--bootstrap-server", b, "--topic", t, "--messages", "5000",
                   "--timeout", "500", "--hide-header")
    assert r.returncode == 0
    assert r.stdout.startswith("WARNING: Exiting before consuming the expected number of messages: timeout (500 ms) exceeded.")
    r = gregor_cli("producer-perf-test", "--topic", t, "--num-records", "10", "--record-size", "10", "--throughput", "-1")
    assert r.returncode == 1 and "Either --producer-props or --producer.config must be specified." in r.stderr


def test_every_admin_tool_takes_command_config_and_admin_config_and_help_says_what_each_is_for(server, tmp_path):
    b = server.bootstrap
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=PLAINTEXT\n")
    t = unique("cfg")
    create_topic(b, t, 1)
    for flag in ("--command-config", "--admin.config"):
        for args in (["topics", "--bootstrap-server", b, "--list"],
                     ["consumer-groups", "--bootstrap-server", b, "--list"],
                     ["configs", "--bootstrap-server", b, "--describe", "--entity-type", "topics", "--entity-name", t],
                     ["leader-election", "--bootstrap-server", b, "--election-type", "preferred", "--topic", t, "--partition", "0"],
                     ["get-offsets", "--bootstrap-server", b, "--topic", t],
                     ["broker-api-versions", "--bootstrap-server", b]):
            r = gregor_cli(*args, flag, str(config))
            assert "unexpected argument" not in r.stderr, (args, flag, r.stderr)
            assert r.returncode == 0 or "Valid replica already elected" in r.stdout + r.stderr, (args, flag, r.stdout, r.stderr)
    r = gregor_cli("get-offsets", "--bootstrap-server", b, "--topic", t, "--admin.config", str(tmp_path / "missing"))
    assert r.returncode == 1 and "missing" in r.stderr

    r = gregor_cli("--help")
    assert r.returncode == 0
    for command, words in {
        "configs": "topics, brokers, broker loggers, clients",
        "console-producer": "kafka-console-producer.sh",
        "console-consumer": "kafka-console-consumer.sh",
        "get-offsets": "kafka-get-offsets.sh",
        "delete-records": "kafka-delete-records.sh",
        "broker-api-versions": "kafka-broker-api-versions.sh",
        "producer-perf-test": "kafka-producer-perf-test.sh",
        "consumer-perf-test": "kafka-consumer-perf-test.sh",
        "dump-log": "kafka-dump-log.sh",
    }.items():
        line = next((l for l in r.stdout.splitlines() if l.strip().startswith(command + " ")), "")
        assert words in line, (command, line)
    r = gregor_cli("consumer-groups", "--bootstrap-server", b, "--describe", "--all-groups", "--state")
    assert r.returncode == 0 and "to-latest" not in r.stderr
