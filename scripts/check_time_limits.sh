#!/usr/bin/env bash
# Time limits in tests are hang detectors, never speed checks (see the Makefile's `test`): a limit
# under 3 minutes fails a test that merely queued behind its group on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
short=$(grep -rnE 'timeLimit\(\.(minutes\((1|2)\)|seconds\([0-9]+\))\)' Tests || true)
if [ -n "$short" ]; then
  echo "$short"
  echo "check_time_limits: a test time limit is under 3 minutes; use .timeLimit(.minutes(3)) or more"
  exit 1
fi
echo "check_time_limits: every test time limit is 3 minutes or more"
