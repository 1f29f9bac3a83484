"""`/metrics` of a real `gregor server` after real traffic (librdkafka produce, a consumer
group that commits): the series are named as the Prometheus JMX exporter's Kafka rules name
them, their values follow the traffic, and every series docs/grafana-dashboard.json queries
is served."""

import json
import os
import re
import urllib.request
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import wait_until

DASHBOARD = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "grafana-dashboard.json")
# PromQL words that look like series names but are functions, keywords or label names.
NOT_SERIES = {"sum", "by", "rate", "max", "histogram_quantile", "without", "on"}


def scrape(server):
    url = f"http://127.0.0.1:{server.admin_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return r.read().decode()


def samples(text):
    """{(name, frozenset(labels)): value} of every sample line."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)", line)
        assert m, f"not a sample line: {line!r}"
        labels = frozenset(re.findall(r'([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def value(parsed, name, **labels):
    want = set(labels.items())
    found = [v for (n, ls), v in parsed.items() if n == name and want <= set(ls)
             and ("topic" in labels or not any(k == "topic" for k, _ in ls))]
    assert found, f"no {name}{labels}"
    return sum(found)


def dashboard_series():
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    names = set()
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [v.get("query", {}).get("query", "") if isinstance(v.get("query"), dict) else v.get("query", "")
              for v in dashboard.get("templating", {}).get("list", [])]
    assert exprs
    for expr in exprs:
        # Drop label matchers and ranges, keep identifiers that are not PromQL's own.
        bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\"[^\"]*\"", " ", expr)
        bare = re.sub(r"\b(by|without|on)\s*\([^)]*\)", " ", bare)
        bare = re.sub(r"\blabel_values\(\s*([^,)]+)[^)]*\)", r"\1", bare)
        for word in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", bare):
            if word not in NOT_SERIES:
                names.add(word)
    return names


def test_series_follow_traffic_and_cover_the_dashboard(make_server):
    server = make_server("group.initial.rebalance.delay.ms=0")
    topic = f"metrics-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(timeout=30)
    wait_until(lambda: all(p.leader >= 0 for p in admin.list_topics(topic, timeout=10).topics[topic].partitions.values()),
               what="leaders")
    producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 5})
    for i in range(50):
        producer.produce(topic, value=b"x" * 100, partition=i % 2)
    assert producer.flush(30) == 0

    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = 0
    while got < 30:
        m = consumer.poll(10)
        assert m is not None, "consumer got nothing"
        if m.error():
            continue
        got += 1
    # Commit 30 of the 50: a lag of 20 over the topic.
    consumer.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in consumer.committed(consumer.assignment(), timeout=10)}
    expected_lag = 50 - sum(committed.values())

    text = scrape(server)
    parsed = samples(text)
    names = {n for n, _ in parsed}
    assert value(parsed, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(parsed, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert value(parsed, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(parsed, "kafka_server_replicamanager_leadercount") >= 2
    assert value(parsed, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 50
    assert value(parsed, "kafka_server_brokertopicmetrics_bytesin_total", topic=topic) > 50 * 100
    assert value(parsed, "kafka_server_brokertopicmetrics_bytesout_total", topic=topic) > 30 * 100
    assert value(parsed, "kafka_server_brokertopicmetrics_messagesin_total") >= 50
    assert value(parsed, "kafka_network_requestmetrics_totaltimems_count", request="Produce") >= 1
    assert value(parsed, "kafka_network_requestmetrics_requests_total", request="FetchConsumer") >= 1

    def lag():
        p = samples(scrape(server))
        found = [v for (n, ls), v in p.items()
                 if n == "kafka_consumergroup_lag_sum" and ("consumergroup", group) in ls and ("topic", topic) in ls]
        return found[0] if found else None

    assert wait_until(lambda: lag() == expected_lag or None, what=f"lag {expected_lag}")
    consumer.close()

    missing = sorted(s for s in dashboard_series() if s not in names)
    assert not missing, f"the dashboard queries series /metrics does not serve: {missing}"
    # Histograms are Prometheus histograms with the exporter's names.
    assert "kafka_network_requestmetrics_totaltimems_bucket" in names
    assert re.search(r'^# TYPE kafka_network_requestmetrics_totaltimems histogram$', text, re.M)
