"""Shared helpers for the chaos scripts (crash loop, disk full): storages, manifests, nginx,
process control, tables and the docs/reliability.md sections.

Python 3 standard library only.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "reliability.md"
PUBLISHED_BASE = "https://chaos.invalid/s/"
KIB = 1024
MIB = 1024 * 1024

EXIT_NAMES = {0: "ok", 1: "other", 3: "network", 4: "storage", 5: "filesystem/space",
              6: "config", 130: "interrupted", -9: "SIGKILL"}


def log(*parts: object) -> None:
    print(f"[{time.strftime('%H:%M:%S')}]", *parts, file=sys.stderr, flush=True)


def sudo_prefix() -> list[str]:
    return [] if os.geteuid() == 0 else ["sudo", "-n"]


# --------------------------------------------------------------------------- trees / manifests

def manifest_of(root: Path) -> dict:
    """{"folders": [...], "files": {path: {"size", "sha256"}}, "others": [...]}: the same shape as
    ExampleStorage/manifests/<v>.json (plus anything that is neither a file nor a folder)."""
    folders, files, others = [], {}, []
    for folder, subfolders, names in os.walk(root):
        for name in list(subfolders):
            path = os.path.join(folder, name)
            if os.path.islink(path):
                others.append(os.path.relpath(path, root))
                subfolders.remove(name)
            else:
                folders.append(os.path.relpath(path, root))
        for name in names:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path) or not os.path.isfile(path):
                others.append(rel)
                continue
            digest = hashlib.sha256()
            size = 0
            with open(path, "rb") as handle:
                while True:
                    chunk = handle.read(1 << 20)
                    if not chunk:
                        break
                    size += len(chunk)
                    digest.update(chunk)
            files[rel] = {"size": size, "sha256": digest.hexdigest()}
    return {"folders": sorted(folders), "files": dict(sorted(files.items())), "others": sorted(others)}


def compare(got: dict, expected: dict, limit: int = 8) -> list[str]:
    """Differences between two manifests (empty list: identical)."""
    problems: list[str] = []
    gf, ef = set(got["folders"]), set(expected["folders"])
    problems += [f"missing folder {p}" for p in sorted(ef - gf)]
    problems += [f"extra folder {p}" for p in sorted(gf - ef)]
    problems += [f"missing file {p}" for p in sorted(set(expected["files"]) - set(got["files"]))]
    problems += [f"extra file {p}" for p in sorted(set(got["files"]) - set(expected["files"]))]
    problems += [f"different file {p}" for p in sorted(expected["files"])
                 if p in got["files"] and got["files"][p] != expected["files"][p]]
    problems += [f"not a regular file or folder: {p}" for p in got.get("others", [])]
    if len(problems) > limit:
        problems = problems[:limit] + [f"... and {len(problems) - limit} more"]
    return problems


def classify(root: Path, versions: dict[str, dict]) -> tuple[str | None, dict | None, list[str]]:
    """Which version `root` is exactly: (name, manifest, []) or (None, manifest, differences from
    each version). A missing folder gives ("absent", None, [])."""
    if not root.exists():
        return "absent", None, []
    got = manifest_of(root)
    notes = []
    for name, manifest in versions.items():
        diff = compare(got, manifest)
        if not diff:
            return name, got, []
        notes.append(f"vs {name}: " + "; ".join(diff[:4]))
    return None, got, notes


def fnv1a64(text: str) -> str:
    """The staging area's partial-file name for a content path (StagingArea.partialFile)."""
    value = 0xCBF29CE484222325
    for byte in text.encode():
        value ^= byte
        value = (value * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    value ^= 0xFF
    value = (value * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return format(value, "x")


def tree_bytes(root: Path) -> int:
    total = 0
    for folder, _, names in os.walk(root):
        for name in names:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except FileNotFoundError:
                pass
    return total


# --------------------------------------------------------------------------- content generation

def _random_bytes(rng: random.Random, size: int) -> bytes:
    return rng.getrandbits(8 * size).to_bytes(size, "little") if size else b""


def _compressible_bytes(rng: random.Random, size: int) -> bytes:
    """Bytes that deflate about 100x: one random 1 KiB block repeated."""
    block = _random_bytes(rng, 1024)
    return (block * (size // 1024 + 1))[:size]


def write_tree(root: Path, folders: list[str], files: dict[str, bytes]) -> None:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for folder in folders:
        (root / folder).mkdir(parents=True, exist_ok=True)
    for path, data in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)


# The version before 1.0 that a crash loop's clients replay from (see base_of).
BASE_VERSION = "0.9"

PROFILES = {
    # groups x folders x files per folder, small size range, large file count and range
    "short": dict(groups=3, folders=6, per_folder=25, small=(1 * KIB, 12 * KIB), large=3, large_size=(1200 * KIB, 2 * MIB)),
    "full": dict(groups=6, folders=10, per_folder=40, small=(2 * KIB, 20 * KIB), large=6, large_size=(1500 * KIB, 3 * MIB)),
    # Issue 23's scale: 100,000 small files in 1,000 folders (a run takes minutes per iteration).
    "scale": dict(groups=10, folders=100, per_folder=100, small=(64, 512), large=2, large_size=(1200 * KIB, 2 * MIB)),
}


def make_versions(profile: str, seed: int = 1) -> tuple[tuple[list[str], dict[str, bytes]], tuple[list[str], dict[str, bytes]]]:
    """Content of v1 and v2 (folders incl. empty ones, files). v2 = v1 with file adds, file moves,
    a folder rename, a folder move, file and folder deletes, small and large edits, a folder whose
    every file changed (deep redownload), new and removed empty folders."""
    p = PROFILES[profile]
    rng = random.Random(seed)
    files: dict[str, bytes] = {}
    folders: list[str] = []
    for g in range(p["groups"]):
        for f in range(p["folders"]):
            folder = f"g{g:02d}/d{f:03d}"
            folders.append(folder)
            for n in range(p["per_folder"]):
                ext = "bin" if n % 2 else "txt"
                files[f"{folder}/f{n:04d}.{ext}"] = _random_bytes(rng, rng.randint(*p["small"]))
    small_paths = sorted(files)
    for i in range(p["large"]):
        files[f"g{i % p['groups']:02d}/large/big{i:02d}.bin"] = _random_bytes(rng, rng.randint(*p["large_size"]))
    folders += ["empty/one", "empty/two/deeper", "g00/d000/void"]
    v1 = (sorted(set(folders)), dict(sorted(files.items())))

    files2 = dict(files)
    folders2 = set(folders)
    r2 = random.Random(seed + 1)
    # deletes of single files
    for path in r2.sample(small_paths, len(small_paths) // 20):
        files2.pop(path, None)
    # a deleted folder (with its files)
    dead = "g01/d001"
    for path in [p_ for p_ in files2 if p_.startswith(dead + "/")]:
        del files2[path]
    folders2.discard(dead)
    # a renamed folder and a folder moved to another group
    for old, new in (("g00/d002", "g00/d002-renamed"), ("g02/d003", "g00/moved/d003")):
        for path in [p_ for p_ in files2 if p_.startswith(old + "/")]:
            files2[new + path[len(old):]] = files2.pop(path)
        folders2.discard(old)
        folders2.add(new)
    # file moves
    movable = sorted(p_ for p_ in files2 if "/f" in p_)
    for path in r2.sample(movable, len(movable) // 30):
        if path in files2:
            folder, name = path.rsplit("/", 1)
            files2[f"{folder}/moved-{name}"] = files2.pop(path)
    # small edits
    editable = sorted(p_ for p_ in files2 if "/f" in p_ and "/moved-" not in p_)
    for path in r2.sample(editable, len(editable) // 20):
        files2[path] = _random_bytes(r2, r2.randint(*p["small"]))
    # large edits (resumable downloads)
    larges = sorted(p_ for p_ in files2 if "/large/" in p_)
    for path in larges[:2]:
        files2[path] = _random_bytes(r2, r2.randint(*p["large_size"]))
    # a folder whose every file changed (deep folder redownload)
    deep = "g01/d004"
    for path in [p_ for p_ in files2 if p_.startswith(deep + "/")]:
        files2[path] = _random_bytes(r2, r2.randint(*p["small"]))
    # adds: small files here and there, a new folder of files, new large files
    for i in range(len(small_paths) // 12):
        g = r2.randrange(p["groups"])
        f = r2.randrange(p["folders"])
        folder = f"g{g:02d}/d{f:03d}"
        if folder in folders2:
            files2[f"{folder}/new{i:04d}.dat"] = _random_bytes(r2, r2.randint(*p["small"]))
    for i in range(20):
        files2[f"added/batch/n{i:03d}.txt"] = _random_bytes(r2, r2.randint(*p["small"]))
    for i in range(2):
        files2[f"added/large/new{i:02d}.bin"] = _random_bytes(r2, r2.randint(*p["large_size"]))
    # empty folders: one removed, two added
    folders2.discard("empty/one")
    folders2 |= {"added/empty", "empty/two/deeper/deepest"}
    folders2 = {f for f in folders2 if not any(f == d or f.startswith(d + "/") for d in (dead,))}
    v2 = (sorted(folders2), dict(sorted(files2.items())))
    return v1, v2


def publish(agent: str, storage: Path, content: Path, version: str, init: bool = False,
            minimal: str | None = None) -> None:
    cmd = [agent, "publish", "--storage", str(storage), "--content", str(content), "--version", version,
           "--base-url", PUBLISHED_BASE]
    if init:
        cmd.append("--init")
    if minimal:
        cmd += ["--minimal", minimal]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"publish {version} failed ({result.returncode}): {result.stderr.strip()}")


def base_of(v1: tuple) -> tuple:
    """A version before v1: v1 with one file's bytes changed and one file more, so that a client
    replays 0.9 → 1.0 and keeps 0.9 as its twin, as every client does after its first replay."""
    folders, files = v1
    files = dict(files)
    first = sorted(files)[0]
    files[first] = files[first] + b"-before"
    files["before-only.txt"] = b"only in the version before"
    return list(folders), files


def build_pair(agent: str, work: Path, v1: tuple, v2: tuple, names: tuple[str, str] = ("1.0", "2.0"),
               minimal2: str | None = None, base: tuple | None = None) -> dict:
    """Publishes v1 into work/www/v1 and v1→v2 into work/www/v2. Returns manifests and sizes.
    With `base` (a version 0.9), work/www/v0 holds it, and v1 and v2 are published after it."""
    content1, content2 = work / "content-v1", work / "content-v2"
    write_tree(content1, *v1)
    write_tree(content2, *v2)
    www = work / "www"
    www.mkdir(parents=True, exist_ok=True)
    s0, s1, s2 = www / "v0", www / "v1", www / "v2"
    for s in (s0, s1, s2):
        if s.exists():
            shutil.rmtree(s)
    if base is None:
        publish(agent, s1, content1, names[0], init=True)
    else:
        content0 = work / "content-v0"
        write_tree(content0, *base)
        publish(agent, s0, content0, BASE_VERSION, init=True)
        shutil.copytree(s0, s1, symlinks=True)
        publish(agent, s1, content1, names[0])
    shutil.copytree(s1, s2, symlinks=True)
    publish(agent, s2, content2, names[1], minimal=minimal2)
    m1, m2 = manifest_of(content1), manifest_of(content2)
    manifests = {names[0]: m1, names[1]: m2}
    if base is not None:
        manifests[BASE_VERSION] = manifest_of(work / "content-v0")
    return {"www": www, "manifests": manifests, "names": names,
            "zip": {names[0]: (s1 / "RXCacheContent.zip").stat().st_size,
                    names[1]: (s2 / "RXCacheContent.zip").stat().st_size}}


# --------------------------------------------------------------------------- nginx

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find_nginx(install: bool = True) -> str:
    for candidate in (shutil.which("nginx"), "/usr/sbin/nginx"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    if not install:
        raise SystemExit("nginx is not installed")
    log("installing nginx-light")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(sudo_prefix() + ["apt-get", "update", "-qq"], check=True, env=env)
    if subprocess.run(sudo_prefix() + ["apt-get", "install", "-y", "-qq", "nginx-light"], env=env).returncode != 0:
        subprocess.run(sudo_prefix() + ["apt-get", "install", "-y", "-qq", "nginx"], check=True, env=env)
    return find_nginx(install=False)


class Nginx:
    """nginx on 127.0.0.1:<free port> serving `root`, started in the foreground (daemon off) so
    that it is stopped by its own PID. Every request is logged as one JSON line with the
    X-Chaos-Tag request header, so bytes can be attributed to one sync run exactly."""

    def __init__(self, work: Path, root: Path, extra_locations: str = ""):
        self.dir = work / "nginx"
        self.root = root
        self.extra = extra_locations
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.access_log = self.dir / "access.log"

    def start(self) -> "Nginx":
        nginx = find_nginx()
        (self.dir / "tmp").mkdir(parents=True, exist_ok=True)
        user = "user root;" if os.geteuid() == 0 else ""
        conf = f"""daemon off;
{user}
worker_processes 1;
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log warn;
events {{ worker_connections 512; }}
http {{
    log_format chaos escape=json '{{"tag":"$http_x_chaos_tag","status":"$status","body":"$body_bytes_sent",'
        '"uri":"$uri","range":"$http_range","msec":"$msec"}}';
    access_log {self.access_log} chaos;
    sendfile on;
    keepalive_timeout 30;
    types {{ application/json json; application/zip zip; }}
    default_type application/octet-stream;
    client_body_temp_path {self.dir}/tmp/client;
    proxy_temp_path {self.dir}/tmp/proxy;
    fastcgi_temp_path {self.dir}/tmp/fastcgi;
    uwsgi_temp_path {self.dir}/tmp/uwsgi;
    scgi_temp_path {self.dir}/tmp/scgi;
    server {{
        listen 127.0.0.1:{self.port};
        root {self.root};
        location = /nginx-status {{ stub_status; access_log off; }}
{self.extra}
    }}
}}
"""
        (self.dir / "nginx.conf").write_text(conf)
        self.access_log.write_text("")
        self.proc = subprocess.Popen([nginx, "-p", str(self.dir), "-c", str(self.dir / "nginx.conf"),
                                      "-e", str(self.dir / "error.log")],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 10
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit("nginx did not start: " + (self.proc.stderr.read().decode() if self.proc.stderr else ""))
            try:
                self.active_connections()
                return self
            except OSError:
                time.sleep(0.05)
        raise SystemExit("nginx did not answer within 10 s")

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def active_connections(self) -> int:
        with urllib.request.urlopen(self.url("nginx-status"), timeout=2) as response:
            first = response.read().decode().splitlines()[0]
        return int(first.split(":")[1])

    def settle(self, timeout: float = 10.0) -> None:
        """Waits until no connection but the status probe is open, so that every request of a
        killed client has been logged (nginx logs an aborted transfer when it notices)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.active_connections() <= 1:
                return
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # fast shutdown, by PID
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def requests(self) -> list[dict]:
        out = []
        for line in self.access_log.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                entry["body"] = int(entry["body"] or 0)
                entry["path"] = urllib.parse.unquote(entry["uri"])
                out.append(entry)
        return out

    def by_tag(self, tag: str) -> list[dict]:
        return [r for r in self.requests() if r["tag"] == tag]


# --------------------------------------------------------------------------- running the agent

def run_until_done(run, cleanup) -> int:
    """Runs `run()` and always `cleanup()` afterwards, a SIGTERM included (it becomes exit 128 + 15),
    so that whatever the suite started (nginx, a sync-agent, a tmpfs mount) is stopped."""
    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        return run()
    finally:
        cleanup()


def run_agent(agent: str, args: list[str], env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([agent] + args, capture_output=True, text=True, env=env, timeout=timeout)


def status_json(agent: str, content: Path, state: Path, env: dict | None = None) -> tuple[bool, dict | str]:
    result = run_agent(agent, ["status", "--dir", str(content), "--state", str(state), "--json"], env=env, timeout=60)
    if result.returncode != 0:
        return False, f"exit {result.returncode}: {result.stderr.strip()}"
    try:
        return True, json.loads(result.stdout)
    except json.JSONDecodeError as error:
        return False, f"not JSON ({error}): {result.stdout[:200]}"


# --------------------------------------------------------------------------- tables and docs

def table(rows: list[list[str]], header: list[str]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = "  ".join("{:<%d}" % w for w in widths)
    print(fmt.format(*header))
    print(fmt.format(*("-" * w for w in widths)))
    for row in rows:
        print(fmt.format(*(str(c) for c in row)))


DOC_INTRO = """# Reliability

How content-sync behaves when things go wrong, measured with the real `sync-agent` binary.
Each section is written by the script that measured it (`make chaos` runs the full suite,
`make test` a short version). Sections sit between `<!-- name:begin -->` and `<!-- name:end -->`
markers; scripts rewrite only their own section.
"""


def write_doc_section(name: str, body: str, doc: Path = DOC) -> None:
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    text = doc.read_text() if doc.exists() else DOC_INTRO
    block = f"{begin}\n{body.rstrip()}\n{end}"
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        _, tail = rest.split(end, 1)
        text = head + block + tail
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    doc.write_text(text)
    log(f"wrote the {name} section of {doc.relative_to(REPO) if doc.is_relative_to(REPO) else doc}")
