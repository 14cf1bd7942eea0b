#!/usr/bin/env bash
# Profiles S2 replays the way docs/benchmarks.md's "where the time goes" sections were made:
# the client that bench/scenarios.sh prepared (run it once first) is copied to its slot, hard-linking
# its content, and `sync-agent sync` replays 1.0 → 1.1 from a private nginx, under an optional wrapper.
#
#   bash bench/profile_s2.sh AGENT ext4|tmpfs RUNS [WRAPPER ...]
#   bash bench/profile_s2.sh AGENT tmpfs 1 perf record -F 4000 -g -o /tmp/s2.perf.data
#   perf script -i /tmp/s2.perf.data > /tmp/s2.perf.txt && python3 bench/perf_phases.py /tmp/s2.perf.txt
#
# RTT_MS=20: the requests go through bench/latency_proxy.py, which adds that round-trip time (as a
# real network to the host would). PEER=curl or PEER=rclone: each run is `curl --parallel
# --parallel-max 8` (or `rclone copy --files-from --transfers 8`) of the version's new files into a
# fresh folder of the slot instead of the agent (AGENT is still needed for the tmpfs set-up), to
# compare with the same proxy and filesystem. PEER=floor: each run is bench/s2_floor.c (built here), an
# ideal client doing only the work our design cannot avoid (the same ranges of the archive, each
# file hashed, written unnamed and linked; no plan, no state, no switch), into a fresh folder.
#
# Prints each run's wall time and nginx's CPU time. tmpfs: a tmpfs is mounted on the slot's folder
# for the runs (and unmounted on exit); its first, untimed replay teaches the copied client the
# fingerprints of its new inodes, as a real client has them after its previous update.
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,10p "$0" >&2; exit 2; }
AGENT=$(realpath "$1"); FS=$2; RUNS=$3; shift 3
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${BENCH_WORK:-/tmp/content-sync-bench}/scenarios
PRISTINE=$WORK/clients/s2-1.0-disk
RUNS_DIR=$WORK/runs
SLOT=$RUNS_DIR/slot-s2   # the path the prepared client's state database records
[ -d "$PRISTINE/content" ] || { echo "profile_s2.sh: no prepared client at $PRISTINE; run bench/scenarios.sh once" >&2; exit 2; }
. "$REPO/bench/nginx.sh"
mkdir -p "$WORK/profile-nginx" "$RUNS_DIR"
MOUNTED=""
PROXY_PID=""
cleanup() {
  if [ -n "$PROXY_PID" ]; then kill "$PROXY_PID" 2>/dev/null || true; fi
  nginx_stop
  rm -rf "$SLOT"
  if [ -n "$MOUNTED" ]; then umount "$RUNS_DIR"; fi
}
trap cleanup EXIT
nginx_start "$WORK/profile-nginx" "$WORK/www" >/dev/null 2>&1
URL=http://127.0.0.1:$NGINX_PORT/s2/
if [ -n "${RTT_MS:-}" ]; then
  exec 3< <(python3 "$REPO/bench/latency_proxy.py" "$NGINX_PORT" "$RTT_MS")
  PROXY_PID=$!
  read -r PROXY_PORT <&3
  URL=http://127.0.0.1:$PROXY_PORT/s2/
fi

fresh_slot() {
  if [ -e "$SLOT" ]; then
    # ext4: rename away instead of deleting (see spread_folders in scenarios.py); removed on exit.
    if [ "$FS" = ext4 ]; then mkdir -p "$RUNS_DIR/profile-trash"; mv "$SLOT" "$RUNS_DIR/profile-trash/$(date +%s%N)"; else rm -rf "$SLOT"; fi
  fi
  mkdir -p "$SLOT"
  cp -al "$PRISTINE/content" "$SLOT/content"
  # The twin the client keeps (a restore's, or a replay's), linked the same way.
  if [ -d "$PRISTINE/.content.content-sync/retired" ]; then cp -al "$PRISTINE/.content.content-sync" "$SLOT/"; fi
  cp -a "$PRISTINE"/state.sqlite* "$SLOT/"
  # The copy's folders keep the times the client recorded, as a real client's do (see clone_client).
  python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; import scenarios
slot = Path(sys.argv[2])
scenarios.keep_folder_times(slot / "state.sqlite", slot / "content")
scenarios.keep_twin(slot / "state.sqlite", slot / scenarios.STAGING / "retired")' "$REPO/bench" "$SLOT"
}

