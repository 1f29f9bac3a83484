#!/usr/bin/env bash
# Runs a throwaway standalone ZooKeeper 3.8 (Debian's `zookeeper` package) for tests.
#
#   scripts/zk.sh start DIR PORT   # data, config, log and pid file in DIR; listens on 127.0.0.1:PORT
#   scripts/zk.sh stop DIR         # stops the server started with DIR (SIGTERM, then SIGKILL after 10 s)
#
# `start` returns once the server serves requests (or fails after 60 s, printing the log).
# Then run the tests with GREGOR_TEST_ZOOKEEPER=127.0.0.1:PORT.
#
# tickTime is 500 ms so that tests may ask for session timeouts down to 1 s, and forceSync is
# off because the data is thrown away (this is a test server, not a durable one).
set -euo pipefail

ZK_JAR=${ZK_JAR:-/usr/share/java/zookeeper.jar}
# The jar's manifest lists its other dependencies; slf4j needs one backend, and the simple one
# writes to stderr, which goes to DIR/zookeeper.log.
LOG_JAR=${LOG_JAR:-/usr/share/java/slf4j-simple.jar}

usage() {
    echo "usage: $0 start DIR PORT | stop DIR" >&2
    exit 2
}

serving() {
    local port=$1 answer
    # A bash /dev/tcp probe (no nc needed). `ruok` answers before the server is ready to serve;
    # `srvr` prints "Mode: standalone" only once it is.
    answer=$( (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'srvr' >&3 && timeout 2 cat <&3) 2>/dev/null || true)
    [[ $answer == *"Mode: standalone"* ]]
}

start() {
    local dir=$1 port=$2
    if [[ ! -f $ZK_JAR ]]; then
        echo "ZooKeeper is not installed ($ZK_JAR missing): apt-get install -y zookeeper" >&2
        exit 1
    fi
    if [[ -f $dir/zookeeper.pid ]] && kill -0 "$(cat "$dir/zookeeper.pid")" 2>/dev/null; then
        echo "a ZooKeeper started with $dir is already running (pid $(cat "$dir/zookeeper.pid"))" >&2
        exit 1
    fi
    mkdir -p "$dir/data"
    dir=$(cd "$dir" && pwd)
    cat >"$dir/zoo.cfg" <<EOF
tickTime=500
minSessionTimeout=1000
maxSessionTimeout=60000
dataDir=$dir/data
clientPort=$port
clientPortAddress=127.0.0.1
maxClientCnxns=0
forceSync=no
4lw.commands.whitelist=*
admin.enableServer=false
EOF
    local classpath=$ZK_JAR
    [[ -f $LOG_JAR ]] && classpath="$classpath:$LOG_JAR"
    # setsid: the server must not die with the shell that started it, nor get its signals.
    setsid java -Xmx256m -cp "$classpath" \
        -Dzookeeper.jmx.log4j.disable=true \
        org.apache.zookeeper.server.ZooKeeperServerMain "$dir/zoo.cfg" \
        >"$dir/zookeeper.log" 2>&1 </dev/null &
    echo $! >"$dir/zookeeper.pid"
    local pid=$!
    for _ in $(seq 1 120); do
        if serving "$port"; then
            echo "ZooKeeper running on 127.0.0.1:$port (pid $pid, dir $dir)"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "ZooKeeper exited during startup; log:" >&2
            cat "$dir/zookeeper.log" >&2
            exit 1
        fi
        sleep 0.5
    done
    echo "ZooKeeper did not answer on 127.0.0.1:$port within 60 s; log:" >&2
    cat "$dir/zookeeper.log" >&2
    kill "$pid" 2>/dev/null || true
    exit 1
}

stop() {
    local dir=$1 pid
    if [[ ! -f $dir/zookeeper.pid ]]; then
        echo "no $dir/zookeeper.pid: nothing to stop" >&2
        return 0
    fi
    pid=$(cat "$dir/zookeeper.pid")
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            echo "ZooKeeper (pid $pid) ignored SIGTERM for 10 s; killing it" >&2
            kill -9 "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$dir/zookeeper.pid"
    echo "ZooKeeper stopped (dir $dir)"
}

case ${1:-} in
start)
    [[ $# -eq 3 ]] || usage
    start "$2" "$3"
    ;;
stop)
    [[ $# -eq 2 ]] || usage
    stop "$2"
    ;;
*) usage ;;
esac
