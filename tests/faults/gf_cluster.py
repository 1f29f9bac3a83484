"""The cluster under test: 3 `gregor server` brokers and a 3-node ZooKeeper ensemble, each
process in its own network namespace, all joined by one bridge in the root namespace.

    root namespace (clients)  10.77.0.1  on bridge gfbr0
    broker i (1..3)           10.77.0.1i in namespace gfb<i>   (Kafka 9092, admin 8080)
    ZooKeeper node i (1..3)   10.77.0.2i in namespace gfz<i>   (client 2181, quorum 2888/3888)

Every name the harness makes starts with `gf` (namespaces, the bridge and its veth ends, the
nftables tables `inet gf<fault>` inside the namespaces), and only those are ever removed. Nothing is
changed in the root namespace but the bridge and its own address: not its loopback, not its
routes, not its firewall. A lock file keeps two harness runs on one machine apart, and each run
first removes whatever a killed earlier run left behind.
"""

import errno
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import time

from confluent_kafka.admin import AdminClient

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GREGOR_BIN = os.environ.get("GREGOR_BIN") or os.path.join(ROOT, "target", "debug", "gregor")
ZK_JAR = os.environ.get("ZK_JAR", "/usr/share/java/zookeeper.jar")
LOG_JAR = os.environ.get("LOG_JAR", "/usr/share/java/slf4j-simple.jar")
FAKETIME_LIB = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1"
LOCK_PATH = "/run/gf-faults.lock"

BRIDGE = "gfbr0"
HOST_IP = "10.77.0.1"
BROKERS = (1, 2, 3)
ZK_NODES = (1, 2, 3)
KAFKA_PORT = 9092
ADMIN_PORT = 8080
ZK_PORT = 2181
# The broker whose log.dirs is a small loop-mounted filesystem (the full-disk fault).
DISK_BROKER = 3
DISK_MIB = 512
# ZooKeeper grants sessions from 1 s (tickTime 500 ms); 6 s keeps a loaded machine from
# expiring healthy sessions while a pause of 7 s or more expires a paused broker's.
SESSION_TIMEOUT_MS = 6000


def broker_ip(i):
    return f"10.77.0.1{i}"


def zk_ip(i):
    return f"10.77.0.2{i}"


def broker_ns(i):
    return f"gfb{i}"


def zk_ns(i):
    return f"gfz{i}"


ALL_NS = [broker_ns(i) for i in BROKERS] + [zk_ns(i) for i in ZK_NODES]


def sh(*args, check=True, timeout=60):
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def unsupported():
    """Why this machine cannot run the harness, or None."""
    if os.geteuid() != 0:
        return "the fault harness needs root (network namespaces, nftables, loop mounts)"
    for tool in ("ip", "tc", "nft", "losetup", "mkfs.ext4", "java"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (apt-get install -y iproute2 nftables mount e2fsprogs default-jre-headless)"
    if not os.path.exists(ZK_JAR):
        return f"ZooKeeper is not installed ({ZK_JAR} missing): apt-get install -y zookeeper"
    probe = f"gfprobe{os.getpid()}"
    r = sh("ip", "netns", "add", probe, check=False)
    if r.returncode != 0:
        return f"no network namespace support: {r.stderr.strip()}"
    try:
        r = sh("ip", "netns", "exec", probe, "nft", "add", "table", "inet", "gf", check=False)
        if r.returncode != 0:
            return f"no nftables inside a network namespace: {r.stderr.strip()}"
    finally:
        sh("ip", "netns", "del", probe, check=False)
    return None


class Lock:
    """One harness run per machine: the network names and addresses are fixed."""

    def __init__(self, timeout=900):
        self.fd = os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT, 0o644)
        deadline = time.time() + timeout
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES) or time.time() > deadline:
                    raise RuntimeError(f"another fault-harness run holds {LOCK_PATH}") from e
                time.sleep(1)

    def release(self):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def _alive(pid):
    try:
        os.kill(int(pid), 0)
        return True
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True


def cleanup_stale():
    """Removes what a run killed before its teardown left behind: processes in our
    namespaces, the namespaces, the bridge, the loop mount. Only `gf` names; callers hold
    the lock, so nothing of a live run is touched."""
    listed = sh("ip", "netns", "list", check=False).stdout.split("\n")
    names = [line.split()[0] for line in listed if line.strip()]
    for ns in names:
        if ns in ALL_NS:
            for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGCONT)
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
    with open("/proc/mounts") as f:
        mounts = [line.split()[1] for line in f]
    for m in mounts:
        if os.path.basename(m).startswith("gf-disk-"):
            sh("umount", "-l", m, check=False)
    for ns in names:
        if ns in ALL_NS or (ns.startswith("gfprobe") and not _alive(ns[len("gfprobe"):])):
            sh("ip", "netns", "del", ns, check=False)
    if sh("ip", "link", "show", BRIDGE, check=False).returncode == 0:
        sh("ip", "link", "del", BRIDGE, check=False)