case "$FS" in
  ext4) chattr +T "$RUNS_DIR" 2>/dev/null || true ;;
  tmpfs)
    mountpoint -q "$RUNS_DIR" && { echo "profile_s2.sh: $RUNS_DIR is already a mount point" >&2; exit 2; }
    mount -t tmpfs -o size=4g tmpfs "$RUNS_DIR"; MOUNTED=1
    # One cp keeps the twin's files linked to the content's (`-a` preserves hard links).
    mkdir -p "$RUNS_DIR/pristine"
    cp -a "$PRISTINE/content" $(ls -d "$PRISTINE/.content.content-sync" 2>/dev/null) "$PRISTINE"/state.sqlite* "$RUNS_DIR/pristine/"
    PRISTINE=$RUNS_DIR/pristine
    fresh_slot
    "$AGENT" sync --base-url "$URL" --dir "$SLOT/content" --state "$SLOT/state.sqlite" >/dev/null
    python3 - "$SLOT/state.sqlite" "$PRISTINE/state.sqlite" <<'PY'
import os, sqlite3, sys
# Only the rows of this tmpfs (the copied ext4 inodes' rows are stale; a real client has none).
device = os.stat(os.path.dirname(sys.argv[1])).st_dev
rows = sqlite3.connect(sys.argv[1]).execute("SELECT device, inode, size, modifiedNanoseconds, sha256 FROM fileFingerprint WHERE device = ?", (device,)).fetchall()
db = sqlite3.connect(sys.argv[2])
db.execute("DELETE FROM fileFingerprint")
db.executemany("INSERT INTO fileFingerprint (device, inode, size, modifiedNanoseconds, sha256) VALUES (?, ?, ?, ?, ?)", rows)
db.commit()
PY
    ;;
  *) echo "profile_s2.sh: filesystem must be ext4 or tmpfs" >&2; exit 2 ;;
esac

if [ "${PEER:-}" = floor ]; then
  FLOOR_DIR=$WORK/s2floor
  mkdir -p "$FLOOR_DIR"
  cc -O2 -Wall -Wextra -o "$FLOOR_DIR/s2_floor" "$REPO/bench/s2_floor.c" -lcurl -lcrypto -lpthread
  python3 "$REPO/bench/s2_floor_manifest.py" "$WORK/www/s2" "$FLOOR_DIR/manifest" >/dev/null
elif [ -n "${PEER:-}" ]; then
  # The new files of 1.1, from its change list, into the slot (emptied before each run): a curl
  # config, and the same paths for rclone's --files-from.
  CURL_CONFIG=$RUNS_DIR/s2-curl.cfg
  python3 - "$WORK/www/s2/RXCacheConfig/HistoryOfVersions" "$URL" "$SLOT/curl" "$CURL_CONFIG" <<'PY'
import json, pathlib, sys
changes = json.loads(next(pathlib.Path(sys.argv[1]).glob("changes_1.0_1.1.json")).read_text())["changes"]
paths = [change["newPath"].split("RXCacheContent/", 1)[1] for change in changes
         if not change.get("oldPath") and not change["newPath"].endswith("/")]
pathlib.Path(sys.argv[4]).write_text("".join(
    f'url = "{sys.argv[2]}RXCacheContent/{p}"\noutput = "{sys.argv[3]}/{p}"\n' for p in paths))
pathlib.Path(sys.argv[4] + ".list").write_text("".join(f"RXCacheContent/{p}\n" for p in paths))
PY
fi
WORKER=$(pgrep -P "$NGINX_PID" | head -1)
cpu() { awk '{print $14 + $15}' "/proc/$WORKER/stat"; }
for i in $(seq 1 "$RUNS"); do
  fresh_slot
  sync -f "$SLOT"
  before=$(cpu); start=$(date +%s%N)
  if [ "${PEER:-}" = floor ]; then
    "$@" "$FLOOR_DIR/s2_floor" "$FLOOR_DIR/manifest" "${URL}RXCacheContent.zip" "$SLOT/floor" 2>/dev/null
  elif [ "${PEER:-}" = curl ]; then
    "$@" curl --parallel --parallel-max 8 -s -f --create-dirs -K "$CURL_CONFIG"
  elif [ "${PEER:-}" = rclone ]; then
    "$@" rclone copy --config /dev/null --http-url "$URL" :http: "$SLOT/rclone" --files-from "$CURL_CONFIG.list" \
      --http-no-head --no-traverse --transfers 8 -q
  else
    "$@" "$AGENT" sync --base-url "$URL" --dir "$SLOT/content" --state "$SLOT/state.sqlite"
  fi
  end=$(date +%s%N); after=$(cpu)
  printf 'run %d: %.3f s wall, nginx %d ms CPU\n' "$i" "$(echo "($end - $start) / 1000000000" | bc -l)" "$(( (after - before) * 1000 / $(getconf CLK_TCK) ))"
done
[ "$FS" = ext4 ] && rm -rf "$RUNS_DIR/profile-trash"
