"""Sarama (Go; Debian's golang-github-shopify-sarama-dev 1.22) against a gregor server
(issue 16): an independent implementation that sends no ApiVersions and picks each request's
version from the Kafka release it is told (-version), so the broker must serve exactly those
versions. tests/e2e/clients/sarama/main.go creates a topic, describes it, adds partitions,
describes its config, produces with acks=all, consumes in a group with commits, lists and
describes groups, reads the committed offsets back and deletes the topic; it prints one JSON
line checked here. Built here with Debian's Go and sarama (GOPATH mode, no network).
"""

import json
import os
import shutil
import subprocess

import pytest

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clients", "sarama")
GOPATH = "/usr/share/gocode"
COUNT = 30


@pytest.fixture(scope="module")
def sarama_bin(tmp_path_factory):
    go = shutil.which("go")
    assert go, "go is not installed (scripts/test.sh installs golang-go)"
    assert os.path.isdir(os.path.join(GOPATH, "src", "github.com", "Shopify", "sarama")), (
        "Debian's sarama is missing (scripts/test.sh installs golang-github-shopify-sarama-dev)"
    )
    out = str(tmp_path_factory.mktemp("sarama") / "sarama-e2e")
    env = {**os.environ, "GOPATH": GOPATH, "GO111MODULE": "off", "GOFLAGS": "",
           "GOCACHE": str(tmp_path_factory.mktemp("gocache"))}
    built = subprocess.run([go, "build", "-o", out, "."], cwd=SRC, env=env,
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-4000:]
    return out


# Sarama 1.22 knows releases up to 2.2; CreatePartitions (which the program calls) is 1.0+.
@pytest.mark.parametrize("version", ["1.0.0", "2.1.0"])
def test_sarama_round_trip(server, sarama_bin, version):
    topic, group = f"sarama-{version}", f"sarama-group-{version}"
    done = subprocess.run(
        [sarama_bin, "-bootstrap", server.bootstrap, "-topic", topic, "-group", group,
         "-count", str(COUNT), "-version", version],
        capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, f"sarama {version} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["consumed"] == sorted(f"v{i}" for i in range(COUNT))
    assert group in out["groups"]
    assert out["committed"] == {f"{topic}-{p}": COUNT // 3 for p in range(3)}, out["committed"]
    assert out["partitions"] == 3
    assert out["configs"] > 0
    assert out["state"] == "Empty"
