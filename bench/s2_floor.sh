#!/usr/bin/env bash
# What S2's bytes cost on this machine without sync-agent: the floor under issue 23's S2 goal.
# On the S2 storage that bench/scenarios.sh prepared (run it once first), with a private nginx on
# loopback and a tmpfs (/dev/shm), ROUNDS times (default 5):
#
#   1. curl --parallel --parallel-max 8, one request a file, the 2,100 new files of 1.0 → 1.1
#      (the goal's yardstick);
#   2. the same bytes as sync-agent's 54 ranges of the archive, 8 at once, into /dev/null
#      (receiving alone) and into files on the tmpfs (receiving and writing once);
#   3. `openssl dgst -sha256` of the 2,100 files (the hashing every update does), and
#      `cp -a` of them (writing 2,100 files from bytes in memory, plus reading them).
#
#   bash bench/s2_floor.sh [ROUNDS]
#
# Prints wall and CPU time (user+sys) of each, and nginx's CPU time for the transfers.
set -euo pipefail
ROUNDS=${1:-5}
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${BENCH_WORK:-/tmp/content-sync-bench}/scenarios
STORAGE=$WORK/www/s2
[ -f "$STORAGE/RXCacheContent.zip" ] || { echo "s2_floor.sh: no S2 storage at $STORAGE; run bench/scenarios.sh once" >&2; exit 2; }
. "$REPO/bench/nginx.sh"
bench_require_packages nginx time curl openssl
SCRATCH=$(mktemp -d /tmp/s2-floor.XXXXXX)
SHM=$(mktemp -d /dev/shm/s2-floor.XXXXXX)
cleanup() { nginx_stop; rm -rf "$SCRATCH" "$SHM"; }
trap cleanup EXIT
nginx_start "$SCRATCH/nginx" "$WORK/www" >/dev/null 2>&1
WORKER=$(pgrep -P "$NGINX_PID" | head -1)
cpu() { awk '{print $14 + $15}' "/proc/$WORKER/stat"; }
URL=http://127.0.0.1:$NGINX_PORT/s2
# The new files of 1.1 (from its change list) as a curl config and a list; the ranges as sync-agent
# cut them: the archive's first TOTAL bytes in 54 pieces.
python3 - "$STORAGE/RXCacheConfig/HistoryOfVersions" "$URL" "$SHM" "$SCRATCH" <<'PY'
import json, pathlib, sys
history, url, shm, scratch = sys.argv[1:]
changes = json.loads(next(pathlib.Path(history).glob("changes_1.0_1.1.json")).read_text())["changes"]
paths = [c["newPath"].split("RXCacheContent/", 1)[1] for c in changes
         if not c.get("oldPath") and not c["newPath"].endswith("/")]
pathlib.Path(scratch, "files.cfg").write_text("".join(
    f'url = "{url}/RXCacheContent/{p}"\noutput = "{shm}/files/{p}"\n' for p in paths))
pathlib.Path(scratch, "files.list").write_text("".join(p + "\n" for p in paths))
total, pieces = 113784371, 54
step = (total + pieces - 1) // pieces
for name, output in (("null", lambda a: "/dev/null"), ("tmpfs", lambda a: f"{shm}/ranges/{a}")):
    pathlib.Path(scratch, f"ranges-{name}.cfg").write_text("".join(
        f'url = "{url}/RXCacheContent.zip"\nrange = {a}-{min(a + step, total) - 1}\noutput = "{output(a)}"\n'
        for a in range(0, total, step)))
PY
timed() { # LABEL COMMAND...: wall and CPU of the command, and nginx's CPU meanwhile
  local label=$1; shift
  local before; before=$(cpu)
  /usr/bin/time -f "$label: wall %e s, CPU %U+%S s" "$@" 2>&1 >/dev/null | grep -v '^DL%\|--:--' || true
  echo "    nginx $(( ($(cpu) - before) * 1000 / $(getconf CLK_TCK) )) ms CPU"
}
for round in $(seq 1 "$ROUNDS"); do
  echo "round $round"
  rm -rf "$SHM/files" "$SHM/ranges" "$SHM/copy"; mkdir -p "$SHM/ranges"
  timed "curl, 2,100 files, 8 at once     " curl --parallel --parallel-max 8 -s -f --create-dirs -K "$SCRATCH/files.cfg"
  timed "54 ranges into /dev/null, 8 at once" curl --parallel --parallel-max 8 -s -f -K "$SCRATCH/ranges-null.cfg"
  timed "54 ranges into tmpfs files, 8 at once" curl --parallel --parallel-max 8 -s -f -K "$SCRATCH/ranges-tmpfs.cfg"
  (cd "$SHM/files" && /usr/bin/time -f "sha-256 of the 2,100 files (openssl): wall %e s, CPU %U+%S s" \
    xargs -a "$SCRATCH/files.list" openssl dgst -sha256 >/dev/null)
  /usr/bin/time -f "cp -a of the 2,100 files: wall %e s, CPU %U+%S s" cp -a "$SHM/files" "$SHM/copy"
done
