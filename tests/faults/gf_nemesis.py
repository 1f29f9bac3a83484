"""The seeded nemesis: a fault schedule drawn from a seed (the same seed and fault kinds give
the same schedule), and the code that applies and heals each fault.

Kinds (for --faults):
  partition  one of: a broker cut off from the other brokers / from ZooKeeper / from the
             clients; a majority/minority split (one broker and one ZooKeeper node against the
             rest); a one-way drop (a broker stops receiving from the other brokers, still sends)
  loss       random loss of 20-40 % of one broker's packets each way (nftables numgen; the
             kernel has no sch_netem, so no netem delay/reorder)
  slow       a slow link out of one broker (tc tbf, 64-256 kbit/s): queueing delay
  kill       kill -9 of one broker, restarted at the heal
  pause      SIGSTOP of one broker for longer than its ZooKeeper session timeout, then SIGCONT
  clock      one broker's wall clock jumps forward or back by minutes to hours (libfaketime's
             control file; the monotonic clock does not jump)
  disk       the loop-mounted filesystem of broker 3's log.dirs filled up, freed at the heal
  zk         kill -9 of one ZooKeeper node, restarted at the heal
"""

import random
import threading
import time

from gf_cluster import (
    BROKERS,
    DISK_BROKER,
    HOST_IP,
    SESSION_TIMEOUT_MS,
    ZK_NODES,
    broker_ip,
    broker_ns,
    zk_ip,
    zk_ns,
)

KINDS = ("partition", "loss", "slow", "kill", "pause", "clock", "disk", "zk")
PARTITIONS = ("brokers", "zookeeper", "clients", "split", "oneway")


def schedule(seed, duration, kinds, quiet=(2.0, 5.0), hold=(4.0, 10.0), streams=1):
    """[{at, hold, kind, name, stream, tag, ...}] from the seed: in each of `streams`
    independent streams, faults one at a time, each held for a while and healed, with quiet
    gaps between them (so with 2 streams, two faults may overlap)."""
    rng = random.Random(seed)
    events = []
    for stream in range(streams):
        events += _stream(rng, stream, duration, kinds, quiet, hold)
    return sorted(events, key=lambda e: e["at"])


def _stream(rng, stream, duration, kinds, quiet, hold):
    events = []
    t = rng.uniform(*quiet)
    while t < duration - 2:
        kind = rng.choice(kinds)
        h = rng.uniform(*hold)
        e = {"at": round(t, 2), "kind": kind}
        if kind == "partition":
            sub = rng.choice(PARTITIONS)
            e.update(sub=sub, broker=rng.choice(BROKERS), zk=rng.choice(ZK_NODES))
            e["name"] = f"partition-{sub}(b{e['broker']}" + (f",z{e['zk']})" if sub == "split" else ")")
        elif kind == "loss":
            e.update(broker=rng.choice(BROKERS), percent=rng.choice((20, 30, 40)))
            e["name"] = f"loss(b{e['broker']},{e['percent']}%)"
        elif kind == "slow":
            e.update(broker=rng.choice(BROKERS), kbit=rng.choice((64, 128, 256)))
            e["name"] = f"slow(b{e['broker']},{e['kbit']}kbit)"
        elif kind == "kill":
            e.update(broker=rng.choice(BROKERS))
            e["name"] = f"kill(b{e['broker']})"
        elif kind == "pause":
            e.update(broker=rng.choice(BROKERS))
            h = SESSION_TIMEOUT_MS / 1000 + rng.uniform(1.0, 4.0)
            e["name"] = f"pause(b{e['broker']})"
        elif kind == "clock":
            e.update(broker=rng.choice(BROKERS), offset=rng.choice((-7200, -600, -120, 120, 600, 86400)))
            e["name"] = f"clock(b{e['broker']},{e['offset']:+d}s)"
        elif kind == "disk":
            e.update(broker=DISK_BROKER)
            e["name"] = f"disk-full(b{DISK_BROKER})"
        elif kind == "zk":
            e.update(zk=rng.choice(ZK_NODES))
            e["name"] = f"zk-kill(z{e['zk']})"
        e["hold"] = round(min(h, max(duration - t, 1.0)), 2)
        e["stream"] = stream
        e["tag"] = f"{stream}x{len(events)}"
        events.append(e)
        t += e["hold"] + rng.uniform(*quiet)
    return events


