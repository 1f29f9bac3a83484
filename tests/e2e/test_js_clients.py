"""Pure-JavaScript Kafka clients against a gregor server (issue 16): kafkajs 2.2.4, which
negotiates Kafka 2.x versions through ApiVersions, and @platformatic/kafka, which implements
only the versions of Kafka 3.5+ (FindCoordinator v4+ batched keys, OffsetFetch v8+ batched
groups, Fetch v13+ by topic id, JoinGroup v6+) and so fails on a broker offering 2.8's ranges.

Each program (tests/e2e/clients/js/*.mjs) creates a topic with its admin client, produces
with keys to fixed partitions, consumes in a group with commits, and reads the group and its
committed offsets back; it prints one JSON line checked here. scripts/test.sh installs the
packages (`npm ci` from the committed package-lock.json).
"""

import json
import os
import shutil
import subprocess

import pytest

JS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clients", "js")
COUNT = 30


def run_node(program, *args):
    node = shutil.which("node")
    assert node, "node is not installed (scripts/test.sh installs nodejs and npm)"
    assert os.path.isdir(os.path.join(JS, "node_modules")), (
        f"run `npm ci` in {JS} (scripts/test.sh does)"
    )
    done = subprocess.run([node, program, *args], cwd=JS, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{program} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def expected_values():
    return sorted(f"v{i}" for i in range(COUNT))


@pytest.mark.parametrize("program", ["kafkajs.mjs", "platformatic.mjs"])
def test_js_client_round_trip(server, program):
    topic, group = f"js-{program.split('.')[0]}", f"js-group-{program.split('.')[0]}"
    out = run_node(program, server.bootstrap, topic, group, str(COUNT))
    assert out["consumed"] == expected_values()
    assert group in out["groups"]
    # Messages went to partitions i % 3; each consumed and committed up to its end.
    assert out["committed"] == {f"{topic}-{p}": COUNT // 3 for p in range(3)}
    if program == "kafkajs.mjs":
        assert out["partitions"] == 3
        assert out["state"] == "Empty"
