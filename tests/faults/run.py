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
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gf_cluster import Cluster, unsupported  # noqa: E402
from gf_nemesis import KINDS  # noqa: E402
from gf_runner import run_once, summary  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=None, help="schedule seed (default: from the time)")
    ap.add_argument("--time", type=float, default=60, help="seconds of faults per run (default 60)")
    ap.add_argument("--faults", default="partition,loss,kill,pause,clock,disk,zk",
                    help=f"comma-separated kinds from {','.join(KINDS)} (or 'all')")
    ap.add_argument("--hold", default="4,10", help="MIN,MAX seconds each fault is held (default 4,10; a pause always outlasts the session timeout)")
    ap.add_argument("--streams", type=int, default=1, help="independent fault streams (2: faults overlap); default 1")
    ap.add_argument("--tolerate-client-resends", action="store_true",
                    help="do not fail on acks=all duplicates that are the client's re-sends under a newer producer epoch (librdkafka issue 4953); they are still reported")
    ap.add_argument("--runs", type=int, default=1, help="runs on one cluster, seeds seed, seed+1, ...")
    ap.add_argument("--dir", default=None, help="where logs and result.json go (default /tmp/gf-run-<seed>)")
    args = ap.parse_args()
    kinds = list(KINDS) if args.faults == "all" else [k.strip() for k in args.faults.split(",") if k.strip()]
    bad = [k for k in kinds if k not in KINDS]
    if bad:
        ap.error(f"unknown fault kinds {bad}; known: {','.join(KINDS)}")
    hold = tuple(float(x) for x in args.hold.split(","))
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
            r = run_once(cluster, s, args.time, kinds, f"gf-queue-{s}", hold=hold, streams=args.streams, tolerate_client_resends=args.tolerate_client_resends, log=lambda m: print(m, flush=True))
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
