"""Reads record-batch headers straight from a broker's segment files (Kafka's v2 batch format),
to tell how a duplicated value came to be written twice: the producer id, epoch and sequence of
each copy. A retry the broker failed to recognise has the same producer id, epoch and sequence
twice; a copy under a newer epoch was sent again by the client after it bumped its epoch
(librdkafka does so after some errors, re-sending messages that may already be written)."""

import glob
import os
import struct

HEADER = struct.Struct(">qiibIhiqqqhii")  # base offset .. record count: 61 bytes


def batches(partition_dir):
    """(base_offset, last_offset, producer_id, producer_epoch, base_sequence) of every batch."""
    out = []
    for path in sorted(glob.glob(os.path.join(partition_dir, "*.log"))):
        with open(path, "rb") as f:
            data = f.read()
        pos = 0
        while pos + HEADER.size <= len(data):
            base, length, _ple, _magic, _crc, _attr, lod, _bts, _mts, pid, epoch, seq, _cnt = HEADER.unpack_from(data, pos)
            if length <= 0:
                break
            out.append((base, base + lod, pid, epoch, seq))
            pos += 12 + length
    return out


def locate(run_dir, topic, places):
    """{(partition, offset): {producer_id, epoch, sequence}} for the given places, from the first
    broker's copy of each partition that holds them."""
    found = {}
    dirs = sorted(glob.glob(os.path.join(run_dir, "broker*", "logs"))) + sorted(glob.glob(os.path.join(run_dir, "gf-disk-*", "logs")))
    by_partition = {}
    for p, off in places:
        by_partition.setdefault(p, set()).add(off)
    for p, offs in by_partition.items():
        for d in dirs:
            pdir = os.path.join(d, f"{topic}-{p}")
            if not os.path.isdir(pdir):
                continue
            for base, last, pid, epoch, seq in batches(pdir):
                for off in offs:
                    if base <= off <= last and (p, off) not in found:
                        found[(p, off)] = {"producer_id": pid, "epoch": epoch, "sequence": seq + (off - base)}
    return found


def explain_duplicates(run_dir, topic, duplicated):
    """For each duplicated value ({value: [(partition, offset), ...]}), its copies' producer id,
    epoch and sequence, and whether a newer epoch explains the second copy."""
    places = [tuple(loc) for locs in duplicated.values() for loc in locs]
    found = locate(run_dir, topic, places)
    out = {}
    for v, locs in duplicated.items():
        copies = [found.get(tuple(loc)) for loc in locs]
        epochs = [c["epoch"] for c in copies if c]
        same = len(copies) > 1 and all(c and (c["epoch"], c["sequence"]) == (copies[0]["epoch"], copies[0]["sequence"]) for c in copies)
        out[v] = {"copies": copies, "cause": "broker appended one (epoch, sequence) twice" if same else (
            "client re-sent under a newer producer epoch" if len(set(epochs)) > 1 else "unknown")}
    return out
