#!/usr/bin/env bash
# Publish benchmark (issue 3): time `sync-agent publish` on a 5,000-file, 200 MiB tree with 1% of
# the files changed (edits, renames, adds, deletes), and count the changes and bytes of a folder
# rename holding 1,000 files. Usage: bench/publish.sh SYNC_AGENT_BINARY
set -euo pipefail
agent="$1"
cd "$(dirname "$0")/.."
work="${BENCH_WORK:-/tmp/content-sync-bench}/publish"
runs="${RUNS:-3}"
rm -rf "$work" && mkdir -p "$work"
python3 bench/make_storage.py --out "$work/generated" --files 5000 --mb 200 > /dev/null
base="https://bench.invalid/store/"
seconds() { python3 -c 'import sys,time; print(f"{time.time():.3f}")'; }

# v1: the generated content. v2: 1% (50 files) changed: 20 edited, 10 renamed, 10 added, 10 deleted.
cp -a "$work/generated/RXCacheContent" "$work/v1"
cp -a "$work/v1" "$work/v2"
mapfile -t files < <(cd "$work/v2" && find . -type f | sort | sed 's|^\./||')
for i in $(seq 0 19); do printf 'edited %d\n' "$i" >> "$work/v2/${files[$((i * 97))]}"; done
for i in $(seq 20 29); do f="${files[$((i * 97))]}"; mv "$work/v2/$f" "$work/v2/${f%.*}-renamed.${f##*.}"; done
for i in $(seq 30 39); do rm "$work/v2/${files[$((i * 97))]}"; done
for i in $(seq 0 9); do head -c 20000 /dev/urandom > "$work/v2/g00/new-$i.bin"; done

# v3: v2 with a 1,000-file folder group renamed.
cp -a "$work/v2" "$work/v3"
folder=$(cd "$work/v3" && find . -mindepth 1 -maxdepth 1 -type d | sort | head -n1 | sed 's|^\./||')
count=$(find "$work/v3/$folder" -type f | wc -l)
mv "$work/v3/$folder" "$work/v3/${folder}-renamed"

echo "publish benchmark: $(nproc) cores, work folder $work ($(df -T "$work" | awk 'NR==2 {print $2}'))"
for run in $(seq 1 "$runs"); do
  storage="$work/storage-$run"
  "$agent" publish --init --storage "$storage" --content "$work/v1" --version 1.0 --base-url "$base" > /dev/null
  sync -f "$storage" 2>/dev/null || true
  start=$(seconds)
  out=$("$agent" publish --storage "$storage" --content "$work/v2" --version 1.1 --base-url "$base")
  end=$(seconds)
  echo "run $run: publish of 1% changed took $(python3 -c "print(f'{$end - $start:.2f}')") s: $(echo "$out" | head -n1)"
done
storage="$work/storage-1"
out=$("$agent" publish --storage "$storage" --content "$work/v3" --version 1.2 --base-url "$base")
echo "folder rename ($folder, $count files): $(echo "$out" | head -n1)"
echo "$out" | tail -n +2 | head -n 5
rm -rf "$work"