class Net:
    """The bridge, the namespaces, and the fault rules inside them."""

    def setup(self):
        sh("ip", "link", "add", BRIDGE, "type", "bridge")
        sh("ip", "addr", "add", f"{HOST_IP}/24", "dev", BRIDGE)
        sh("ip", "link", "set", BRIDGE, "up")
        for ns, ip in [(broker_ns(i), broker_ip(i)) for i in BROKERS] + [(zk_ns(i), zk_ip(i)) for i in ZK_NODES]:
            veth = "gfv" + ns[2:]
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "link", "set", veth, "master", BRIDGE, "up")
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{ip}/24", "dev", "eth0")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")

    @staticmethod
    def nft(ns, rule):
        sh("ip", "netns", "exec", ns, "nft", *rule.split())

    def __init__(self):
        self.tables = {}  # tag -> namespaces holding the table `inet gf<tag>`

    def _table(self, ns, tag):
        """Each fault's rules live in a table of their own (`inet gf<tag>`, with its own input
        and output hooks), so healing one fault removes exactly its rules."""
        held = self.tables.setdefault(tag, set())
        if ns not in held:
            t = f"gf{tag}"
            self.nft(ns, f"add table inet {t}")
            self.nft(ns, f"add chain inet {t} input {{ type filter hook input priority 0 ; policy accept ; }}")
            self.nft(ns, f"add chain inet {t} output {{ type filter hook output priority 0 ; policy accept ; }}")
            held.add(ns)
        return f"inet gf{tag}"

    def drop(self, ns, ips, direction="both", tag="0"):
        """Drops packets from (`in`), to (`out`) or both ways between ns and the addresses.
        Rules on eth0 only: the namespace's loopback keeps working."""
        t = self._table(ns, tag)
        s = "{ " + ", ".join(ips) + " }"
        if direction in ("both", "in"):
            self.nft(ns, f"add rule {t} input iifname eth0 ip saddr {s} drop")
        if direction in ("both", "out"):
            self.nft(ns, f"add rule {t} output oifname eth0 ip daddr {s} drop")

    def loss(self, ns, percent, tag="0"):
        """Random loss of `percent` % of eth0's packets each way. The kernel here has no
        sch_netem, so the loss is nftables' `numgen random`."""
        t = self._table(ns, tag)
        self.nft(ns, f"add rule {t} input iifname eth0 numgen random mod 100 < {percent} drop")
        self.nft(ns, f"add rule {t} output oifname eth0 numgen random mod 100 < {percent} drop")

    def slow(self, ns, rate_kbit):
        """A slow link (queueing delay) out of ns: a token bucket on eth0."""
        sh("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf",
           "rate", f"{rate_kbit}kbit", "burst", "16kbit", "latency", "2s")

    def unslow(self, ns):
        sh("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "eth0", "root", check=False)

    def heal(self, tag):
        for ns in self.tables.pop(tag, set()):
            sh("ip", "netns", "exec", ns, "nft", "delete", "table", "inet", f"gf{tag}", check=False)

    def heal_all(self):
        for ns in ALL_NS:
            for line in sh("ip", "netns", "exec", ns, "nft", "list", "tables", check=False).stdout.splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1] == "inet" and parts[2].startswith("gf"):
                    sh("ip", "netns", "exec", ns, "nft", "delete", "table", "inet", parts[2], check=False)
            self.unslow(ns)
        self.tables.clear()


def four_letter(ip, word, port=ZK_PORT):
    try:
        with socket.create_connection((ip, port), timeout=2) as s:
            s.sendall(word.encode())
            chunks = []
            while True:
                data = s.recv(65536)
                if not data:
                    break
                chunks.append(data)
        return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def wait(predicate, timeout, what, interval=0.25):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = predicate()
        if v:
            return v
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout} s waiting for {what}")


