#!/usr/bin/env python3
"""Scenarios S2 replay, S3 jump, S4 no-change poll and the wrk ceiling, against nginx on loopback.

Run by bench/scenarios.sh, which starts nginx (bench/nginx.sh) with its root at WORK/www and an
access log, and passes: --agent BIN --work WORK --port PORT --access-log FILE. Everything else
comes from the environment (see bench/README.md): RUNS, WARMUP, SCENARIOS, BASE_FILES, BASE_MB,
SKIP_TMPFS, BENCH_TMPFS, BENCH_DOC, KEEP_RUNS, WRK_SECONDS.

Storages are made with the real publisher (`sync-agent publish --init`, then `publish` for each
next version). nginx serves WORK/www/s2 and WORK/www/s3, symlinks swapped between a snapshot of
the old version (to bring a client to it) and the storage at its final version (for the timed
runs). Every timed run starts from a `cp -a` copy of a prepared client (folder + state file),
untimed, followed by an untimed `sync -f`. Requests and bytes of each run are read from nginx's
access log (format "bench" in bench/nginx.sh).
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report  # noqa: E402  (shared helpers: summary, machine_line, replace_section, ...)

REPO = Path(__file__).resolve().parent.parent
KIB, MIB = 1024, 1_048_576
PUBLISHED_BASE = "https://bench.invalid/{name}/"


def log(msg: str) -> None:
    print(f"[scenarios.py {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def die(msg: str) -> None:
    print(f"scenarios.py: FAILED: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if res.returncode != 0:
        die(f"{' '.join(map(str, cmd))} exited {res.returncode}: {res.stderr.strip()[-2000:]}")
    return res



def fs_label(path: Path) -> str:
    return f"{report.fs_type(str(path))} (/{path.parts[1] if len(path.parts) > 1 else ''})"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def listing(root: Path) -> dict[str, str]:
    """relative path -> sha256 of every file under root; folders as path/ -> 'dir'."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        if rel != ".":
            out[rel + "/"] = "dir"
        for name in filenames:
            p = Path(dirpath) / name
            out[os.path.relpath(p, root)] = sha256(p)
    return out


def cp_a(src: Path, dst: Path) -> None:
    run(["cp", "-a", str(src), str(dst)])


def clone_client(src: Path, dst: Path) -> None:
    """A client folder as a real one persists between runs: its content files keep their inodes
    (hard links; sync-agent never writes a file in place, it swaps whole trees), so the
    fingerprints its state database remembers by inode, size and time still apply. Everything
    else (the state database) is copied. Its folders are new ones, though: a real client's keep
    the status-change times it recorded at its switch, so the copy's times are written into the
    copied database's `liveFolder` rows (the folders are the same names with the same entries).
    Without that, sync-agent would take every folder for changed by hand and list its content
    folder instead of planning from its index, a path no client between two updates takes
    (S2 measured that path until 2026-11-28). The twin in the staging folder (`retired/`, hard
    links to the content's files and to the files the versions before changed) is linked the same
    way, and the copied database is pointed at the copy (see keep_twin)."""
    dst.mkdir(parents=True)
    for entry in src.iterdir():
        if entry.name in ("content", STAGING) and entry.is_dir():
            if os.stat(src).st_dev != os.stat(dst).st_dev:
                die(f"clone_client: {src} and {dst} are on different filesystems; hard links need one")
            run(["cp", "-al", str(entry), str(dst / entry.name)])
        else:
            run(["cp", "-a", str(entry), str(dst / entry.name)])
    keep_folder_times(dst / "state.sqlite", dst / "content")
    keep_twin(dst / "state.sqlite", dst / STAGING / "retired")


# The staging folder of a client whose content folder is `content` (StagingArea).
STAGING = ".content.content-sync"


def keep_twin(state: Path, twin: Path) -> None:
    """Points the cloned state database's twin at the cloned twin folder (its device and inode)
    and writes the clone's folders' status-change times into its `twinFolder` rows, as a real
    client's twin keeps the folder and the times it recorded at its switch. Without it the clone's
    twin is another folder to sync-agent, which then builds its next tree whole."""
    if twin.is_dir():
        info = os.lstat(twin)
        rewrite_folder_times(state, "twinFolder", twin, ("UPDATE twin SET device = ?, inode = ? WHERE id = 1",
                                                         (info.st_dev, info.st_ino)))


def keep_folder_times(state: Path, content: Path) -> None:
    """Writes the status-change times of the cloned content's folders into the cloned state
    database's `liveFolder` rows, as the client recorded its own folders' at its switch."""
    if content.is_dir():
        rewrite_folder_times(state, "liveFolder", content)


def rewrite_folder_times(state: Path, table: str, root: Path, also: tuple[str, tuple] | None = None) -> None:
    """Sets each row of `table` (a folder path under `root`, '' for root itself, and a ctime) to
    the folder's status-change time now, and runs the statement `also` in the same transaction;
    nothing when the database or the table does not exist (a client older than the table)."""
    if not state.exists():
        return
    db = sqlite3.connect(state)
    try:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if table not in tables:
            return
        if also:
            db.execute(*also)
        rows = []
        for (path,) in db.execute(f"SELECT path FROM {table}").fetchall():
            try:
                rows.append((os.lstat(root / path if path else root).st_ctime_ns, path))
            except OSError:
                pass
        db.executemany(f"UPDATE {table} SET ctime = ? WHERE path = ?", rows)
        db.commit()
    finally:
        db.close()


def spread_folders(path: Path) -> None:
    """On ext4, mark `path` a top folder (`chattr +T`): each folder made in it then gets a block
    group of its own (Orlov allocator), so one run's deletions cannot slow the next run's file
    creation. ext4 without a journal (as on the bench machines) skips inodes freed in the last
    30 s, reading each one's inode-table block to find out; aria2c deletes its 2,100 `.aria2`
    control files every run, and whichever tool ran next in the same group paid up to 1.3 s of
    system time for them (measured with `perf`: `find_inode_bit` → `recently_deleted`).
    No-op elsewhere (tmpfs has no such flag)."""
    subprocess.run(["chattr", "+T", str(path)], capture_output=True, check=False)


# ---------------------------------------------------------------- nginx access log

class AccessLog(report.AccessLog):
    LINE = re.compile(r'^(\S+) (\d+) (\S+) "([^"]*)" (\d+) (\d+) "([^"]*)"$')

    def entry(self, m: re.Match) -> dict:
        return {"status": int(m[2]), "method": m[3], "uri": m[4], "bytes": int(m[5]), "body": int(m[6]), "inm": m[7]}


