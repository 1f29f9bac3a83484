"""The web console against real `gregor` processes, over real HTTP (urllib): the placement
matrix of a topic is the one Metadata reports (leader in the right broker column, replicas in
order), the create preview is the assignment the topic then gets and creates nothing, actions
go through Kafka's checks and show Kafka's code and message, a stopped broker's cells turn
out of sync, the group page shows the lag `gregor consumer-groups --describe` shows, and the
znode browser shows the store."""

import base64
import html
import html.parser
import os
import re
import signal
import struct
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

from confluent_kafka import Consumer, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import GREGOR_BIN, free_port, free_ports, gregor_cli, wait_for_port, wait_until

IDS = [1001, 1002, 1003]
RACKS = ["a", "a", "b"]


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def get(port, path, expect=200):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
            assert r.status == expect, (path, r.status)
            return r.read().decode()
    except urllib.error.HTTPError as e:
        assert e.code == expect, (path, e.code, e.read().decode())
        return e.read().decode()


def post(port, path, fields, headers=None, follow=True):
    """(status, body, location) of a form post."""
    data = urllib.parse.urlencode(fields).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method="POST",
                                 headers={"Content-Type": "application/x-www-form-urlencoded", **(headers or {})})
    opener = urllib.request.build_opener() if follow else urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req, timeout=60) as r:
            return r.status, r.read().decode(), r.headers.get("Location")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), e.headers.get("Location")


def csrf(port):
    page = get(port, "/topics/new")
    return re.search(r'name="csrf" value="([0-9a-f]{32})"', page).group(1)


def matrix(page):
    """{partition: (replicas, leader, {broker: role})} of the page's placement matrix."""
    rows = {}
    for m in re.finditer(r'<tr data-partition="(\d+)" data-replicas="([\d,]*)" data-leader="(-?\d+)">(.*?)</tr>', page):
        roles = {int(b): r for b, r in re.findall(r'<td class="cell [^"]*" data-broker="(\d+)" data-role="([a-z-]+)"', m.group(4))}
        replicas = [int(x) for x in m.group(2).split(",") if x]
        rows[int(m.group(1))] = (replicas, int(m.group(3)), roles)
    return rows


def column_order(page):
    head = re.search(r'<table class="matrix" id="placement"><thead>(.*?)</thead>', page, re.S).group(1)
    return [int(b) for b in re.findall(r'<th class="broker[^"]*" data-broker="(\d+)"', head)]


def metadata(admin, topic):
    t = admin.list_topics(topic=topic, timeout=10).topics[topic]
    assert t.error is None, t.error
    return {p.id: (list(p.replicas), p.leader, sorted(p.isrs)) for p in t.partitions.values()}


def start_dev_cluster(tmp_path):
    ports = free_ports(len(IDS))
    admin = free_port()
    log = open(tmp_path / "cluster.log", "ab")
    proc = subprocess.Popen(
        [GREGOR_BIN, "dev-cluster", "--brokers", str(len(IDS)), "--port", str(ports[0]),
         "--data-dir", str(tmp_path / "cluster"), "--broker-ids", ",".join(map(str, IDS)),
         "--racks", ",".join(RACKS), "--override", f"admin.listener=127.0.0.1:{admin}",
         "--override", "file.delete.delay.ms=1000"],
        stdin=subprocess.PIPE, stdout=log, stderr=log)
    for p in ports + [admin]:
        wait_for_port(p, proc)
    return proc, ",".join(f"127.0.0.1:{p}" for p in ports), admin


