"""One seeded fault run on a started cluster (run_once) and its human summary; used by
run.py and tests/e2e/test_faults_short.py."""

import json
import threading
import time

from gf_batches import explain_duplicates
from gf_nemesis import Nemesis, schedule
from gf_workload import (
    ACKS1_PRODUCERS,
    STRICT_PRODUCERS,
    ConsumerThread,
    ProducerThread,
    availability,
    check,
    create_topic,
    high_watermarks,
    read_all,
)

CATCH_UP_S = 60


def run_once(cluster, seed, duration, kinds, topic, hold=(4.0, 10.0), streams=1, log=print, settle=3.0,
             tolerate_client_resends=False):
    """One workload run under one seeded schedule on a started cluster; returns the report."""
    events = schedule(seed, duration, kinds, hold=hold, streams=streams)
    log(f"seed {seed}, faults {','.join(kinds)}, {duration} s, hold {hold[0]:g}-{hold[1]:g} s, {streams} stream(s); schedule:")
    for e in events:
        log(f"  at {e['at']:6.1f}s for {e['hold']:5.1f}s  {e['name']}")
    create_topic(cluster.bootstrap, topic)
    stop_work = threading.Event()
    stop_reading = threading.Event()
    stop_nemesis = threading.Event()
    producers = [ProducerThread(n, cluster.bootstrap, topic, True, stop_work, log_dir=cluster.dir) for n in STRICT_PRODUCERS]
    producers += [ProducerThread(n, cluster.bootstrap, topic, False, stop_work) for n in ACKS1_PRODUCERS]
    consumers = [ConsumerThread("assign", cluster.bootstrap, topic, "assign", stop_reading),
                 ConsumerThread("subscribe", cluster.bootstrap, topic, "subscribe", stop_reading)]
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
    # Every consumer must catch up with the healed cluster: up to each partition's high
    # watermark within CATCH_UP_S (a consumer that does not is reported as a hang).
    highs = high_watermarks(cluster.bootstrap, topic)
    deadline = time.time() + CATCH_UP_S
    known = {p: h for p, h in highs.items() if h is not None}
    while time.time() < deadline and not all(c.caught_up(known) for c in consumers):
        time.sleep(0.5)
    behind = {c.cname: c.behind(known) for c in consumers if not c.caught_up(known)}
    stop_reading.set()
    for t in consumers:
        t.join(30)
    final, complete, highs = read_all(cluster.bootstrap, topic)
    report = check(producers, consumers, final, complete, explain=lambda dup: explain_duplicates(cluster.dir, topic, dup),
                   tolerate_client_resends=tolerate_client_resends)
    report.update({
        "seed": seed,
        "faults": list(kinds),
        "duration_s": duration,
        "hold_s": list(hold),
        "streams": streams,
        "tolerate_client_resends": tolerate_client_resends,
        "topic": topic,
        "schedule": [{k: v for k, v in e.items() if k not in ("started", "healed")} for e in events],
        "availability": availability(producers, events, healed_at),
        "undelivered_after_flush": hang,
        "consumers_behind": behind,
        "unreadable_partitions": sorted(p for p, h in highs.items() if h is None),
        "high_watermarks": highs,
        "consumer_errors": {c.cname: c.errors[:10] for c in consumers},
    })
    if hang or behind or report["unreadable_partitions"]:
        report["ok"] = False
    return report


def summary(r):
    s = r["acks_all_idempotent"]
    a = r["acks_1"]
    lines = [
        f"seed {r['seed']}  faults {','.join(r['faults'])}  {r['duration_s']} s  hold {r['hold_s']}  streams {r['streams']}  topic {r['topic']}",
        f"  {'':22} {'sent':>7} {'acked':>7} {'failed':>7} {'indet.':>7} {'lost':>6} {'dup':>6} {'reord':>6} {'moved':>6}",
    ]
    for name, x in (("acks=all idempotent", s), ("acks=1", a)):
        lines.append(f"  {name:22} {x['sent']:7} {x['acked']:7} {x['failed']:7} {x['indeterminate']:7} "
                     f"{x['lost']:6} {x['duplicated']:6} {x['reordered']:6} {x['moved']:6}")
    lines.append(f"  unexpected {r['unexpected']}  inconsistent {r['inconsistent']}  nonmonotonic {r['nonmonotonic']}  "
                 f"final read complete {r['final_read_complete']}  consumer reads {r['consumer_reads']}")
    for av in r["availability"]:
        lines.append(f"  {av['fault']:32} acks=all max gap {av['max_gap_s']} s, resumed {av['resumed_after_heal_s']} s after heal")
    if r["unreadable_partitions"]:
        lines.append(f"  HANG: no high watermark for partitions {r['unreadable_partitions']} within 120 s of the heal "
                     "(their acknowledged values count as lost above)")
    if r["consumers_behind"]:
        lines.append(f"  HANG: consumers still behind the high watermarks {CATCH_UP_S} s after the heal: {r['consumers_behind']}")
    if r["undelivered_after_flush"]:
        lines.append(f"  HANG: undelivered after flush: {r['undelivered_after_flush']}")
    for cls in ("acks_all_idempotent", "acks_1"):
        causes = {}
        for x in r[cls].get("duplicated_explained", {}).values():
            causes[x["cause"]] = causes.get(x["cause"], 0) + 1
        if causes:
            lines.append(f"  {cls} duplicates by cause (from the segment files' batch headers): {causes}")
    for key in ("lost_sample", "duplicated_sample", "reordered_sample", "moved_sample"):
        for cls in ("acks_all_idempotent", "acks_1"):
            if r[cls][key]:
                lines.append(f"  {cls} {key}: {json.dumps(r[cls][key])[:600]}")
    for key in ("unexpected_sample", "inconsistent_sample", "nonmonotonic_sample"):
        if r[key]:
            lines.append(f"  {key}: {json.dumps(r[key])[:600]}")
    resent = s.get("duplicated_by_client_resend", 0)
    tolerated = f" ({resent} acks=all duplicates were the client's re-sends under a newer epoch, tolerated)" if r["ok"] and resent else ""
    lines.append("  OK" + tolerated if r["ok"] else "  FAILED")
    return "\n".join(lines)
