#!/usr/bin/env python3
"""The kernel's own cost of sending a file to a loopback TCP socket (issue 14, zero-copy Fetch).

No Gregor here: the floor under `gregor bench consume --broker-pid`'s CPU per GB. A sender
sends the same file (in the page cache) --rounds times per mode, interleaved, to a forked
receiver that reads into a 1 MiB buffer, in --chunk bytes per call (1 MiB: what one Fetch of
librdkafka's default max.partition.fetch.bytes carries):

- sendfile: sendfile(2), what the broker does on PLAINTEXT connections;
- splice: file -> pipe -> socket with splice(2), the pipe grown to the chunk (at most
  /proc/sys/fs/pipe-max-size);
- copy: pread(2) into a buffer, then send(2): the broker's copy path, minus the broker.

Prints per run and then per mode the median of the sender's CPU (utime + stime from
getrusage: what /proc/<pid>/stat gives the bench) per GB, and MB/s.

    head -c 1000000000 /dev/urandom > /tmp/floor.bin; cat /tmp/floor.bin > /dev/null
    python3 scripts/bench_sendfile_floor.py /tmp/floor.bin --rounds 5
"""

import argparse
import fcntl
import os
import resource
import socket
import statistics
import time


def receive(port):
    conn = socket.create_connection(("127.0.0.1", port))
    view = memoryview(bytearray(1 << 20))
    while conn.recv_into(view):
        pass
    os._exit(0)


def run(path, mode, chunk, nodelay):
    size = os.path.getsize(path)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    pid = os.fork()
    if pid == 0:
        receive(listener.getsockname()[1])
    sock, _ = listener.accept()
    if nodelay:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    fd = os.open(path, os.O_RDONLY)
    if mode == "splice":
        pipe_r, pipe_w = os.pipe()
        fcntl.fcntl(pipe_w, fcntl.F_SETPIPE_SZ, chunk)
        chunk = fcntl.fcntl(pipe_w, fcntl.F_GETPIPE_SZ)
    buf = memoryview(bytearray(chunk))
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.monotonic()
    offset = 0
    while offset < size:
        want = min(chunk, size - offset)
        if mode == "sendfile":
            n = os.sendfile(sock.fileno(), fd, offset, want)
        elif mode == "splice":
            n = os.splice(fd, pipe_w, want, offset_src=offset)
            left = n
            while left:
                left -= os.splice(pipe_r, sock.fileno(), left)
        else:
            n = os.preadv(fd, [buf[:want]], offset)
            sock.sendall(buf[:n])
        offset += n
    sock.shutdown(socket.SHUT_WR)
    os.waitpid(pid, 0)
    elapsed = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_SELF)
    os.close(fd)
    sock.close()
    listener.close()
    if mode == "splice":
        os.close(pipe_r)
        os.close(pipe_w)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return cpu / (size / 1e9), size / 1e6 / elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--chunk", type=int, default=1 << 20)
    parser.add_argument("--modes", default="sendfile,splice,copy")
    parser.add_argument("--nodelay", action="store_true", help="TCP_NODELAY, as the broker")
    args = parser.parse_args()
    modes = args.modes.split(",")
    results = {mode: [] for mode in modes}
    for round_ in range(1, args.rounds + 1):
        for mode in modes:
            cpu, rate = run(args.file, mode, args.chunk, args.nodelay)
            results[mode].append((cpu, rate))
            print(f"round {round_} {mode}: sender_cpu_s_per_GB={cpu:.3f} MB/s={rate:.0f}")
    for mode, runs in results.items():
        cpu = statistics.median(c for c, _ in runs)
        rate = statistics.median(r for _, r in runs)
        low, high = min(c for c, _ in runs), max(c for c, _ in runs)
        print(
            f"median {mode} chunk={args.chunk}: sender_cpu_s_per_GB={cpu:.3f} "
            f"(min {low:.3f}, max {high:.3f}) MB/s={rate:.0f}"
        )


if __name__ == "__main__":
    main()