def test_placement_matrix_preview_actions_and_a_stopped_broker(tmp_path):
    proc, bootstrap, port = start_dev_cluster(tmp_path)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        md = admin.list_topics(timeout=10)
        wait_until(lambda: len(admin.list_topics(timeout=10).brokers) == 3, what="3 brokers")

        cluster = get(port, "/")
        assert f'<dd id="cluster-id">{md.cluster_id}</dd>' in cluster
        assert re.search(rf'<dd id="controller">broker <strong>{md.controller_id}</strong>, epoch \d+', cluster), cluster
        for b in IDS:
            assert f'<tr data-broker="{b}">' in cluster
        assert "embedded store in" in cluster
        assert '<script src="/assets/console.js">' in cluster and "https://" not in cluster
        assert "fetch(" in get(port, "/assets/console.js")

        token = csrf(port)
        topic = f"placed-{uuid.uuid4().hex[:6]}"
        form = {"csrf": token, "name": topic, "partitions": "6", "replication_factor": "2", "configs": "retention.ms=3600000"}

        # The preview: the controller's assignment, nothing created.
        status, page, _ = post(port, "/topics/new", {**form, "op": "preview"})
        assert status == 200 and 'id="preview"' in page, page
        preview = matrix(page)
        assert sorted(preview) == list(range(6))
        assert f"would create <strong>{topic}</strong> with 6 partitions of 2 replicas," in page
        for replicas, leader, roles in preview.values():
            assert len(set(replicas)) == 2 and leader == replicas[0]
            assert set(roles) == set(replicas) and roles[leader] == "leader"
            assert {RACKS[IDS.index(r)] for r in replicas} == {"a", "b"}, "rack-aware: one replica per rack"
        assert column_order(page) == [1001, 1002, 1003], "columns grouped by rack"
        assert topic not in admin.list_topics(timeout=10).topics, "a preview creates nothing"
        _, page, _ = post(port, "/topics/new", {**form, "partitions": "1", "replication_factor": "1", "op": "preview"})
        assert "with 1 partition of 1 replica," in page, page

        # Refusals carry Kafka's code and message, next to the form.
        status, page, _ = post(port, "/topics/new", {**form, "replication_factor": "5", "op": "preview"})
        assert status == 200 and "INVALID_REPLICATION_FACTOR (38)" in page, page
        assert 'id="create-topic"' in page
        status, page, _ = post(port, "/topics/new", {**form, "configs": "retention.ms=forever", "op": "preview"})
        assert 'data-error-code="40"' in page, page  # INVALID_CONFIG
        # CSRF: no token, or another site's form, is refused and changes nothing.
        status, body, _ = post(port, "/topics/new", {**form, "csrf": "0" * 32, "op": "create"})
        assert status == 403, body
        status, body, _ = post(port, "/topics/new", {**form, "op": "create"}, headers={"Origin": "http://evil.example"})
        assert status == 403, body
        assert topic not in admin.list_topics(timeout=10).topics

        # Create: redirected to the topic's page; it gets the assignment previewed.
        status, _, location = post(port, "/topics/new", {**form, "op": "create"}, follow=False)
        assert status == 303 and location.startswith(f"/topics/{topic}?notice="), (status, location)
        wait_until(lambda: (lambda m: len(m) == 6 and all(l >= 0 and len(isr) == 2 for _, l, isr in m.values()))(metadata(admin, topic)),
                   timeout=30, what="topic online")
        actual = metadata(admin, topic)
        assert {p: r for p, (r, _, _) in actual.items()} == {p: r for p, (r, _, _) in preview.items()}, \
            "the preview is the assignment the topic got"

        page = get(port, location)
        assert f"Created topic {topic}." in page
        # The topic id in Kafka's form (Uuid.toString, URL-safe base64), as clients see it.
        tid = admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=10).topic_id
        raw = struct.pack(">qq", tid.get_most_significant_bits(), tid.get_least_significant_bits())
        kafka_form = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        assert f"<dt>Topic id</dt><dd>{kafka_form}</dd>" in page, page
        assert f"TopicId: {kafka_form}\t" in gregor_cli("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", topic).stdout
        shown = matrix(page)
        for p, (replicas, leader, isr) in actual.items():
            s_replicas, s_leader, roles = shown[p]
            assert s_replicas == replicas and s_leader == leader
            assert roles[leader] == "leader", f"partition {p}: leader {leader} marked in its own column"
            for b in replicas:
                assert roles[b] == ("leader" if b == leader else "follower")
            assert set(roles) == set(replicas), "no cell outside the replicas"
        assert re.search(r'<tr data-config="retention.ms" class="source-topic"><td>retention.ms</td><td>3600000</td>', page)
        # The live part alone, as the script polls it.
        fragment = get(port, f"/topics/{topic}?fragment=1")
        assert "<html" not in fragment and 'id="placement"' in fragment
        topics = get(port, f"/topics?filter={topic[:10]}")
        assert f'<tr data-name="{topic}">' in topics
        assert "data-name=" not in get(port, "/topics?filter=no-such-topic-name")

        # Actions on the topic page.
        status, _, location = post(port, f"/topics/{topic}/partitions", {"csrf": token, "count": "8"}, follow=False)
        assert status == 303, location
        wait_until(lambda: len(metadata(admin, topic)) == 8, timeout=30, what="8 partitions")
        status, page, _ = post(port, f"/topics/{topic}/partitions", {"csrf": token, "count": "2"})
        assert "INVALID_PARTITIONS (37)" in page, page
        status, _, _ = post(port, f"/topics/{topic}/config", {"csrf": token, "name": "retention.ms", "value": "7200000"}, follow=False)
        assert status == 303
        assert re.search(r'data-config="retention.ms" class="source-topic"><td>retention.ms</td><td>7200000<', get(port, f"/topics/{topic}"))
        status, page, _ = post(port, f"/topics/{topic}/config", {"csrf": token, "name": "no.such.config", "value": "1"})
        assert "data-error-code=" in page and 'id="alter-config"' in page, page

        # Preferred leader election: every partition is led by its preferred replica already.
        status, page, _ = post(port, f"/topics/{topic}/elect", {"csrf": token})
        assert status == 200 and "0 partition(s) moved to their preferred leader, 8 led by it already" in page, \
            re.findall(r'<p class="(?:error|notice)".*?</p>', page)

        # A broker stops: its cells go out of sync, its column is marked down.
        victim = 1003
        started = time.time()
        proc.stdin.write(f"stop {victim}\n".encode())
        proc.stdin.flush()

        def victim_out():
            rows = matrix(get(port, f"/topics/{topic}?fragment=1"))
            roles = [r[2].get(victim) for r in rows.values() if victim in r[0]]
            return roles and all(r in ("out-of-sync", "offline") for r in roles)

        wait_until(victim_out, timeout=30, interval=0.5, what=f"broker {victim}'s cells out of sync")
        print(f"broker {victim} shown out of sync {time.time() - started:.1f} s after the stop")
        page = get(port, f"/topics/{topic}")
        assert f'<th class="broker down" data-broker="{victim}">' in page
        for replicas, leader, roles in matrix(page).values():
            assert leader != victim and roles[leader] == "leader"
        # The stopped broker was the preferred leader of some partitions: those cannot move back.
        assert any(replicas[0] == victim for replicas, _, _ in matrix(page).values())
        status, page, _ = post(port, f"/topics/{topic}/elect", {"csrf": token})
        assert "PREFERRED_LEADER_NOT_AVAILABLE (80)" in page, re.findall(r'<p class="error".*?</p>', page)

        # Delete, confirmed by the name.
        status, page, _ = post(port, f"/topics/{topic}/delete", {"csrf": token, "confirm": "wrong"})
        assert "Type the topic" in page
        assert topic in admin.list_topics(timeout=10).topics
        status, page, location = post(port, f"/topics/{topic}/delete", {"csrf": token, "confirm": topic}, follow=False)
        assert status == 303 and location.startswith("/topics"), re.findall(r'<p class="error".*?</p>', page)
        wait_until(lambda: topic not in admin.list_topics(timeout=10).topics, timeout=30, what="topic deleted")
        get(port, f"/topics/{topic}", expect=404)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_group_lag_matches_the_cli_and_the_znode_browser(make_server):
    server = make_server("group.initial.rebalance.delay.ms=0")
    port = server.admin_port
    topic, group = f"lag-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(timeout=30)
    wait_until(lambda: all(p.leader >= 0 for p in admin.list_topics(topic, timeout=10).topics[topic].partitions.values()),
               what="leaders")
    p = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(10):
        p.produce(topic, value=b"v", partition=i % 2)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "client.id": "console-client"})
    c.subscribe([topic])
    got = 0
    while got < 4:
        m = c.poll(10)
        assert m is not None
        if not m.error():
            got += 1
            if got == 4:
                c.commit(message=m, asynchronous=False)
    try:
        out = gregor_cli("consumer-groups", "--bootstrap-server", server.bootstrap, "--describe", "--group", group)
        assert out.returncode == 0, out.stderr
        cli = {}
        lines = [l for l in out.stdout.splitlines() if l.strip()]
        assert lines[0].split()[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"], out.stdout
        for cols in (l.split() for l in lines[1:]):
            cli[int(cols[2])] = (cols[3], cols[4], cols[5])
        page = get(port, f"/groups/{urllib.parse.quote(group)}")
        shown = {int(p): (c_, e, l) for p, c_, e, l in re.findall(
            rf'<tr data-topic="{topic}" data-partition="(\d+)"><td>{topic}</td><td>\d+</td><td>([\d–-]+)</td><td>(\d+)</td><td class="lag">([\d–-]+)</td>', page)}
        norm = {p: tuple("-" if v == "–" else v for v in vals) for p, vals in shown.items()}
        assert norm == cli, (norm, out.stdout)
        total = sum(int(l) for _, _, l in cli.values() if l != "-")
        assert re.search(rf'<tr data-topic="{topic}"><td>{topic}</td><td class="lag">{total}</td>', page), page
        assert "console-client" in page and '<dd id="group-state">Stable</dd>' in page
        groups = get(port, "/groups")
        assert f'<tr data-name="{group}">' in groups
    finally:
        c.close()

    # The znode browser: a broker's registration, pretty-printed, with its stat.
    ids = get(port, "/znodes/brokers/ids")
    assert re.search(r'<ul id="children"><li><a href="/znodes/brokers/ids/(\d+)">', ids), ids
    broker_id = re.search(r'href="/znodes/brokers/ids/(\d+)"', ids).group(1)
    node = get(port, f"/znodes/brokers/ids/{broker_id}")
    data = html.unescape(re.search(r'<pre id="znode-data" class="json">(.*?)</pre>', node, re.S).group(1))
    assert '"host": "127.0.0.1"' in data
    assert "(ephemeral)" in node
    get(port, "/znodes/no/such/node", expect=404)


def test_group_offset_reset_previews_refuses_a_live_group_and_commits(make_server):
    server = make_server("group.initial.rebalance.delay.ms=0")
    port = server.admin_port
    topic, group = f"rst-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(timeout=30)
    wait_until(lambda: all(p.leader >= 0 for p in admin.list_topics(topic, timeout=10).topics[topic].partitions.values()),
               what="leaders")
    p = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(10):
        p.produce(topic, value=b"v", partition=i % 2)
    assert p.flush(30) == 0

    def committed():
        """{partition: CURRENT-OFFSET} as `gregor consumer-groups --describe` shows it."""
        out = gregor_cli("consumer-groups", "--bootstrap-server", server.bootstrap, "--describe", "--group", group)
        assert out.returncode == 0, out.stderr
        rows = [l.split() for l in out.stdout.splitlines()[1:] if l.strip()]
        return {int(cols[2]): cols[3] for cols in rows if cols[1] == topic}

    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got = 0
    while got < 10:
        m = c.poll(10)
        assert m is not None
        if not m.error():
            got += 1
    c.commit(asynchronous=False)
    assert committed() == {0: "5", 1: "5"}
    path = f"/groups/{urllib.parse.quote(group)}/reset"
    form = {"csrf": csrf(port), "topic": topic, "to": "earliest", "op": "execute"}
    try:
        # A live group is refused with Kafka's message, and nothing changes.
        page = get(port, f"/groups/{urllib.parse.quote(group)}")
        assert 'id="reset-offsets"' in page, page
        status, page, _ = post(port, path, form)
        assert status == 200, page
        assert f"Assignments can only be reset if the group '{group}' is inactive, but the current state is Stable." in html.unescape(page), page
        assert committed() == {0: "5", 1: "5"}
    finally:
        c.close()
    wait_until(lambda: '<dd id="group-state">Empty</dd>' in get(port, f"/groups/{urllib.parse.quote(group)}"),
               what="the group empty after its member left")

    # The preview (--dry-run): an offset past the end is kept at the end, with Kafka's notice;
    # nothing is committed.
    status, page, _ = post(port, path, {**form, "to": "offset", "offset": "100", "op": "preview"})
    assert status == 200 and 'id="reset-preview"' in page, page
    shown = dict(re.findall(rf'<tr data-topic="{topic}" data-partition="(\d+)">.*?<td class="new-offset">(\d+)</td>', page))
    assert shown == {"0": "5", "1": "5"}, page
    assert f"New offset (100) is higher than latest offset for topic partition {topic}-0. Value will be set to 5" in page
    status, page, _ = post(port, path, {**form, "to": "offset", "offset": "2", "op": "preview"})
    assert dict(re.findall(rf'<tr data-topic="{topic}" data-partition="(\d+)">.*?<td class="new-offset">(\d+)</td>', page)) == {"0": "2", "1": "2"}
    assert committed() == {0: "5", 1: "5"}
    # Bad input is refused next to the form.
    status, page, _ = post(port, path, {**form, "to": "offset", "offset": "x"})
    assert "The offset must be a whole number." in page and committed() == {0: "5", 1: "5"}
    status, page, _ = post(port, path, {**form, "topic": "no-such-topic"})
    assert "UNKNOWN_TOPIC_OR_PARTITION (3)" in page and committed() == {0: "5", 1: "5"}
    status, _, _ = post(port, path, {**form, "csrf": "0" * 32})
    assert status == 403 and committed() == {0: "5", 1: "5"}

    # The reset: committed, back on the group page with a notice; a consumer of the group
    # starts again from the beginning.
    status, page, location = post(port, path, form, follow=False)
    assert status in (302, 303) and location.startswith(f"/groups/{urllib.parse.quote(group)}?notice="), (status, location)
    assert committed() == {0: "0", 1: "0"}
    status, page, _ = post(port, path, {**form, "topic": "", "to": "offset", "offset": "3"})
    assert status == 200 and "Reset the committed offsets of 2 partitions" in page, page
    assert committed() == {0: "3", 1: "3"}
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.subscribe([topic])
    try:
        m = c.poll(20)
        assert m is not None and not m.error() and m.offset() == 3, m
    finally:
        c.close()


def test_matrix_marks_replicas_a_reassignment_adds_and_removes(tmp_path):
    """A partition being moved {1002,1001} -> {1002,1003}: its matrix row shows 1003 as
    adding and 1001 as removing (from ListPartitionReassignments), the leader as leader; after
    --cancel the row is back to two in-sync replicas. The move is throttled to 1 byte/s so it
    stays in progress while the page is read (the first follower fetch goes through, as under
    Kafka's quotas; the rest waits)."""
    proc, bootstrap, port = start_dev_cluster(tmp_path)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        wait_until(lambda: len(admin.list_topics(timeout=10).brokers) == 3, what="3 brokers")
        made = gregor_cli("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "moving",
                          "--replica-assignment", "1002:1001")
        assert made.returncode == 0, made.stdout + made.stderr
        wait_until(lambda: metadata(admin, "moving")[0][2] == [1001, 1002], what="both replicas in sync")
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        # 5 MB: more than one follower fetch (1 MB), so the throttled copy cannot finish at once.
        for i in range(5000):
            p.produce("moving", value=os.urandom(1000), partition=0)
            if i % 500 == 0:
                p.poll(0)
        assert p.flush(30) == 0
        plan = tmp_path / "plan.json"
        plan.write_text('{"version":1,"partitions":[{"topic":"moving","partition":0,"replicas":[1002,1003]}]}')
        run = gregor_cli("reassign-partitions", "--bootstrap-server", bootstrap, "--execute",
                         "--reassignment-json-file", str(plan), "--throttle", "1")
        assert run.returncode == 0, run.stdout + run.stderr

        def marked():
            rows = matrix(get(port, "/topics/moving?fragment=1"))
            return rows.get(0, ([], -1, {}))[2]
        wait_until(lambda: marked().get(1003) == "adding", timeout=30,
                   what=f"1003 marked adding (row: {matrix(get(port, '/topics/moving?fragment=1')).get(0)})")
        roles = marked()
        assert roles == {1002: "leader", 1001: "removing", 1003: "adding"}, roles
        page = get(port, "/topics/moving")
        assert '<span class="cell adding">+</span> being added' in page

        run = gregor_cli("reassign-partitions", "--bootstrap-server", bootstrap, "--cancel",
                         "--reassignment-json-file", str(plan))
        assert run.returncode == 0, run.stdout + run.stderr
        wait_until(lambda: marked() == {1002: "leader", 1001: "follower"}, timeout=30,
                   what="the row back to its two replicas")
    finally:
        proc.kill()
        proc.wait()


def test_with_an_authorizer_the_admin_listener_asks_for_a_scram_login(make_server):
    """With `authorizer.class.name` set, every admin path but /v1/health needs HTTP Basic
    checked against the user's SCRAM credentials; a wrong password or an unknown user gets a
    401 challenge and sees nothing."""
    import base64

    server = make_server("authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                         "super.users=User:ANONYMOUS;User:alice")
    port = server.admin_port
    out = gregor_cli("configs", "--bootstrap-server", server.bootstrap, "--entity-type", "users",
                     "--entity-name", "alice", "--alter", "--add-config", "SCRAM-SHA-512=[password=alice-secret]")
    assert out.returncode == 0, out.stderr

    def fetch(path, auth=None):
        headers = {"Authorization": "Basic " + base64.b64encode(auth.encode()).decode()} if auth else {}
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read().decode()

    assert fetch("/v1/health")[0] == 200, "health stays open for load balancers"
    for path in ["/", "/topics", "/metrics", "/v1/meta/brokers/ids"]:
        status, headers, body = fetch(path)
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic realm="), (path, status, body)
        assert "log in" in body and "cluster-id" not in body, body
    for wrong in ["alice:wrong", "bob:alice-secret", "alice:", "nonsense"]:
        status, _, body = fetch("/topics", wrong)
        assert status == 401, (wrong, status, body)
    status, _, body = fetch("/", "alice:alice-secret")
    assert status == 200 and 'id="cluster-id"' in body, body
    status, _, body = fetch("/metrics", "alice:alice-secret")
    assert status == 200 and "kafka_controller_kafkacontroller_activecontrollercount" in body
    wait_until(lambda: "admin listener: failed authentication" in server.log_path.read_text(),
               what="the refused logins in the broker's log")

    # Pages and actions are authorized as the logged-in user's Kafka requests would be: bob,
    # no super user, sees no topic until an ACL lets him describe it, and cannot delete it.
    out = gregor_cli("configs", "--bootstrap-server", server.bootstrap, "--entity-type", "users",
                     "--entity-name", "bob", "--alter", "--add-config", "SCRAM-SHA-256=[password=bob-secret]")
    assert out.returncode == 0, out.stderr
    topic = f"secret-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(timeout=30)
    wait_until(lambda: f'<tr data-name="{topic}">' in fetch("/topics", "alice:alice-secret")[2],
               what="the super user seeing the topic")
    status, _, body = fetch("/topics", "bob:bob-secret")
    assert status == 200 and f'<tr data-name="{topic}">' not in body, body
    out = gregor_cli("acls", "--bootstrap-server", server.bootstrap, "--add", "--allow-principal", "User:bob",
                     "--operation", "Describe", "--topic", topic)
    assert out.returncode == 0, out.stderr
    wait_until(lambda: f'<tr data-name="{topic}">' in fetch("/topics", "bob:bob-secret")[2],
               what="bob seeing the topic once an ACL lets him describe it")
    page = fetch(f"/topics/{topic}", "bob:bob-secret")[2]
    token = re.search(r'name="csrf" value="([0-9a-f]{32})"', page).group(1)
    data = urllib.parse.urlencode({"csrf": token, "confirm": topic}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/topics/{topic}/delete", data=data, method="POST", headers={
        "Content-Type": "application/x-www-form-urlencoded",
        "Authorization": "Basic " + base64.b64encode(b"bob:bob-secret").decode()})
    with urllib.request.urlopen(req, timeout=60) as r:
        body = r.read().decode()
    assert "TOPIC_AUTHORIZATION_FAILED (29)" in body, re.findall(r'<p class="error".*?</p>', body)
    assert topic in admin.list_topics(timeout=10).topics, "bob's refused delete changed nothing"


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class WellFormed(html.parser.HTMLParser):
    """Checks what a validator would first refuse: every element closed, in order, ids unique,
    one doctype and one <html>."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.ids, self.problems, self.doctype, self.htmls = [], set(), [], 0, 0

    def handle_decl(self, decl):
        self.doctype += decl.lower() == "doctype html"

    def handle_starttag(self, tag, attrs):
        self.htmls += tag == "html"
        for name, value in attrs:
            if name == "id":
                if value in self.ids:
                    self.problems.append(f"duplicate id {value!r}")
                self.ids.add(value)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if tag in VOID:
            self.problems.append(f"end tag for void <{tag}>")
        elif not self.stack or self.stack[-1] != tag:
            self.problems.append(f"</{tag}> closes <{self.stack[-1] if self.stack else None}>")
        else:
            self.stack.pop()


def test_every_page_is_well_formed_html_readable_without_javascript(make_server):
    server = make_server("group.initial.rebalance.delay.ms=0")
    port = server.admin_port
    topic, group = f"wf-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": server.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1,
                                  config={"retention.ms": "3600000"})])[topic].result(timeout=30)
    wait_until(lambda: all(p.leader >= 0 for p in admin.list_topics(topic, timeout=10).topics[topic].partitions.values()),
               what="leaders")
    c = Consumer({"bootstrap.servers": server.bootstrap, "group.id": group, "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, p, 0) for p in range(3)], asynchronous=False)
    c.close()
    token = csrf(port)
    pages = {
        "/": [], "/topics": [topic], "/topics/new": [], f"/topics/{topic}": ['id="placement"', "retention.ms"],
        "/groups": [group], f"/groups/{group}": ['id="offsets"'], "/znodes/": [], "/znodes/brokers/ids": [],
    }
    _, preview, _ = post(port, "/topics/new", {"csrf": token, "name": "wf-preview", "partitions": "2", "op": "preview"})
    _, reset, _ = post(port, f"/groups/{group}/reset", {"csrf": token, "to": "latest", "op": "preview"})
    bodies = {path: get(port, path) for path in pages}
    bodies["create preview"], bodies["reset preview"] = preview, reset
    for path, body in bodies.items():
        checker = WellFormed()
        checker.feed(body)
        checker.close()
        assert checker.doctype == 1 and checker.htmls == 1, path
        assert not checker.problems and not checker.stack, (path, checker.problems, checker.stack)
        # Readable without JavaScript: what the page shows is in the HTML the server sent.
        for text in pages.get(path, []):
            assert text in body, (path, text)
        assert "<noscript" not in body