class Nemesis:
    def __init__(self, cluster, log=print):
        self.c = cluster
        self.log = log

    def apply(self, e):
        c, net = self.c, self.c.net
        kind = e["kind"]
        tag = e["tag"]
        if kind == "partition":
            b = e["broker"]
            ns = broker_ns(b)
            others = [broker_ip(j) for j in BROKERS if j != b]
            sub = e["sub"]
            if sub == "brokers":
                net.drop(ns, others, tag=tag)
            elif sub == "zookeeper":
                net.drop(ns, [zk_ip(j) for j in ZK_NODES], tag=tag)
            elif sub == "clients":
                net.drop(ns, [HOST_IP], tag=tag)
            elif sub == "oneway":
                net.drop(ns, others, direction="in", tag=tag)
            elif sub == "split":
                z = e["zk"]
                majority = others + [zk_ip(j) for j in ZK_NODES if j != z]
                net.drop(ns, majority, tag=tag)
                net.drop(zk_ns(z), majority, tag=tag)
        elif kind == "loss":
            net.loss(broker_ns(e["broker"]), e["percent"], tag=tag)
        elif kind == "slow":
            net.slow(broker_ns(e["broker"]), e["kbit"])
        elif kind == "kill":
            c.brokers[e["broker"]].kill()
        elif kind == "pause":
            c.brokers[e["broker"]].pause()
        elif kind == "clock":
            if c.clock:
                c.set_clock(e["broker"], e["offset"])
            else:
                self.log("clock: libfaketime is not installed or the cluster was started without it; skipped")
        elif kind == "disk":
            if c.disk_mount:
                c.fill_disk()
            else:
                self.log("disk: the cluster was started without a loop-mounted log dir; skipped")
        elif kind == "zk":
            c.zk[e["zk"]].kill()

    def heal(self, e):
        c, net = self.c, self.c.net
        kind = e["kind"]
        if kind in ("partition", "loss"):
            net.heal(e["tag"])
        elif kind == "slow":
            net.unslow(broker_ns(e["broker"]))
        elif kind == "kill":
            b = c.brokers[e["broker"]]
            if not b.alive():
                b.start()
        elif kind == "pause":
            c.brokers[e["broker"]].resume()
        elif kind == "clock":
            if c.clock:
                c.set_clock(e["broker"], 0)
        elif kind == "disk":
            if c.disk_mount:
                c.free_disk()
        elif kind == "zk":
            z = c.zk[e["zk"]]
            if not z.alive():
                z.start()

    def heal_all(self):
        self.c.net.heal_all()
        if self.c.clock:
            for i in BROKERS:
                self.c.set_clock(i, 0)
        if self.c.disk_mount:
            self.c.free_disk()
        return self.c.restart_dead()

    def run(self, events, t0, stop):
        """Applies the schedule, relative to t0, until it ends or stop is set: each stream in
        a thread of its own. Records on each event when it started and healed."""
        streams = sorted({e["stream"] for e in events})
        threads = [threading.Thread(target=self._run_stream, args=([e for e in events if e["stream"] == s], t0, stop), daemon=True)
                   for s in streams]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def _run_stream(self, events, t0, stop):
        for e in events:
            while time.time() < t0 + e["at"]:
                if stop.wait(0.1):
                    return
            self.log(f"[{time.time() - t0:6.1f}s] nemesis: {e['name']} for {e['hold']} s")
            e["started"] = time.time()
            try:
                self.apply(e)
            except Exception as ex:  # a fault that cannot be applied is reported, not fatal
                e["error"] = str(ex)
                self.log(f"nemesis: {e['name']} failed: {ex}")
            stop.wait(e["hold"])
            try:
                self.heal(e)
            except Exception as ex:
                e["error"] = str(ex)
                self.log(f"nemesis: healing {e['name']} failed: {ex}")
            e["healed"] = time.time()
            self.log(f"[{time.time() - t0:6.1f}s] nemesis: healed {e['name']}")
            if stop.is_set():
                return
