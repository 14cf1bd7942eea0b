#!/usr/bin/env python3
"""Scale benchmark (issue 23): an update should cost what changed, not what is mirrored.

    scale_bench.py [run] SYNC_AGENT         build the trees, publish, restore, update with every tool, write the report
    scale_bench.py report RESULTS.jsonl     rewrite the section from an earlier run's results

`make bench-scale` installs what is missing (rsync, strace, GNU time, nginx, rclone), builds sync-agent in
release and runs this script.

For each tree size (SCALE_SIZES: 10,000 and 100,000 files; 1,000,000 too with SCALE_1M=1), on the
filesystem of SCALE_WORK (the repository's, ext4 here) and, with SCALE_TMPFS=1, again on tmpfs:
- Content, made by this script: N files of 512 seeded random bytes in folders of 100
  (g000/d00000/f0000000.bin …). Version 0.9 is that tree; each next version is a hard-linked copy of the one
  before with some files edited (new bytes, same size, an mtime of its own): 1.0 edits 1 file (so a client
  at 1.0 got there by a replay and keeps 0.9 as its twin, as every client does after its first replay),
  1.1 1 file, 1.2 100,
  1.3 10,000 (SCALE_CHANGES; a change larger than the tree edits every file), then 1-file versions until
  there are SCALE_PUBLISH_VERSIONS versions (10: the 10th is a 1-file publish, compared with the 2nd's
  as the issue asks; the first 1-file publish after the 10,000-file one also catches the publisher's
  twin up across that version, and shows in the publish table).
- Publish: `sync-agent publish --init` of 0.9, then `publish` of each version, each timed once (wall, CPU,
  peak RSS). After each, the storage is kept as a hard-linked snapshot; nginx on loopback (bench/nginx.sh,
  access log on, stopped by its PID) serves the snapshot a run needs.
- Prepared client (untimed): a restore of 0.9, then an update to each version, checked at each. The
  1.0 → 1.1 update runs with `--verbose` and its log is kept; at the last version, a no-change sync runs under strace, counting the syscalls that name the
  mirror and the folders it lists (a tree walk lists them all).
- Rounds, SCALE_WARMUP uncounted then SCALE_ROUNDS counted: a restore of 0.9 into a fresh slot and
  (untimed) its update to 1.0; then every tool's tree is put at 1.0 (untimed) and taken through the change versions by the tool's own runs, one
  change size after the other (1.0 → 1.1 → 1.2 → 1.3), the tools in an order rotated every round and change;
  then a no-change sync of sync-agent's client, now current (the peak RSS baseline; nginx's log counts its
  requests). The tools:
  - sync-agent: `sync --dir SLOT/content --state SLOT/state.sqlite`, the slot of the round's restore (its
    state database records the folder, so the slot's path is fixed);
  - rsync: `rsync -a --delete NEW/ MIRROR/`, from the new version's content folder on the same disk, into
    a `cp -al` copy of 1.0 made once (same mtimes, so its quick check finds exactly the edited files);
  - rclone: `rclone copy --http-url URL :http: MIRROR --files-from LIST`, exactly the changed paths from
    nginx (it knows what changed; it writes in place, no atomic switch);
  - cp -al + swap: `cp -al` of the old mirror, the changed files copied over it from the new version's
    content folder, two renames to swap it in, and `rm -rf` of the old tree (sync-agent keeps its old
    version as the twin its next update catches up).
  The peers' mirrors are brought back to 1.0 with `rsync -a --delete` (untimed, checked) at the start of
  each later round.
- Per run: wall clock (perf_counter around Popen), CPU (user + system) and peak RSS (GNU time: the process
  and the children it waited for), the `sync -f` right after it, and the requests nginx logged; `sync -f`
  (untimed) before it. After it the tree is checked (untimed) against the version's content: every path,
  size and a hash of every file (hashes are remembered per inode, size and ctime); a wrong tree stops the
  benchmark.
The report: per filesystem and size, a table of medians with the min–max over the counted rounds, the
issue's goals met or not met, and the chart BENCH_CHART of update time against tree size. Written as the
section "## Scale (issue 23)" of BENCH_DOC; raw results in SCALE_WORK/results-*.jsonl.

Settings (environment): SCALE_SIZES ("10000,100000"; "2000" checks the script in about a minute), SCALE_1M
(1 adds 1,000,000 files: hours with today's publish), SCALE_CHANGES ("1,100,10000"), SCALE_ROUNDS (3),
SCALE_WARMUP (0), SCALE_PUBLISH_VERSIONS (10), SCALE_WORK (.build-bench-scale/work in the repository),
SCALE_TMPFS (1: a second pass on SCALE_TMPFS_DIR, /dev/shm), SCALE_KEEP (1 keeps the trees, which are
otherwise deleted once each size is done), BENCH_DOC (docs/benchmarks.md; empty to only print), BENCH_CHART
(docs/benchmarks-scale.svg).
"""
from __future__ import annotations

import datetime
import hashlib
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import report  # noqa: E402  (shared helpers: fs_type, machine_line, replace_section, line_chart, AccessLog)

HEADING = "## Scale (issue 23)"
OURS, RSYNC, RCLONE, CPAL = "sync-agent", "rsync", "rclone", "cp -al + swap"
TOOLS = [OURS, RSYNC, RCLONE, CPAL]
LABEL = {OURS: "sync-agent", RSYNC: "rsync -a --delete", RCLONE: "rclone copy --files-from", CPAL: "cp -al + swap"}
COLORS = {OURS: "#1f77b4", RSYNC: "#ff7f0e", RCLONE: "#2ca02c", "cp": "#9467bd",
          "restore": "#8c564b", "no-change": "#17becf", "1-file": "#1f77b4"}
FILE_BYTES, PER_FOLDER, PER_GROUP = 512, 100, 10_000
# The whole first version; 1.0 edits one file of it, and the timed updates start at 1.0.
BASE = "0.9"
T0 = 1_767_225_600  # 2026-01-01 00:00 UTC: the edited files' mtimes are T0 + one hour per version
GOAL_SIZE = 100_000
TIME = report.GNU_TIME  # see report.under_gnu_time
# The cp -al + swap peer: hard-link the old tree, copy the changed files over it (unlinking the linked
# copy first, so the old tree never changes), swap with two renames, delete the old tree.
CPAL_SCRIPT = ('set -e; m=$1; cp -al "$m" "$m.next"; cd "$2"; '
               'xargs -d "\\n" -a "$3" cp -p --parents --remove-destination -t "$m.next" --; '
               'mv -T "$m" "$m.old"; mv -T "$m.next" "$m"; rm -rf "$m.old"')


