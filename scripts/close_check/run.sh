#!/usr/bin/env bash
# Runs a command (a `swift test` run) with close_check.so preloaded, then fails if any program
# built here closed a descriptor that was not open (see close_check.c), printing where, with the
# frames of our binaries symbolized. Usage: scripts/close_check/run.sh COMMAND [ARGS...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$repo/.build/close-check"
mkdir -p "$out"
shim="$out/close_check.so"
if [[ ! -f "$shim" || "$here/close_check.c" -nt "$shim" ]]; then
    # The Swift toolchain ships clang beside swift (SwiftPM builds the C targets with it); then
    # clang, cc or gcc on the PATH.
    compiler="$(dirname "$(readlink -f "$(command -v swift)")")/clang"
    [[ -x "$compiler" ]] || compiler="$(command -v clang || command -v cc || command -v gcc || true)"
    if [[ -z "$compiler" ]] || ! "$compiler" -shared -fPIC -O2 -o "$shim.tmp" "$here/close_check.c" -ldl; then
        # The tests still run: the check is a net under them, not their subject.
        echo "close_check: WARNING: cannot build $shim (no working C compiler: clang beside swift, clang, cc, gcc);" \
            "running without the double-close check" >&2
        exec "$@"
    fi
    mv "$shim.tmp" "$shim"
fi
log="$(mktemp "$out/log.XXXXXX")"
trap 'rm -f "$log"' EXIT
status=0
LD_PRELOAD="$shim${LD_PRELOAD:+:$LD_PRELOAD}" CLOSE_CHECK_LOG="$log" CLOSE_CHECK_PREFIX="$repo/" "$@" || status=$?
if [[ -s "$log" ]]; then
    echo "close_check: a program built here closed a descriptor that was not open (a double close:" >&2
    echo "the second close hits whatever another thread opened under that number). Where:" >&2
    # Symbolize our frames: "binary(+0xOFFSET)" -> function and line.
    while IFS= read -r line; do
        if [[ "$line" =~ ^(/[^\(]+)\(\+(0x[0-9a-f]+)\) && "${BASH_REMATCH[1]}" == "$repo/"* ]]; then
            where="$(addr2line -f -C -e "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}" 2>/dev/null | paste -sd ' ' || true)"
            echo "    ${where:-$line}" | swift demangle --simplified 2>/dev/null || echo "    $line"
        elif [[ "$line" == ===* ]]; then
            echo "$line"
        fi
    done < "$log" | head -200 >&2
    exit 1
fi
exit "$status"
