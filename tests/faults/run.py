#!/usr/bin/env python3
"""A Jepsen-style fault run against a real 3-broker Gregor cluster on a 3-node ZooKeeper
ensemble, every process in its own network namespace (see README.md, "Fault injection").

    sudo .venv/bin/python tests/faults/run.py --seed 7 --time 60 --faults partition,kill,pause

Prints the fault schedule, the checker's summary and availability; writes result.json, the
broker and ZooKeeper logs into --dir (kept); exits 1 on any anomaly of the acks=all idempotent
producers (lost, duplicated, reordered, moved), any unexpected or inconsistent read, 2 if the
harness could not run. The same --seed and --faults give the same schedule.
"""

import argparse
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cluster import Cluster, unsupported  # noqa: E402
from nemesis import KINDS, Nemesis, schedule  # noqa: E402
from workload import (  # noqa: E402
    ACKS1_PRODUCERS,
    STRICT_PRODUCERS,
    ConsumerThread,
    ProducerThread,
    availability,
    check,
    create_topic,
    read_all,
)


def run_once(cluster, seed, duration, kinds, topic, log=print, settle=3.0):
    """One workload run under one seeded schedule on a started cluster; returns the report."""
    events = schedule(seed, duration, kinds)
    log(f"seed {seed}, faults {','.join(kinds)}, {duration} s; schedule:")
    for e in events:
        log(f"  at {e['at']:6.1f}s for {e['hold']:5.1f}s  {e['name']}")
    create_topic(cluster.bootstrap, topic)
    stop_work = threading.Event()
    stop_nemesis = threading.Event()
    producers = [ProducerThread(n, cluster.bootstrap, topic, True, stop_work) for n in STRICT_PRODUCERS]
    producers += [ProducerThread(n, cluster.bootstrap, topic, False, stop_work) for n in ACKS1_PRODUCERS]
    consumers = [ConsumerThread("assign", cluster.bootstrap, topic, "assign", stop_work),
                 ConsumerThread("subscribe", cluster.bootstrap, topic, "subscribe", stop_work)]
    nemesis = Nemesis(cluster, log=log)
    t0 = time.time()
    for t in producers + consumers:
        t.start()
    nt = threading.Thread(target=nemesis.run, args=(events, t0, stop_nemesis), daemon=True)
    nt.start()
    try:
        while nt.is_alive() and time.time() < t0 + duration:
            nt.join(0.5)
    finally:
        stop_nemesis.set()
        nt.join(60)
        restarted = nemesis.heal_all()
        if restarted:
            log(f"healed; restarted {', '.join(restarted)}")
    healed_at = time.time()
    # Keep producing a little on the healed cluster, then stop and drain.
    time.sleep(settle)
    stop_work.set()
    for t in producers:
        t.join(10)
    hang = {}
    for p in producers:
        left = p.finish(90)
        if left:
            hang[p.pname] = left
    for t in consumers:
        t.join(30)
    final, complete, highs = read_all(cluster.bootstrap, topic)
    report = check(producers, consumers, final, complete)
    report.update({
        "seed": seed,
        "faults": list(kinds),
        "duration_s": duration,
        "topic": topic,
        "schedule": [{k: v for k, v in e.items() if k not in ("started", "healed")} for e in events],
        "availability": availability(producers, events, healed_at),
        "undelivered_after_flush": hang,
        "high_watermarks": highs,
        "consumer_errors": {c.cname: c.errors[:10] for c in consumers},
    })
    if hang:
        report["ok"] = False
    return report


def summary(r):
    s = r["acks_all_idempotent"]
    a = r["acks_1"]
    lines = [
        f"seed {r['seed']}  faults {','.join(r['faults'])}  {r['duration_s']} s  topic {r['topic']}",
        f"  {'':22} {'sent':>7} {'acked':>7} {'failed':>7} {'indet.':>7} {'lost':>6} {'dup':>6} {'reord':>6} {'moved':>6}",
    ]
    for name, x in (("acks=all idempotent", s), ("acks=1", a)):
        lines.append(f"  {name:22} {x['sent']:7} {x['acked']:7} {x['failed']:7} {x['indeterminate']:7} "
                     f"{x['lost']:6} {x['duplicated']:6} {x['reordered']:6} {x['moved']:6}")
    lines.append(f"  unexpected {r['unexpected']}  inconsistent {r['inconsistent']}  nonmonotonic {r['nonmonotonic']}  "
                 f"final read complete {r['final_read_complete']}  consumer reads {r['consumer_reads']}")
    for av in r["availability"]:
        lines.append(f"  {av['fault']:32} acks=all max gap {av['max_gap_s']} s, resumed {av['resumed_after_heal_s']} s after heal")
    if r["undelivered_after_flush"]:
        lines.append(f"  HANG: undelivered after flush: {r['undelivered_after_flush']}")
    for key in ("lost_sample", "duplicated_sample", "reordered_sample", "moved_sample"):
        for cls in ("acks_all_idempotent", "acks_1"):
            if r[cls][key]:
                lines.append(f"  {cls} {key}: {json.dumps(r[cls][key])[:600]}")
    for key in ("unexpected_sample", "inconsistent_sample", "nonmonotonic_sample"):
        if r[key]:
            lines.append(f"  {key}: {json.dumps(r[key])[:600]}")
    lines.append("  OK" if r["ok"] else "  FAILED")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=None, help="schedule seed (default: from the time)")
    ap.add_argument("--time", type=float, default=60, help="seconds of faults per run (default 60)")
    ap.add_argument("--faults", default="partition,loss,kill,pause,clock,disk,zk",
                    help=f"comma-separated kinds from {','.join(KINDS)} (or 'all')")
    ap.add_argument("--runs", type=int, default=1, help="runs on one cluster, seeds seed, seed+1, ...")
    ap.add_argument("--dir", default=None, help="where logs and result.json go (default /tmp/gf-run-<seed>)")
    args = ap.parse_args()
    kinds = list(KINDS) if args.faults == "all" else [k.strip() for k in args.faults.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        ap.error(f"unknown fault kinds {bad}; known: {','.join(KINDS)}")
    why = unsupported()
    if why:
        print(f"cannot run: {why}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else int(time.time()) % 100000
    run_dir = args.dir or f"/tmp/gf-run-{seed}"
    os.makedirs(run_dir, exist_ok=True)

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    cluster = Cluster(run_dir, clock="clock" in kinds, disk="disk" in kinds)
    results = []
    try:
        cluster.start()
        for n in range(args.runs):
            s = seed + n
            r = run_once(cluster, s, args.time, kinds, f"gf-queue-{s}")
            results.append(r)
            print(summary(r), flush=True)
    except KeyboardInterrupt:
        print("interrupted; tearing down", file=sys.stderr)
        return 130
    finally:
        cluster.teardown()
        with open(os.path.join(run_dir, "result.json"), "w") as f:
            json.dump(results, f, indent=1, default=str)
        print(f"result.json and logs in {run_dir}")
    return 0 if results and all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