def log(msg: str) -> None:
    print(f"[scale_bench.py {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def die(msg: str) -> None:
    print(f"scale_bench.py: FAILED: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def run(cmd: list, **kw) -> subprocess.CompletedProcess:
    res = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    if res.returncode != 0:
        die(f"{' '.join(map(str, cmd))} exited {res.returncode}: {res.stderr.strip()[-2000:]}")
    return res



def flush_time(path: Path) -> float:
    """The `sync -f` right after a run: the durability work the run left to the system."""
    t0 = time.perf_counter()
    subprocess.run(["sync", "-f", str(path)], check=False)
    return time.perf_counter() - t0


def n_label(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)


def rel_path(i: int) -> str:
    return f"g{i // PER_GROUP:03d}/d{i // PER_FOLDER:05d}/f{i:07d}.bin"


def write_tree(root: Path, n: int):
    """Writes the base tree of n files (FILE_BYTES seeded bytes each, PER_FOLDER a folder) under
    root, the same bytes for the same n, and yields (index, relative path, bytes) per file written.
    The scale benchmark's 1.0, and bench/restore_rss.sh's and bench/first_replay.sh's content."""
    rng = random.Random(f"scale-{n}")
    for i in range(n):
        rel = rel_path(i)
        if i % PER_FOLDER == 0:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
        data = rng.randbytes(FILE_BYTES)
        with open(root / rel, "wb", buffering=0) as f:
            f.write(data)
        yield i, rel, data


def digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


# ---------------------------------------------------------------------------------------------
# Checking a tree against a version's content.

class Hashes:
    """Content hashes by inode: a file already hashed with the same size and ctime is not read again.
    Every write changes a file's ctime (userspace cannot set it), so a reused hash is sound; mtime is
    not enough: rclone writes in place and sets the same mtime (1970) every time."""

    def __init__(self) -> None:
        self.known: dict[tuple[int, int], tuple[int, int, bytes]] = {}

    def of(self, path: str, st: os.stat_result) -> bytes:
        key = (st.st_dev, st.st_ino)
        hit = self.known.get(key)
        if hit and hit[0] == st.st_size and hit[1] == st.st_ctime_ns:
            return hit[2]
        with open(path, "rb") as f:
            d = digest(f.read())
        self.known[key] = (st.st_size, st.st_ctime_ns, d)
        return d


def tree_problems(root: Path, files: dict[str, bytes], dirs: set[str], hashes: Hashes) -> list[str]:
    """What differs between the tree at root and the expected files (relative path -> hash, all
    FILE_BYTES long) and folders; [] when they are equal."""
    problems: list[str] = []
    seen_files, seen_dirs = 0, set()
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            entries = list(os.scandir(root / rel if rel else root))
        except OSError as e:
            return [f"cannot list {root / rel}: {e}"]
        for e in entries:
            r = f"{rel}/{e.name}" if rel else e.name
            if e.is_dir(follow_symlinks=False):
                seen_dirs.add(r)
                stack.append(r)
                continue
            if not e.is_file(follow_symlinks=False):
                problems.append(f"{r}: not a regular file")
                continue
            want = files.get(r)
            if want is None:
                problems.append(f"{r}: not in the version")
                continue
            seen_files += 1
            st = e.stat(follow_symlinks=False)
            if st.st_size != FILE_BYTES:
                problems.append(f"{r}: {st.st_size} bytes, expected {FILE_BYTES}")
            elif hashes.of(e.path, st) != want:
                problems.append(f"{r}: other bytes than the version's")
    if seen_files != len(files):
        missing = [r for r in files if not (root / r).is_file()][:3]
        problems.append(f"{len(files) - seen_files} file(s) of the version missing, e.g. {missing}")
    if seen_dirs != dirs:
        problems.append(f"folders differ: missing {sorted(dirs - seen_dirs)[:3]}, extra {sorted(seen_dirs - dirs)[:3]}")
    return problems


# ---------------------------------------------------------------------------------------------
# nginx (bench/nginx.sh) and its access log.

class AccessLog(report.AccessLog):
    LINE = re.compile(r'^(\S+) (\d+) (\S+) "([^"]*)" (\d+) (\d+) "([^"]*)"$')

    def entry(self, m: re.Match) -> dict:
        return {"status": int(m[2]), "uri": m[4], "body": int(m[6]), "inm": m[7]}


class Nginx:
    """nginx started by bench/nginx.sh's nginx_start in a bash that waits for it; stopped by its PID."""

    def __init__(self, folder: Path, www: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.access_log = folder / "access.log"
        self.access_log.write_text("")
        script = '. "$1" && nginx_start "$2" "$3" "$4" && echo "READY $NGINX_PID $NGINX_PORT" && wait "$NGINX_PID"'
        self.errors = open(folder / "wrapper.log", "w")
        self.proc = subprocess.Popen(["bash", "-c", script, "nginx", str(ROOT / "bench" / "nginx.sh"), str(folder), str(www),
                                      str(self.access_log)], stdout=subprocess.PIPE, stderr=self.errors, text=True)
        line = self.proc.stdout.readline().split()
        if len(line) != 3 or line[0] != "READY":
            self.proc.wait()
            die(f"nginx did not start (bench/nginx.sh): {(folder / 'wrapper.log').read_text().strip()[-1000:]} "
                f"{(folder / 'error.log').read_text().strip()[-1000:] if (folder / 'error.log').exists() else ''}")
        self.pid, self.port = int(line[1]), int(line[2])
        log(f"nginx (pid {self.pid}) serves {www} on 127.0.0.1:{self.port}, access log {self.access_log}")

    def stop(self) -> None:
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                log(f"nginx (pid {self.pid}) did not stop within 15 s of SIGTERM")
            log(f"nginx (pid {self.pid}) stopped")
            self.pid = 0
            self.errors.close()


# ---------------------------------------------------------------------------------------------
# Running a tool.

def timed(cmd: list, logs: Path, name: str, cwd: Path | None = None) -> dict:
    """Run cmd under GNU time; wall clock from Popen to its exit (perf_counter), CPU (user + system)
    and peak RSS as GNU time reports them (the process and the children it waited for), exit code;
    stdout and stderr go to files in logs.

    Not os.wait4 on a child of this script: a child's ru_maxrss starts at the RSS of the process it was
    forked from (the kernel keeps the pre-exec high-water mark), and this script holds every version's
    listing, over 100 MiB at 100k files. GNU time forks the tool from a 2 MiB process."""
    out, err, tfile = logs / f"{name}.out", logs / f"{name}.err", logs / f"{name}.time"
    with open(out, "w") as o, open(err, "w") as e:
        started = time.perf_counter()
        p = subprocess.Popen(report.under_gnu_time(cmd, tfile), stdout=o, stderr=e, cwd=cwd)
        p.wait()
        wall = time.perf_counter() - started
    if p.returncode != 0:
        die(f"{' '.join(map(str, cmd[:8]))}{' …' if len(cmd) > 8 else ''} exited {p.returncode}: "
            f"{err.read_text(errors='replace').strip()[-2000:]}")
    usage = report.read_gnu_time(tfile)
    if usage is None:
        die(f"GNU time wrote no usage line into {tfile}: {tfile.read_text() if tfile.exists() else 'no file'}")
    return {"wall_s": wall, **usage, "rc": p.returncode,
            "stdout_head": out.read_text(errors="replace")[:400].strip()}


class Tree:
    """One tree size on one filesystem: content versions, storage snapshots, prepared clients, runs."""

    def __init__(self, fs_root: Path, fs: str, n: int, changes: list[int], versions: int) -> None:
        self.fs, self.n = fs, n
        self.root = fs_root / f"n{n}"
        self.label = f"{fs}-{n}"
        self.content = self.root / "content"
        self.storage = self.root / "storage" / "current"
        self.snaps = self.root / "storage" / "snapshots"
        self.slot = self.root / "agent"
        self.runs = self.root / "runs"
        self.logs = self.root / "logs"
        self.lists = self.root / "lists"
        # (version, files edited): 0.9 whole, 1.0 one file (so a client at 1.0 got there by a replay,
        # and keeps 0.9 as its twin, as every client does after its first replay), then one version
        # per change size, then 1-file versions.
        changes = list(dict.fromkeys(min(c, n) for c in changes))
        plan = [(BASE, 0), ("1.0", 1)] + [(f"1.{i + 1}", c) for i, c in enumerate(changes)]
        while len(plan) < versions + 1:
            plan.append((f"1.{len(plan) - 1}", 1))
        self.plan = plan
        # The timed updates: (from, to, files edited), one per change size, from 1.0.
        self.steps = [(plan[i - 1][0], plan[i][0], plan[i][1]) for i in range(2, len(changes) + 2)]
        self.files: dict[str, dict[str, bytes]] = {}
        self.changed: dict[str, list[str]] = {}
        self.dirs: set[str] = set()

    def version_dir(self, v: str) -> Path:
        return self.content / v

    def make(self) -> float:
        """The content versions (deterministic: the same N gives the same bytes)."""
        if self.root.exists():  # left by an interrupted run
            log(f"  {self.label}: deleting {self.root}, left by an earlier run")
            run(["rm", "-rf", self.root])
        for d in (self.content, self.snaps, self.runs, self.logs, self.lists):
            d.mkdir(parents=True)
        spread_folders(self.runs)
        started = time.perf_counter()
        files: dict[str, bytes] = {}
        for i, rel, data in write_tree(self.version_dir(BASE), self.n):
            if i % PER_FOLDER == 0:
                self.dirs.add(rel.rsplit("/", 2)[0])
                self.dirs.add(rel.rsplit("/", 1)[0])
            files[rel] = digest(data)
            if i and i % 200_000 == 0:
                log(f"  {self.label}: {i:,} files written")
        self.files[BASE], self.changed[BASE] = files, []
        previous = BASE
        for index, (v, k) in enumerate(self.plan[1:], 1):
            run(["cp", "-al", self.version_dir(previous), self.version_dir(v)])
            vrng = random.Random(f"scale-{self.n}-{v}")
            picked = sorted(vrng.sample(range(self.n), k))
            files = dict(self.files[previous])
            mtime = (T0 + 3600 * index) * 1_000_000_000
            for i in picked:
                rel = rel_path(i)
                path = self.version_dir(v) / rel
                data = vrng.randbytes(FILE_BYTES)
                path.unlink()  # a new inode: the previous version's hard link keeps its bytes
                with open(path, "wb", buffering=0) as f:
                    f.write(data)
                os.utime(path, ns=(mtime, mtime))
                files[rel] = digest(data)
            self.files[v], self.changed[v] = files, [rel_path(i) for i in picked]
            (self.lists / f"{v}.txt").write_text("".join(r + "\n" for r in self.changed[v]))
            previous = v
        return time.perf_counter() - started


def spread_folders(path: Path) -> None:
    """On ext4, `chattr +T`: each folder made in path gets a block group of its own (Orlov), so one
    run's deletions do not slow the next run's file creation (see scenarios.py). No-op elsewhere."""
    subprocess.run(["chattr", "+T", str(path)], capture_output=True, check=False)


def unshare(mirror: Path, paths: list[str]) -> None:
    """Give each of these files an inode of its own (untimed), for rclone, which writes in place: it
    must not write through a hard link into the content folder the copy was linked from."""
    for rel in paths:
        p = mirror / rel
        if p.stat().st_nlink == 1:
            continue
        tmp = p.with_name(p.name + ".unshare")
        shutil.copy2(p, tmp)
        os.replace(tmp, p)


# ---------------------------------------------------------------------------------------------
# The benchmark.

class Bench:
    def __init__(self, agent: str, work: Path, results: Path) -> None:
        self.agent = agent
        self.rounds = env_int("SCALE_ROUNDS", 3, 1)
        self.warmup = env_int("SCALE_WARMUP", 0, 0)
        self.www = work / "www"
        self.www.mkdir(parents=True, exist_ok=True)
        self.out = results.open("w")
        self.hashes = Hashes()
        self.nginx: Nginx | None = None
        self.access: AccessLog | None = None
        self.started = time.time()
        self.used = 0

    def write(self, row: dict) -> None:
        self.out.write(json.dumps(row) + "\n")
        self.out.flush()

    def url(self, tree: Tree) -> str:
        return f"http://127.0.0.1:{self.nginx.port}/{tree.label}/"

    def serve(self, tree: Tree, version: str) -> None:
        report.swap_symlink(self.www / tree.label, tree.snaps / version)

    def elapsed(self) -> str:
        return f"{(time.time() - self.started) / 60:.1f} min"

    def check(self, what: str, root: Path, tree: Tree, version: str) -> None:
        problems = tree_problems(root, tree.files[version], tree.dirs, self.hashes)
        if problems:
            die(f"{what}: {root} is not version {version} of the {tree.n:,}-file tree ({len(problems)} problem(s)): "
                + "; ".join(problems[:6]))

    def agent_sync(self, tree: Tree, folder: Path, name: str, verbose: bool = False) -> dict:
        cmd = [self.agent, "sync", "--base-url", self.url(tree), "--dir", folder / "content", "--state", folder / "state.sqlite"]
        return timed(cmd + (["--verbose"] if verbose else []), tree.logs, name)

    def retire_slot(self, tree: Tree) -> None:
        if tree.slot.exists():
            self.used += 1
            os.rename(tree.slot, tree.runs / f"agent-used-{self.used}")

    def staging_left(self, tree: Tree) -> None:
        """After a successful update the staging folder holds nothing but `retired/`, the twin."""
        staging = tree.slot / ".content.content-sync"
        left = sorted(p.name for p in staging.iterdir()) if staging.exists() else []
        if left not in ([], ["retired"]):
            die(f"sync-agent left {left} in its staging folder {staging} after a successful update")

    # ---------------------------------------------------------------- one run, measured

    def measured(self, tree: Tree, r: int, measure: str, change: int | None, tool: str, cmd: list) -> dict:
        counted = r >= self.warmup
        report.settle(tree.root)
        offset = self.access.mark()
        res = timed(cmd, tree.logs, f"r{r}-{measure}-{change}-{tool.replace(' ', '_')}")
        res["flush_s"] = flush_time(tree.root)
        self.access.mark()
        entries = self.access.since(offset)
        statuses: dict[str, int] = {}
        for e in entries:
            statuses[str(e["status"])] = statuses.get(str(e["status"]), 0) + 1
        row = {"kind": "result", "fs": tree.fs, "size": tree.n, "round": r, "counted": counted, "measure": measure,
               "change": change, "tool": tool, **res, "requests": len(entries), "statuses": statuses,
               "conditional": sum(1 for e in entries if e["inm"] not in ("", "-")),
               "body_bytes": sum(e["body"] for e in entries), "load_1min": os.getloadavg()[0]}
        self.write(row)
        what = f"{measure}{f' {change}' if change is not None else ''}"
        log(f"  {tree.label:>14} r{r}{'' if counted else ' (warm-up)'} {what:<14} {tool:<14} {res['wall_s']:8.3f} s wall, "
            f"{res['user_s'] + res['sys_s']:7.2f} s CPU, {res['maxrss_kib'] / 1024:6.1f} MiB, {len(entries):>6} requests, "
            f"then sync -f {res['flush_s']:.2f} s  [{self.elapsed()}]")
        return row

    # ---------------------------------------------------------------- the phases of one tree

    def publish_all(self, tree: Tree) -> None:
        base = f"https://bench.invalid/{tree.label}/"
        for index, (v, k) in enumerate(tree.plan):
            cmd = [self.agent, "publish", "--storage", tree.storage, "--content", tree.version_dir(v), "--version", v,
                   "--base-url", base]
            if index == 0:
                cmd.insert(2, "--init")
                tree.storage.parent.mkdir(parents=True, exist_ok=True)
            report.settle(tree.root)
            log(f"  {tree.label}: publishing {v} ({'init, ' if index == 0 else ''}{k:,} file(s) edited)")
            res = timed(cmd, tree.logs, f"publish-{v}")
            self.write({"kind": "publish", "fs": tree.fs, "size": tree.n, "version": v, "index": index + 1, "changes": k,
                        "init": index == 0, **res})
            log(f"  {tree.label}: published {v} in {res['wall_s']:.2f} s ({res['user_s'] + res['sys_s']:.2f} s CPU, "
                f"{res['maxrss_kib'] / 1024:.0f} MiB) [{self.elapsed()}]")
            # Copied, not hard-linked: a link moves every published file's status-change time, so the next
            # publish could trust none of its index and would hash the whole tree again (untimed either way).
            run(["rsync", "-a", "--exclude", "/.content-sync-publish-base", f"{tree.storage}/", tree.snaps / v])
        for v, _ in tree.plan:  # untimed: every snapshot still holds its version (no publish wrote in place)
            self.check(f"storage snapshot {v}", tree.snaps / v / "RXCacheContent", tree, v)
            status = json.loads((tree.snaps / v / "RXCacheConfig" / "cacheStatus.json").read_text())
            if str(status.get("actualCacheVersion")) != v:
                die(f"{tree.snaps / v}/RXCacheConfig/cacheStatus.json says {status.get('actualCacheVersion')}, expected {v}")

    def prepare_clients(self, tree: Tree) -> None:
        """Bring a client through every version (untimed), checking it at each; keep it at 1.0, where
        every round's chain of updates starts."""
        for index, (v, _) in enumerate(tree.plan):
            self.serve(tree, v)
            verbose = index == 2  # 1.0 → 1.1, with 0.9 as the twin
            res = self.agent_sync(tree, tree.slot, f"prepare-{v}", verbose=verbose)
            self.check(f"prepared client {v}", tree.slot / "content", tree, v)
            self.staging_left(tree)
            row = {"kind": "prepare", "fs": tree.fs, "size": tree.n, "version": v, **res}
            if verbose:
                row["verbose_log"] = (tree.logs / f"prepare-{v}.err").read_text(errors="replace")[-6000:]
            self.write(row)
            log(f"  {tree.label}: client at {v} ({'restore' if index == 0 else 'update'} {res['wall_s']:.2f} s): "
                f"{res['stdout_head'].splitlines()[0] if res['stdout_head'] else ''}")

    def strace_poll(self, tree: Tree) -> None:
        """One no-change sync of the prepared client (at the last version) under strace, untimed: the
        syscalls that name the mirror, the folders of it that were listed."""
        if shutil.which("strace") is None:
            self.write({"kind": "strace", "fs": tree.fs, "size": tree.n, "missing": "strace is not installed"})
            return
        self.serve(tree, tree.plan[-1][0])
        trace = tree.logs / "nochange.strace"
        content = str(tree.slot / "content")
        timed(["strace", "-f", "-y", "-qq", "-o", trace, "-e", "trace=%file,%desc,getdents64", self.agent, "sync",
               "--base-url", self.url(tree), "--dir", content, "--state", tree.slot / "state.sqlite"], tree.logs, "strace")
        naming, listed, listed_root = 0, set(), 0
        inside = re.compile(re.escape(content) + r'(?=[/>"])')
        for line in trace.read_text(errors="replace").splitlines():
            if not inside.search(line):
                continue
            naming += 1
            m = re.search(r"getdents64\(\d+<([^>]*)>", line)
            if m and m[1].startswith(content):
                if m[1] == content:
                    listed_root += 1
                else:
                    listed.add(m[1])
        self.write({"kind": "strace", "fs": tree.fs, "size": tree.n, "syscalls_naming_mirror": naming,
                    "folders_listed_below_root": len(listed), "root_listings": listed_root, "folders": len(tree.dirs)})
        log(f"  {tree.label}: no-change sync under strace: {naming} syscalls name the mirror, {len(listed)} of its "
            f"{len(tree.dirs):,} folders listed")
        trace.unlink()
        self.retire_slot(tree)

    def rounds_of(self, tree: Tree) -> None:
        """Each round: a restore; then every tool's tree starts at 1.0 and is taken through the change
        versions by the tool's own runs (1.0 → 1.1 → 1.2 → 1.3), so no tree is copied between two
        updates; then a no-change sync of sync-agent's client, now current."""
        first = tree.plan[0][0]
        start = tree.steps[0][0]
        current = tree.steps[-1][1]
        for r in range(self.warmup + self.rounds):
            log(f"{tree.label}: round {r + 1}/{self.warmup + self.rounds}{' (warm-up)' if r < self.warmup else ''}")
            # Restore of 0.9 into a fresh slot (its own state database), then (untimed) its replay to
            # 1.0: the slot is a client as every client is after its first replay, with a twin.
            self.retire_slot(tree)
            tree.slot.mkdir()
            self.serve(tree, first)
            self.measured(tree, r, "restore", None, OURS, [self.agent, "sync", "--base-url", self.url(tree), "--dir",
                          tree.slot / "content", "--state", tree.slot / "state.sqlite"])
            self.check("restore", tree.slot / "content", tree, first)
            self.serve(tree, start)
            self.agent_sync(tree, tree.slot, f"r{r}-to-{start}")
            self.check(f"sync-agent's client brought to {start}", tree.slot / "content", tree, start)
            # Every peer's tree at 1.0 (untimed).
            for tool in TOOLS[1:]:
                mirror = self.mirror(tree, tool)
                if not mirror.exists():
                    run(["cp", "-al", tree.version_dir(start), mirror])
                else:  # back from the last version: rsync replaces the changed files (new inodes)
                    run(["rsync", "-a", "--delete", f"{tree.version_dir(start)}/", f"{mirror}/"])
                    self.check(f"{tool}'s mirror brought back to {start}", mirror, tree, start)
            for ci, (old, new, k) in enumerate(tree.steps):
                self.serve(tree, new)
                shift = (r + ci) % len(TOOLS)
                for tool in TOOLS[shift:] + TOOLS[:shift]:
                    self.update(tree, r, old, new, k, tool)
            # No-change sync of sync-agent's client, now at the served version.
            self.measured(tree, r, "nochange", None, OURS, [self.agent, "sync", "--base-url", self.url(tree), "--dir",
                          tree.slot / "content", "--state", tree.slot / "state.sqlite"])
            self.check("no-change sync", tree.slot / "content", tree, current)

    def mirror(self, tree: Tree, tool: str) -> Path:
        return tree.runs / f"mirror-{tool.split()[0]}"

    def update(self, tree: Tree, r: int, old: str, new: str, k: int, tool: str) -> None:
        """One tool's update of its own tree from old to new (the tree is at old: see rounds_of)."""
        listing = tree.lists / f"{new}.txt"
        if tool == OURS:
            self.measured(tree, r, "update", k, tool, [self.agent, "sync", "--base-url", self.url(tree), "--dir",
                          tree.slot / "content", "--state", tree.slot / "state.sqlite"])
            self.check("sync-agent update", tree.slot / "content", tree, new)
            self.staging_left(tree)
            return
        mirror = self.mirror(tree, tool)
        if tool == RSYNC:
            cmd = ["rsync", "-a", "--delete", f"{tree.version_dir(new)}/", f"{mirror}/"]
        elif tool == RCLONE:
            unshare(mirror, tree.changed[new])
            cmd = ["rclone", "copy", "--config", "/dev/null", "--http-url", self.url(tree) + "RXCacheContent/", ":http:",
                   mirror, "--files-from", listing, "--http-no-head", "--no-traverse", "--ignore-times", "--transfers", "8", "-q"]
        else:
            cmd = ["bash", "-c", CPAL_SCRIPT, "cp-al-swap", mirror, tree.version_dir(new), listing]
        self.measured(tree, r, "update", k, tool, cmd)
        self.check(f"{tool} update", mirror, tree, new)

    def tree_run(self, fs_root: Path, fs: str, n: int, changes: list[int], versions: int) -> None:
        tree = Tree(fs_root, fs, n, changes, versions)
        need_bytes = n * 4096 * (self.rounds + self.warmup + 6) + n * 800 * versions
        st = os.statvfs(fs_root)
        if st.f_bavail * st.f_frsize < need_bytes * 1.2 or st.f_favail < n * (self.rounds + self.warmup + 4) * 1.2:
            die(f"{fs_root} has {st.f_bavail * st.f_frsize / 2**30:.1f} GiB and {st.f_favail:,} inodes free; the "
                f"{n:,}-file tree needs about {need_bytes * 1.2 / 2**30:.1f} GiB and {n * (self.rounds + self.warmup + 4) * 1.2:,.0f} "
                "inodes: free some, set SCALE_WORK elsewhere, or leave the size out of SCALE_SIZES")
        log(f"{tree.label}: making {n:,} files in {n // PER_FOLDER:,} folders and {len(tree.plan) - 1} edited versions "
            f"in {tree.root} [{self.elapsed()}]")
        gen = tree.make()
        self.write({"kind": "tree", "fs": tree.fs, "fs_type": report.fs_type(str(fs_root)), "path": str(fs_root), "size": n,
                    "folders": len(tree.dirs), "plan": tree.plan, "generation_s": gen})
        log(f"{tree.label}: content made in {gen:.1f} s; publishing {len(tree.plan)} versions [{self.elapsed()}]")
        self.publish_all(tree)
        log(f"{tree.label}: preparing the clients [{self.elapsed()}]")
        self.prepare_clients(tree)
        self.strace_poll(tree)
        self.rounds_of(tree)
        self.hashes.known.clear()
        if os.environ.get("SCALE_KEEP") == "1":
            log(f"{tree.label}: kept {tree.root} (SCALE_KEEP=1)")
        else:
            log(f"{tree.label}: deleting {tree.root} [{self.elapsed()}]")
            run(["rm", "-rf", tree.root])
            report.settle(fs_root)
        (self.www / tree.label).unlink(missing_ok=True)


def env_int(name: str, default: int, least: int) -> int:
    raw = os.environ.get(name) or str(default)
    if not raw.isdigit() or int(raw) < least:
        die(f"{name}={raw!r}: expected a whole number of at least {least} (default {default})")
    return int(raw)


def env_list(name: str, default: str) -> list[int]:
    raw = os.environ.get(name) or default
    try:
        values = [int(x.replace("_", "")) for x in raw.split(",") if x.strip()]
    except ValueError:
        die(f"{name}={raw!r}: expected a comma-separated list of whole numbers, e.g. {default!r}")
    if not values or any(v <= 0 for v in values):
        die(f"{name}={raw!r}: expected positive numbers, e.g. {default!r}")
    return values


def run_all(binary: str) -> Path:
    sizes = env_list("SCALE_SIZES", "10000,100000")
    if os.environ.get("SCALE_1M") == "1" and 1_000_000 not in sizes:
        sizes.append(1_000_000)
    sizes = sorted(set(sizes))
    changes = env_list("SCALE_CHANGES", "1,100,10000")
    versions = max(env_int("SCALE_PUBLISH_VERSIONS", 10, 1), len(changes) + 1)
    for tool, package in (("rsync", "rsync"), ("rclone", "rclone"), ("xargs", "findutils"), (TIME, "time")):
        if shutil.which(tool) is None:
            die(f"{tool} is missing: `apt-get install {package}` (`make bench-scale` does)")
    work = Path(os.environ.get("SCALE_WORK") or ROOT / ".build-bench-scale" / "work").resolve()
    work.mkdir(parents=True, exist_ok=True)
    passes = [(work / "trees", report.fs_type(str(work)))]
    if os.environ.get("SCALE_TMPFS") == "1":
        tmp_dir = Path(os.environ.get("SCALE_TMPFS_DIR") or "/dev/shm")
        if report.fs_type(str(tmp_dir)) != "tmpfs":
            die(f"SCALE_TMPFS_DIR={tmp_dir} is not a tmpfs (it is {report.fs_type(str(tmp_dir))}); point it at one or unset SCALE_TMPFS")
        if passes[0][1] == "tmpfs":
            die(f"SCALE_WORK ({work}) is on tmpfs already: unset SCALE_TMPFS, or point SCALE_WORK at a disk")
        passes.append((tmp_dir / f"content-sync-scale-{os.getpid()}", "tmpfs"))
    results = work / f"results-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    bench = Bench(binary, work, results)
    keys = ["SCALE_SIZES", "SCALE_1M", "SCALE_CHANGES", "SCALE_ROUNDS", "SCALE_WARMUP", "SCALE_PUBLISH_VERSIONS", "SCALE_TMPFS",
            "SCALE_WORK"]
    bench.write({"kind": "meta", "binary": binary, "sizes": sizes, "changes": changes, "versions": versions,
                 "rounds": bench.rounds, "warmup": bench.warmup, "started": bench.started,
                 "command": report.command_line("bench/scale_bench.py", binary, keys),
                 "binary_line": binary_line(binary),
                 "machine": report.machine_line(str(work), [("rsync", ["sh", "-c", "rsync --version | head -n 1 | tr -s ' '"]),
                                                            ("rclone", ["rclone", "version"]),
                                                            ("nginx", ["nginx", "-v"])]),
                 "load_before": os.getloadavg()[0]})

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        bench.nginx = Nginx(work / "nginx", bench.www)
        bench.access = AccessLog(bench.nginx.access_log)
        for fs_root, fs in passes:
            fs_root.mkdir(parents=True, exist_ok=True)
            for n in sizes:
                bench.tree_run(fs_root, fs, n, changes, versions)
            if fs_root != work / "trees" and os.environ.get("SCALE_KEEP") != "1":
                shutil.rmtree(fs_root, ignore_errors=True)
        bench.write({"kind": "end", "ended": time.time(), "load_after": os.getloadavg()[0]})
    finally:
        if bench.nginx:
            bench.nginx.stop()
            bench.nginx.access_log.unlink(missing_ok=True)
        bench.out.close()
    log(f"results: {results} (the run took {bench.elapsed()})")
    return results


def binary_line(binary: str) -> str:
    version = report.sh(binary, "--version") or "?"
    built = datetime.datetime.fromtimestamp(os.path.getmtime(binary), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    repo = Path(binary).resolve()
    while repo != repo.parent and not (repo / ".git").exists():
        repo = repo.parent
    if repo == repo.parent:
        return f"sync-agent {version} (`{binary}`, built {built}, outside a git work tree)"
    return report.tool_binary_line(binary, ["Sources"], f"sync-agent {version}")


# ---------------------------------------------------------------------------------------------
# The report.

def load(path: Path) -> tuple[dict, list[dict]]:
    meta, rows = {}, []
    for line in path.read_text().splitlines():
        obj = json.loads(line)
        if obj.get("kind") in ("meta", "end"):
            meta.update(obj)
        else:
            rows.append(obj)
    return meta, rows


def stats(values: list[float]) -> tuple[float, float, float] | None:
    return (statistics.median(values), min(values), max(values)) if values else None


def fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.1f}" if abs(x) >= 10 else f"{x:.2f}" if abs(x) >= 0.1 else f"{x:.3f}"


def cell(s: tuple[float, float, float] | None, unit: str = "") -> str:
    return f"{fmt(s[0])}{unit} ({fmt(s[1])}–{fmt(s[2])})" if s else "–"


def count(values: list[int]) -> str:
    """Request counts: the median, and the range when the rounds differ."""
    if not values:
        return "–"
    lo, hi = min(values), max(values)
    return f"{statistics.median(values):,g}" + ("" if lo == hi else f" ({lo:,}–{hi:,})")


def met(ok: bool | None) -> str:
    return "–" if ok is None else "met" if ok else "**not met**"


def write_report(results: Path) -> None:
    meta, rows = load(results)
    results_rows = [r for r in rows if r["kind"] == "result" and r.get("counted")]
    if not results_rows:
        die(f"{results} has no counted runs (an interrupted run?): run the benchmark again")
    trees = [r for r in rows if r["kind"] == "tree"]
    fss = list(dict.fromkeys(t["fs"] for t in trees))
    fs_type = {t["fs"]: t["fs_type"] for t in trees}
    primary = fss[0]

    def pick(fs: str, n: int, measure: str, tool: str = OURS, change: int | None = None) -> list[dict]:
        return sorted((r for r in results_rows if r["fs"] == fs and r["size"] == n and r["measure"] == measure
                       and r["tool"] == tool and r["change"] == change), key=lambda r: r["round"])

    wall = lambda rs: [r["wall_s"] for r in rs]  # noqa: E731
    durable = lambda rs: [r["wall_s"] + r["flush_s"] for r in rs]  # noqa: E731
    cpu = lambda rs: [r["user_s"] + r["sys_s"] for r in rs]  # noqa: E731
    rss = lambda rs: [r["maxrss_kib"] / 1024 for r in rs]  # noqa: E731
    reqs = lambda rs: [r["requests"] for r in rs]  # noqa: E731

    started = datetime.datetime.fromtimestamp(meta.get("started", time.time()), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    took = (meta.get("ended", meta.get("started", 0)) - meta.get("started", 0)) / 60
    sizes = meta.get("sizes", [])
    changes = meta.get("changes", [])
    lines = [HEADING, "",
             f"Measured {started} by `{meta.get('command')}` (`make bench-scale` runs it with the defaults; "
             "`SCALE_SIZES=2000 BENCH_DOC= make bench-scale` checks the script in about a minute); "
             f"{meta.get('binary_line')}. The run took {took:.1f} min.", ""] + kept_notes(os.environ.get("BENCH_DOC", str(ROOT / "docs" / "benchmarks.md"))) + [
             f"**Machine.** {' '.join(str(meta.get('machine')).split())}. Load average (1 min) {meta.get('load_before', float('nan')):.2f} before "
             f"the runs, {meta.get('load_after', float('nan')):.2f} after; the machine is shared, so other work may run "
             "meanwhile.", "",
             f"**Workload** (issue 23). Trees of {', '.join(f'{n:,}' for n in sizes)} files of {FILE_BYTES} seeded random "
             f"bytes in folders of {PER_FOLDER}, made by the script. Version {BASE} is the tree; each next version edits some "
             "files (new bytes, same size) of a hard-linked copy of the one before: "
             + ", ".join(f"{v} {k:,} file(s)" for v, k in (trees[0]["plan"][1:] if trees else []))
             + f" (a change larger than the tree edits every file). Published with `sync-agent publish` "
             f"(`--init` for {BASE}), served by nginx on loopback from a hard-linked snapshot of the storage at the "
             "version a run needs.", "",
             f"**Method.** Per tree, untimed: a client is brought through every version (a restore of {BASE}, then an "
             "update to each version, the 1.0 → 1.1 one with `--verbose`), checked at each. "
             f"Then {meta.get('warmup', 0)} uncounted and {meta.get('rounds')} counted "
             f"rounds, each: a restore of {BASE} into a fresh slot, and (untimed) its update to 1.0, so that the slot is "
             f"a client as every client is after its first replay, keeping {BASE} as its twin; every tool's tree put at "
             "1.0 (untimed) and taken through "
             "the change versions by the tool's own runs, one change size after the other (1.0 → 1.1 → 1.2 → 1.3), the "
             "tools in an order rotated every round and change size; then a no-change sync of sync-agent's client, now "
             "current. The tools:",
             f"- **{LABEL[OURS]}**: `sync-agent sync --base-url URL --dir SLOT/content --state SLOT/state.sqlite` "
             "(`syncfs` before its swap, `RENAME_EXCHANGE`; the old version kept as the twin the next update catches up);",
             f"- **{LABEL[RSYNC]}**: `rsync -a --delete NEW/ MIRROR/` from the new version's content folder on the same disk "
             "into its mirror, a `cp -al` copy of 1.0 made once, with the same mtimes (no network; its quick check finds "
             "exactly the edited files, but it walks both trees);",
             f"- **{LABEL[RCLONE]}**: `rclone copy --http-url URL/RXCacheContent/ :http: MIRROR --files-from LIST "
             "--http-no-head --no-traverse --ignore-times --transfers 8` of exactly the changed paths from nginx into its "
             "mirror: it knows what changed, walks nothing, and writes the files in place (no atomic switch);",
             f"- **{LABEL[CPAL]}**: `cp -al` of the old mirror, the changed files copied over it (`cp -p --parents "
             "--remove-destination`) from the new version's content folder, two `mv -T` to swap it in, `rm -rf` of the old "
             "tree (sync-agent keeps its old version as the twin its next update catches up).",
             "The peers' mirrors are brought back to 1.0 with `rsync -a --delete` (untimed, checked) at the start of each "
             "later round. Wall clock: `perf_counter` around the process, start-up included; CPU (user + system) and peak RSS from GNU "
             "`time` (the process and the children it waited for; RSS of the largest). Not `os.wait4` of the script's own "
             "children: their `ru_maxrss` starts at the RSS of the Python process that forked them. `sync -f` "
             "(untimed) before every run, and timed right after it: \"+ sync -f\" adds it, the durability sync-agent's "
             "`syncfs` already pays and the peers leave to the kernel. Requests are counted from nginx's access log. After "
             "every run the tree is compared (untimed) with the version's content: every path, size and a hash of every "
             "file; a wrong tree stops the benchmark, so every number below comes from a correct update.", ""]

    goals: list[str] = []
    notes: list[str] = []
    for fs in fss:
        fs_name = f"{fs_type.get(fs, fs)}"
        where = next((t["path"] for t in trees if t["fs"] == fs), "?")
        for n in sizes:
            if not any(r["fs"] == fs and r["size"] == n for r in results_rows):
                continue
            tree = next(t for t in trees if t["fs"] == fs and t["size"] == n)
            lines += [f"**{n:,} files ({tree['folders']:,} folders), {fs_name}** (`{where}`). Medians over the counted rounds "
                      "(min–max); \"÷\" is sync-agent's median over this row's (below 1: sync-agent is faster).", "",
                      "| run | tool | wall s | wall + sync -f s | CPU s | peak RSS MiB | requests | ÷ (wall) | ÷ (CPU) |",
                      "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
            for measure, label in (("restore", f"restore of {BASE} ({n:,} files)"), ("nochange", "no-change sync")):
                rs = pick(fs, n, measure)
                lines.append(f"| {label} | {LABEL[OURS]} | {cell(stats(wall(rs)))} | {cell(stats(durable(rs)))} | "
                             f"{cell(stats(cpu(rs)))} | {cell(stats(rss(rs)))} | {count(reqs(rs))} | – | – |")
            for k in sorted({r["change"] for r in results_rows if r["fs"] == fs and r["size"] == n and r["measure"] == "update"}):
                ours = pick(fs, n, "update", OURS, k)
                for tool in TOOLS:
                    rs = pick(fs, n, "update", tool, k)
                    if not rs:
                        continue
                    rw = f"{statistics.median(wall(ours)) / statistics.median(wall(rs)):.2f}×" if ours and tool != OURS else "–"
                    rc = f"{statistics.median(cpu(ours)) / statistics.median(cpu(rs)):.2f}×" if ours and tool != OURS else "–"
                    lines.append(f"| update, {k:,} file(s) | {LABEL[tool]} | {cell(stats(wall(rs)))} | {cell(stats(durable(rs)))} | "
                                 f"{cell(stats(cpu(rs)))} | {cell(stats(rss(rs)))} | {count(reqs(rs))} | {rw} | {rc} |")
            lines.append("")
            pubs = [r for r in rows if r["kind"] == "publish" and r["fs"] == fs and r["size"] == n]
            if pubs:
                lines += [f"Publishes of the {n:,}-file tree ({fs_name}; one run each, so single numbers on a noisy disk): "
                          + "; ".join(f"{p['version']} ({'init' if p['init'] else format(p['changes'], ',') + ' edited'}) "
                                      f"{fmt(p['wall_s'])} s wall, {fmt(p['user_s'] + p['sys_s'])} s CPU, {p['maxrss_kib'] / 1024:.0f} MiB"
                                      for p in pubs) + ".", ""]

    # The goals, judged on the first filesystem's 100k tree (1M for the two 1M goals).
    g = GOAL_SIZE if any(r["fs"] == primary and r["size"] == GOAL_SIZE for r in results_rows) else None
    big = 1_000_000 if any(r["fs"] == primary and r["size"] == 1_000_000 for r in results_rows) else None
    fsn = fs_type.get(primary, primary)
    goals += ["| goal (issue 23) | target | measured | met? |", "|---|---|---|---|"]

    def goal_row(goal: str, target: str, text: str, ok: bool | None) -> None:
        goals.append(f"| {goal} | {target} | {text} | {met(ok)} |")

    if g:
        one = pick(primary, g, "update", OURS, 1)
        base = pick(primary, g, "nochange")
        s1, sb = stats(wall(one)), stats(rss(base))
        r1 = stats(rss(one))
        goal_row(f"1-file update, {g:,}-file mirror, {fsn}: wall", "≤ 0.15 s", f"{cell(s1, ' s')}", s1[0] <= 0.15 if s1 else None)
        if r1 and sb:
            goal_row(f"same: peak RSS", "≤ the no-change sync's + 8 MiB",
                     f"{fmt(r1[0])} MiB against {fmt(sb[0])} MiB ({r1[0] - sb[0]:+.1f} MiB)", r1[0] <= sb[0] + 8)
        hundred = pick(primary, g, "update", OURS, 100)
        s100 = stats(wall(hundred))
        goal_row(f"100-file update, {g:,}-file mirror, {fsn}: wall", "≤ 0.3 s", cell(s100, " s"), s100[0] <= 0.3 if s100 else None)
        rcl = pick(primary, g, "update", RCLONE, 100)
        if hundred and rcl:
            ratio = statistics.median(wall(hundred)) / statistics.median(wall(rcl))
            by_round = {r["round"]: r["wall_s"] for r in rcl}
            paired = [f"{r['wall_s'] / by_round[r['round']]:.2f}×" for r in hundred if r["round"] in by_round]
            goal_row("same, ratio to `rclone copy --files-from` (same run)", "≤ 1.5×",
                     f"{ratio:.2f}× ({fmt(statistics.median(wall(hundred)))} s ÷ {fmt(statistics.median(wall(rcl)))} s; "
                     f"round by round {', '.join(paired)}; CPU {statistics.median(cpu(hundred)) / statistics.median(cpu(rcl)):.2f}×)",
                     ratio <= 1.5)
    else:
        goals.append(f"| 1-file and 100-file updates on a {GOAL_SIZE:,}-file mirror | ≤ 0.15 s, ≤ 0.3 s, ≤ 1.5× rclone | "
                     f"no {GOAL_SIZE:,}-file tree in this run (SCALE_SIZES) | – |")
    restore_rss = []
    for n in sizes:
        rr, nb = stats(rss(pick(primary, n, "restore"))), stats(rss(pick(primary, n, "nochange")))
        if rr and nb:
            restore_rss.append((n, rr[0], nb[0]))
    flat = "; ".join(f"{n_label(n)}: {a:.0f} MiB ({a - b:+.0f} over the no-change sync's {b:.0f})" for n, a, b in restore_rss)
    if big:
        n, a, b = next(x for x in restore_rss if x[0] == big)
        goal_row("restore of 1,000,000 files: peak RSS", "≤ the no-change sync's + 32 MiB (flat in the file count)", flat, a <= b + 32)
    else:
        goal_row("restore of 1,000,000 files: peak RSS", "≤ the no-change sync's + 32 MiB (flat in the file count)",
                 f"1M not run (SCALE_1M=1); restore peak RSS {flat}", None)
        if restore_rss:
            n, a, b = restore_rss[-1]
            goal_row(f"(the same bound at {n:,} files, as a sign)", "≤ no-change + 32 MiB", f"{a - b:+.0f} MiB", a <= b + 32)
    pubs = [r for r in rows if r["kind"] == "publish" and r["fs"] == primary and r["size"] == (g or 0)]
    one_pubs = [p for p in pubs if p["changes"] == 1 and not p["init"]]
    if one_pubs:
        second = next((p for p in pubs if p["index"] == 2), None)
        last = one_pubs[-1]
        goal_row(f"publish of a 1-file change over {g:,} files ({second['version'] if second else '?'}, the 2nd version)", "≤ 5 s",
                 f"{fmt(second['wall_s'])} s wall, {fmt(second['user_s'] + second['sys_s'])} s CPU" if second else "–",
                 second["wall_s"] <= 5 if second else None)
        if second and last is not second:
            goal_row(f"same at version {last['index']} ({last['version']}) against the 2nd (single runs: ≤ 1.1× counts as no slower)",
                     "no slower at the 10th version than at the 2nd",
                     f"{fmt(last['wall_s'])} s wall ({last['wall_s'] / second['wall_s']:.2f}×), "
                     f"{fmt(last['user_s'] + last['sys_s'])} s CPU ({(last['user_s'] + last['sys_s']) / (second['user_s'] + second['sys_s']):.2f}×)"
                     + ("" if last["index"] >= 10 else f"; only {last['index']} versions published (SCALE_PUBLISH_VERSIONS=10 for the 10th)"),
                     last["wall_s"] <= 1.1 * second["wall_s"])
    if not one_pubs:
        goals.append(f"| publish of a 1-file change over {GOAL_SIZE:,} files | ≤ 5 s, no slower at the 10th version than at the "
                     f"2nd | no {GOAL_SIZE:,}-file tree in this run (SCALE_SIZES) | – |")
    poll_n = big or g or (max(sizes) if sizes else None)
    if poll_n:
        nc = pick(primary, poll_n, "nochange")
        s = stats(wall(nc))
        one_cond = all(r["requests"] == 1 and r["conditional"] == 1 and r["statuses"].get("304") == 1 for r in nc)
        tr = next((r for r in rows if r["kind"] == "strace" and r["fs"] == primary and r["size"] == poll_n), None)
        walk = None if not tr or "missing" in tr else (tr["folders_listed_below_root"] == 0 and tr["syscalls_naming_mirror"] < tr["folders"])
        walk_text = (tr.get("missing", "") if tr and "missing" in tr else
                     f"strace: {tr['syscalls_naming_mirror']} syscalls name the mirror, {tr['folders_listed_below_root']} of its "
                     f"{tr['folders']:,} folders listed" if tr else "not traced")
        reqs_text = ", ".join(sorted({f"{r['requests']} request(s) ({', '.join(f'{c}× {st}' for st, c in r['statuses'].items())})" for r in nc}))
        target_n = "1M" if big else f"{n_label(poll_n)} (1M with SCALE_1M=1)"
        goal_row(f"no-change poll at {target_n}: requests", "one conditional request", reqs_text, one_cond)
        goal_row("same: wall", "≤ 50 ms", cell((s[0] * 1000, s[1] * 1000, s[2] * 1000) if s else None, " ms"), s[0] <= 0.05 if s else None)
        goal_row("same: no tree walk", "no folder of the mirror listed", walk_text, walk)

    # Notes: CPU where the disk is noisy, phase logs.
    for fs in fss:
        for n in sizes:
            parts = []
            for k in changes:
                kk = min(k, n)
                ours = pick(fs, n, "update", OURS, kk)
                if not ours:
                    continue
                peers = [f"{LABEL[t]} {statistics.median(cpu(ours)) / statistics.median(cpu(pick(fs, n, 'update', t, kk))):.2f}×"
                         for t in TOOLS[1:] if pick(fs, n, "update", t, kk)]
                parts.append(f"{kk:,} file(s): {fmt(statistics.median(cpu(ours)))} s, ÷ {', '.join(peers)}")
            if parts:
                notes.append(f"- CPU time of the updates ({n_label(n)}, {fs_type.get(fs, fs)}; sync-agent's median, then its ratio "
                             f"to each peer's): {'; '.join(parts)}.")
    for fs in fss:
        for n in sizes:
            prep = next((r for r in rows if r["kind"] == "prepare" and r["fs"] == fs and r["size"] == n and "verbose_log" in r), None)
            if prep is None:
                continue
            log_lines = [re.sub(r"^\S+Z ", "", l) for l in prep["verbose_log"].splitlines() if l.strip()]
            timing = [l for l in log_lines if re.search(r"\d(\.\d+)?\s*(ms|s|µs)\b", l)]
            notes.append(f"- `sync-agent sync --verbose`, 1-file update at {n_label(n)} ({fs_type.get(fs, fs)}, untimed "
                         f"preparation, {fmt(prep['wall_s'])} s): {len(log_lines)} log line(s), "
                         + ("phase timings: " + "; ".join(f"`{l[:160]}`" for l in timing[:12]) if timing else
                            "no phase timings (" + "; ".join(f"`{l[:120]}`" for l in log_lines[:4]) + ")") + ".")
    for fs in fss:
        for n in sizes:
            tr = next((r for r in rows if r["kind"] == "strace" and r["fs"] == fs and r["size"] == n), None)
            if tr and "missing" not in tr:
                notes.append(f"- No-change sync under strace ({n_label(n)}, {fs_type.get(fs, fs)}): {tr['syscalls_naming_mirror']} "
                             f"syscalls name the mirror; {tr['folders_listed_below_root']} of its {tr['folders']:,} folders listed, "
                             f"the root {tr['root_listings']} time(s).")

    # The chart.
    chart_path = Path(os.environ.get("BENCH_CHART") or ROOT / "docs" / "benchmarks-scale.svg")
    doc = os.environ.get("BENCH_DOC", str(ROOT / "docs" / "benchmarks.md"))
    panels = []
    for fs in fss:
        fsn_ = fs_type.get(fs, fs)
        for k in changes:
            series = []
            for tool in TOOLS:
                pts = []
                for n in sizes:
                    s = stats(wall(pick(fs, n, "update", tool, min(k, n))))
                    if s:
                        pts.append((n, *s))
                if pts:
                    series.append((LABEL[tool], pts))
            goal = {1: [(0.15, "goal at 100k: 0.15 s")], 100: [(0.3, "goal at 100k: 0.3 s")]}.get(k, [])
            if series:
                every = " (every file of a smaller tree)" if any(n < k for n in sizes) else ""
                panels.append((f"Update of {k:,} changed file{'s' if k > 1 else ''}{every}, {fsn_}: wall seconds against tree size",
                               "s", series, goal))
        series = []
        for measure, name in (("restore", "restore of 1.0"), ("nochange", "no-change sync")):
            pts = [(n, *stats(rss(pick(fs, n, measure)))) for n in sizes if pick(fs, n, measure)]
            if pts:
                series.append((name, pts))
        pts = [(n, *stats(rss(pick(fs, n, "update", OURS, 1)))) for n in sizes if pick(fs, n, "update", OURS, 1)]
        if pts:
            series.append(("1-file update", pts))
        if series:
            panels.append((f"sync-agent peak RSS against tree size, {fsn_}", "MiB", series, []))
    if panels and doc:
        report.line_chart(chart_path, panels, {**COLORS, LABEL[RSYNC]: COLORS[RSYNC], LABEL[RCLONE]: COLORS[RCLONE],
                                               LABEL[CPAL]: COLORS["cp"], "restore of 1.0": COLORS["restore"],
                                               "no-change sync": COLORS["no-change"]},
                          "points: medians over the counted rounds; whiskers: lowest–highest round; log–log (bench/scale_bench.py)",
                          x_label=lambda x: n_label(int(x)), x_title="files in the mirror")
    lines += ["**Goals.** Judged on the " + fsn + " trees, from the medians above.", ""] + goals + [""]
    if notes:
        lines += notes + [""]
    if panels and doc:
        lines += [f"![Update time against tree size]({chart_path.name})", "",
                  f"Chart: [{chart_path.name}]({chart_path.name}), written by `bench/scale_bench.py` from the same runs.", ""]
    shown = results.resolve()
    shown = shown.relative_to(ROOT) if shown.is_relative_to(ROOT) else shown
    lines += [f"Raw results: `{shown}` (regenerate this section with `python3 bench/scale_bench.py report FILE`).", ""]
    text = "\n".join(lines)
    print(text)
    if doc:
        report.replace_section(doc, HEADING, text)
        log(f"wrote the section '{HEADING}' of {doc}" + (f" and {chart_path}" if panels else ""))


KEPT_BEGIN = "<!-- scale_bench.py keeps this block: notes written by hand -->"
KEPT_END = "<!-- end of the notes written by hand -->"


def kept_notes(doc) -> list:
    """The hand-written block (KEPT_BEGIN ... KEPT_END) of the section this script rewrites, kept as it
    is: the before-and-after history of the numbers, which no single run can write."""
    if not doc or not Path(doc).exists():
        return []
    text = Path(doc).read_text()
    section = re.search(rf"^{re.escape(HEADING)}\n.*?(?=^## |\Z)", text, re.S | re.M)
    if not section:
        return []
    block = re.search(re.escape(KEPT_BEGIN) + r".*?" + re.escape(KEPT_END), section.group(0), re.S)
    return block.group(0).splitlines() + [""] if block else []


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["report"] and len(argv) == 2:
        if not Path(argv[1]).is_file():
            die(f"{argv[1]} is not a file; give the results-*.jsonl of a run (in SCALE_WORK)")
        write_report(Path(argv[1]))
    elif len(argv) == 1 or (argv[:1] == ["run"] and len(argv) == 2):
        binary = os.path.abspath(argv[-1])
        if not os.access(binary, os.X_OK) or os.path.isdir(binary):
            die(f"{binary} is not an executable; build it with `swift build -c release --product sync-agent`")
        write_report(run_all(binary))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(64)


if __name__ == "__main__":
    main()
