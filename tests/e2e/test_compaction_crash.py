"""kill -9 of a running `gregor server` in the middle of a log cleaning (issue 12).

The cleaner rewrites a group of segments into `.cleaned/`, renames the result to `.swap` (its
commit point) and then into place (docs/formats.md). A SIGKILL anywhere in that must leave a
log that reopens to either the old or the new segments: after the restart every record a
consumer reads is the very record produced at that offset, every key's latest value is still
there, the log end is unchanged, and the next cleanings finish the job.

The moments of the kills are random from a seed, printed, so a failing run can be repeated:
GREGOR_CLEAN_KILL_SEED=<seed> pytest tests/e2e/test_compaction_crash.py
"""

import os
import random
import signal
import time

from confluent_kafka import Consumer, TopicPartition

from conftest import wait_until
from test_compaction import compacted_config, produce, read_all
from test_data_plane import create_topic

SEED = int(os.environ.get("GREGOR_CLEAN_KILL_SEED", "20261201"))
KILLS = 4
# Kills go on past KILLS until one lands inside a rewrite: a cleaning of this log's dirty part
# takes tens of milliseconds (below the cleaner throttle's 300 ms check period, as in Kafka's
# Throttler, so the throttle does not stretch it), and a kill can land after it. CI once saw
# all four land after.
MAX_KILLS = 20
KEYS = 40


def cleaning_files(partition_dir):
    """The cleaner's work in progress: the `.cleaned/` directory or a `.swap` segment."""
    try:
        names = os.listdir(partition_dir)
    except FileNotFoundError:
        return []
    return [n for n in names if n == ".cleaned" or n.endswith(".swap")]


def log_end(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "log-end"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def check_survivors(records, produced, latest, end, read_end):
    """Every record read is the one produced at its offset; each key's latest is there."""
    assert read_end == end, f"log end {read_end} after the restart, {end} acknowledged"
    last = -1
    for offset, key, value in records:
        assert offset > last, f"offsets increase ({offset} after {last})"
        last = offset
        assert produced.get(offset) == (key, value), (
            f"offset {offset} reads {(key, value)!r:.90}, produced {produced.get(offset)!r:.90}"
        )
    by_offset = {o for o, _, _ in records}
    for key, offset in latest.items():
        assert offset in by_offset, f"latest value of {key!r} (offset {offset}) is gone"


def test_kill_9_in_the_middle_of_a_cleaning_loses_nothing(make_server):
    print(f"GREGOR_CLEAN_KILL_SEED={SEED}")
    rng = random.Random(SEED)
    # A slow cleaner (60 kB/s), checking often: a cleaning of the dirty log lasts seconds.
    server = make_server(
        "log.cleaner.backoff.ms=100",
        "log.cleaner.io.max.bytes.per.second=60000",
    )
    topic = "clean-kill"
    create_topic(server.bootstrap, topic, config=compacted_config(
        segment_bytes="16384", delete_retention_ms="86400000",
    ))
    partition_dir = os.path.join(server.data_dir, "logs", f"{topic}-0")
    produced = {}
    latest = {}
    round_no = 0
    caught = []

    def write_round(n_rounds):
        nonlocal round_no
        messages = []
        for _ in range(n_rounds):
            for k in range(KEYS):
                messages.append((f"k{k}".encode(), f"k{k}-r{round_no}-".encode() + os.urandom(400)))
            round_no += 1
        offsets = produce(server.bootstrap, topic, messages, **{"batch.num.messages": 20})
        for (key, value), offset in zip(messages, offsets):
            produced[offset] = (key, value)
            latest[key] = offset

    write_round(25)
    kills = 0
    for attempt in range(60):
        if kills >= MAX_KILLS or (kills >= KILLS and caught):
            break
        # More versions of every key, so there is dirty log to clean.
        write_round(15)
        end = log_end(server.bootstrap, topic)
        try:
            wait_until(lambda: cleaning_files(partition_dir), timeout=5, interval=0.005,
                       what=f"a cleaning in progress (kill {kills + 1})")
        except AssertionError:
            # That cleaning was over before we looked: write more and look again.
            print(f"attempt {attempt + 1}: no cleaning seen in progress; writing more")
            continue
        # Early in the rewrite most of the time (it lasts tens of ms), sometimes later.
        delay = rng.uniform(0.0, 0.03) if rng.random() < 0.75 else rng.uniform(0.0, 0.5)
        time.sleep(delay)
        in_progress = cleaning_files(partition_dir)
        server.stop(signal.SIGKILL)
        kills += 1
        print(f"kill {kills}: SIGKILL {delay:.3f} s into a cleaning; then on disk: {in_progress}")
        caught += in_progress
        server.start()
        records = read_all(server.bootstrap, topic)
        check_survivors(records, produced, latest, end, log_end(server.bootstrap, topic))

    assert kills >= KILLS, f"only {kills} kills landed during a cleaning"
    # At least one kill hit a group being rewritten (its files on disk at the kill).
    assert caught, "no kill landed inside a segment group's rewrite"
    # The cleanings the kills interrupted finish (at full speed now, after a last SIGKILL):
    # each key once, at its latest offset.
    server.stop(signal.SIGKILL)
    at = server.args.index("log.cleaner.io.max.bytes.per.second=60000")
    del server.args[at - 1:at + 1]
    server.start()
    def compacted():
        records = read_all(server.bootstrap, topic)
        check_survivors(records, produced, latest, max(produced) + 1, log_end(server.bootstrap, topic))
        keys = [k for _, k, _ in records]
        # The active segment is never cleaned: only keys before it must be unique.
        return len(records) < len(produced) // 4 and len(set(keys)) == KEYS
    wait_until(compacted, timeout=90, interval=1, what="the log compacted after the kills")
    assert "cleaned log" in server.log_text()
