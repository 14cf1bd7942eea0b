#!/usr/bin/env python3
"""Fleet simulation (issue 12): 1,000 agents against one nginx on loopback.

    python3 bench/fleet/fleet_sim.py --agent PATH/TO/sync-agent --sim PATH/TO/fleet-sim
    (`make bench-fleet` builds both in release and runs this; about 12 minutes)

It publishes a small storage (a few hundred files, a few MB) with the real publisher
(`sync-agent publish`), serves it with nginx (own config, a free loopback port, an access log with
$msec, $status, $request_length, $bytes_sent and the validators), and runs `fleet-sim`, whose N
in-process agents each keep their own content folder and state database and loop like
`sync-agent watch`. Intervals are scaled down (20 s for the daemon's 300 s). Scenarios, each a
fresh fleet-sim process (so each starts as a restart of every agent):

  install  agents with no content: every one restores from the archive (this seeds the fleet)
  herd     jitter 0, splay 0; a new version is published at PUBLISH_AT s
  jitter   jitter 0.1, splay 0; a new version at PUBLISH_AT s
  splay    jitter 0.1, splay = the interval; a new version at PUBLISH_AT s
  quiet    jitter 0.1, splay = the interval, nothing published: bytes per poll

Requests per second come from nginx's access log; what each agent did comes from fleet-sim's
JSON report. The script fails (exit 1) when an agent does not converge: fleet-sim's own check
(every agent at the published version, its last check successful), then every agent's content
tree compared byte for byte with the published content at the end.

Environment (all optional): AGENTS=1000 INTERVAL=20 DURATION=150 PUBLISH_AT=50
INSTALL_SECONDS=60 QUIET_SECONDS=100 FILES=300 SEED=1 CONNECTIONS=64
FLEET_WORK=/tmp/content-sync-fleet (storage, nginx files, results/*.json; kept)
FLEET_SCRATCH=/dev/shm/content-sync-fleet when /dev/shm is tmpfs with room, else FLEET_WORK/agents
(the agents' folders; removed at the end unless KEEP=1)
FLEET_DOC=docs/operations.md (the "## Fleet simulation" section is replaced; "" prints only).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import random
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))
import report  # noqa: E402  (machine_line, replace_section)

PUBLISHED_BASE = "https://fleet.invalid/fleet/"
DEFAULT_INTERVAL = 300        # sync-agent watch's --interval
SECTION = "## Fleet simulation"
DOC_TITLE = "# Operating sync-agent"

ENV = os.environ
AGENTS = int(ENV.get("AGENTS", 1000))
INTERVAL = float(ENV.get("INTERVAL", 20))
DURATION = float(ENV.get("DURATION", 150))
PUBLISH_AT = float(ENV.get("PUBLISH_AT", 50))
INSTALL_SECONDS = float(ENV.get("INSTALL_SECONDS", 60))
QUIET_SECONDS = float(ENV.get("QUIET_SECONDS", 100))
FILES = int(ENV.get("FILES", 300))
SEED = int(ENV.get("SEED", 1))
CONNECTIONS = int(ENV.get("CONNECTIONS", 64))
KEEP = ENV.get("KEEP", "0") == "1"


def log(msg: str) -> None:
    print(f"[fleet_sim.py {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Failure(Exception):
    """The run cannot go on, or an agent did not converge."""


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise Failure(f"{' '.join(map(str, cmd))} exited {res.returncode}: {res.stderr.strip()[-2000:]}")
    return res


def children_cpu_seconds() -> float:
    """User + system CPU time of this script's finished children (fleet-sim, the publishes)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def load() -> str:
    return "load average " + " ".join(Path("/proc/loadavg").read_text().split()[:3])


# ---------------------------------------------------------------- content and publishing

def text_bytes(rng: random.Random, size: int) -> bytes:
    words = ["storage", "version", "agent", "poll", "change", "content", "status", "fleet", "nginx", "archive",
             "publish", "client", "folder", "update", "server", "cache"]
    out = bytearray()
    while len(out) < size:
        out += (" ".join(rng.choice(words) for _ in range(12)) + "\n").encode()
    return bytes(out[:size])


def file_bytes(rng: random.Random, name: str, size: int) -> bytes:
    return rng.randbytes(size) if name.endswith(".bin") else text_bytes(rng, size)


def make_content(root: Path, files: int, rng: random.Random) -> None:
    """FILES files in 12 folders (some nested): mostly 2–12 KiB, one in 30 of 40–80 KiB; half
    incompressible (.bin), half text (.txt). Deterministic for a seed."""
    for index in range(files):
        folder = root / f"section-{index % 12:02d}" / ("media" if index % 5 == 0 else "")
        folder.mkdir(parents=True, exist_ok=True)
        name = f"item-{index:04d}.{'bin' if index % 2 else 'txt'}"
        size = rng.randint(40 << 10, 80 << 10) if index % 30 == 7 else rng.randint(2 << 10, 12 << 10)
        (folder / name).write_bytes(file_bytes(rng, name, size))


def next_content(previous: Path, new: Path, rng: random.Random, serial: int) -> dict:
    """A copy of `previous` with 6 files rewritten, 4 added, 2 removed and 1 moved."""
    shutil.copytree(previous, new)
    files = sorted(p for p in new.rglob("*") if p.is_file())
    picked = rng.sample(files, 9)
    for path in picked[:6]:
        path.write_bytes(file_bytes(rng, path.name, rng.randint(2 << 10, 12 << 10)))
    for path in picked[6:8]:
        path.unlink()
    moved = picked[8]
    moved.rename(moved.with_name(f"moved-{serial}-{moved.name}"))
    for k in range(4):
        name = f"new-{serial}-{k}.{'bin' if k % 2 else 'txt'}"
        (new / f"section-{rng.randrange(12):02d}" / name).write_bytes(file_bytes(rng, name, rng.randint(2 << 10, 12 << 10)))
    return {"rewritten": 6, "added": 4, "removed": 2, "moved": 1}


