#!/usr/bin/env bash
# `make test`: the systemd units in contrib/systemd/ pass `systemd-analyze verify` with no warning
# (it exits 0 on unknown keys and bad values, so any output fails here), with ExecStart pointed at
# the built binary, and keep the settings operators rely on; the example config passes check-config. Skipped when systemd-analyze is absent.
#
#   bash scripts/check_systemd_unit.sh PATH/TO/sync-agent
set -uo pipefail
agent=$(realpath "$1")
here=$(cd "$(dirname "$0")/.." && pwd)
if ! command -v systemd-analyze >/dev/null; then
  echo "check_systemd_unit: SKIP (no systemd-analyze on this machine)"
  exit 0
fi
status=0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for unit in "$here"/contrib/systemd/*.service; do
  name=$(basename "$unit")
  sed "s|/usr/local/bin/sync-agent|$agent|g" "$unit" > "$scratch/$name"
  output=$(systemd-analyze verify --man=no "$scratch/$name" 2>&1)
  code=$?
  if [ $code -ne 0 ] || [ -n "$output" ]; then
    echo "check_systemd_unit: $name does not verify cleanly (exit $code):"
    echo "$output" | sed "s|$scratch/||g"
    status=1
  fi
  for setting in '^Type=notify$' '^ExecStart=.* watch --config ' '^ExecReload=' '^WatchdogSec=' '^StateDirectory=' '^ProtectSystem=strict$' '^ReadWritePaths=' '^NoNewPrivileges=yes$' '^Restart=on-failure$'; do
    grep -q "$setting" "$unit" || { echo "check_systemd_unit: $name lacks $setting"; status=1; }
  done
done
# The example config the unit reads must load (its storage folder is made relative to a scratch root).
sed "s|/srv/mirror|$scratch/mirror|" "$here/contrib/systemd/agent.yaml" > "$scratch/agent.yaml"
if ! output=$("$agent" check-config "$scratch/agent.yaml" 2>&1); then
  echo "check_systemd_unit: contrib/systemd/agent.yaml does not pass check-config:"
  echo "$output"
  status=1
fi
[ $status -eq 0 ] && echo "check_systemd_unit: contrib/systemd units verify cleanly with systemd-analyze $(systemd-analyze --version | head -1 | cut -d' ' -f2)"
exit $status
