#!/usr/bin/env bash
# Runs throwaway ZooKeeper 3.8 servers (Debian's `zookeeper` package) for tests: a standalone
# server, or a real ensemble of several processes.
#
#   scripts/zk.sh start DIR PORT   # data, config, log and pid file in DIR; listens on 127.0.0.1:PORT
#   scripts/zk.sh stop DIR         # stops the server started with DIR (SIGTERM, then SIGKILL after
#                                  # 10 s); given an ensemble's DIR, stops every node
#
#   scripts/zk.sh ensemble DIR C1:Q1:E1,C2:Q2:E2,C3:Q3:E3
#                                  # node i in DIR/i: client port Ci, quorum port Qi, election
#                                  # port Ei, all on 127.0.0.1; returns once every node serves
#   scripts/zk.sh start-node DIR/i [--no-wait]
#                                  # (re)starts one node of an ensemble; waits until it serves
#                                  # unless --no-wait (a node without a quorum never does)
#   scripts/zk.sh kill DIR         # SIGKILL, no grace: one node (DIR/i) or every node under DIR
#
# `start` and `ensemble` return once the servers serve requests (or fail after 60 s, printing the
# log). Then run the tests with GREGOR_TEST_ZOOKEEPER=127.0.0.1:PORT (an ensemble:
# 127.0.0.1:C1,127.0.0.1:C2,127.0.0.1:C3).
#
# tickTime is 500 ms so that tests may ask for session timeouts down to 1 s, and forceSync is
# off because the data is thrown away (these are test servers, not durable ones).
set -euo pipefail

ZK_JAR=${ZK_JAR:-/usr/share/java/zookeeper.jar}
# The jar's manifest lists its other dependencies; slf4j needs one backend, and the simple one
# writes to stderr, which goes to DIR/zookeeper.log.
LOG_JAR=${LOG_JAR:-/usr/share/java/slf4j-simple.jar}

usage() {
    echo "usage: $0 start DIR PORT | stop DIR | ensemble DIR C:Q:E,C:Q:E,... | start-node DIR [--no-wait] | kill DIR" >&2
    exit 2
}

serving() {
    local port=$1 answer
    # A bash /dev/tcp probe (no nc needed). `ruok` answers before the server is ready to serve;
    # `srvr` prints its mode (standalone, leader or follower) only once it is.
    answer=$( (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'srvr' >&3 && timeout 2 cat <&3) 2>/dev/null || true)
    [[ $answer == *"Mode: standalone"* || $answer == *"Mode: leader"* || $answer == *"Mode: follower"* ]]
}

check_installed() {
    if [[ ! -f $ZK_JAR ]]; then
        echo "ZooKeeper is not installed ($ZK_JAR missing): apt-get install -y zookeeper" >&2
        exit 1
    fi
}

refuse_running() {
    local dir=$1
    if [[ -f $dir/zookeeper.pid ]] && kill -0 "$(cat "$dir/zookeeper.pid")" 2>/dev/null; then
        echo "a ZooKeeper started with $dir is already running (pid $(cat "$dir/zookeeper.pid"))" >&2
        exit 1
    fi
}

# Starts the server configured by DIR/zoo.cfg in the background, MAIN being its main class.
launch() {
    local dir=$1 main=$2 classpath=$ZK_JAR
    [[ -f $LOG_JAR ]] && classpath="$classpath:$LOG_JAR"
    # setsid: the server must not die with the shell that started it, nor get its signals.
    setsid java -Xmx256m -cp "$classpath" \
        -Dzookeeper.jmx.log4j.disable=true \
        "$main" "$dir/zoo.cfg" \
        >>"$dir/zookeeper.log" 2>&1 </dev/null &
    echo $! >"$dir/zookeeper.pid"
}

wait_serving() {
    local dir=$1 port=$2 pid
    pid=$(cat "$dir/zookeeper.pid")
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

# The settings every server here shares.
common_config() {
    local dir=$1 port=$2
    cat <<EOF
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
}

start() {
    local dir=$1 port=$2
    check_installed
    refuse_running "$dir"
    mkdir -p "$dir/data"
    dir=$(cd "$dir" && pwd)
    common_config "$dir" "$port" >"$dir/zoo.cfg"
    launch "$dir" org.apache.zookeeper.server.ZooKeeperServerMain
    wait_serving "$dir" "$port"
}

ensemble() {
    local dir=$1 spec=$2 i node c q e servers=()
    check_installed
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    IFS=',' read -r -a nodes <<<"$spec"
    [[ ${#nodes[@]} -ge 1 ]] || usage
    for i in "${!nodes[@]}"; do
        IFS=':' read -r c q e <<<"${nodes[$i]}"
        [[ -n $c && -n $q && -n $e ]] || usage
        servers+=("server.$((i + 1))=127.0.0.1:$q:$e")
    done
    for i in "${!nodes[@]}"; do
        IFS=':' read -r c q e <<<"${nodes[$i]}"
        node="$dir/$((i + 1))"
        refuse_running "$node"
        mkdir -p "$node/data"
        echo "$((i + 1))" >"$node/data/myid"
        {
            common_config "$node" "$c"
            # In ticks: a follower may take 10 s to sync with the leader and lag 5 s behind it.
            echo "initLimit=20"
            echo "syncLimit=10"
            printf '%s\n' "${servers[@]}"
        } >"$node/zoo.cfg"
        launch "$node" org.apache.zookeeper.server.quorum.QuorumPeerMain
    done
    for i in "${!nodes[@]}"; do
        IFS=':' read -r c q e <<<"${nodes[$i]}"
        wait_serving "$dir/$((i + 1))" "$c"
    done
}

start_node() {
    local dir=$1 wait=${2:-} port
    check_installed
    dir=$(cd "$dir" && pwd)
    [[ -f $dir/zoo.cfg ]] || { echo "no $dir/zoo.cfg: not a node of an ensemble made by '$0 ensemble'" >&2; exit 1; }
    refuse_running "$dir"
    port=$(sed -n 's/^clientPort=//p' "$dir/zoo.cfg")
    launch "$dir" org.apache.zookeeper.server.quorum.QuorumPeerMain
    if [[ $wait == --no-wait ]]; then
        echo "ZooKeeper node starting on 127.0.0.1:$port (pid $(cat "$dir/zookeeper.pid"), dir $dir)"
    else
        wait_serving "$dir" "$port"
    fi
}

# SIGKILL for the server of DIR, or every node of the ensemble in DIR.
kill_now() {
    local dir=$1 pidfile
    for pidfile in "$dir/zookeeper.pid" "$dir"/*/zookeeper.pid; do
        [[ -f $pidfile ]] || continue
        kill -9 "$(cat "$pidfile")" 2>/dev/null || true
        rm -f "$pidfile"
        echo "ZooKeeper killed (dir $(dirname "$pidfile"))"
    done
}

stop() {
    local dir=$1 pid node
    if [[ ! -f $dir/zookeeper.pid ]] && compgen -G "$dir/*/zookeeper.pid" >/dev/null; then
        for node in "$dir"/*/; do
            [[ -f $node/zookeeper.pid ]] && stop "${node%/}"
        done
        return 0
    fi
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
ensemble)
    [[ $# -eq 3 ]] || usage
    ensemble "$2" "$3"
    ;;
start-node)
    [[ $# -ge 2 && $# -le 3 ]] || usage
    start_node "$2" "${3:-}"
    ;;
kill)
    [[ $# -eq 2 ]] || usage
    kill_now "$2"
    ;;
*) usage ;;
esac
