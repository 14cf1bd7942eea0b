#!/usr/bin/env bash
# `make run`: serve each ExampleStorage version on loopback in turn and mirror it, showing what
# each sync did. Everything it writes lives under .build/demo/ (the state file too).
set -euo pipefail
agent="$1"
cd "$(dirname "$0")/.."
demo=.build/demo
rm -rf "$demo" && mkdir -p "$demo"
content="$demo/content"
state="$demo/state.sqlite"
server_pid=""
stop_server() { if [ -n "$server_pid" ]; then kill -9 "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; server_pid=""; fi; }
trap stop_server EXIT

serve() {
  stop_server
  : > "$demo/url"
  "$agent" serve "ExampleStorage/versions/$1" --port 0 > "$demo/url" 2> "$demo/serve.log" &
  server_pid=$!
  for _ in $(seq 1 100); do [ -s "$demo/url" ] && break; sleep 0.05; done
  url=$(head -n1 "$demo/url")
  [ -n "$url" ] || { echo "the server did not start:"; cat "$demo/serve.log"; exit 1; }
}

step() {
  echo
  echo "== storage publishes $1 ($2) at $url"
  "$agent" sync --base-url "$url" --dir "$content" --state "$state" --verbose 2> "$demo/sync-$1.log" \
    || { echo "sync failed:"; cat "$demo/sync-$1.log"; exit 1; }
  grep -E " warning " "$demo/sync-$1.log" | sed -E 's/^[^ ]+ //' | sed 's/^/   /' || true
}

serve 1.0; step 1.0 "first sync: restore from the archive"
serve 1.2; step 1.2 "two versions behind: one net plan over 1.1 and 1.2"
serve 1.4; step 1.4 "1.2 is above minimalCacheVersion 1.1: replay 1.3 and 1.4"
step 1.4 "nothing new: one conditional request"

echo
echo "== mirrored tree at $content"
(cd "$content" && find . -mindepth 1 | sort | sed 's|^\./|   |')
echo
echo "== compared with ExampleStorage/manifests/1.4.json"
python3 scripts/compare_tree.py "$content" ExampleStorage/manifests/1.4.json
echo
echo "== sync-agent status --json"
"$agent" status --dir "$content" --state "$state" --json
