#!/usr/bin/env python3
"""Failing origin (issue 20): 8 `sync-agent cache get` processes waiting on one failing URL.

    cache_origin.py run SYNC_AGENT   the scenario alone; prints the subsection's lines

bench/cache_bench.py runs it after the measures (`run(sync_agent)`) and writes `table_lines(result)`
into its section.

A loopback origin (stdlib ThreadingHTTPServer, 127.0.0.1, ephemeral port) answers every GET of
/fail/STATUS/TAG after DELAY seconds with STATUS and a short body, and logs each request's arrival.
Per round and per status, in a cache folder of that round's own:

1. solo: one `sync-agent cache get URL --cache FOLDER` of a URL of its own; its wall time is "one
   fetch's time" as a process sees it (start-up, opening the cache, the origin's delay, retries
   if any, exit). This run also creates the folder, so the 8 below open an existing cache.
2. herd: 8 `sync-agent cache get URL2 --cache FOLDER` of one new URL, started back to back (the
   spread of their starts is recorded); each process's wall time and exit code, and the number of
   requests the origin saw for URL2.

404 is the acceptance row: it is not retried, so one fetch is one request of DELAY; since issue 21 it
is the origin's answer, cached and served with exit 22 by every process. 503 is transient for the
loader's RetryPolicy (`LoadingConfiguration.retry`: 2 attempts, backoff from 0.2 s, jitter), so its
one fetch is 2 requests and the backoff, served with exit 23 (the waiters share the failure and its
status); the solo run measures that time, and the herd is judged against it.

Verdict (stated before the runs): pass when the origin saw exactly 1 request per fetch for the
herd's URL (1 for 404, the solo run's count for 503), all 8 exited with the solo run's exit code,
and the slowest of the 8 finished within the solo run's time + SLACK (0.5 s: 8 processes starting
at once on 2 cores). max ÷ DELAY and max ÷ solo are printed beside.

Settings (environment): ORIGIN_ROUNDS (3), ORIGIN_DELAY (1.5 s), ORIGIN_PROCS (8), ORIGIN_STATUSES
(404,503), BENCH_WORK (/tmp/content-sync-bench/cache; folders under BENCH_WORK/origin).
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SUBHEADING = "### Failing origin: 8 processes, one URL (issue 20)"
SLACK = 0.5  # seconds over the solo run allowed for 8 processes starting at once on 2 cores


class Origin:
    """The failing origin: its request log (path, arrival on the perf_counter clock)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.lock = threading.Lock()
        self.log: list[tuple[str, float]] = []
        handler = type("Handler", (FailingHandler,), {"origin": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> "Origin":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def arrivals(self, path: str) -> list[float]:
        with self.lock:
            return [t for p, t in self.log if p == path]


class FailingHandler(BaseHTTPRequestHandler):
    origin: Origin

    def do_GET(self) -> None:  # noqa: N802  (http.server's naming)
        with self.origin.lock:
            self.origin.log.append((self.path, time.perf_counter()))
        parts = self.path.split("/")
        status = int(parts[2]) if len(parts) > 3 and parts[1] == "fail" and parts[2].isdigit() else 400
        time.sleep(self.origin.delay)
        body = f"origin failing on purpose: {status}\n".encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:  # quiet: the log above is the record
        pass


def run_processes(agent: str, url: str, folder: Path, count: int) -> tuple[list[dict], float]:
    """Starts `count` `cache get` processes back to back; each one's start, end, exit code and the
    end of its stderr. Returns them and the perf_counter time the first was started."""
    procs, runs = [], []
    first = time.perf_counter()
    for _ in range(count):
        started = time.perf_counter()
        p = subprocess.Popen([agent, "cache", "get", url, "--cache", str(folder)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        procs.append((p, started))
    done: list[dict | None] = [None] * count

    def reap(i: int, p: subprocess.Popen, started: float) -> None:
        _, err = p.communicate(timeout=120)
        done[i] = {"start_s": started - first, "wall_s": time.perf_counter() - started, "exit": p.returncode,
                   "stderr": err.strip().splitlines()[-1][:300] if err.strip() else ""}

    threads = [threading.Thread(target=reap, args=(i, p, s)) for i, (p, s) in enumerate(procs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [d for d in done if d is not None], first


def run(agent: str) -> dict:
    rounds = int(os.environ.get("ORIGIN_ROUNDS", "3"))
    delay = float(os.environ.get("ORIGIN_DELAY", "1.5"))
    procs = int(os.environ.get("ORIGIN_PROCS", "8"))
    statuses = [int(s) for s in os.environ.get("ORIGIN_STATUSES", "404,503").split(",") if s]
    work = Path(os.environ.get("BENCH_WORK", "/tmp/content-sync-bench/cache")) / "origin"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    origin = Origin(delay).start()
    result = {"kind": "origin", "delay_s": delay, "procs": procs, "slack_s": SLACK, "rounds": []}
    try:
        for r in range(rounds):
            for status in statuses:
                folder = work / f"r{r}-{status}"
                solo_path, herd_path = f"/fail/{status}/solo-r{r}", f"/fail/{status}/herd-r{r}"
                solo, _ = run_processes(agent, origin.url(solo_path), folder, 1)
                herd, first = run_processes(agent, origin.url(herd_path), folder, procs)
                arrivals = [t - first for t in origin.arrivals(herd_path)]
                result["rounds"].append({"round": r, "status": status, "solo": solo[0],
                                         "solo_requests": len(origin.arrivals(solo_path)), "herd": herd,
                                         "herd_requests": len(arrivals), "arrivals_s": arrivals})
                walls = [h["wall_s"] for h in herd]
                print(f"[cache_origin.py] round {r + 1}/{rounds}, {status}: solo {solo[0]['wall_s']:.2f} s "
                      f"(exit {solo[0]['exit']}, {len(origin.arrivals(solo_path))} requests); {procs} processes "
                      f"{min(walls):.2f}–{max(walls):.2f} s, exits {sorted({h['exit'] for h in herd})}, "
                      f"{len(arrivals)} requests", file=sys.stderr, flush=True)
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        origin.stop()
    return result


def leader_end(row: dict, delay: float) -> float:
    """When the fetch the herd waited for ended, from the first start: its last request's
    arrival at the origin plus the origin's delay (its answer)."""
    return max(row["arrivals_s"], default=0.0) + delay


def judge(row: dict, procs: int, slack: float, delay: float) -> tuple[bool, str]:
    solo, herd = row["solo"], row["herd"]
    worst = max(h["wall_s"] for h in herd)
    # One fetch's time: the solo run's, or the herd's own fetch's when its retries' backoff
    # (random jitter) took longer than the solo run's did.
    fetch = max(solo["wall_s"], leader_end(row, delay))
    reasons = []
    if row["herd_requests"] != row["solo_requests"]:
        reasons.append(f"{row['herd_requests']} requests for one fetch of {row['solo_requests']}")
    if len(herd) != procs or any(h["exit"] != solo["exit"] for h in herd):
        reasons.append("exit codes differ")
    if worst > fetch + slack:
        reasons.append(f"slowest {worst:.2f} s > one fetch {fetch:.2f} s + {slack} s")
    return not reasons, "; ".join(reasons)


def table_lines(result: dict) -> list[str]:
    d, procs, slack = result["delay_s"], result["procs"], result["slack_s"]
    lines = [SUBHEADING, "",
             f"A loopback origin (`bench/cache_origin.py`, Python `ThreadingHTTPServer`) answers `/fail/STATUS/…` after "
             f"D = {d:g} s with that status. Per round and status, in a fresh cache folder on the work filesystem: one "
             f"`sync-agent cache get URL --cache DIR` alone (\"solo\", which also creates the folder: one fetch's time as a "
             f"process sees it), then {procs} processes of `sync-agent cache get URL2 --cache DIR` started back to back on "
             f"one new URL (times from the first one's start). 404 is the acceptance row: it is not retried, so one fetch is one request, "
             f"and since issue 21 it is cached and served (exit 22). 503 "
             f"is retried (`LoadingConfiguration.retry`: 2 attempts, backoff from 0.2 s; exit 23), so its one fetch is the solo run's requests "
             f"and time. Pass: the origin sees the solo run's request count for the {procs} (the leader's failure is "
             f"shared), all exit with the solo run's code, and the slowest finishes within one fetch's time + {slack} s: the "
             f"solo run's, or the herd's own fetch's (its last request's arrival + D) when the random backoff of its "
             f"retries made it the longer.", "",
             f"| origin answer | round | solo: wall (s), exit, requests | {procs} processes: wall min–max (s) | started within (s) | "
             "first request at (s) | herd's fetch ends (s) | exit codes | origin requests | max ÷ D | max ÷ solo | result |",
             "|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---|"]
    summary = []
    for status in dict.fromkeys(r["status"] for r in result["rounds"]):
        rows = [r for r in result["rounds"] if r["status"] == status]
        passed = 0
        for row in rows:
            walls = [h["wall_s"] for h in row["herd"]]
            ok, why = judge(row, procs, slack, d)
            passed += ok
            exits = ", ".join(f"{code}×{sum(h['exit'] == code for h in row['herd'])}" for code in sorted({h['exit'] for h in row['herd']}))
            lines.append(f"| {status} | {row['round'] + 1} | {row['solo']['wall_s']:.2f}, {row['solo']['exit']}, {row['solo_requests']} | "
                         f"{min(walls):.2f}–{max(walls):.2f} | {max(h['start_s'] for h in row['herd']):.3f} | "
                         f"{min(row['arrivals_s'], default=float('nan')):.2f} | {leader_end(row, d):.2f} | {exits} | "
                         f"{row['herd_requests']} | {max(walls) / d:.2f} | {max(walls) / row['solo']['wall_s']:.2f} | "
                         f"{'PASS' if ok else 'FAIL: ' + why} |")
        worst = statistics.median(max(h["wall_s"] for h in r["herd"]) for r in rows)
        reqs = sorted({r["herd_requests"] for r in rows})
        summary.append(f"- {status}{' (acceptance)' if status == 404 else ' (retried: informative)'}: {passed} of {len(rows)} rounds "
                       f"pass; median slowest {worst:.2f} s = {worst / d:.2f}× D; origin requests per herd {', '.join(map(str, reqs))}."
                       + f" Requests of round 1 arrived at {', '.join(f'{a:.2f}' for a in rows[0]['arrivals_s'])} s after the first start."
                       + (f" First stderr line of a process: `{rows[0]['herd'][0]['stderr']}`." if rows[0]["herd"][0]["stderr"] else ""))
    return lines + [""] + summary + [""]


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["run"] and len(argv) == 2:
        result = run(os.path.abspath(argv[1]))
        print(json.dumps(result), file=sys.stderr)
        print("\n".join(table_lines(result)))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(64)


if __name__ == "__main__":
    main()
