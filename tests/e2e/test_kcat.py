"""kcat (Debian's, on librdkafka 2.0.2) reads our metadata."""

import json
import subprocess

from confluent_kafka.admin import AdminClient, NewTopic

from conftest import wait_until


def kcat_metadata(bootstrap, topic=None):
    args = ["kcat", "-b", bootstrap, "-L", "-J", "-m", "10"]
    if topic:
        args += ["-t", topic]
    out = subprocess.run(args, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_kcat_lists_brokers_and_topics(server):
    a = AdminClient({"bootstrap.servers": server.bootstrap})
    a.create_topics([NewTopic("kcat-topic", num_partitions=3, replication_factor=1)])["kcat-topic"].result(timeout=30)

    def listed():
        md = kcat_metadata(server.bootstrap, "kcat-topic")
        t = [t for t in md["topics"] if t["topic"] == "kcat-topic"]
        return md if t and len(t[0]["partitions"]) == 3 and all(p["leader"] == 0 for p in t[0]["partitions"]) else None

    md = wait_until(listed, what="kcat sees 3 partitions")
    assert md["brokers"] == [{"id": 0, "name": f"127.0.0.1:{server.kafka_ports[0]}"}]
    assert md["controllerid"] == 0
