#!/usr/bin/env bash
# Scenarios S2 replay, S3 jump, S4 no-change poll and the wrk ceiling (bench/scenarios.py does the
# work), against one nginx on loopback with an access log, started and stopped here by its PID.
#
#   bash bench/scenarios.sh PATH/TO/sync-agent      (`make bench` builds it in release and runs this)
#
# Environment (all optional; see bench/README.md):
#   RUNS=5 WARMUP=1          counted rounds and uncounted warm-up rounds per scenario and filesystem
#   SCENARIOS=s2,s3,s4,ceiling
#   BASE_FILES=5000 BASE_MB=200   the version-1.0 content (bench/make_storage.py) of the S2 and S3 storages
#   SKIP_TMPFS=1             skip S2's second pass on tmpfs (BENCH_TMPFS=/dev/shm)
#   WRK_SECONDS=10           duration of each wrk run
#   BENCH_WORK=/tmp/content-sync-bench   work folder (storages and prepared clients are kept and reused)
#   BENCH_DOC=docs/benchmarks.md         where the sections are written ("" = print only)
#   KEEP_RUNS=1              keep the run folders
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: bash bench/scenarios.sh PATH/TO/sync-agent" >&2
  exit 2
fi
AGENT=$(realpath "$1")
[ -x "$AGENT" ] || { echo "scenarios.sh: $1 is not an executable" >&2; exit 2; }
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${BENCH_WORK:-/tmp/content-sync-bench}/scenarios
export BENCH_DOC=${BENCH_DOC-$REPO/docs/benchmarks.md}
COMMAND_LINE="RUNS=${RUNS:-5} WARMUP=${WARMUP:-1} SCENARIOS=${SCENARIOS:-s2,s3,s4,ceiling} BASE_FILES=${BASE_FILES:-5000} BASE_MB=${BASE_MB:-200} SKIP_TMPFS=${SKIP_TMPFS:-0} bash bench/scenarios.sh $AGENT"

. "$REPO/bench/nginx.sh"   # bench_require_packages, nginx_start, nginx_stop
bench_require_packages nginx time python3 curl rclone aria2c wget wrk
NGINX_BIN=$(nginx_binary)   # not $NGINX: nginx reads that variable (inherited sockets)
export NGINX_BIN

mkdir -p "$WORK/www"
ACCESS_LOG="$WORK/nginx/access.log"
mkdir -p "$WORK/nginx"
: > "$ACCESS_LOG"
trap nginx_stop EXIT
trap 'exit 130' INT TERM
nginx_start "$WORK/nginx" "$WORK/www" "$ACCESS_LOG"

python3 "$REPO/bench/scenarios.py" --agent "$AGENT" --work "$WORK" --port "$NGINX_PORT" \
  --access-log "$ACCESS_LOG" --command "$COMMAND_LINE"

nginx_stop
trap - EXIT
rm -f "$ACCESS_LOG"   # large after the wrk runs