@dataclass
class Result:
    scenario: str
    fs: str
    tool: str
    run: int
    wall: float
    rss_kb: int
    requests: int
    bytes_sent: int
    body_bytes: int
    content_body: int
    statuses: dict = field(default_factory=dict)
    flush: float = 0.0      # seconds of the `sync -f` right after the run (durability the tool left undone)


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.agent = str(Path(args.agent).resolve())
        self.work = Path(args.work)
        self.port = args.port
        self.access = AccessLog(Path(args.access_log))
        self.www = self.work / "www"
        self.stor = self.work / "storages"
        self.clients = self.work / "clients"
        for d in (self.www, self.stor, self.clients):
            d.mkdir(parents=True, exist_ok=True)
        self.runs = int(os.environ.get("RUNS", "5"))
        self.warmup = int(os.environ.get("WARMUP", "1"))
        self.base_files = int(os.environ.get("BASE_FILES", "5000"))
        self.base_mb = float(os.environ.get("BASE_MB", "200"))
        self.results: list[Result] = []
        self.results_path = self.work / "scenario-results.jsonl"
        self.stamp = time.strftime("%Y%m%d-%H%M%S")
        self.run_roots: list[Path] = []
        self.agent_sha = sha256(Path(self.agent))[:16]

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}/"

    def timed(self, scenario: str, fs: str, tool: str, run_no: int, workdir: Path, cmd: list[str],
              content_prefix: str = "") -> Result:
        """Run cmd under GNU time (peak RSS); wall from perf_counter; requests from the access log."""
        report.settle(workdir, 0.2)
        offset = self.access.mark()
        tfile = workdir / f".time-{tool.replace('/', '_')}-{run_no}.txt"
        start = time.perf_counter()
        res = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", str(tfile), *cmd],
                             capture_output=True, text=True)
        wall = time.perf_counter() - start
        if res.returncode != 0:
            die(f"{scenario} {tool} run {run_no} failed ({res.returncode}): {' '.join(cmd)}\n{res.stderr[-3000:]}")
        rss = int(tfile.read_text().split()[-1])
        t0 = time.perf_counter()
        subprocess.run(["sync", "-f", str(workdir)], check=False)
        flush = time.perf_counter() - t0
        self.access.mark()   # wait until nginx has logged the last request
        entries = self.access.since(offset)
        statuses: dict[str, int] = {}
        for e in entries:
            statuses[str(e["status"])] = statuses.get(str(e["status"]), 0) + 1
        r = Result(scenario, fs, tool, run_no, wall, rss, len(entries), sum(e["bytes"] for e in entries),
                   sum(e["body"] for e in entries),
                   sum(e["body"] for e in entries if content_prefix and e["uri"].startswith(content_prefix)), statuses,
                   flush)
        if run_no > 0:
            self.results.append(r)
            with open(self.results_path, "a") as f:
                f.write(json.dumps(r.__dict__) + "\n")
        what = "warm-up (not counted)" if run_no <= 0 else f"run {run_no}"
        log(f"{scenario} {fs} {tool:<22} {what}: {wall:.3f} s, {rss // 1024} MiB, {len(entries)} requests, "
            f"{r.body_bytes / MIB:.2f} MiB bodies {statuses}, then sync -f {flush:.3f} s")
        return r

    # ------------------------------------------------------------ storages

    def base_content(self) -> Path:
        gen = self.stor / f"gen-{self.base_files}f-{self.base_mb:g}mb"
        run([sys.executable, str(REPO / "bench/make_storage.py"), "--out", str(gen), "--files", str(self.base_files),
             "--mb", str(self.base_mb), "--if-changed"])
        return gen / "RXCacheContent"

    def publish(self, storage: Path, content: Path, version: str, name: str, init: bool = False) -> None:
        cmd = [self.agent, "publish", "--storage", str(storage), "--content", str(content), "--version", version,
               "--base-url", PUBLISHED_BASE.format(name=name)]
        if init:
            cmd.insert(2, "--init")
        run(cmd)

    def stamp_ok(self, folder: Path, params: dict) -> bool:
        f = folder / ".scenario-params.json"
        return f.exists() and json.loads(f.read_text()) == params

    def write_stamp(self, folder: Path, params: dict) -> None:
        (folder / ".scenario-params.json").write_text(json.dumps(params))

    def prepare_client(self, name: str, old_snapshot: Path, final: Path, slot: Path, pristine: Path, params: dict) -> None:
        """Bring a client to the old version (nginx serving the old snapshot), then serve the final one.

        The client is synced at `slot` (its state database records that content folder, so every timed
        run must use the same path) and kept as `pristine`, which each run copies back to `slot`."""
        link = self.www / name
        params = {**params, "slot": str(slot)}
        if self.stamp_ok(pristine, params):
            report.swap_symlink(link, final)
            return
        for d in (pristine, slot):
            if d.exists():
                shutil.rmtree(d)
        slot.mkdir(parents=True)
        report.swap_symlink(link, old_snapshot)
        run([self.agent, "sync", "--base-url", self.url(name), "--dir", str(slot / "content"),
             "--state", str(slot / "state.sqlite")])
        if listing(slot / "content") != listing(old_snapshot / "RXCacheContent"):
            die(f"the prepared client {slot} differs from {old_snapshot}")
        report.swap_symlink(link, final)
        clone_client(slot, pristine)
        shutil.rmtree(slot)
        self.write_stamp(pristine, params)

    def restore_slot(self, pristine: Path, slot: Path) -> None:
        """An identical client at `slot` (untimed): see clone_client."""
        if slot.exists():
            shutil.rmtree(slot)
        clone_client(pristine, slot)

    def rounds(self, root: Path, tools: list[str]):
        """The rounds of one scenario: the warm-up rounds, then the counted ones, every tool once per
        round in an order rotated each round (A B C …, B C … A, …). Yields (round, tool, a fresh
        folder for the run under root)."""
        for i in range(1 - self.warmup, self.runs + 1):
            rotation = (i - 1) % len(tools)
            for tool in tools[rotation:] + tools[:rotation]:
                d = root / f"{re.sub(r'[^a-z0-9]+', '-', tool.lower()).strip('-')}-{i}"
                d.mkdir()
                yield i, tool, d

    def agent_run(self, scenario: str, name: str, fs: str, run_no: int, pristine: Path, slot: Path, expected_tree: dict) -> None:
        """One timed `sync-agent sync` of storage `name` from an identical client at `slot`, checked
        against the storage's tree."""
        self.restore_slot(pristine, slot)
        self.timed(scenario, fs, "sync-agent", run_no, slot, [self.agent, "sync", "--base-url", self.url(name),
                   "--dir", str(slot / "content"), "--state", str(slot / "state.sqlite")],
                   # No slash: the content's files and the ranges of RXCacheContent.zip both count.
                   content_prefix=f"/{name}/RXCacheContent")
        self.check_agent("sync-agent", slot, expected_tree)

    def retire_slot(self, slot: Path, keep_as: Path | None) -> None:
        """After a run: on ext4 the folder is renamed away (a mass delete would slow the next runs' file
        creation), on tmpfs deleted."""
        if keep_as is not None:
            os.rename(slot, keep_as)
        else:
            shutil.rmtree(slot)

    # ------------------------------------------------------------ S2

    def s2_storage(self) -> tuple[Path, Path, list[str]]:
        base = self.base_content()
        root = self.stor / "s2"
        params = {"base": str(base), "files": self.base_files, "mb": self.base_mb, "agent": self.agent_sha, "v": 1}
        added: list[tuple[str, int]] = [(f"added/s{i // 100:02d}/f{i:04d}.bin", 4 * KIB) for i in range(2000)]
        added += [(f"added/big/b{i:03d}.bin", MIB) for i in range(100)]
        if not self.stamp_ok(root, params):
            log("S2: publishing the storage (1.0 = base, 1.1 = base + 2,000 × 4 KiB + 100 × 1 MiB)")
            if root.exists():
                shutil.rmtree(root)
            root.mkdir(parents=True)
            self.publish(root / "storage", base, "1.0", "s2", init=True)
            cp_a(root / "storage", root / "snap-1.0")
            v2 = root / "content-1.1"
            cp_a(base, v2)
            rng = random.Random(2002)
            for rel, size in added:
                p = v2 / rel
                p.parent.mkdir(parents=True, exist_ok=True)
                p.write_bytes(rng.randbytes(size))
            self.publish(root / "storage", v2, "1.1", "s2")
            shutil.rmtree(v2)
            self.write_stamp(root, params)
        return root / "snap-1.0", root / "storage", [rel for rel, _ in added]

    def peer_commands(self, base_url: str, paths: list[str], lists: Path, dest: Path, url_prefix_dirs: int) -> dict[str, list[str]]:
        """The S2 peers, downloading exactly `paths` (relative to base_url) into dest."""
        lists.mkdir(parents=True, exist_ok=True)
        (lists / "files-from.txt").write_text("".join(p + "\n" for p in paths))
        (lists / "urls.txt").write_text("".join(base_url + p + "\n" for p in paths))
        (lists / "aria2.txt").write_text("".join(f"{base_url}{p}\n  out={p}\n" for p in paths))
        (lists / "curl.cfg").write_text("".join(f'url = "{base_url}{p}"\noutput = "{dest}/{p}"\n' for p in paths))
        return {
            "rclone": ["rclone", "copy", "--config", "/dev/null", "--http-url", base_url, ":http:", str(dest),
                       "--files-from", str(lists / "files-from.txt"), "--http-no-head", "--no-traverse", "--transfers", "8", "-q"],
            "aria2c": ["aria2c", "-j", "8", "-i", str(lists / "aria2.txt"), "-d", str(dest), "-q",
                       "--allow-overwrite=true", "--auto-file-renaming=false"],
            "curl --parallel": ["curl", "--parallel", "--parallel-max", "8", "-s", "-f", "--create-dirs",
                                "-K", str(lists / "curl.cfg")],
            "wget (serial)": ["wget", "-q", "-i", str(lists / "urls.txt"), "-x", "-nH", f"--cut-dirs={url_prefix_dirs}",
                              "-P", str(dest)],
        }

    def check_download(self, tool: str, dest: Path, expected: dict[str, str], full: bool) -> None:
        got = [p for p in dest.rglob("*") if p.is_file()]
        if len(got) != len(expected):
            die(f"{tool}: {dest} holds {len(got)} files, expected {len(expected)}")
        if full:
            for rel, digest in expected.items():
                if sha256(dest / rel) != digest:
                    die(f"{tool}: {dest / rel} has the wrong bytes")

    def check_agent(self, tool: str, run_dir: Path, expected: dict[str, str]) -> None:
        if listing(run_dir / "content") != expected:
            die(f"{tool}: {run_dir}/content differs from the storage's RXCacheContent")
        # After a replay the staging folder keeps the replaced version as the next update's twin.
        staging = run_dir / ".content.content-sync"
        left = sorted(p.name for p in staging.iterdir()) if staging.exists() else []
        if left not in ([], ["retired"]):
            die(f"{tool}: staging folder {staging} holds {left}, more than the twin (retired/)")

    def s2(self, roots: list[tuple[str, Path, bool]]) -> dict:
        old, final, added = self.s2_storage()
        expected_tree = listing(final / "RXCacheContent")
        expected_added = {rel: expected_tree[rel] for rel in added}
        for fs, root, deleting in roots:
            root = root / f"s2-{self.stamp}"
            root.mkdir(parents=True)
            spread_folders(root.parent)
            spread_folders(root)
            self.run_roots.append(root)
            if deleting:
                self.run_roots.append(root.parent)
            slot = root.parent / "slot-s2"
            # The prepared client lives on the same filesystem as the slot, so that each run's
            # copy can hard-link its content (clone_client).
            pristine = root.parent / "pristine-s2-1.0" if deleting else self.clients / "s2-1.0-disk"
            self.prepare_client("s2", old, final, slot, pristine,
                                {"storage": self.agent_sha, "files": self.base_files, "mb": self.base_mb})
            log(f"S2 pass on {fs}: {root}")
            tools = ["sync-agent", "rclone", "aria2c", "curl --parallel", "wget (serial)", "cp -a (local floor)"]
            for i, tool, d in self.rounds(root, tools):
                if tool == "sync-agent":
                    d.rmdir()
                    self.agent_run("S2", "s2", fs, i, pristine, slot, expected_tree)
                    if not deleting:
                        self.retire_slot(slot, d)
                        self.last_s2_agent = (d, slot)   # S4 starts from a copy of it, at the same slot
                    else:
                        self.retire_slot(slot, None)
                        continue
                elif tool.startswith("cp -a"):
                    self.timed("S2", fs, tool, i, d, ["cp", "-a", str(final / "RXCacheContent" / "added"), str(d / "out")])
                else:
                    cmd = self.peer_commands(self.url("s2") + "RXCacheContent/", added, d / "lists", d / "out", 2)[tool]
                    self.timed("S2", fs, tool, i, d, cmd, content_prefix="/s2/RXCacheContent/")
                    self.check_download(tool, d / "out", expected_added, full=(i <= 1))
                if deleting:   # tmpfs: deleting is cheap and room is short
                    shutil.rmtree(d)
        return {"added_files": len(added), "added_bytes": 2000 * 4 * KIB + 100 * MIB, "expected": expected_tree}

    # ------------------------------------------------------------ S4

    def s4(self, fs: str, s2_client: tuple[Path, Path], expected_tree: dict) -> None:
        source, client = s2_client      # a client at 1.1, and the slot path its state database names
        if client.exists():
            shutil.rmtree(client)
        cp_a(source, client)
        pristine = self.clients / "s4-state"
        if pristine.exists():
            shutil.rmtree(pristine)
        pristine.mkdir()
        for f in client.glob("state.sqlite*"):
            cp_a(f, pristine / f.name)
        status_url = self.url("s2") + "RXCacheConfig/cacheStatus.json"
        head = run(["curl", "-sI", status_url]).stdout
        etag = next((l.split(":", 1)[1].strip() for l in head.splitlines() if l.lower().startswith("etag:")), "")
        log(f"S4: client at 1.1 in {client}; cacheStatus.json ETag {etag}")
        tools = ["sync-agent", "curl conditional GET"]
        for i in range(1 - self.warmup, self.runs + 1):
            for tool in tools if i % 2 else tools[::-1]:
                if tool == "sync-agent":
                    for f in client.glob("state.sqlite*"):
                        f.unlink()
                    for f in pristine.iterdir():
                        cp_a(f, client / f.name)
                    r = self.timed("S4", fs, tool, i, client, [self.agent, "sync", "--base-url", self.url("s2"),
                                   "--dir", str(client / "content"), "--state", str(client / "state.sqlite")])
                    if r.requests != 1 or r.statuses != {"304": 1}:
                        log(f"S4: sync-agent made {r.requests} requests {r.statuses}, expected exactly one 304")
                else:
                    self.timed("S4", fs, tool, i, client, ["curl", "-s", "-f", "-o", "/dev/null", "-H",
                               f"If-None-Match: {etag}", status_url])
        if listing(client / "content") != expected_tree:
            die("S4: the client's content changed during the no-change polls")
        shutil.rmtree(client)

    # ------------------------------------------------------------ S3

    def s3_storage(self) -> tuple[Path, Path, dict]:
        base = self.base_content()
        root = self.stor / "s3"
        versions = 20
        params = {"base": str(base), "files": self.base_files, "mb": self.base_mb, "agent": self.agent_sha, "v": 1}
        if self.stamp_ok(root, params):
            return root / "snap-1.0", root / "storage", json.loads((root / "evolution.json").read_text())
        log(f"S3: publishing the storage (1.0 = base, then {versions} versions 1.1 … 1.{versions})")
        if root.exists():
            shutil.rmtree(root)
        root.mkdir(parents=True)
        self.publish(root / "storage", base, "1.0", "s3", init=True)
        cp_a(root / "storage", root / "snap-1.0")
        work = root / "content"
        cp_a(base, work)
        rng = random.Random(3003)
        base_files = sorted(str(p.relative_to(work)) for p in work.rglob("*") if p.is_file())
        rng.shuffle(base_files)
        added: list[str] = []                      # files added by some version, still present
        counts = {"added": 0, "added_bytes": 0, "moved_added": 0, "deleted_added": 0, "edited": 0,
                  "moved_base": 0, "deleted_base": 0, "folders_renamed": 0}

        def move(rel: str, new_rel: str) -> None:
            (work / new_rel).parent.mkdir(parents=True, exist_ok=True)
            os.rename(work / rel, work / new_rel)

        for k in range(1, versions + 1):
            # Adds: 40 small files (4-16 KiB) in a new folder, one 512 KiB file every 5th version.
            for j in range(40):
                rel = f"jump/v{k:02d}/a{j:02d}.bin"
                size = rng.randint(4 * KIB, 16 * KIB)
                (work / rel).parent.mkdir(parents=True, exist_ok=True)
                (work / rel).write_bytes(rng.randbytes(size))
                added.append(rel)
                counts["added"] += 1
                counts["added_bytes"] += size
            if k % 5 == 0:
                rel = f"jump/v{k:02d}/big.bin"
                (work / rel).write_bytes(rng.randbytes(512 * KIB))
                added.append(rel)
                counts["added"] += 1
                counts["added_bytes"] += 512 * KIB
            earlier = [a for a in added if not a.startswith(f"jump/v{k:02d}/")]
            if earlier:
                picked = rng.sample(earlier, min(16, len(earlier)))
                # Moves and renames of files earlier versions added.
                for rel in picked[:8]:
                    new_rel = f"moved/v{k:02d}/{Path(rel).parent.name}-{Path(rel).stem}-r.bin"
                    move(rel, new_rel)
                    added[added.index(rel)] = new_rel
                    counts["moved_added"] += 1
                # Deletes of files earlier versions added.
                for rel in picked[8:]:
                    (work / rel).unlink()
                    added.remove(rel)
                    counts["deleted_added"] += 1
            # Every 4th version renames a folder an earlier version added (with what is left in it).
            if k % 4 == 0:
                old_dir = f"jump/v{k - 2:02d}"
                if (work / old_dir).is_dir():
                    new_dir = f"jump/v{k - 2:02d}-renamed-in-{k:02d}"
                    os.rename(work / old_dir, work / new_dir)
                    added = [new_dir + a[len(old_dir):] if a.startswith(old_dir + "/") else a for a in added]
                    counts["folders_renamed"] += 1
            # Edits: 2 earlier additions and 2 base files get new bytes (same size).
            alive_earlier = [a for a in added if not a.startswith(f"jump/v{k:02d}/")] or added
            for rel in rng.sample(alive_earlier, 2) + base_files[:2]:
                size = (work / rel).stat().st_size
                (work / rel).write_bytes(rng.randbytes(size))
                counts["edited"] += 1
            base_files = base_files[2:]
            # Base files: 5 moved elsewhere (the client has their bytes), 5 deleted.
            for rel in base_files[:5]:
                move(rel, f"basemoved/v{k:02d}/{Path(rel).name}")
                counts["moved_base"] += 1
            for rel in base_files[5:10]:
                (work / rel).unlink()
                counts["deleted_base"] += 1
            base_files = base_files[10:]
            # Empty folders left behind are removed (they would otherwise be published as folders).
            for dirpath, dirnames, filenames in sorted(os.walk(work), key=lambda t: -len(t[0])):
                if Path(dirpath) != work and not os.listdir(dirpath):
                    os.rmdir(dirpath)
            self.publish(root / "storage", work, f"1.{k}", "s3")
        shutil.rmtree(work)
        evolution = {"versions": versions, **counts}
        (root / "evolution.json").write_text(json.dumps(evolution))
        self.write_stamp(root, params)
        return root / "snap-1.0", root / "storage", evolution

    def s3(self, fs: str, root: Path) -> dict:
        old, final, evolution = self.s3_storage()
        slot = root / "slot-s3"
        pristine = self.clients / "s3-1.0-disk"
        self.prepare_client("s3", old, final, slot, pristine, {"storage": self.agent_sha, "files": self.base_files, "mb": self.base_mb})
        client = pristine
        start_hashes = set(listing(client / "content").values())
        expected_tree = listing(final / "RXCacheContent")
        new_files = {rel: h for rel, h in expected_tree.items() if h != "dir" and h not in start_hashes}
        net_new = sum((final / "RXCacheContent" / rel).stat().st_size for rel in new_files)
        unique_new = {}
        for rel, h in new_files.items():
            unique_new.setdefault(h, (final / "RXCacheContent" / rel).stat().st_size)
        log(f"S3: {len(new_files)} files of the final tree have bytes the client lacks: {net_new} bytes")
        root = root / f"s3-{self.stamp}"
        root.mkdir(parents=True)
        spread_folders(root)
        self.run_roots.append(root)
        new_paths = sorted(new_files)
        tools = ["sync-agent", "rclone", "curl --parallel"]
        for i, tool, d in self.rounds(root, tools):
            if tool == "sync-agent":
                d.rmdir()
                self.agent_run("S3", "s3", fs, i, pristine, slot, expected_tree)
                self.retire_slot(slot, d)
            else:
                cmd = self.peer_commands(self.url("s3") + "RXCacheContent/", new_paths, d / "lists", d / "out", 2)[tool]
                # No slash: the content's files and the ranges of RXCacheContent.zip both count.
                self.timed("S3", fs, tool, i, d, cmd, content_prefix="/s3/RXCacheContent")
                self.check_download(tool, d / "out", new_files, full=(i <= 1))
        return {"net_new_bytes": net_new, "net_new_files": len(new_files), "unique_new_bytes": sum(unique_new.values()),
                "final_files": sum(1 for h in expected_tree.values() if h != "dir"), "evolution": evolution,
                "start_files": len([1 for _ in (client / "content").rglob("*")])}

    # ------------------------------------------------------------ ceiling

    def ceiling(self, seconds: int) -> dict:
        d = self.www / "ceiling"
        d.mkdir(exist_ok=True)
        small, big = d / "small-4k.bin", d / "big-100m.bin"
        if not small.exists() or small.stat().st_size != 4 * KIB:
            small.write_bytes(random.Random(1).randbytes(4 * KIB))
        if not big.exists() or big.stat().st_size != 100 * MIB:
            big.write_bytes(random.Random(2).randbytes(100 * MIB))
        nolog = self.www / "nolog"
        if not nolog.is_symlink():
            os.symlink(d, nolog)
        out = {}
        for key, path, size in (("small", "ceiling/small-4k.bin", 4 * KIB), ("small_nolog", "nolog/small-4k.bin", 4 * KIB),
                                ("big", "nolog/big-100m.bin", 100 * MIB), ("big_log", "ceiling/big-100m.bin", 100 * MIB)):
            url = f"http://127.0.0.1:{self.port}/{path}"
            run(["curl", "-sf", "-o", "/dev/null", url])
            res = run(["wrk", "-t2", "-c8", f"-d{seconds}s", url])
            rps = float(re.search(r"Requests/sec:\s*([\d.]+)", res.stdout)[1])
            out[key] = {"rps": rps, "bytes_per_s": rps * size, "url_path": path, "raw": res.stdout}
            log(f"ceiling {path}: {rps:,.0f} requests/s, {rps * size / 1e9:.2f} GB/s")
        # The access log of the logged wrk runs is large; keep the log usable by later scenarios.
        return out


