#!/usr/bin/env bash
# The first replay after a restore, at scale: for each AGENT in turn (ROUNDS rounds, alternated), a restore
# of 1.0 into a fresh slot, then its replay to 1.1 (every 1,000th file of the tree changed), each under GNU
# time with `--verbose`; prints wall time and peak RSS of both, and the phases that differ.
#
#   bash bench/first_replay.sh ROUNDS AGENT [AGENT ...]
#
# FILES=100000 files of 512 seeded bytes in folders of 100 (bench/scale_bench.py's layout), made and published
# (1.0 with `publish --init`, then 1.1) by the first AGENT once, under WORK=/work/rig100k (kept: delete it to
# start over; each slot left behind is renamed to WORK/trash-*, which you delete).
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,10p "$0" >&2; exit 2; }
ROUNDS=$1; shift
W=${WORK:-/work/rig100k}; REPO=$(cd "$(dirname "$0")/.." && pwd); N=${FILES:-100000}
mkdir -p $W
if [ ! -d "$W/snaps/1.1" ]; then
  rm -rf $W/content $W/storage $W/snaps
  python3 - "$REPO/bench" "$W/content" "$N" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from scale_bench import write_tree
for _ in write_tree(Path(sys.argv[2]), int(sys.argv[3])):
    pass
PY
  A=$(realpath "$1")
  $A publish --init --storage $W/storage --content $W/content --version 1.0 --base-url https://bench.invalid/r/ > $W/pub1.out 2>&1
  mkdir -p $W/snaps; rsync -a --exclude /.content-sync-publish-base $W/storage/ $W/snaps/1.0
  python3 - "$REPO/bench" "$W/content" "$N" <<'PY'
import os, random, sys
sys.path.insert(0, sys.argv[1])
from scale_bench import rel_path, FILE_BYTES
rng = random.Random("change-100")
for i in range(0, int(sys.argv[3]), 1000):
    p = os.path.join(sys.argv[2], rel_path(i)); os.unlink(p)
    with open(p, "wb") as f: f.write(rng.randbytes(FILE_BYTES))
PY
  $A publish --storage $W/storage --content $W/content --version 1.1 --base-url https://bench.invalid/r/ > $W/pub2.out 2>&1
  rsync -a --exclude /.content-sync-publish-base $W/storage/ $W/snaps/1.1
fi
. $REPO/bench/nginx.sh
mkdir -p $W/www $W/nginx
nginx_start $W/nginx $W/www >/dev/null 2>&1
trap 'nginx_stop >/dev/null 2>&1' EXIT
URL=http://127.0.0.1:$NGINX_PORT/r/
for r in $(seq 1 $ROUNDS); do
  for A in "$@"; do
    S=$W/slot-$(basename $A); if [ -e $S ]; then mv $S $W/trash-$(date +%s%N); fi; mkdir -p $S; sync -f $W
    ln -sfn $W/snaps/1.0 $W/www/r
    /usr/bin/time -f "%e %M" -o $S/restore.time $A sync --base-url $URL --dir $S/content --state $S/state.sqlite --verbose 2> $S/restore.err >/dev/null
    ln -sfn $W/snaps/1.1 $W/www/r
    sync -f $W
    /usr/bin/time -f "%e %M" -o $S/replay.time $A sync --base-url $URL --dir $S/content --state $S/state.sqlite --verbose 2> $S/replay.err >/dev/null
    echo "$(basename $A) r$r restore $(cat $S/restore.time) [$(grep -o 'tree check [0-9.]* s' $S/restore.err | tail -1)] | first replay $(cat $S/replay.time) [$(grep -o 'stage [0-9.]* s, tree check [0-9.]* s, switch [0-9.]* s' $S/replay.err | tail -1)]"
  done
done
