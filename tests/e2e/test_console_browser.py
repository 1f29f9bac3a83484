"""The web console in a real browser: headless Chromium (Debian's `chromium` and
`chromium-driver`, driven over WebDriver by selenium) against a 5-broker dev-cluster with
racks. What a user sees is checked, not the HTML the server sent: the DOM after the page's
own script ran.

- The create form's placement preview (typed and clicked in the browser) is the assignment
  the topic then gets, and the topic page's matrix equals `gregor topics --describe`, cell by
  cell (leader, in-sync follower, out-of-sync follower, empty).
- A broker stopped in the dev-cluster turns its cells out of sync in the open page, without a
  reload, within the live refresh interval of the server knowing it (the filter typed on the
  topics page survives the refreshes).
- The group page shows the lag `gregor consumer-groups --describe` shows.
- Screenshots of every page at 1280x800 are saved under the test's temp dir
  (`GREGOR_SCREENSHOTS=<dir>` saves them there too: that is how docs/console/ is refreshed).
"""

import os
import re
import shutil
import signal
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from conftest import GREGOR_BIN, free_port, free_ports, gregor_cli, wait_for_port, wait_until

IDS = [1001, 1002, 1003, 1004, 1005]
RACKS = ["a", "a", "b", "b", "c"]
# The console's live refresh (console::REFRESH_MS), and what a refresh may take on a busy machine.
REFRESH_S = 2.0

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture
def cluster(tmp_path):
    ports = free_ports(len(IDS))
    admin = free_port()
    log = open(tmp_path / "cluster.log", "ab")
    proc = subprocess.Popen(
        [GREGOR_BIN, "dev-cluster", "--brokers", str(len(IDS)), "--port", str(ports[0]),
         "--data-dir", str(tmp_path / "cluster"), "--broker-ids", ",".join(map(str, IDS)),
         "--racks", ",".join(RACKS), "--override", f"admin.listener=127.0.0.1:{admin}",
         "--override", "group.initial.rebalance.delay.ms=0"],
        stdin=subprocess.PIPE, stdout=log, stderr=log)
    for p in ports + [admin]:
        wait_for_port(p, proc)
    yield proc, ",".join(f"127.0.0.1:{p}" for p in ports), admin
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def browser(tmp_path):
    assert os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER), \
        "chromium and chromium-driver (Debian packages) are installed by scripts/test.sh"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,800", f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        options.add_argument(arg)
    service = Service(executable_path=CHROMEDRIVER, log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_window_size(1280, 800)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def screenshot(driver, tmp_path, name):
    path = tmp_path / "screenshots" / f"{name}.png"
    path.parent.mkdir(exist_ok=True)
    assert driver.save_screenshot(str(path)), name
    assert path.stat().st_size > 10_000, f"{name}: a blank screenshot"
    extra = os.environ.get("GREGOR_SCREENSHOTS")
    if extra:
        os.makedirs(extra, exist_ok=True)
        shutil.copy(path, os.path.join(extra, f"{name}.png"))


def dom_matrix(driver, table_id="placement"):
    """{partition: (replicas, leader, {broker: role})} of a placement matrix, read from the DOM."""
    rows = driver.execute_script("""
        var out = [];
        document.querySelectorAll('#' + arguments[0] + ' tbody tr[data-partition]').forEach(function (tr) {
          var roles = {};
          tr.querySelectorAll('td[data-broker]').forEach(function (td) {
            roles[td.getAttribute('data-broker')] = td.getAttribute('data-role');
          });
          out.push([tr.getAttribute('data-partition'), tr.getAttribute('data-replicas'),
                    tr.getAttribute('data-leader'), roles]);
        });
        return out;""", table_id)
    return {int(p): ([int(x) for x in replicas.split(",") if x], int(leader),
                     {int(b): r for b, r in roles.items() if r})
            for p, replicas, leader, roles in rows}


def describe(bootstrap, topic):
    """{partition: (replicas, leader, isr)} from `gregor topics --describe`."""
    out = gregor_cli("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", topic)
    assert out.returncode == 0, out.stderr
    rows = {}
    for m in re.finditer(r"Partition: (\d+)\tLeader: (-?\d+|none)\tReplicas: ([\d,]*)\tIsr: ([\d,]*)", out.stdout):
        leader = -1 if m.group(2) == "none" else int(m.group(2))
        rows[int(m.group(1))] = ([int(x) for x in m.group(3).split(",") if x], leader,
                                 {int(x) for x in m.group(4).split(",") if x})
    return rows


def expected_roles(replicas, leader, isr):
    return {b: ("leader" if b == leader else "follower" if b in isr else "out-of-sync") for b in replicas}


def confirm(driver):
    """Accepts the page's confirmation dialog (every console action asks first)."""
    def accepted():
        try:
            driver.switch_to.alert.accept()
            return True
        except NoAlertPresentException:
            return False
    wait_until(accepted, timeout=10, what="the confirmation dialog")


def test_the_console_in_a_browser(cluster, browser, tmp_path):
    proc, bootstrap, port = cluster
    base = f"http://127.0.0.1:{port}"
    driver = browser
    wait_until(lambda: gregor_cli("topics", "--bootstrap-server", bootstrap, "--list").returncode == 0,
               what="the cluster answering")

    driver.get(base + "/")
    assert driver.find_element(By.ID, "controller").text.startswith("broker ")
    wait_until(lambda: len(driver.find_elements(By.CSS_SELECTOR, "tr[data-broker]")) == len(IDS),
               what="5 brokers on the cluster page")
    screenshot(driver, tmp_path, "cluster")

    # Create a topic as a user would: type, preview, confirm.
    topic = f"web-{uuid.uuid4().hex[:6]}"
    driver.get(base + "/topics/new")
    driver.find_element(By.NAME, "name").send_keys(topic)
    driver.find_element(By.NAME, "partitions").send_keys("10")
    driver.find_element(By.NAME, "replication_factor").send_keys("3")
    driver.find_element(By.CSS_SELECTOR, "#create-topic button[name=op][value=preview]").click()
    wait_until(lambda: driver.find_elements(By.ID, "preview"), what="the placement preview")
    preview = dom_matrix(driver)
    assert sorted(preview) == list(range(10)), preview
    for replicas, leader, roles in preview.values():
        assert len(set(replicas)) == 3 and leader == replicas[0]
        assert {RACKS[IDS.index(r)] for r in replicas} == {"a", "b", "c"}, "one replica per rack"
    screenshot(driver, tmp_path, "create-preview")
    assert topic not in gregor_cli("topics", "--bootstrap-server", bootstrap, "--list").stdout
    driver.find_element(By.CSS_SELECTOR, "#confirm-create button[name=op][value=create]").click()
    confirm(driver)
    wait_until(lambda: f"/topics/{topic}" in driver.current_url, timeout=60, what="the topic's page")

    def online():
        d = describe(bootstrap, topic)
        return len(d) == 10 and all(leader >= 0 and len(isr) == 3 for _, leader, isr in d.values()) and d
    described = wait_until(online, timeout=60, what="topic online with full ISRs")
    assert {p: r for p, (r, _, _) in described.items()} == {p: r for p, (r, _, _) in preview.items()}, \
        "the preview is the assignment the topic got"

    # The matrix the browser shows (after its live refresh) equals --describe, cell by cell.
    def matrix_matches(down=()):
        """The DOM's matrix is --describe's; a stopped broker's replicas may show as offline."""
        shown, d = dom_matrix(driver), describe(bootstrap, topic)

        def seen(roles):
            return {b: ("out-of-sync" if b in down and r == "offline" else r) for b, r in roles.items()}
        return shown and all((shown[p][0], shown[p][1], seen(shown[p][2])) == (r, l, expected_roles(r, l, isr))
                             for p, (r, l, isr) in d.items())
    wait_until(matrix_matches, timeout=10, interval=0.5, what="the matrix equal to --describe")
    screenshot(driver, tmp_path, "topic")

    # The topics page with a filter typed in: it survives the live refreshes.
    driver.get(base + "/topics")
    box = driver.find_element(By.ID, "filter")
    box.send_keys(topic[:8])
    time.sleep(REFRESH_S * 1.5)
    assert driver.find_element(By.ID, "filter").get_attribute("value") == topic[:8]
    visible = [tr.get_attribute("data-name") for tr in driver.find_elements(By.CSS_SELECTOR, "tr[data-name]")
               if tr.is_displayed()]
    assert visible == [topic], visible
    screenshot(driver, tmp_path, "topics")

    # A consumer group: the page shows the lag the CLI shows.
    group = f"g-{uuid.uuid4().hex[:6]}"
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(30):
        p.produce(topic, value=b"v", partition=i % 10)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    got = 0
    deadline = time.time() + 60
    while got < 12 and time.time() < deadline:
        m = c.poll(1)
        if m is not None and not m.error():
            got += 1
    assert got == 12
    c.commit(asynchronous=False)
    try:
        out = gregor_cli("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group)
        assert out.returncode == 0, out.stderr
        cli = {int(cols[2]): (cols[3], cols[5]) for cols in (l.split() for l in out.stdout.splitlines()[1:] if l.strip())
               if cols[1] == topic}
        driver.get(base + f"/groups/{group}")

        def shown_lag():
            rows = driver.execute_script("""
                return Array.from(document.querySelectorAll('#offsets tbody tr')).map(function (tr) {
                  var td = tr.querySelectorAll('td');
                  return [tr.getAttribute('data-partition'), td[2].textContent, td[4].textContent];
                });""")
            return {int(p): ("-" if c_ == "–" else c_, "-" if l == "–" else l) for p, c_, l in rows}
        wait_until(lambda: shown_lag() == cli, timeout=10, what=f"the group page's lag equal to the CLI's {cli}")
        screenshot(driver, tmp_path, "group")
        driver.get(base + "/groups")
        wait_until(lambda: driver.find_elements(By.CSS_SELECTOR, f'tr[data-name="{group}"]'), what="the group listed")
        screenshot(driver, tmp_path, "groups")
    finally:
        c.close()

    driver.get(base + "/znodes/brokers/topics")
    assert driver.find_elements(By.CSS_SELECTOR, f'a[href="/znodes/brokers/topics/{topic}"]')
    screenshot(driver, tmp_path, "znodes")

    # A broker stops while its topic page is open: the open page turns its cells out of sync
    # by its own refresh, no reload.
    driver.get(base + f"/topics/{topic}")
    wait_until(matrix_matches, timeout=10, interval=0.5, what="the matrix before the stop")
    marker = driver.execute_script("window.__gregorNoReload = 1; return window.__gregorNoReload;")
    assert marker == 1
    victim = 1005
    proc.stdin.write(f"stop {victim}\n".encode())
    proc.stdin.flush()

    def victim_out_in(rows):
        roles = [r[2].get(victim) for r in rows.values() if victim in r[0]]
        return bool(roles) and all(r in ("out-of-sync", "offline") for r in roles)

    def server_knows():
        d = describe(bootstrap, topic)
        return all(victim not in isr for _, _, isr in d.values())
    wait_until(server_knows, timeout=60, interval=0.5, what=f"broker {victim} out of every ISR")
    known = time.time()
    wait_until(lambda: victim_out_in(dom_matrix(driver)), timeout=REFRESH_S * 3, interval=0.2,
               what=f"broker {victim}'s cells out of sync in the open page")
    print(f"the open page showed broker {victim} out of sync {time.time() - known:.1f} s after --describe did")
    assert driver.execute_script("return window.__gregorNoReload;") == 1, "the page was reloaded"
    wait_until(lambda: matrix_matches(down={victim}), timeout=10, interval=0.5,
               what="the matrix equal to --describe after the stop")
    screenshot(driver, tmp_path, "topic-broker-down")