# ---------------------------------------------------------------- report

TOOL_COLORS = {"sync-agent": "#1f77b4", "rclone": "#ff7f0e", "aria2c": "#2ca02c", "curl --parallel": "#d62728",
               "wget (serial)": "#9467bd", "cp -a (local floor)": "#8c8c8c", "curl conditional GET": "#d62728"}


def group(results: list[Result], scenario: str) -> dict[tuple[str, str], list[Result]]:
    g: dict[tuple[str, str], list[Result]] = {}
    for r in results:
        if r.scenario == scenario:
            g.setdefault((r.fs, r.tool), []).append(r)
    return g


def wall_table(results: list[Result], scenario: str, extra: list[tuple[str, callable]] = ()) -> tuple[list[str], dict]:
    g = group(results, scenario)
    fss = list(dict.fromkeys(fs for fs, _ in g))
    head = ("| tool | filesystem | runs | median wall (s) | min–max wall (s) | sync-agent median ÷ this median "
            "| median peak RSS (MiB) | median wall + `sync -f` after (s) | sync-agent ÷ this, with `sync -f` |")
    sep = "|---|---|---:|---:|---:|---:|---:|---:|---:|"
    for title, _ in extra:
        head += f" {title} |"
        sep += "---:|"
    lines = [head, sep]
    medians = {}
    for fs in fss:
        agent = g.get((fs, "sync-agent"))
        agent_median = statistics.median(r.wall for r in agent) if agent else None
        agent_durable = statistics.median(r.wall + r.flush for r in agent) if agent else None
        for (f, tool), rs in g.items():
            if f != fs:
                continue
            med, lo, hi = report.summary([r.wall for r in rs])
            medians[(fs, tool)] = (med, lo, hi)
            durable = statistics.median(r.wall + r.flush for r in rs)
            rel = "1.00×" if tool == "sync-agent" else (f"**{agent_median / med:.2f}×**" if agent_median else "–")
            rel_d = "1.00×" if tool == "sync-agent" else (f"{agent_durable / durable:.2f}×" if agent_durable else "–")
            line = (f"| {tool} | {fs} | {len(rs)} | {med:.3f} | {lo:.3f}–{hi:.3f} | {rel} | "
                    f"{statistics.median(r.rss_kb for r in rs) / 1024:.1f} | {durable:.3f} | {rel_d} |")
            for _, fn in extra:
                line += f" {fn(rs)} |"
            lines.append(line)
    return lines, medians