def tree_digest(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            path = Path(dirpath) / name
            out[os.path.relpath(path, root)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def tree_size(root: Path) -> tuple[int, int]:
    sizes = [p.stat().st_size for p in root.rglob("*") if p.is_file()]
    return len(sizes), sum(sizes)


# ---------------------------------------------------------------- nginx

class Nginx:
    """nginx in the foreground as our child, own config under `work`, a free port on 127.0.0.1;
    stopped by its PID. Static files get ETag and Last-Modified (nginx's defaults)."""

    FORMAT = ('$msec $status $request_method "$request_uri" $request_length $bytes_sent $body_bytes_sent '
              '"$http_if_none_match" "$http_if_modified_since" "$sent_http_etag" "$sent_http_last_modified"')

    def __init__(self, work: Path, root: Path, access_log: Path) -> None:
        self.work, self.root, self.access_log = work, root, access_log
        self.proc: subprocess.Popen | None = None
        self.port = 0

    def start(self) -> None:
        binary = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
        if not binary:
            raise Failure("nginx is not installed: run `make bench-deps` (nginx-light)")
        (self.work / "tmp").mkdir(parents=True, exist_ok=True)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        user = "user root;" if os.getuid() == 0 else ""
        tmp = self.work / "tmp"
        conf = self.work / "nginx.conf"
        conf.write_text(f"""daemon off;
{user}
worker_processes 1;
worker_rlimit_nofile 8192;
pid {self.work}/nginx.pid;
error_log {self.work}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    log_format fleet '{self.FORMAT}';
    access_log {self.access_log} fleet;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 30;
    keepalive_requests 1000000;
    types {{ application/json json; application/zip zip; }}
    default_type application/octet-stream;
    client_body_temp_path {tmp}/client;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen 127.0.0.1:{self.port} backlog=4096;
        root {self.root};
    }}
}}
""")
        self.proc = subprocess.Popen([binary, "-p", str(self.work), "-c", str(conf), "-e", str(self.work / "error.log")])
        for _ in range(100):
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    break
            except OSError:
                if self.proc.poll() is not None:
                    raise Failure(f"nginx did not start: {(self.work / 'error.log').read_text()[-2000:]}")
                time.sleep(0.05)
        log(f"nginx (pid {self.proc.pid}) serves {self.root} on 127.0.0.1:{self.port}")

    def cpu_seconds(self) -> float:
        """User + system CPU time of the master and its workers so far."""
        if not self.proc:
            return 0.0
        total = 0.0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(entry.name) == self.proc.pid or int(fields[1]) == self.proc.pid:
                total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            log(f"nginx (pid {self.proc.pid}) stopped")
        self.proc = None


class AccessLog(report.AccessLog):
    LINE = re.compile(r'^(\S+) (\d+) (\S+) "([^"]*)" (\d+) (\d+) (\d+) "([^"]*)" "([^"]*)" "([^"]*)" "([^"]*)"$')
    # 1,000 agents' requests take longer to land than one client's.
    settle = 0.3
    strict = True

    def entry(self, m: re.Match) -> dict:
        return {"t": float(m[1]), "status": int(m[2]), "method": m[3], "uri": m[4],
                "request_length": int(m[5]), "bytes_sent": int(m[6]), "body": int(m[7]),
                "inm": m[8], "ims": m[9], "etag": m[10], "last_modified": m[11]}


def kind(uri: str) -> str:
    path = uri.split("?", 1)[0]
    if path.endswith("/RXCacheConfig/cacheStatus.json"):
        return "status"
    if path.endswith("/RXCacheConfig/listOfURLsToUpdatesByVersion.json"):
        return "update list"
    if "/RXCacheConfig/HistoryOfVersions/" in path:
        return "change list"
    if "/RXCacheConfig/" in path:
        return "manifest"
    if path.endswith("/RXCacheContent.zip"):
        return "archive"
    if "/RXCacheContent/" in path:
        return "content file"
    return "other"


# ---------------------------------------------------------------- statistics

def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def sparkline(series: list[int], peak: int | None = None) -> str:
    bars = " ▁▂▃▄▅▆▇█"
    top = peak or max(series) or 1
    return "".join(bars[0] if v == 0 else bars[max(1, min(8, math.ceil(v / top * 8)))] for v in series)


def per_second(entries: list[dict], t0: float, seconds: int) -> list[int]:
    counts = [0] * seconds
    for e in entries:
        index = int(e["t"] - t0)
        if 0 <= index < seconds:
            counts[index] += 1
        elif index >= seconds:
            counts.extend([0] * (index - seconds + 1))
            seconds = index + 1
            counts[index] += 1
    return counts


def busiest_window(times: list[float], width: float = 1.0) -> int:
    """The most of the sorted `times` inside any window of `width` seconds (a sliding second:
    a herd that straddles two calendar seconds still counts whole)."""
    best, low = 0, 0
    for high, t in enumerate(times):
        while t - times[low] >= width:
            low += 1
        best = max(best, high - low + 1)
    return best


def round_peaks(times: list[float], interval: float, seconds: float) -> list[dict]:
    """For each complete interval-long window of the run (a round: every agent checks about
    once), the polls in it and the busiest sliding second among them. `times` are sorted."""
    rounds = []
    start = 0.0
    while start + interval <= seconds + 1e-9:
        inside = [t for t in times if start <= t < start + interval]
        spread = (inside[int(0.95 * len(inside)) - 1] - inside[int(0.05 * len(inside))]) if len(inside) >= 20 else None
        rounds.append({"from": start, "requests": len(inside), "busiest_second": busiest_window(inside), "spread_90": spread})
        start += interval
    return rounds


def schedule_model(agents: int, interval: float, jitter: float, splay: float, seconds: float, seed: int) -> list[float]:
    """The poll times (sorted) of a fleet following PollSchedule's arithmetic alone: the first
    check at splay × U, then pauses of interval × (1 + jitter × (2U − 1)), checks taking no time.
    The extrapolation to 100,000 agents runs it, after checking it against the measured rounds."""
    rng = random.Random(seed)
    times = []
    for _ in range(agents):
        t = splay * rng.random()
        while t < seconds:
            times.append(t)
            t += interval * (1 + jitter * (2 * rng.random() - 1))
    times.sort()
    return times


def model_counts(agents: int, interval: float, jitter: float, splay: float, seconds: float, seed: int) -> list[int]:
    """schedule_model's polls per calendar second, without keeping every time (for 100,000 agents)."""
    rng = random.Random(seed)
    counts = [0] * int(math.ceil(seconds))
    for _ in range(agents):
        t = splay * rng.random()
        while t < seconds:
            counts[int(t)] += 1
            t += interval * (1 + jitter * (2 * rng.random() - 1))
    return counts


# ---------------------------------------------------------------- the runs

class Fleet:
    def __init__(self, args: argparse.Namespace) -> None:
        self.agent, self.sim = args.agent, args.sim
        self.work = Path(ENV.get("FLEET_WORK", "/tmp/content-sync-fleet"))
        self.scratch = Path(ENV["FLEET_SCRATCH"]) if ENV.get("FLEET_SCRATCH") else self.default_scratch()
        self.www = self.work / "www"
        self.storage = self.www / "fleet"
        self.contents = self.work / "content"
        self.results = self.work / "results"
        self.nginx = Nginx(self.work / "nginx", self.www, self.work / "nginx" / "access.log")
        self.log = AccessLog(self.nginx.access_log)
        self.sim_proc: subprocess.Popen | None = None
        self.versions: list[str] = []
        self.scenarios: list[dict] = []

    def default_scratch(self) -> Path:
        shm = Path("/dev/shm")
        if shm.is_dir() and report.fs_type(str(shm)) == "tmpfs" and shutil.disk_usage(shm).free > AGENTS * 12 * 1_048_576:
            return shm / "content-sync-fleet"
        return self.work / "agents"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.nginx.port}/fleet/"

    def prepare(self) -> None:
        for path in (self.www, self.contents, self.scratch):
            if path.exists():
                shutil.rmtree(path)
        self.www.mkdir(parents=True)
        self.results.mkdir(parents=True, exist_ok=True)
        (self.work / "nginx").mkdir(parents=True, exist_ok=True)
        self.nginx.access_log.write_text("")
        rng = random.Random(SEED)
        first = self.contents / "1.0"
        make_content(first, FILES, rng)
        files, size = tree_size(first)
        self.content_info = {"files": files, "bytes": size}
        run([self.agent, "publish", "--init", "--storage", str(self.storage), "--content", str(first), "--version", "1.0",
             "--base-url", PUBLISHED_BASE])
        self.versions = ["1.0"]
        self.pending: list[str] = []
        for serial in (1, 2, 3):
            previous = self.contents / f"1.{serial - 1}" if serial > 1 else first
            self.change_info = next_content(previous, self.contents / f"1.{serial}", rng, serial)
            self.pending.append(f"1.{serial}")
        zip_size = (self.storage / "RXCacheContent.zip").stat().st_size
        self.content_info["zip_bytes"] = zip_size
        log(f"storage 1.0 published: {files} files, {size / 1e6:.1f} MB, archive {zip_size / 1e6:.1f} MB; "
            f"agents' folders under {self.scratch} ({report.fs_type(str(self.scratch.parent))})")

    def publish_next(self) -> tuple[str, float, float]:
        version = self.pending.pop(0)
        started = time.time()
        run([self.agent, "publish", "--storage", str(self.storage), "--content", str(self.contents / version),
             "--version", version, "--base-url", PUBLISHED_BASE])
        ended = time.time()
        self.versions.append(version)
        log(f"published {version} in {ended - started:.2f} s")
        return version, started, ended

    def scenario(self, name: str, title: str, jitter: float, splay: float, duration: float, publish: bool) -> dict:
        """One fleet-sim run (a restart of every agent), with a publish at PUBLISH_AT s when asked."""
        expected = self.pending[0] if publish else self.versions[-1]
        report_path = self.results / f"{name}.json"
        cmd = [self.sim, "--base-url", self.base_url, "--scratch", str(self.scratch), "--agents", str(AGENTS),
               "--interval", f"{INTERVAL:g}", "--jitter", f"{jitter:g}", "--splay", f"{splay:g}", "--duration", f"{duration:g}",
               "--seed", str(SEED), "--connections", str(CONNECTIONS), "--report", str(report_path),
               "--expect-version", expected]
        load_before = load()
        log(f"{name}: {title} ({load_before})")
        offset = self.log.mark()
        nginx_cpu = self.nginx.cpu_seconds()
        children_cpu = children_cpu_seconds()
        started = threading.Event()
        start_epoch = [0.0]

        self.sim_proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def relay() -> None:
            for line in self.sim_proc.stderr:
                if "starting them all now" in line and not started.is_set():
                    start_epoch[0] = time.time()
                    started.set()
                print("    " + line.rstrip(), file=sys.stderr, flush=True)
        relay_thread = threading.Thread(target=relay, daemon=True)
        relay_thread.start()
        published = None
        if publish:
            if not started.wait(timeout=300):
                raise Failure(f"{name}: fleet-sim did not start its agents within 300 s")
            time.sleep(max(0.0, start_epoch[0] + PUBLISH_AT - time.time()))
            published = self.publish_next()
        stdout, _ = self.sim_proc.communicate()
        relay_thread.join(timeout=5)
        rc = self.sim_proc.returncode
        self.sim_proc = None
        for line in stdout.splitlines():
            print("    " + line, file=sys.stderr, flush=True)
        if rc != 0:
            raise Failure(f"{name}: fleet-sim exited {rc}; the fleet did not converge on {expected}:\n{stdout}")
        sim = json.loads(report_path.read_text())
        entries = self.log.since(offset)
        result = analyse(name, title, jitter, splay, sim, entries, published)
        result["load_before"], result["load_after"] = load_before, load()
        # CPU time of fleet-sim (and the publish, a fraction of a second) and of nginx's processes.
        result["sim_cpu_seconds"] = children_cpu_seconds() - children_cpu
        result["nginx_cpu_seconds"] = self.nginx.cpu_seconds() - nginx_cpu
        result["sim_summary"] = stdout.strip().splitlines()
        (self.results / f"{name}-analysis.json").write_text(json.dumps(result, indent=1))
        self.scenarios.append(result)
        return result

    def check_trees(self) -> int:
        """Every agent's content tree against the published content of the final version."""
        expected = tree_digest(self.contents / self.versions[-1])
        bad = []
        for folder in sorted((self.scratch / "agents").iterdir()):
            if tree_digest(folder / "content") != expected:
                bad.append(folder.name)
        if bad:
            raise Failure(f"{len(bad)} agent folder(s) differ from the published {self.versions[-1]}: {', '.join(bad[:10])}")
        return len(expected)

    def stop(self) -> None:
        if self.sim_proc and self.sim_proc.poll() is None:
            self.sim_proc.send_signal(signal.SIGTERM)
            try:
                self.sim_proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.sim_proc.kill()
                self.sim_proc.wait()
            log(f"fleet-sim (pid {self.sim_proc.pid}) stopped")
        self.nginx.stop()


def analyse(name: str, title: str, jitter: float, splay: float, sim: dict, entries: list[dict],
            published: tuple[str, float, float] | None) -> dict:
    t0 = sim["startEpoch"]
    seconds = int(math.ceil(sim["runSeconds"])) + 1
    series = per_second(entries, t0, seconds)
    kinds: dict[str, dict] = {}
    for e in entries:
        k = kinds.setdefault(kind(e["uri"]) + (" 304" if e["status"] == 304 else f" {e['status']}"),
                             {"requests": 0, "request_bytes": 0, "response_bytes": 0})
        k["requests"] += 1
        k["request_bytes"] += e["request_length"]
        k["response_bytes"] += e["bytes_sent"]
    polls = [e for e in entries if kind(e["uri"]) == "status"]
    checks = sum(a["checks"] for a in sim["agents"])
    status_series = per_second(polls, t0, seconds)
    all_times = sorted(e["t"] - t0 for e in entries)
    poll_times = sorted(e["t"] - t0 for e in polls)
    # The status requests (the polls themselves, 304 or 200) of each round.
    interval = sim["settings"]["interval"]
    rounds = round_peaks(poll_times, interval, sim["runSeconds"])
    result = {
        "name": name, "title": title, "jitter": jitter, "splay": splay, "interval": interval,
        "agents": sim["settings"]["agents"], "duration": sim["settings"]["duration"], "run_seconds": sim["runSeconds"],
        "start_epoch": t0, "requests": len(entries), "checks": checks, "status_requests": len(polls),
        "series": series, "status_series": status_series,
        "peak": max(series), "p50": percentile(series, 50), "p99": percentile(series, 99),
        "mean": len(entries) / max(1, len(series)),
        "status_peak": max(status_series), "rounds": rounds, "kinds": kinds,
        "peak_sliding": busiest_window(all_times), "status_peak_sliding": busiest_window(poll_times),
        "failures": sum(a["failures"] for a in sim["agents"]),
        "open_files_peak": sim["openFilesPeak"], "open_file_limit": sim["openFileLimit"],
        "peak_rss_mib": sim["peakResidentBytes"] / 1_048_576, "setup_seconds": sim["setupSeconds"],
        "statuses_without_validator": sum(1 for e in polls if e["etag"] in ("", "-") or e["last_modified"] in ("", "-")),
        "conditional_polls": sum(1 for e in polls if e["inm"] not in ("", "-")),
    }
    updates = [u for a in sim["agents"] for u in a["updates"]]
    if updates:
        durations = sorted(u["seconds"] for u in updates)
        result["update_seconds"] = {"p50": percentile(durations, 50), "max": durations[-1], "count": len(durations)}
        result["requests_per_update"] = sum(1 for e in entries if e["status"] != 304) / len(updates)
    if published:
        version, pub_start, pub_end = published
        result["publish"] = {"version": version, "at": pub_start - t0, "seconds": pub_end - pub_start}
        # Times after the publish count from the command's start: the status is installed last,
        # a moment before the command returns.
        after = [e for e in entries if e["t"] >= pub_start]
        wave = [e for e in after if e["status"] != 304]
        done = sorted(sim["startEpoch"] + u["start"] + u["seconds"] - pub_start
                      for a in sim["agents"] for u in a["updates"] if u["to"] == version)
        wave_kinds: dict[str, int] = {}
        for e in wave:
            wave_kinds[kind(e["uri"])] = wave_kinds.get(kind(e["uri"]), 0) + 1
        wave_series = per_second(wave, t0, seconds)
        result["wave"] = {
            "requests": len(wave), "kinds": wave_kinds,
            "first": (wave[0]["t"] - pub_start) if wave else None, "last": (wave[-1]["t"] - pub_start) if wave else None,
            "peak": max(wave_series), "peak_sliding": busiest_window(sorted(e["t"] for e in wave)),
            "bytes": sum(e["bytes_sent"] for e in wave),
            "agents_updated": len(done),
            "lag_p50": percentile(done, 50) if done else None, "lag_p99": percentile(done, 99) if done else None,
            "lag_max": done[-1] if done else None,
        }
    if name == "quiet":
        sizes = [e["request_length"] + e["bytes_sent"] for e in polls if e["status"] == 304]
        others = [e for e in entries if not (kind(e["uri"]) == "status" and e["status"] == 304)]
        result["poll_bytes"] = {
            "polls": len(sizes), "median": statistics.median(sizes) if sizes else 0,
            "min": min(sizes, default=0), "max": max(sizes, default=0),
            "request_median": statistics.median(e["request_length"] for e in polls) if polls else 0,
            "response_median": statistics.median(e["bytes_sent"] for e in polls) if polls else 0,
            "other_requests": len(others), "total_bytes": sum(e["request_length"] + e["bytes_sent"] for e in entries),
        }
    return result


# ---------------------------------------------------------------- the report

def fmt(n: float) -> str:
    return f"{n:,.0f}"


def describe_kinds(kinds: dict[str, int]) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))