class Proc:
    """A process started inside a namespace with `ip netns exec` (which execs, so the pid is
    the process's own: kill -9 and SIGSTOP reach it directly)."""

    def __init__(self, name, ns, argv, log_path, env=None):
        self.name, self.ns, self.argv, self.log_path, self.env = name, ns, argv, log_path, env
        self.proc = None
        self.paused = False

    def start(self):
        log = open(self.log_path, "ab")
        log.write(f"\n==== start {time.strftime('%H:%M:%S')} ====\n".encode())
        log.flush()
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, *self.argv],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=self.env or os.environ.copy(), start_new_session=True,
        )
        log.close()
        self.paused = False

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig):
        if self.alive():
            self.proc.send_signal(sig)

    def kill(self):
        if self.alive():
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
        self.paused = False

    def pause(self):
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self):
        self.signal(signal.SIGCONT)
        self.paused = False


class Cluster:
    """The ensemble and the brokers, in run_dir. `clock` makes every broker read its wall clock
    through libfaketime with a control file (the clock fault writes an offset into it)."""

    def __init__(self, run_dir, clock=False, disk=False, log=print):
        self.dir = os.path.abspath(run_dir)
        self.clock = clock and os.path.exists(FAKETIME_LIB)
        self.disk = disk
        self.log = log
        self.net = Net()
        self.zk = {}
        self.brokers = {}
        self.disk_mount = None
        self.lock = None

    # ---------------------------------------------------------------- lifecycle
    def start(self):
        self.lock = Lock()
        cleanup_stale()
        os.makedirs(self.dir, exist_ok=True)
        self.net.setup()
        self.start_zk()
        if self.disk:
            self.make_disk()
        for i in BROKERS:
            self.brokers[i] = self.make_broker(i)
            self.brokers[i].start()
        for i in BROKERS:
            self.wait_broker_port(i)
        wait(self.metadata_complete, 90, "every broker's metadata to name all brokers and a controller", interval=1)
        return self

    def teardown(self):
        if self.lock is None:
            return  # never got the lock: whatever exists belongs to another run
        try:
            for p in list(self.brokers.values()) + list(self.zk.values()):
                try:
                    p.kill()
                except Exception:
                    pass
            cleanup_stale()
        finally:
            if self.lock:
                self.lock.release()
                self.lock = None

    # ---------------------------------------------------------------- ZooKeeper
    @property
    def zk_connect(self):
        return ",".join(f"{zk_ip(i)}:{ZK_PORT}" for i in ZK_NODES)

    def start_zk(self):
        servers = [f"server.{j}={zk_ip(j)}:2888:3888" for j in ZK_NODES]
        cp = ZK_JAR + (":" + LOG_JAR if os.path.exists(LOG_JAR) else "")
        for i in ZK_NODES:
            d = os.path.join(self.dir, f"zk{i}")
            os.makedirs(os.path.join(d, "data"), exist_ok=True)
            with open(os.path.join(d, "data", "myid"), "w") as f:
                f.write(f"{i}\n")
            cfg = os.path.join(d, "zoo.cfg")
            with open(cfg, "w") as f:
                f.write("\n".join([
                    "tickTime=500", "initLimit=20", "syncLimit=10",
                    "minSessionTimeout=1000", "maxSessionTimeout=60000",
                    f"dataDir={d}/data", f"clientPort={ZK_PORT}", f"clientPortAddress={zk_ip(i)}",
                    "maxClientCnxns=0", "forceSync=no", "4lw.commands.whitelist=*", "admin.enableServer=false",
                    *servers, "",
                ]))
            argv = ["java", "-Xmx256m", "-cp", cp, "-Dzookeeper.jmx.log4j.disable=true",
                    "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg]
            self.zk[i] = Proc(f"zk{i}", zk_ns(i), argv, os.path.join(self.dir, f"zk{i}.log"))
            self.zk[i].start()
        for i in ZK_NODES:
            self.wait_zk(i)

    def zk_serving(self, i):
        answer = four_letter(zk_ip(i), "srvr")
        return any(m in answer for m in ("Mode: leader", "Mode: follower", "Mode: standalone"))

    def wait_zk(self, i, timeout=90):
        wait(lambda: self.zk_serving(i) or self._dead(self.zk[i]), timeout, f"ZooKeeper node {i} to serve")
        if not self.zk[i].alive():
            raise RuntimeError(f"ZooKeeper node {i} exited; see {self.zk[i].log_path}")

    @staticmethod
    def _dead(p):
        return not p.alive()

    # ---------------------------------------------------------------- brokers
    def make_disk(self):
        image = os.path.join(self.dir, "disk.img")
        mount = os.path.join(self.dir, f"gf-disk-b{DISK_BROKER}")
        with open(image, "wb") as f:
            f.truncate(DISK_MIB << 20)
        sh("mkfs.ext4", "-q", "-F", "-m", "0", image)
        os.makedirs(mount, exist_ok=True)
        sh("mount", "-o", "loop", image, mount)
        self.disk_mount = mount

    def filler_path(self):
        return os.path.join(self.disk_mount, "filler")

    def fill_disk(self):
        """Leaves the broker's filesystem (almost) no free space."""
        st = os.statvfs(self.disk_mount)
        free = st.f_bavail * st.f_frsize
        with open(self.filler_path(), "ab") as f:
            try:
                os.posix_fallocate(f.fileno(), 0, max(free - 4096, 4096))
            except OSError:
                pass
        # Whatever fallocate could not take, a write can.
        with open(self.filler_path() + "2", "ab") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass

    def free_disk(self):
        for p in (self.filler_path(), self.filler_path() + "2"):
            if os.path.exists(p):
                os.remove(p)

    def clock_file(self, i):
        return os.path.join(self.dir, f"broker{i}.faketime")

    def set_clock(self, i, offset_s):
        tmp = self.clock_file(i) + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{offset_s:+d}\n")
        os.replace(tmp, self.clock_file(i))

    def make_broker(self, i):
        data = os.path.join(self.dir, f"broker{i}")
        overrides = [
            f"broker.id={i}",
            f"listeners=PLAINTEXT://{broker_ip(i)}:{KAFKA_PORT}",
            f"admin.listener={broker_ip(i)}:{ADMIN_PORT}",
            f"zookeeper.connect={self.zk_connect}",
            f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}",
            "replica.lag.time.max.ms=5000",
            "offsets.topic.replication.factor=3",
            "offsets.topic.num.partitions=3",
            "controlled.shutdown.retry.backoff.ms=500",
            "file.delete.delay.ms=1000",
        ]
        if self.disk and i == DISK_BROKER:
            overrides.append(f"log.dirs={self.disk_mount}/logs")
        argv = [GREGOR_BIN, "server", "--data-dir", data]
        for o in overrides:
            argv += ["--override", o]
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "info")}
        if self.clock:
            self.set_clock(i, 0)
            env.update({
                "LD_PRELOAD": FAKETIME_LIB,
                "FAKETIME_TIMESTAMP_FILE": self.clock_file(i),
                "FAKETIME_NO_CACHE": "1",
                # A clock jump moves the wall clock; the monotonic clock never jumps.
                "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            })
        return Proc(f"broker{i}", broker_ns(i), argv, os.path.join(self.dir, f"broker{i}.log"), env)

    def wait_broker_port(self, i, timeout=90):
        def up():
            if not self.brokers[i].alive():
                raise RuntimeError(f"broker {i} exited; see {self.brokers[i].log_path}")
            try:
                with socket.create_connection((broker_ip(i), KAFKA_PORT), timeout=0.5):
                    return True
            except OSError:
                return False
        wait(up, timeout, f"broker {i}'s port")

    @property
    def bootstrap(self):
        return ",".join(f"{broker_ip(i)}:{KAFKA_PORT}" for i in BROKERS)

    def metadata_complete(self):
        for i in BROKERS:
            try:
                md = AdminClient({"bootstrap.servers": f"{broker_ip(i)}:{KAFKA_PORT}"}).list_topics(timeout=5)
            except Exception:
                return False
            if len(md.brokers) != len(BROKERS) or md.controller_id < 0:
                return False
        return True

    def restart_dead(self):
        """Restarts every broker or ZooKeeper node that is not running (killed, or exited by
        itself, e.g. on a full disk), and resumes paused ones."""
        restarted = []
        for i, p in self.zk.items():
            if p.paused:
                p.resume()
            if not p.alive():
                p.start()
                restarted.append(p.name)
        for i, p in self.brokers.items():
            if p.paused:
                p.resume()
            if not p.alive():
                if p.proc is not None and p.proc.returncode not in (None, -9):
                    self.log(f"broker {i} had exited by itself with {p.proc.returncode}")
                p.start()
                restarted.append(p.name)
        # A broker restarted within the session timeout of its kill finds its old registration
        # still in ZooKeeper and exits ("already registered by another live broker"), as
        # Kafka's does; start it again once that session has expired.
        for i, p in self.brokers.items():
            for _ in range(3):
                try:
                    self.wait_broker_port(i, timeout=30)
                    break
                except RuntimeError:
                    time.sleep(SESSION_TIMEOUT_MS / 1000)
                    if not p.alive():
                        p.start()
        return restarted

    def save_state(self, path):
        with open(path, "w") as f:
            json.dump({"zk": {i: p.alive() for i, p in self.zk.items()},
                       "brokers": {i: p.alive() for i, p in self.brokers.items()}}, f)
