#!/usr/bin/env bash
# Apache Kafka as the yardstick: the same kafka-producer-perf-test / kafka-consumer-perf-test
# runs against Apache Kafka 4.x (KRaft, from Maven Central's jars) and Gregor, A B A B.
# See scripts/yardstick.py for the options; e.g.
#   cargo build --release -p cli && scripts/yardstick.sh --out /tmp/yardstick.md
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/yardstick.py "$@"