def paired_notes(results: list[Result], scenario: str) -> list[str]:
    g = group(results, scenario)
    notes = []
    for (fs, tool), rs in g.items():
        if tool == "sync-agent":
            continue
        agent = {r.run: r.wall for r in g.get((fs, "sync-agent"), [])}
        pairs = sorted(agent[r.run] / r.wall for r in rs if r.run in agent and r.wall > 0)
        if pairs:
            notes.append(f"- {fs}: sync-agent ÷ {tool}, run by run (same round): median {statistics.median(pairs):.2f}×, "
                         f"range {pairs[0]:.2f}–{pairs[-1]:.2f}×.")
    return notes


def svg_chart(path: Path, panels: list[tuple[str, str, list[tuple[str, float, float, float]]]]) -> None:
    """Horizontal bar chart, one panel per scenario: bars = medians, whiskers = min–max."""
    width, label_w, bar_h, gap, right = 860, 250, 18, 6, 90
    plot_w = width - label_w - right
    y = 20
    parts = []
    for title, unit, bars in panels:
        parts.append(f'<text x="10" y="{y + 14}" font-size="14" font-weight="bold">{esc(title)}</text>')
        y += 24
        top = max(hi for _, _, _, hi in bars) * 1.05 or 1
        for name, med, lo, hi in bars:
            color = TOOL_COLORS.get(name.split(" [")[0], "#555")
            w = plot_w * med / top
            parts.append(f'<text x="{label_w - 8}" y="{y + 13}" font-size="12" text-anchor="end">{esc(name)}</text>')
            parts.append(f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{color}"/>')
            x1, x2, ym = label_w + plot_w * lo / top, label_w + plot_w * hi / top, y + bar_h / 2
            parts.append(f'<line x1="{x1:.1f}" y1="{ym}" x2="{x2:.1f}" y2="{ym}" stroke="#000" stroke-width="1"/>')
            parts.append(f'<line x1="{x1:.1f}" y1="{ym - 5}" x2="{x1:.1f}" y2="{ym + 5}" stroke="#000"/>')
            parts.append(f'<line x1="{x2:.1f}" y1="{ym - 5}" x2="{x2:.1f}" y2="{ym + 5}" stroke="#000"/>')
            parts.append(f'<text x="{max(x2, label_w + w) + 6:.1f}" y="{y + 13}" font-size="12">{fmt(med)} {unit}</text>')
            y += bar_h + gap
        y += 16
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y + 20}" viewBox="0 0 {width} {y + 20}" '
           f'font-family="sans-serif">\n<rect width="100%" height="100%" fill="#fff"/>\n' + "\n".join(parts) +
           f'\n<text x="10" y="{y + 8}" font-size="11" fill="#555">bars: median wall time; whiskers: min–max of the counted runs '
           f'(bench/scenarios.py)</text>\n</svg>\n')
    path.write_text(svg)


def esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def fmt(v: float) -> str:
    return f"{v:.3f}" if v < 1 else f"{v:.2f}"


def write_report(b: Bench, s2info: dict | None, s3info: dict | None, ceil: dict | None, doc: str, command: str,
                 chart: Path | None) -> None:
    res = b.results
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    machine = report.machine_line(str(b.work), [
        ("nginx", [os.environ.get("NGINX_BIN", "nginx"), "-v"]), ("rclone", ["rclone", "version"]),
        ("aria2", ["aria2c", "--version"]), ("curl", ["curl", "--version"]), ("wget", ["wget", "--version"]),
        ("wrk", ["wrk", "--version"])])
    binary = report.binary_line(str(REPO), b.agent)
    load = (f" Load average (1 min) {b.load_start:.2f} just before the scenarios started, {b.load_before_wrk:.2f} after "
            "S2–S4 (before the wrk runs, which load both cores); the machine is shared, so other work may run meanwhile.")
    common = [f"Measured {date} by `{command}` ({binary}).", "",
              f"**Machine.** {machine}.{load}", ""]
    base = (f"`bench/make_storage.py --files {b.base_files} --mb {b.base_mb:g}` content "
            f"({b.base_files} files, {b.base_mb:g} MiB)")
    method = (f"**Method.** {b.runs} counted rounds after {b.warmup} uncounted warm-up round(s); within a round every tool "
              "runs once, in an order rotated each round (A B C …, B C … A, …). Each run starts from an identical client: "
              "a copy of a prepared folder whose content is hard-linked (its files keep their inodes, as a real "
              "client's do between runs) and whose state file is copied with the copy's folder times in it (a real "
              "client's folders keep the times it recorded at its switch; untimed), then `sync -f` of the filesystem "
              "(untimed). On ext4 the run folders are made in a `chattr +T` folder, so each lands in a block group "
              "of its own: this disk's ext4 has no journal, and there a file creation skips every inode freed in the "
              "last 30 s, reading its inode block to find out, so aria2c's 2,100 deleted control files used to slow "
              "whichever tool ran next by up to 1.3 s of system time. Wall "
              "time is measured around the process (Python `perf_counter`), peak RSS by GNU `time -f %M`; requests and "
              "bytes come from nginx's access log (`$status $bytes_sent $body_bytes_sent` per request). Right after each run "
              "a `sync -f` is timed too: sync-agent calls `syncfs` before its swap, the peers leave their writes in the "
              "page cache, so \"wall + `sync -f` after\" compares the same durability.")
    sections: list[tuple[str, list[str]]] = []
    agent_s2 = None
    if s2info:
        def reqs(rs):
            return f"{statistics.median(r.requests for r in rs):.0f}"

        def mb(rs):
            return f"{statistics.median(r.body_bytes for r in rs) / MIB:.1f}"
        table, medians = wall_table(res, "S2", [("requests", reqs), ("body MiB", mb)])
        goals = []
        for fs in dict.fromkeys(fs for fs, _ in medians):
            a = medians.get((fs, "sync-agent"))
            rc, ar = medians.get((fs, "rclone")), medians.get((fs, "aria2c"))
            if a and rc and ar:
                r1, r2 = a[0] / rc[0], a[0] / ar[0]
                g2 = group(res, "S2")
                dur = {t: statistics.median(r.wall + r.flush for r in g2[(fs, t)]) for t in ("sync-agent", "rclone", "aria2c")}
                goals.append(f"- {fs}: sync-agent ÷ rclone = **{r1:.2f}×** (goal ≤ 0.67×: "
                             f"**{'met' if r1 <= 0.67 else 'missed'}**); sync-agent ÷ aria2c = **{r2:.2f}×** (goal ≤ 1.0×: "
                             f"**{'met' if r2 <= 1.0 else 'missed'}**). Counting the `sync -f` each peer leaves undone "
                             f"(sync-agent already called `syncfs`): {dur['sync-agent'] / dur['rclone']:.2f}× rclone, "
                             f"{dur['sync-agent'] / dur['aria2c']:.2f}× aria2c.")
            agent_s2 = agent_s2 or a
        text = ["## S2 replay (a version adding 2,100 files)", "", *common,
                f"**Scenario.** Storage published with `sync-agent publish`: 1.0 = {base}; 1.1 = 1.0 plus "
                "2,000 × 4 KiB files (`added/sNN/`, 20 folders) and 100 × 1 MiB files (`added/big/`), all random bytes. "
                "The client was brought to 1.0 by a restore while nginx served a snapshot of 1.0; nginx then serves 1.1 "
                "and each timed run is one replay (status, update list, one change list, 2,100 downloads, hard links "
                "for the unchanged files, `syncfs`, swap). Every sync-agent run is checked against the storage (sha256 of "
                "every file, empty staging folder).", "",
                "**Peers** download exactly the same 2,100 files into a fresh folder, from the same nginx:",
                "- `rclone copy --config /dev/null --http-url http://127.0.0.1:PORT/s2/RXCacheContent/ :http: OUT "
                "--files-from LIST --http-no-head --no-traverse --transfers 8 -q` (without `--no-traverse`, rclone 1.60 "
                "lists the source root first, and nginx without autoindex answers 403);",
                "- `aria2c -j 8 -i LIST -d OUT -q --allow-overwrite=true --auto-file-renaming=false` (LIST gives "
                "`out=PATH` per URL);",
                "- `curl --parallel --parallel-max 8 -s -f --create-dirs -K CONFIG` (one `url`/`output` pair per file);",
                "- `wget -q -i URLS -x -nH --cut-dirs=2 -P OUT` (serial, one keep-alive connection);",
                "- `cp -a (local floor)`: `cp -a` of the 2,100 files from the storage folder (in the page cache) into "
                "a fresh folder on the same filesystem: no network at all, the file-creation floor of this disk.",
                "", "Their outputs are checked (file count every run, sha256 of every file in the warm-up round).", "",
                method, "", *table, "", *paired_notes(res, "S2"), "", "**Goals.**", *goals, ""]
        if chart:
            text += [f"![S2, S3, S4 medians]({chart.name})", "",
                     f"Chart: [{chart.name}]({chart.name}), written by `bench/scenarios.py` from the same runs.", ""]
        sections.append(("## S2 replay (a version adding 2,100 files)", text))
    if s3info:
        g = group(res, "S3")
        ev = s3info["evolution"]
        table, medians = wall_table(res, "S3", [
            ("requests", lambda rs: f"{statistics.median(r.requests for r in rs):.0f}"),
            ("content bytes", lambda rs: f"{statistics.median(r.content_body for r in rs):,.0f}"),
            ("÷ net new bytes", lambda rs: f"{statistics.median(r.content_body for r in rs) / s3info['net_new_bytes']:.3f}×")])
        agent_runs = [r for (fs, t), rs in g.items() if t == "sync-agent" for r in rs]
        content = [r.content_body for r in agent_runs]
        meta = [r.body_bytes - r.content_body for r in agent_runs]
        ranges = [r.statuses.get("206", 0) for r in agent_runs]
        ratio = statistics.median(content) / s3info["net_new_bytes"]
        text = ["## S3 jump (a client 20 versions behind)", "", *common,
                f"**Scenario.** Storage published with `sync-agent publish` in 21 versions: 1.0 = {base}, then 1.1 … 1.20. "
                f"Each version adds 40 files of 4–16 KiB in a new folder (plus one 512 KiB file every 5th version), moves "
                f"8 and deletes 8 files that earlier versions added, gives new bytes to 2 earlier additions and 2 base "
                f"files, moves 5 base files and deletes 5; every 4th version renames a folder added 2 versions before. "
                f"In all: {ev['added']} files added ({ev['added_bytes']:,} bytes), {ev['moved_added']} moves of added "
                f"files, {ev['deleted_added']} deletes of added files, {ev['folders_renamed']} folder renames, "
                f"{ev['edited']} edits, {ev['moved_base']} base-file moves, {ev['deleted_base']} base-file deletes. "
                f"The client is at 1.0 (restored while nginx served a 1.0 snapshot); each timed run replays 20 change "
                f"lists to 1.20 from a copy of it, and is checked against the storage.", "",
                f"**Net new bytes** = the total size of the files of 1.20 whose sha256 the client did not have at 1.0: "
                f"**{s3info['net_new_bytes']:,} bytes** in {s3info['net_new_files']} files (of {s3info['final_files']}). "
                f"The peers (for wall time only) are given that exact list, which a real peer could not know: rclone and "
                f"curl commands as in S2.", "",
                method, "", *table, "", *paired_notes(res, "S3"), "",
                f"**Goal (bytes downloaded = net new bytes, 1.00×): {'met' if abs(ratio - 1) < 0.005 else 'missed'}.** "
                f"sync-agent's content downloads (bodies of `RXCacheContent/…` requests and of the ranges of "
                f"`RXCacheContent.zip` it reads new files from, from the access log) were "
                f"{statistics.median(content):,.0f} bytes = **{ratio:.3f}×** net new bytes "
                f"{'in every run' if min(content) == max(content) else 'as a median'} "
                f"(min {min(content):,}, max {max(content):,}). On top of that it fetched "
                f"{statistics.median(meta):,.0f} bytes of metadata (status, update list, 20 change lists). "
                + (f"It read ranges of the archive ({max(ranges)} `206` answers in a run), which also carry the "
                   f"archive's directory, read once to find the entries, and each entry's local header: that is what a "
                   f"ratio over 1.00× is made of."
                   if max(ranges) > 0 else
                   f"It read no range of the archive: the archive's directory would have added more than 1 % to the new "
                   f"files' bytes, so each new file came in a request of its own "
                   f"({min(r.requests for r in agent_runs)} requests in all, the metadata's included)."), ""]
        sections.append(("## S3 jump (a client 20 versions behind)", text))
    if any(r.scenario == "S4" for r in res):
        table, medians = wall_table(res, "S4", [
            ("requests", lambda rs: "–".join(sorted({str(r.requests) for r in rs}))),
            ("statuses", lambda rs: ", ".join(sorted({json.dumps(r.statuses).replace('"', '') for r in rs})))])
        agent_runs = [r for r in res if r.scenario == "S4" and r.tool == "sync-agent"]
        ok = all(r.requests == 1 and r.statuses == {"304": 1} for r in agent_runs)
        text = ["## S4 no-change poll", "", *common,
                "**Scenario.** The client is already at the storage's version (the S2 storage at 1.1 and a client from an "
                "S2 run). Each run is one `sync-agent sync`; before each, the state database is restored from a pristine "
                "copy (untimed) so every run starts alike. For scale, `curl -s -f -o /dev/null -H 'If-None-Match: ETAG' "
                "…/cacheStatus.json` makes the same single conditional request.", "",
                method, "", *table, "",
                f"**Goal (exactly one HTTP request, conditional): {'met' if ok else 'missed'}.** "
                f"sync-agent made {', '.join(sorted({str(r.requests) for r in agent_runs}))} request(s) per run, answered "
                f"{', '.join(sorted({json.dumps(r.statuses) for r in agent_runs}))}. The process wall time is in the table.", ""]
        sections.append(("## S4 no-change poll", text))
    if ceil:
        small, big = ceil["small"], ceil["big"]
        text = ["## Ceiling (wrk against the same nginx)", "", *common,
                f"**Command.** `wrk -t2 -c8 -d{b.wrk_seconds}s URL` against the nginx that served S2–S4 (same config, "
                "`sendfile on`, access log on), on the same loopback; and against a location with `access_log off`.", "",
                "| file | access log | requests/s | bytes/s |", "|---|---|---:|---:|",
                f"| 4 KiB | on (as in S2) | {small['rps']:,.0f} | {small['bytes_per_s'] / 1e6:,.0f} MB/s |",
                f"| 4 KiB | off | {ceil['small_nolog']['rps']:,.0f} | {ceil['small_nolog']['bytes_per_s'] / 1e6:,.0f} MB/s |",
                f"| 100 MiB | off | {big['rps']:,.1f} | **{big['bytes_per_s'] / 1e9:.2f} GB/s** |",
                f"| 100 MiB | on | {ceil['big_log']['rps']:,.1f} | {ceil['big_log']['bytes_per_s'] / 1e9:.2f} GB/s |", ""]
        if agent_s2:
            floor_t = 2000 / small["rps"] + 100 * MIB / big["bytes_per_s"]
            text += ["**How close S2 gets.** The server could deliver S2's content (2,000 requests for 4 KiB at the "
                     f"logged 4 KiB rate, plus 100 MiB at the big-file rate) in {floor_t * 1000:.0f} ms. Two ways to put S2 "
                     "against that ceiling, per filesystem, from the S2 medians:", "",
                     "| S2 tool | filesystem | median wall (s) | files/s (2,100 ÷ wall) | ÷ 4 KiB requests/s ceiling | server-side floor ÷ wall |",
                     "|---|---|---:|---:|---:|---:|"]
            _, medians = wall_table(res, "S2")
            for (fs, tool), (med, _, _) in medians.items():
                text.append(f"| {tool} | {fs} | {med:.3f} | {2100 / med:,.0f} | {2100 / med / small['rps'] * 100:.1f} % | "
                            f"{floor_t / med * 100:.1f} % |")
            best = max(floor_t / m[0] for (fs, t), m in medians.items() if t == "sync-agent")
            best_other = max(((floor_t / m[0], t) for (fs, t), m in medians.items()
                              if t != "sync-agent" and not t.startswith("cp -a")), default=(0, "–"))
            text += ["", f"**Goal (S2 at ≥ 80 % of the small-file ceiling): missed.** sync-agent's best S2 median reaches "
                     f"{best * 100:.1f} % of the server-side floor. The ceiling is the server's alone; S2 also has to create "
                     "and write 2,100 files (sync-agent also hashes and makes them durable). No HTTP client gets near 80 % on this "
                     f"machine: the best is {best_other[1]} at {best_other[0] * 100:.1f} %. Only `cp -a (local floor)`, "
                     "which copies the same files with no network at all, comes close to the server-side time." if best < 0.8 else
                     f"**Goal (S2 at ≥ 80 % of the small-file ceiling): met** ({best * 100:.1f} %).", ""]
        sections.append(("## Ceiling (wrk against the same nginx)", text))
    for heading, text in sections:
        out = "\n".join(text)
        print("\n" + out)
        if doc:
            report.replace_section(doc, heading, out, after="## Publish (issue 3 measurement)")


