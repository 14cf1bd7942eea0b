#!/usr/bin/env bash
# Issue 23's restore-memory goal at a file count of your choice (the restore of 1,000,000 files must peak
# at most 32 MiB over a no-change sync's), without the hours `SCALE_1M=1 make bench-scale` takes:
#
#   bash bench/restore_rss.sh AGENT [FILES] [WORK]      # FILES 1000000, WORK /work/rig1m by default
#
# Makes FILES files of 512 seeded bytes in folders of 100 (bench/scale_bench.py's layout), publishes them
# once with `publish --init` (kept in WORK/storage for later runs), serves WORK/www from a private nginx,
# restores into a fresh WORK/slot under GNU time (`--verbose` for the phases), then times three no-change
# syncs and five no-change polls (wall, requests and statuses from nginx's log), and `strace`s one poll to
# show that the content folder is never listed. Needs ~1 GiB of disk per 1,000,000 files and the
# publisher needs ~2 GiB of memory at that size.
set -euo pipefail
[ $# -ge 1 ] || { sed -n 2,12p "$0" >&2; exit 2; }
AGENT=$(realpath "$1"); N=${2:-1000000}; W=${3:-/work/rig1m}
REPO=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$W"
if [ ! -d "$W/storage" ]; then
  rm -rf "$W/content"
  /usr/bin/time -f "made the content in %e s" python3 - "$REPO/bench" "$W/content" "$N" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from scale_bench import write_tree, PER_FOLDER
n = int(sys.argv[3])
for _ in write_tree(Path(sys.argv[2]), n):
    pass
print(f"{n:,} files in {-(-n // PER_FOLDER):,} folders")
PY
  /usr/bin/time -f "publish --init: %e s wall, %U+%S s CPU, %M KiB peak" "$AGENT" publish --init --storage "$W/storage" \
    --content "$W/content" --version 1.0 --base-url https://bench.invalid/r1m/ > "$W/publish.out" 2>&1 \
    || { tail -5 "$W/publish.out" >&2; exit 1; }
  tail -1 "$W/publish.out"
fi
. "$REPO/bench/nginx.sh"
mkdir -p "$W/www" "$W/nginx"
ln -sfn "$W/storage" "$W/www/r1m"
: > "$W/access.log"
nginx_start "$W/nginx" "$W/www" "$W/access.log" >/dev/null 2>&1
trap 'nginx_stop >/dev/null 2>&1' EXIT
URL=http://127.0.0.1:$NGINX_PORT/r1m/
if [ -e "$W/slot" ]; then mv "$W/slot" "$W/trash-$(date +%s%N)"; fi  # deleted by you: a million unlinks are slow
mkdir -p "$W/slot"
sync -f "$W"
sync_args=(sync --base-url "$URL" --dir "$W/slot/content" --state "$W/slot/state.sqlite")
/usr/bin/time -f "restore: %e s wall, %U+%S s CPU, %M KiB peak" "$AGENT" "${sync_args[@]}" --verbose 2> "$W/restore.err"
grep -o "phases:.*" "$W/restore.err" || true
grep "KiB peak" "$W/restore.err"
for i in 1 2 3; do
  /usr/bin/time -f "no-change sync $i: %e s wall, %M KiB peak" "$AGENT" "${sync_args[@]}" 2>&1 >/dev/null | tail -1
done
for i in 1 2 3 4 5; do
  before=$(wc -l < "$W/access.log")
  start=$(date +%s%N)
  "$AGENT" "${sync_args[@]}" > /dev/null
  end=$(date +%s%N)
  after=$(wc -l < "$W/access.log")
  echo "no-change poll $i: $(( (end - start) / 1000 )) µs, $((after - before)) request(s), status $(tail -n $((after - before)) "$W/access.log" | awk '{print $2}' | tr '\n' ' ')"
done
strace -f -y -e trace=%file,getdents64 -o "$W/poll.strace" "$AGENT" "${sync_args[@]}" > /dev/null
echo "a poll under strace: $(grep -c "$W/slot/content" "$W/poll.strace") calls name the content folder, $(grep -c "getdents64([0-9]*<$W/slot/content" "$W/poll.strace" || true) list it or a folder in it"