def model_rows(big: int, seed: int) -> list[dict]:
    """The schedule model for BIG agents at the default interval, over six hours: the busiest
    calendar second at the restart, in the rest of the first hour, in the second hour and in the sixth."""
    rows = []
    for label, jitter, splay in (("jitter 0, splay 0", 0.0, 0.0), ("jitter 0.1, splay 0", 0.1, 0.0),
                                 ("jitter 0.1, splay 300 s", 0.1, float(DEFAULT_INTERVAL))):
        series = model_counts(big, DEFAULT_INTERVAL, jitter, splay, 6 * 3600, seed)
        rows.append({"label": label, "restart": max(series[:DEFAULT_INTERVAL]), "hour1": max(series[DEFAULT_INTERVAL:3600]),
                     "hour2": max(series[3600:7200]), "hour6": max(series[5 * 3600:6 * 3600])})
    return rows


def write_doc(run: dict) -> str:
    """The section, from a run's record (results/run.json)."""
    by = {s["name"]: s for s in run["scenarios"]}
    herd, jit, spl, quiet, install = by["herd"], by["jitter"], by["splay"], by["quiet"], by["install"]
    n, interval, seed = run["agents"], run["interval"], run["seed"]
    content = run["content"]
    scale = DEFAULT_INTERVAL / interval
    poll = quiet["poll_bytes"]
    per_hour = 3600 / DEFAULT_INTERVAL
    big = 100_000
    runs = (install, herd, jit, spl, quiet)
    load1 = lambda text: text.split()[-3]

    rows = [f"| {s['name']}: {s['title']} | {s['jitter']:g} | {s['splay']:g} s | {fmt(s['requests'])} | {fmt(s['checks'])} "
            f"| **{fmt(s['peak'])}** | {fmt(s['peak_sliding'])} | {fmt(s['p99'])} | {fmt(s['p50'])} | {s['mean']:.0f} |"
            for s in runs]
    cost_rows = [f"| {s['name']} | {s['failures']} | {s['sim_cpu_seconds']:.0f} s in {s['run_seconds']:.0f} s "
                 f"| {s['nginx_cpu_seconds']:.1f} s | {s['open_files_peak']:,} | {s['peak_rss_mib']:.0f} "
                 f"| {load1(s['load_before'])} → {load1(s['load_after'])} |"
                 for s in runs]
    series = []
    for s in runs:
        mark = f", publish of {s['publish']['version']} at t = {s['publish']['at']:.0f} s" if "publish" in s else ""
        series.append(f"{s['name']:<8} all requests, peak {s['peak']}/s{mark}")
        series.append(f"         |{sparkline(s['series'])}|")
        if s["name"] != "install" and s["series"] != s["status_series"]:
            series.append(f"         status polls only, peak {s['status_peak']}/s")
            series.append(f"         |{sparkline(s['status_series'])}|")

    # The measured rounds beside the schedule model's for the same fleet (AGENTS, INTERVAL).
    table_rounds = min(len(s["rounds"]) for s in (herd, jit, spl))
    round_header = "| | " + " | ".join(f"{int(i * interval)}–{int((i + 1) * interval)} s" for i in range(table_rounds)) + " |"
    round_sep = "|---|" + "---:|" * table_rounds
    round_rows = []
    for s in (herd, jit, spl):
        model = round_peaks(schedule_model(n, interval, s["jitter"], s["splay"], table_rounds * interval, seed), interval,
                            table_rounds * interval)
        pub = int(s["publish"]["at"] // interval)
        measured = [f"{r['busiest_second']}" + ("*" if i == pub else "") for i, r in enumerate(s["rounds"][:table_rounds])]
        round_rows.append(f"| {s['name']}, measured | " + " | ".join(measured) + " |")
        round_rows.append(f"| {s['name']}, schedule model | " + " | ".join(str(r["busiest_second"]) for r in model) + " |")
    herd_spread = [r["spread_90"] for r in herd["rounds"]]
    pub_round = int(herd["publish"]["at"] // interval)

    wave_rows = []
    for s in (herd, jit, spl):
        w = s["wave"]
        wave_rows.append(f"| {s['name']} | {s['publish']['version']} | {fmt(w['requests'])} | {fmt(w['peak_sliding'])} "
                         f"| {w['first']:.1f} – {w['last']:.1f} s | {w['lag_p50']:.1f} / {w['lag_p99']:.1f} / {w['lag_max']:.1f} s "
                         f"| {w['agents_updated']:,} | {s['update_seconds']['p50']:.2f} / {s['update_seconds']['max']:.2f} s |")
    req_per_update = statistics.median(s["wave"]["requests"] / max(1, s["wave"]["agents_updated"]) for s in (herd, jit, spl))
    kinds_per_update = {k: v / max(1, herd["wave"]["agents_updated"]) for k, v in herd["wave"]["kinds"].items()}
    per_update_text = ", ".join(f"{v:g} {k}{'s' if v != 1 and not k.endswith('s') else ''}"
                                for k, v in sorted(kinds_per_update.items(), key=lambda kv: -kv[1]))
    # Requests of an update that reach the origin when everything but the status and the change
    # lists is served `no-cache`: the update list, the manifest, the files.
    revalidated = sum(v for k, v in kinds_per_update.items() if k not in ("status", "change list"))

    model = model_rows(big, seed)
    model_table = "\n".join(f"| {r['label']} | {fmt(r['restart'])} | {fmt(r['hour1'])} | {fmt(r['hour2'])} | {fmt(r['hour6'])} |"
                            for r in model)
    m = {r["label"]: r for r in model}
    even = big / DEFAULT_INTERVAL
    hour_1k = poll["median"] * per_hour * n
    hour_100k = poll["median"] * per_hour * big
    spread = lambda k, i: 0.1 * i * math.sqrt(k / 3)
    restores = install.get("update_seconds", {})
    span = lambda values: (lambda v: f"{v[0]:.1f}" if f"{v[0]:.1f}" == f"{v[-1]:.1f}" else f"{v[0]:.1f}–{v[-1]:.1f}")(sorted(values))

    return f"""{SECTION}

What a fleet of agents costs the server that hosts its storage: {n:,} agents against one nginx on loopback, measured;
{big:,} agents behind a CDN, extrapolated (issue 12).

**Reproduce:** `make bench-fleet` (this run took {run['minutes']:.0f} minutes; it installs nginx with `make bench-deps`,
builds `sync-agent` and `fleet-sim` in release and runs `bench/fleet/fleet_sim.py`). Settings of this run:
`{run['command']}`, started {run['started']}; {run['binary']}. The raw results (fleet-sim's per-agent
reports, the per-second series) are in `{run['results']}/*.json`, not committed.

**Machine.** {run['machine']}. The second table gives the 1-minute
load average before → after each scenario.

**How.** `fleet-sim` (Sources/FleetSim) runs {n:,} agents in one process, on one shared libcurl transport (at most
{run['connections']} connections to the server). Each agent has its own content folder and state database (under
`{run['scratch']}`, {run['scratch_fs']}) and runs the daemon's own loop, a `StorageWatcher` (the one `sync-agent watch`
runs for each storage) with its `PollSchedule`'s draws seeded (`--seed {seed}`): the initial delay
(`splay × random`), `checkForUpdates()`, then the pause after a success (`interval × (1 ± jitter)`) or after a
failure (backoff). Each scenario is a new
fleet-sim process, so each starts as a restart of all {n:,} agents at once. Intervals are scaled down {scale:g}×:
{interval:g} s stands for the default 300 s. The storage was published with `sync-agent publish`:
{content['files']} files, {content['bytes'] / 1e6:.1f} MB (archive
{content['zip_bytes'] / 1e6:.1f} MB); each new version rewrites 6 files, adds 4, removes 2 and moves 1.
nginx (one worker, `sendfile`, ETag and Last-Modified on the static files) logs `$msec $status $request_length
$bytes_sent` for every request: every request count, rate and byte count below comes from that log; the agents' side
(checks, failures, updates, final versions) comes from fleet-sim's report. Every scenario ended with all {n:,} agents
at the expected version and their last check successful (fleet-sim exits 2 otherwise), and at the end every agent's
tree ({run['tree_files']} files) matched the published content byte for byte (the script fails otherwise).

### Requests per second (measured)

| scenario | jitter | splay | requests | checks | peak req/s | busiest sliding second | p99 req/s | p50 req/s | mean req/s |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

Peak, p99 and p50 are over the run's calendar seconds, idle ones included (nearest rank); the busiest sliding second
is the most requests within any 1-second window, so a burst that straddles two calendar seconds counts whole. The
first scenario also seeds the fleet: {restores.get('count', 0):,} restores from the archive at once, the last done
after {restores.get('max', 0):.0f} s in the simulator.

| scenario | failed checks | fleet-sim CPU | nginx CPU | open files (peak) | fleet-sim RSS (MiB) | load |
|---|---:|---:|---:|---:|---:|---|
{chr(10).join(cost_rows)}

nginx was never the limit: at most {max(s['nginx_cpu_seconds'] for s in runs):.1f} s of CPU in a scenario, and
the same nginx serves about 69,000 requests for a 4 KiB file a second with its access log on ("Ceiling" in
docs/benchmarks.md).
The simulator was: its {n:,} agents share 2 cores with each other and with other engineers' work, so how fast it makes
a burst of checks or updates is what the herd rows measure at their peaks.

One character a second, scaled to each line's own peak:

```
{chr(10).join(series)}
```

The busiest sliding second of status polls in each {interval:g}-second round (one interval: every agent checks about
once; * marks the round of the publish), measured and as the schedule model predicts for the same fleet
(PollSchedule's arithmetic alone, checks taking no time; the model runs the extrapolation below):

{round_header}
{round_sep}
{chr(10).join(round_rows)}

- **Without jitter the restart herd stays.** 90 % of the first round's polls came within {herd_spread[0]:.1f} s, and
  the fleet kept polling in step. The simulator is what moved agents apart: each check waits behind the others on
  its 2 cores, and after the publish it took up to {herd['update_seconds']['max']:.1f} s to get through {n:,} updates
  at once, so agents went back to polling in the order they finished (90 % of the polls within
  {herd_spread[pub_round + 1]:.1f} s in the next round, {herd_spread[-1]:.1f} s in the last). Real agents update each on
  its own machine, in about {spl['update_seconds']['p50']:.2f} s as in the splay run, and would stay in step.
- **Jitter 0.1 disperses it slowly.** Each pause is `interval × U(0.9, 1.1)`, so after k rounds an agent's phase
  has moved by about `0.1 × interval × √(k/3)` (standard deviation): {spread(1, interval):.1f} s after one round
  and {spread(6, interval):.1f} s after six at {interval:g} s, {spread(1, DEFAULT_INTERVAL):.0f} s and
  {spread(12, DEFAULT_INTERVAL):.0f} s after one round and after an hour at 300 s. The first round is the whole
  herd (the simulator made its {n:,} first checks about as fast as in the run without jitter). The rounds before the
  publish follow the model roughly; after it, the time each agent's update took spread them further than jitter alone.
- **Splay equal to the interval removes the herd at once.** The first checks spread evenly over the interval, and no
  second held more than {max(r['busiest_second'] for r in spl['rounds'])} polls, against an even rate of
  {n / interval:.0f} a second ({n:,} agents ÷ {interval:g} s); the model predicts the same.

### After a publish (measured)

| scenario | version | requests after the publish (not 304) | busiest sliding second | first – last of them, after the publish | agents at the new version, after the publish: p50 / p99 / max | agents updated | update check p50 / max |
|---|---|---:|---:|---|---|---:|---|
{chr(10).join(wave_rows)}

Times count from the start of the `sync-agent publish` command, which installs the status last and took
{span(s['publish']['seconds'] for s in (herd, jit, spl))} s.
An agent that finds a new version makes {req_per_update:g} requests: {per_update_text}. Without jitter all {n:,} agents
find it in the same round and make their {fmt(herd['wave']['requests'])} requests at once, as fast as they can; here
that was as fast as the simulator could work through {n:,} updates (downloads, hashing, SQLite writes) on 2 cores, so
the herd's {fmt(herd['wave']['peak_sliding'])} requests in its busiest second is a floor: real agents, each on its own
machine, would send the wave about as tightly as they poll. With splay the wave is spread over one interval: every agent had the new
version {spl['wave']['lag_max']:.1f} s after the publish at the latest (one interval × 1.1 = {interval * 1.1:g} s, plus the
update itself).

### No change: bytes per poll (measured)

In the quiet scenario ({quiet['checks']:,} checks, nothing published) the server saw {quiet['requests']:,} requests,
{quiet['status_requests']:,} of them GETs of `RXCacheConfig/cacheStatus.json` ({quiet['conditional_polls']:,} with
`If-None-Match`), all answered `304 Not Modified`, and {poll['other_requests']} others: **a poll is one conditional
request, without a body**. The agents send `If-None-Match` with the stored ETag; nginx sends `Last-Modified` as well,
but the client does not use `If-Modified-Since`.

| per poll, HTTP (nginx's log) | bytes |
|---|---:|
| request (`$request_length`: request line and headers) | {poll['request_median']:.0f} |
| response (`$bytes_sent`: status line and headers, no body) | {poll['response_median']:.0f} |
| **total**, median (min–max) | **{poll['median']:.0f}** ({poll['min']}–{poll['max']}) |

A no-change hour at the default interval of 300 s is {per_hour:.0f} polls an agent (the measured bytes per poll,
multiplied out):

| agents | polls per hour | HTTP bytes per hour | mean req/s |
|---:|---:|---:|---:|
| 1,000 | {fmt(per_hour * 1000)} | {hour_1k / 1e6:.1f} MB | {1000 / DEFAULT_INTERVAL:.1f} |
| 100,000 | {fmt(per_hour * big)} | {hour_100k / 1e6:.0f} MB | {big / DEFAULT_INTERVAL:.0f} |

These are HTTP bytes only. TCP and TLS come on top and were not measured: a poll every 300 s outlives most
keep-alive timeouts, so a real poll usually opens a new connection, and a TLS handshake can outweigh the poll's HTTP
bytes several times. A CDN adds response headers of its own, and a longer host name makes the request longer.

### {big:,} agents on a CDN (extrapolated, not measured)

Agents do not interact, so when and how often {big:,} agents poll follows from the schedule alone. The schedule model
above matches the measured rounds wherever the simulator's own queueing does not move the agents (with splay
throughout, with jitter before the publish); here it runs for {big:,} agents at 300 s over six hours. Busiest
calendar second of status polls:

| {big:,} agents, interval 300 s | the restart (first 300 s) | rest of hour 1 | hour 2 | hour 6 |
|---|---:|---:|---:|---:|
{model_table}

- **Without jitter** the whole fleet polls in the same second, every 300 s, for as long as nothing moves it apart: an
  origin without a CDN would take {fmt(big)} requests in a second, and after a publish about
  {fmt(big * req_per_update)} within about as long as an update takes (a few hundredths of a second of work
  without queueing, as in the splay run, plus network time).
- **Jitter alone** takes hours to undo a restart herd: after the restart itself, the busiest second holds
  {fmt(m['jitter 0.1, splay 0']['hour1'])} polls in the rest of the first hour
  ({m['jitter 0.1, splay 0']['hour1'] / even:.1f}× the even rate of {even:.0f} a second),
  {fmt(m['jitter 0.1, splay 0']['hour2'])} in the second hour and {fmt(m['jitter 0.1, splay 0']['hour6'])} in the sixth.
- **With splay = interval** there is no herd: {fmt(m['jitter 0.1, splay 300 s']['restart'])} polls in the busiest
  second of the first 300 s (the earliest agents' second checks meet the latest agents' first ones), then
  {fmt(m['jitter 0.1, splay 300 s']['hour1'])}. After a publish, each agent's next poll brings about
  {req_per_update:g} requests: about {fmt(even * req_per_update)} requests a second for one interval, and
  {big:,} × the changed files' bytes in all ({big:,} × {content['zip_bytes'] / 1e6:.1f} MB of archive when a
  fleet installs from nothing).

**What the publisher must do**, so that CDN edges answer the polls and the origin sees a few requests a minute:
- `RXCacheConfig/cacheStatus.json`: `Cache-Control: public, max-age=60` (short). Each edge then asks the origin at
  most once a minute (with its ETag, so mostly a 304) however many agents poll it, and answers the agents'
  `If-None-Match` with a 304 from its cache, so a poll stays one bodiless request. With E edge caches in front of
  the origin, the status costs the origin at most E conditional requests a minute (about one with an origin shield),
  whatever the fleet's size: 100 edges make under 2 a second, against {even:.0f} a second from {big:,} agents without a
  CDN and {fmt(big)} in a herd's second (arithmetic, not measured). An agent sees a publish within max-age + interval ×
  1.1 (60 + 330 s at the defaults). Keep ETag and Last-Modified on (nginx's static files, S3, GCS and GitHub raw send
  both).
- `RXCacheConfig/HistoryOfVersions/changes_A_B.json`: `Cache-Control: public, max-age=31536000, immutable`. A name is
  used for one pair of versions only, and agents ask for it only after a status that leads to it.
- Everything else keeps its URL from one version to the next while its bytes change: the update list
  (`listOfURLsToUpdatesByVersion.json`), `contentManifest.json`, `RXCacheContent.zip` and the files under
  `RXCacheContent/`. Never mark them immutable, and do not give them a plain max-age either, not even one no longer
  than the status's: an edge that fetched the update list in the minute before a publish and the status just after
  it serves the new status beside the old list. A stale update list makes the agents behind that edge restore from the
  archive (their chain does not reach the new version); a stale content file or archive is refused by the integrity
  check (the agent retries with backoff) or, from a storage published without integrity data, mixes versions. Two
  setups are safe:
  - **purge at every publish** (for large fleets): a long max-age (say a day) on these files, and a CDN purge of the
    update list, the manifest, the archive and the changed files (the new change list names them) after they are
    uploaded and before the status is, then of the status. The origin sees about one request per edge for each
    changed file;
  - **`Cache-Control: no-cache`** on them: nothing to purge, but an edge revalidates every request with the origin,
    so after a publish the origin answers one conditional request for each of these an agent makes, about
    {revalidated:g} an agent ({fmt(even * revalidated)} a second for one interval at {big:,} agents with splay).
- **Upload order:** content files, the archive, the manifest, the new change list, the update list, and
  `cacheStatus.json` last, once the rest is what the edges serve. `sync-agent publish` installs a local storage in this
  order, and `publish --upload REMOTE:PATH` copies it to a bucket in this order (rclone, one step after another). It
  sets no `Cache-Control` and purges no CDN. With `no-cache` on the fixed-URL files that is all it takes; with the
  purge setup the purge has to fall between the update list and the status, so upload the status in a step of its own
  after the purge (a purge after `--upload` leaves a few seconds in which an edge may pair the new status with the old
  update list). A plain folder copy (`aws s3 sync`, `gsutil rsync`, `rclone sync`) keeps no order: copy the status in
  a second step.

**What an operator should set:**
- `--jitter 0.1` (the default) and `--splay 5m`, one interval (`splay: 5m` in a `--config` file; the default is 0,
  every agent checking at once when it starts), so that a restart of the whole fleet (a deploy, a power cut) does not
  poll in step. Jitter alone takes hours to spread a herd; where agents run without splay, restart them in batches.
- `--interval 5m` (the default, 300 s): {big:,} agents then make {even:.0f} conditional requests a second, about
  {hour_100k / 1e6:.0f} MB of HTTP an hour when nothing changes. A shorter interval costs proportionally more, and buys
  freshness only down to the status file's max-age.
"""



def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agent", help="the sync-agent binary (publishes the storage)")
    parser.add_argument("--sim", help="the fleet-sim binary")
    parser.add_argument("--render", metavar="RUN_JSON",
                        help="only write the section again from a finished run's record (FLEET_WORK/results/run.json)")
    args = parser.parse_args()
    if args.render:
        write_section(json.loads(Path(args.render).read_text()))
        return 0
    if not args.agent or not args.sim:
        parser.error("--agent and --sim are required (or --render RUN_JSON)")
    args.agent, args.sim = str(Path(args.agent).resolve()), str(Path(args.sim).resolve())
    fleet = Fleet(args)
    command = (f"AGENTS={AGENTS} INTERVAL={INTERVAL:g} DURATION={DURATION:g} PUBLISH_AT={PUBLISH_AT:g} FILES={FILES} "
               f"SEED={SEED} make bench-fleet")
    begun = time.time()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    binary = report.binary_line(str(REPO), args.agent)

    def interrupted(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, interrupted)
    try:
        fleet.prepare()
        fleet.nginx.start()
        fleet.scenario("install", "first start, no content: restore from the archive", 0.1, 0, INSTALL_SECONDS, False)
        fleet.scenario("herd", "restart, no jitter, publish mid-run", 0, 0, DURATION, True)
        fleet.scenario("jitter", "restart, jitter 0.1, publish mid-run", 0.1, 0, DURATION, True)
        fleet.scenario("splay", "restart, jitter 0.1 and splay, publish mid-run", 0.1, INTERVAL, DURATION, True)
        fleet.scenario("quiet", "restart with splay, no change", 0.1, INTERVAL, QUIET_SECONDS, False)
        tree_files = fleet.check_trees()
        log(f"every agent's tree matches {fleet.versions[-1]} ({tree_files} files each)")
    except Failure as failure:
        print(f"fleet_sim.py: FAILED: {failure}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print("fleet_sim.py: interrupted", file=sys.stderr, flush=True)
        return 130
    finally:
        fleet.stop()
    record = {
        "scenarios": fleet.scenarios, "content": fleet.content_info, "agents": AGENTS, "interval": INTERVAL, "seed": SEED,
        "connections": CONNECTIONS, "scratch": str(fleet.scratch), "scratch_fs": report.fs_type(str(fleet.scratch.parent)),
        "results": str(fleet.results), "command": command, "started": started, "minutes": (time.time() - begun) / 60,
        "tree_files": tree_files, "binary": binary,
        "machine": report.machine_line(str(fleet.work), [("nginx", ["nginx", "-v"])]),
    }
    (fleet.results / "run.json").write_text(json.dumps(record, indent=1))
    write_section(record)
    if not KEEP and fleet.scratch.exists():
        shutil.rmtree(fleet.scratch)
    return 0


def write_section(record: dict) -> None:
    """Replaces (or appends) the section in FLEET_DOC, creating the file with its title when missing;
    with FLEET_DOC empty, prints it."""
    text = write_doc(record)
    doc = ENV.get("FLEET_DOC", str(REPO / "docs/operations.md"))
    if not doc:
        print(text)
        return
    path = Path(doc)
    if not path.exists():
        path.write_text(f"{DOC_TITLE}\n")
    report.replace_section(doc, SECTION, text)
    log(f"wrote the '{SECTION}' section of {doc}")


if __name__ == "__main__":
    sys.exit(main())