CHART_SCENARIOS = (("S2", "S2 replay: +2,000 × 4 KiB + 100 × 1 MiB"), ("S3", "S3 jump: 20 versions behind"),
                   ("S4", "S4 no-change poll"))


def chart_panels(results: list[Result]) -> dict:
    """The panels this run measured, by scenario."""
    panels = {}
    for scenario, title in CHART_SCENARIOS:
        g = group(results, scenario)
        for fs in dict.fromkeys(fs for fs, _ in g):
            bars = []
            for (f, tool), rs in g.items():
                if f == fs:
                    med, lo, hi = report.summary([r.wall for r in rs])
                    bars.append((tool, med, lo, hi))
            if bars:
                panels.setdefault(scenario, []).append((f"{title} — {fs} (seconds)", "s", bars))
    return panels


def merged_panels(store: Path, fresh: dict) -> list:
    """Every scenario's panels: this run's, and the last run's of each scenario it skipped (kept in
    `store`, a JSON file beside the chart), so a run of one scenario (SCENARIOS=s2) redraws the
    others as they were instead of dropping them."""
    kept = {}
    if store.exists():
        try:
            kept = {k: [tuple(p[:2]) + ([tuple(b) for b in p[2]],) for p in v] for k, v in json.loads(store.read_text()).items()}
        except (ValueError, TypeError, IndexError):
            kept = {}
    kept.update(fresh)
    store.write_text(json.dumps(kept, indent=1, ensure_ascii=False) + "\n")
    return [panel for scenario, _ in CHART_SCENARIOS for panel in kept.get(scenario, [])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--port", required=True, type=int)
    ap.add_argument("--access-log", required=True)
    ap.add_argument("--command", default="bash bench/scenarios.sh BIN")
    args = ap.parse_args()
    b = Bench(args)
    b.last_s2_agent = None
    b.load_start = os.getloadavg()[0]
    b.wrk_seconds = int(os.environ.get("WRK_SECONDS", "10"))
    scenarios = os.environ.get("SCENARIOS", "s2,s3,s4,ceiling").split(",")
    doc = os.environ.get("BENCH_DOC", str(REPO / "docs/benchmarks.md"))
    tmpfs = Path(os.environ.get("BENCH_TMPFS", "/dev/shm"))
    b.results_path.write_text("")
    disk_root = b.work / "runs"
    disk_root.mkdir(exist_ok=True)
    spread_folders(disk_root)
    disk_fs = fs_label(b.work)
    roots = [(disk_fs, disk_root, False)]
    if os.environ.get("SKIP_TMPFS", "0") != "1" and report.fs_type(str(tmpfs)) == "tmpfs":
        roots.append((f"tmpfs ({tmpfs})", tmpfs / "content-sync-scenarios", True))
    s2info = s3info = ceil = None
    try:
        if "s2" in scenarios:
            s2info = b.s2(roots)
        if "s4" in scenarios:
            if b.last_s2_agent is None:
                # Without S2 in this session: bring a copy of the S2 client to 1.1 once.
                old, final, _ = b.s2_storage()
                slot, pristine = disk_root / "slot-s2", b.clients / "s2-1.0-disk"
                b.prepare_client("s2", old, final, slot, pristine, {"storage": b.agent_sha, "files": b.base_files, "mb": b.base_mb})
                b.restore_slot(pristine, slot)
                run([b.agent, "sync", "--base-url", b.url("s2"), "--dir", str(slot / "content"), "--state", str(slot / "state.sqlite")])
                source = b.clients / "s4-source"
                shutil.rmtree(source, ignore_errors=True)
                os.rename(slot, source)
                b.last_s2_agent = (source, slot)
            expected = s2info["expected"] if s2info else listing(b.stor / "s2/storage/RXCacheContent")
            b.s4(disk_fs, b.last_s2_agent, expected)
        if "s3" in scenarios:
            s3info = b.s3(disk_fs, disk_root)
        b.load_before_wrk = os.getloadavg()[0]
        if "ceiling" in scenarios:
            ceil = b.ceiling(b.wrk_seconds)
    finally:
        if os.environ.get("KEEP_RUNS", "0") != "1":
            for root in b.run_roots:
                shutil.rmtree(root, ignore_errors=True)
    chart = None
    fresh = chart_panels(b.results)
    if fresh and doc:
        chart = Path(doc).parent / "benchmarks-scenarios.svg"
        panels = merged_panels(Path(doc).parent / "benchmarks-scenarios.json", fresh)
        svg_chart(chart, panels)
        log(f"chart written to {chart}")
    write_report(b, s2info, s3info, ceil, doc, args.command, chart)


if __name__ == "__main__":
    main()
