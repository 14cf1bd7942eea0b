#!/usr/bin/env python3
"""Peak memory and time of planning a replay over big change lists (issue 9, defect 8).

Generates storages whose one change list holds N changes, serves them from a small threaded
HTTP server inside this script (it sends ETags, as GitHub raw and nginx do, and counts requests
per path), and runs `sync-agent sync` under GNU time for a client one version behind.

What is measured: the storages publish no content files for the changes' downloads, so each
sync fetches the status, the update list and the change list, scans the local tree, plans, makes
the plan's folders and hard-links the kept files in the staging area, then fails at the first
download (404). Peak RSS is therefore that of fetching, parsing and planning (the download phase
is not part of this benchmark). `--full N` additionally runs one complete sync with the content
present, for comparison.

Cases (all with a client at 1.0 replaying changes_1.0_1.1.json):
  mix       a realistic mix: adds of new files (a fifth with sha256/size), redownloads, moves,
            renames, removes, empty-folder adds, folder moves and removes
  cancel    most changes cancel out: adds later removed, files moved away and back
  one       the `mix` local tree with a one-change list: the local tree's own share
  noop      a list as large as `mix` whose changes all change nothing (both paths empty, and a
            filler key the reader skips): what fetching, verifying, storing and reading it costs
  dup       an update list naming one 1,000-change list 20,000 times (1.2 MiB)
  deep      a 1,800-level folder chain: rename its top, add and redownload at the bottom

  differ    (subcommand `differ`) `sync-agent publish --dry-run` of a 40,000-file tree in which
            folders were renamed and moved and files moved, edited, added and removed: the
            publisher's differ replays each candidate list through the planner's tree

Usage:
  python3 bench/plan_memory.py differ --agent PATH [--runs 5]
  python3 bench/plan_memory.py run --agent PATH --label after --out /tmp/pm-after.json \
      [--sizes 100000,200000,400000,860000] [--cases mix,cancel,one,noop,dup,deep] [--runs 3] [--full 100000]
  python3 bench/plan_memory.py report BEFORE.json AFTER.json [--notes bench/plan_memory_notes.md] [--doc docs/benchmarks.md]

The JSON is written the way the publisher writes it (sorted keys) but compact and without the
optional false flags, so that 860k changes fit the transport's 64 MiB limit for a storage file,
as in the review that found the defect (62 MiB for 860k changes). Work folder: $BENCH_WORK
(default /tmp/content-sync-planmem); storages are generated once and reused.
"""
from __future__ import annotations

import argparse
import hashlib
import http.server
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

PUBLISHED = "http://s/"
CONTENT = PUBLISHED + "RXCacheContent/"
LIST_NAME = "changes_1.0_1.1.json"
BEGIN, END = "<!-- planmemory:begin -->", "<!-- planmemory:end -->"


# ---------------------------------------------------------------- storage generation

def remove_tree(path: Path) -> None:
    """rm -rf: shutil.rmtree recurses once per level and fails on the deep case's 1,800 levels."""
    subprocess.run(["rm", "-rf", "--", str(path)], check=True)


def body_of(path: str) -> bytes:
    return (path + "\n").encode()


def fingerprint(path: str) -> dict:
    data = body_of(path)
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def status(actual: str, minimal: str) -> dict:
    return {
        "actualCacheVersion": actual, "minimalCacheVersion": minimal,
        "urlAtListOfURLsToUpdatesByVersion": PUBLISHED + "RXCacheConfig/listOfURLsToUpdatesByVersion.json",
        "urlAtZipArchiveOfCacheContent": PUBLISHED + "RXCacheContent.zip",
        "zippedArchiveSizeInMB": "2000", "unzippedArchiveSizeInMB": "2000",
    }


def write_json(path: Path, value, compact: bool = True) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(value, sort_keys=True, separators=(",", ":") if compact else None, ensure_ascii=False)
    path.write_text(text + "\n")
    return path.stat().st_size


def write_v10(folder: Path, files: list[str], folders: list[str]) -> None:
    """The 1.0 storage: status and an archive of the local tree (the client restores it)."""
    write_json(folder / "RXCacheConfig/cacheStatus.json", status("1.0", "1.0"))
    write_json(folder / "RXCacheConfig/listOfURLsToUpdatesByVersion.json", {"updatesByVersions": []})
    with zipfile.ZipFile(folder / "RXCacheContent.zip", "w", zipfile.ZIP_STORED) as archive:
        for name in sorted(folders):
            archive.writestr(name + "/", b"")
        for name in files:
            archive.writestr(name, body_of(name))


def write_v11(folder: Path, changes: list[dict], list_urls: list[str] | None = None,
              content: list[str] | None = None) -> int:
    """The 1.1 storage: status, update list and the change list. Returns the list's size."""
    write_json(folder / "RXCacheConfig/cacheStatus.json", status("1.1", "1.0"))
    urls = list_urls or [PUBLISHED + "RXCacheConfig/HistoryOfVersions/" + LIST_NAME]
    write_json(folder / "RXCacheConfig/listOfURLsToUpdatesByVersion.json", {"updatesByVersions": urls})
    size = write_json(folder / "RXCacheConfig/HistoryOfVersions" / LIST_NAME, {"from": "1.0", "to": "1.1", "changes": changes})
    for path in content or []:
        target = folder / "RXCacheContent" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body_of(path))
    return size


def url(path: str) -> str:
    return CONTENT + path


def b36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        number, digit = divmod(number, 36)
        text = digits[digit] + text
        if number == 0:
            return text


def mix_changes(n: int, seed: int) -> tuple[list[dict], list[str], list[str], list[str]]:
    """A realistic mix of n changes. Returns (changes, local files, local folders, downloads)."""
    rnd = random.Random(seed)
    weights = [("add", 37), ("addfp", 8), ("redownload", 4), ("move", 11), ("rename", 8), ("remove", 22),
               ("addfolder", 4), ("movefolder", 3), ("removefolder", 3)]
    kinds = [kind for kind, weight in weights for _ in range(n * weight // 100)]
    kinds += ["add"] * (n - len(kinds))
    rnd.shuffle(kinds)
    files: list[str] = []
    folders: list[str] = []
    changes: list[dict] = []
    downloads: list[str] = []
    per_folder = 50
    counter = 0

    def local_file() -> str:
        nonlocal counter
        folder = f"d{b36(counter // per_folder)}"
        if counter % per_folder == 0:
            folders.append(folder)
        path = f"{folder}/f{b36(counter)}.txt"
        counter += 1
        files.append(path)
        return path

    group = 0
    for index, kind in enumerate(kinds):
        if kind in ("add", "addfp"):
            path = (f"d{b36(rnd.randrange(max(1, n // 100)))}/n{b36(index)}.txt" if rnd.random() < 0.5
                    else f"e{b36(index // 40)}/n{b36(index)}.txt")
            change = {"newPath": url(path)}
            if kind == "addfp":
                change.update(fingerprint(path))
            downloads.append(path)
        elif kind == "redownload":
            path = local_file()
            change = {"newPath": url(path), "oldPath": url(path), "redownload": True, **fingerprint(path)}
            downloads.append(path)
        elif kind == "move":
            path = local_file()
            target = f"m{b36(index // 40)}/{path.split('/')[1]}"
            change = {"newPath": url(target), "oldPath": url(path)}
        elif kind == "rename":
            path = local_file()
            folder, name = path.split("/")
            change = {"newPath": url(f"{folder}/r{name}"), "oldPath": url(path), "rename": True}
        elif kind == "remove":
            change = {"oldPath": url(local_file())}
        elif kind == "addfolder":
            change = {"newPath": url(f"z{b36(index)}")}
        else:
            group += 1
            folder = f"g{b36(group)}"
            folders.append(folder)
            for member in range(5):
                files.append(f"{folder}/m{member}.txt")
            if kind == "movefolder":
                change = {"newPath": url(f"mg/g{b36(group)}"), "oldPath": url(folder), "rename": False}
            else:
                change = {"oldPath": url(folder)}
        changes.append(change)
    return changes, files, folders, downloads


def cancel_changes(n: int) -> tuple[list[dict], list[str], list[str]]:
    """n changes of which all but the last cancel out: adds later removed, moves there and back."""
    pairs = (n - 1) // 4
    files = [f"c{b36(i // 50)}/f{b36(i)}.txt" for i in range(pairs)]
    folders = sorted({path.split("/")[0] for path in files})
    first, second = [], []
    for i in range(pairs):
        added = f"t{b36(i // 50)}/a{b36(i)}.txt"
        first.append({"newPath": url(added)})
        second.append({"oldPath": url(added)})
        away = f"w{b36(i // 50)}/f{b36(i)}.txt"
        first.append({"newPath": url(away), "oldPath": url(files[i])})
        second.append({"newPath": url(files[i]), "oldPath": url(away)})
    changes = first + second
    while len(changes) < n - 1:
        changes.append({"oldPath": url("missing/nothing.txt")})
    return changes[:n - 1] + [{"newPath": url("missing/last.txt")}], files, folders


def deep_changes(depth: int) -> tuple[list[dict], list[str], list[str]]:
    chain = "/".join(["a"] * depth)
    folders = ["/".join(["a"] * level) for level in range(1, depth + 1)]
    files = [chain + "/leaf.txt"]
    renamed = "b/" + "/".join(["a"] * (depth - 1))
    changes = [
        {"newPath": url("b"), "oldPath": url("a"), "rename": True},
        {"newPath": url(renamed + "/leaf.txt"), "oldPath": url(renamed + "/leaf.txt"), "redownload": True},
        {"newPath": url(renamed + "/new.txt")},
    ]
    return changes, files, folders


def generate(work: Path, case: str, n: int) -> Path:
    root = work / f"{case}-{n}"
    marker = root / ".done"
    if marker.exists():
        return root
    if root.exists():
        remove_tree(root)
    info: dict = {"case": case, "changes": n}
    if case in ("mix", "one", "noop"):
        changes, files, folders, downloads = mix_changes(n, seed=n)
        if case == "one":
            changes, downloads = [{"newPath": url("missing/one.txt")}], []
        elif case == "noop":
            changes = [{"newPath": "", "oldPath": "", "x": "-" * (len(json.dumps(change, separators=(",", ":"))) - 34)}
                       for change in changes]
            changes[-1] = {"newPath": url("missing/one.txt")}
            files, folders, downloads = files[:1000], sorted({path.split("/")[0] for path in files[:1000]}), []
        write_v10(root / "v10", files, folders)
        info["listBytes"] = write_v11(root / "v11", changes)
        info["localFiles"] = len(files)
        info["downloads"] = len(downloads)
    elif case == "cancel":
        changes, files, folders = cancel_changes(n)
        write_v10(root / "v10", files, folders)
        info["listBytes"] = write_v11(root / "v11", changes)
        info["localFiles"] = len(files)
    elif case == "dup":
        changes, files, folders, _ = mix_changes(1000, seed=7)
        write_v10(root / "v10", files, folders)
        entry = PUBLISHED + "RXCacheConfig/HistoryOfVersions/" + LIST_NAME
        info["listBytes"] = write_v11(root / "v11", changes, list_urls=[entry] * n)
        info["updateListBytes"] = (root / "v11/RXCacheConfig/listOfURLsToUpdatesByVersion.json").stat().st_size
        info["localFiles"] = len(files)
    elif case == "deep":
        changes, files, folders = deep_changes(n)
        write_v10(root / "v10", files, folders)
        info["listBytes"] = write_v11(root / "v11", changes)
        info["localFiles"] = len(files)
    elif case == "full":
        changes, files, folders, downloads = mix_changes(n, seed=n)
        write_v10(root / "v10", files, folders)
        info["listBytes"] = write_v11(root / "v11", changes, content=downloads)
        info["localFiles"] = len(files)
        info["downloads"] = len(downloads)
    else:
        raise SystemExit(f"unknown case {case}")
    (root / "info.json").write_text(json.dumps(info))
    marker.touch()
    return root


# ---------------------------------------------------------------- serving and running

class Counter:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.paths: dict[str, int] = {}

    def hit(self, path: str) -> None:
        with self.lock:
            self.paths[path] = self.paths.get(path, 0) + 1

    def reset(self) -> dict[str, int]:
        with self.lock:
            paths, self.paths = self.paths, {}
        return paths


def serve(root: Path, counter: Counter) -> tuple[http.server.ThreadingHTTPServer, int]:
    class Handler(http.server.SimpleHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(root), **kwargs)

        def send_head(self):
            counter.hit(self.path.split("?")[0])
            if self.path.endswith("/"):
                self.send_error(404)
                return None
            # An ETag, as GitHub raw and nginx send, so the client stores storage files as it would.
            try:
                info = os.stat(self.translate_path(self.path))
                self.etag = f'"{info.st_mtime_ns:x}-{info.st_size:x}"'
            except OSError:
                self.etag = None
            if self.etag and self.headers.get("If-None-Match") == self.etag:
                self.send_response(304)
                self.send_header("ETag", self.etag)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            return super().send_head()

        def end_headers(self):
            if getattr(self, "etag", None) and not self._headers_buffer[0].startswith(b"HTTP/1.1 304"):
                self.send_header("ETag", self.etag)
            super().end_headers()

        def log_message(self, *args):
            pass

    class Server(http.server.ThreadingHTTPServer):
        daemon_threads = True

        def handle_error(self, request, client_address):
            pass   # a client that hung up after a 404

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def timed(agent: str, base: str, client: Path, timeout: float = 3600) -> dict:
    command = ["/usr/bin/time", "-v", agent, "sync", "--base-url", base, "--dir", str(client / "content"),
               "--state", str(client / "state.sqlite")]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    wall = time.monotonic() - started
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    cpu_user = re.search(r"User time \(seconds\): ([\d.]+)", done.stderr)
    cpu_sys = re.search(r"System time \(seconds\): ([\d.]+)", done.stderr)
    message = [line for line in done.stderr.splitlines()
               if line.strip() and not line.startswith("\t") and not line.startswith("Command ")]
    return {"exit": done.returncode, "wall": round(wall, 3), "peakKiB": int(rss.group(1)) if rss else None,
            "cpu": round(float(cpu_user.group(1)) + float(cpu_sys.group(1)), 2) if cpu_user and cpu_sys else None,
            "message": (message[-1] if message else "")[:300]}


def state_files(client: Path) -> list[Path]:
    return [client / name for name in ("state.sqlite", "state.sqlite-wal", "state.sqlite-shm")]


def prepare_client(agent: str, port: int, case_root: Path, client: Path, work: Path) -> None:
    """Restores 1.0 into `client` and keeps a pristine copy of its state database."""
    if client.exists():
        remove_tree(client)
    client.mkdir(parents=True)
    base = f"http://127.0.0.1:{port}/{case_root.relative_to(work)}/v10/"
    result = timed(agent, base, client)
    if result["exit"] != 0:
        raise SystemExit(f"restoring 1.0 for {case_root.name} failed: {result['message']}")
    pristine = client / "pristine"
    pristine.mkdir()
    for path in state_files(client):
        if path.exists():
            shutil.copy2(path, pristine / path.name)


def reset_client(client: Path) -> None:
    remove_tree(client / ".content.content-sync")
    for path in state_files(client):
        path.unlink(missing_ok=True)
    for path in (client / "pristine").iterdir():
        shutil.copy2(path, client / path.name)
    subprocess.run(["sync", "-f", str(client)], check=False)


def run(args: argparse.Namespace) -> None:
    work = Path(os.environ.get("BENCH_WORK", "/tmp/content-sync-planmem"))
    work.mkdir(parents=True, exist_ok=True)
    counter = Counter()
    server, port = serve(work, counter)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    results = []
    plan: list[tuple[str, int]] = []
    for case in args.cases.split(","):
        if case in ("mix", "cancel", "one", "noop"):
            plan += [(case, n) for n in sizes]
        elif case == "dup":
            plan.append(("dup", 20000))
        elif case == "deep":
            plan.append(("deep", 1800))
    if args.full:
        plan.append(("full", args.full))
    for case, n in plan:
        print(f"== {case} {n}: generating", flush=True)
        root = generate(work, case, n)
        info = json.loads((root / "info.json").read_text())
        client = work / "clients" / f"{case}-{n}"
        print(f"== {case} {n}: restoring 1.0 ({info['localFiles']} files)", flush=True)
        prepare_client(args.agent, port, root, client, work)
        base10 = f"http://127.0.0.1:{port}/{root.relative_to(work)}/v10/"
        base11 = f"http://127.0.0.1:{port}/{root.relative_to(work)}/v11/"
        reset_client(client)
        baseline = timed(args.agent, base10, client)
        runs = []
        for attempt in range(1 if case == "full" else args.runs):
            if attempt > 0 and case == "full":
                break
            reset_client(client)
            counter.reset()
            result = timed(args.agent, base11, client)
            requests = counter.reset()
            result["requests"] = sum(requests.values())
            result["listRequests"] = sum(count for path, count in requests.items() if "/HistoryOfVersions/" in path)
            runs.append(result)
            print(f"   run {attempt + 1}: exit {result['exit']}, {result['wall']} s, {result['peakKiB']} KiB, "
                  f"{result['requests']} requests ({result['listRequests']} for change lists); {result['message'][:160]}", flush=True)
        results.append({"case": case, "n": n, "info": info, "baselineKiB": baseline["peakKiB"], "runs": runs})
    server.shutdown()
    output = {"label": args.label, "agent": args.agent, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "results": results}
    Path(args.out).write_text(json.dumps(output, indent=1))
    print(f"wrote {args.out}")


# ---------------------------------------------------------------- report

def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarise(entry: dict) -> dict:
    peak = median([r["peakKiB"] for r in entry["runs"]]) / 1024
    base = entry["baselineKiB"] / 1024
    return {"peak": peak, "delta": peak - base, "wall": median([r["wall"] for r in entry["runs"]]),
            "cpu": median([r["cpu"] for r in entry["runs"]]),
            "requests": median([r["requests"] for r in entry["runs"]]),
            "listRequests": median([r["listRequests"] for r in entry["runs"]]), "runs": len(entry["runs"])}


def report(args: argparse.Namespace) -> None:
    before = json.loads(Path(args.before).read_text())
    after = json.loads(Path(args.after).read_text())
    old = {(e["case"], e["n"]): e for e in before["results"]}
    new = {(e["case"], e["n"]): e for e in after["results"]}
    labels = {"mix": "mix", "cancel": "cancel out", "one": "mix tree, 1 change", "noop": "no-op changes",
              "dup": "20,000 × one list", "deep": "1,800-level path", "full": "mix, full sync"}
    lines = [BEGIN, "## Planning memory (issue 9, defect 8)", "",
             f"Measured {after['date']} (before: {before['date']}) by `bench/plan_memory.py`, release builds "
             f"(`swift build -c release --static-swift-stdlib --product sync-agent`) of {before['label']} and "
             f"{after['label']}. Machine: 2 cores, 24 GiB, ext4 on a virtual disk; storages and clients in /tmp (ext4).", "",
             "**What is measured.** `sync-agent sync` of a client at 1.0 against a storage at 1.1 whose one change "
             "list has N changes, served by a threaded Python server on loopback that counts requests. The storage "
             "publishes no content for the downloads, so each sync fetches the status, update list and change list, "
             "scans the local tree, plans, makes the plan's folders and links the kept files in the staging area, and "
             "stops at the first download (404): the peak is that of fetching, parsing and planning, not of "
             "downloading. Peak RSS from GNU time (`Maximum resident set size`); the *baseline* is a no-change sync "
             "of the same client (one request, ~41 MiB); Δ = peak − baseline. *Own Δ* is the list's share: the peak "
             "minus the peak of the same client with a one-change list (`mix tree, 1 change`). "
             f"Before: {len(before['results'][0]['runs'])} run per case; after: median of "
             f"{len(after['results'][0]['runs'])} runs.", "",
             "The lists are compact JSON with sorted keys (the publisher's order, `changes` first) without optional "
             "empty fields, about 78 bytes a change, so that 860k changes fit the transport's 64 MiB limit for a "
             "storage file, as in the review (62 MiB for 860k). Denser JSON makes the ratios harder, not easier. "
             "The mix: 37 % adds of new files (a fifth with `sha256`/`size`), 4 % redownloads with `sha256`, 11 % "
             "moves, 8 % renames, 22 % removes, 4 % empty-folder adds, 3 % folder moves, 3 % folder removes; the "
             "local tree holds every file the changes touch (0.75 files per change, 50 per folder).", "",
             "| case | changes | list JSON (MiB) | local files | before: peak / Δ (MiB) | before: wall (s) | "
             "after: peak / Δ (MiB) | after: wall (s) | after: Δ per 100k changes (MiB) | after: Δ ÷ JSON | "
             "after: own Δ ÷ JSON | change-list requests before → after |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    order = ["mix", "cancel", "noop", "one", "dup", "deep", "full"]
    for key in sorted(new, key=lambda k: (order.index(k[0]), k[1])):
        entry = new[key]
        case, n = key
        info = entry["info"]
        now = summarise(entry)
        was = summarise(old[key]) if key in old else None
        json_mib = info["listBytes"] / 1048576
        changes = {"dup": 1000, "deep": 3, "one": 1}.get(case, n)
        big = changes >= 100000
        per100k = f"{now['delta'] / changes * 100000:.1f}" if big else "–"
        ratio = f"{now['delta'] / json_mib:.2f}×" if big else "–"
        own = "–"
        if case in ("mix", "cancel", "noop") and ("one", n) in new and big and case == "mix":
            own = f"{(now['peak'] - summarise(new[('one', n)])['peak']) / json_mib:.2f}×"
        json_cell = f"{json_mib:.1f}" if case != "dup" else \
            f"{json_mib:.2f} (update list {info.get('updateListBytes', 0) / 1048576:.1f})"
        before_cells = (f"{was['peak']:.0f} / {was['delta']:.0f}", f"{was['wall']:.1f}") if was else ("–", "–")
        requests = f"{was['listRequests']:.0f} → {now['listRequests']:.0f}" if was else f"{now['listRequests']:.0f}"
        lines.append(f"| {labels[case]} | {changes:,} | {json_cell} | {info['localFiles']:,} | {before_cells[0]} | "
                     f"{before_cells[1]} | {now['peak']:.0f} / {now['delta']:.0f} | {now['wall']:.1f} | {per100k} | {ratio} | "
                     f"{own} | {requests} |")
    if args.notes:
        lines += ["", Path(args.notes).read_text().strip()]
    lines += ["", "Commands:", "",
              "```sh",
              "swift build -c release --static-swift-stdlib --product sync-agent   # at each commit; copy the binary",
              "python3 bench/plan_memory.py run --agent BEFORE/sync-agent --label before --out /tmp/pm-before.json \\",
              "    --sizes 100000,200000,400000,860000 --cases mix,cancel,one,noop,dup,deep --runs 1",
              "python3 bench/plan_memory.py run --agent AFTER/sync-agent --label after --out /tmp/pm-after.json \\",
              "    --sizes 100000,200000,400000,860000 --cases mix,cancel,one,noop,dup,deep --runs 3",
              "python3 bench/plan_memory.py report /tmp/pm-before.json /tmp/pm-after.json \\",
              "    --notes bench/plan_memory_notes.md --doc docs/benchmarks.md",
              "# speed: the 2,100-change list, and the differ",
              "python3 bench/plan_memory.py run --agent BEFORE/sync-agent --label before --out /tmp/pm-2100-old.json --sizes 2100 --cases mix --runs 7",
              "python3 bench/plan_memory.py run --agent AFTER/sync-agent --label after --out /tmp/pm-2100-new.json --sizes 2100 --cases mix --runs 7",
              "python3 bench/plan_memory.py differ --agent BEFORE/sync-agent; python3 bench/plan_memory.py differ --agent AFTER/sync-agent",
              "swift test --skip-build --filter PublishRoundTrip   # debug build, at each commit",
              "```", END]
    table = "\n".join(lines)
    print(table)
    if args.doc:
        doc = Path(args.doc)
        text = doc.read_text()
        if BEGIN in text and END in text:
            text = text[:text.index(BEGIN)] + table + text[text.index(END) + len(END):]
        else:
            text = text.rstrip("\n") + "\n\n" + table + "\n"
        doc.write_text(text)


def differ(args: argparse.Namespace) -> None:
    """Times the publisher's differ (which checks every list with the planner) on a big edit."""
    work = Path(os.environ.get("BENCH_WORK", "/tmp/content-sync-planmem")) / "differ"
    if not (work / ".done").exists():
        remove_tree(work)
        rnd = random.Random(5)
        old = work / "v1"
        for index in range(40000):
            path = old / f"f{index // 100}" / f"s{index % 7}" / f"file{index}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"{index}\n")
        new = work / "v2"
        subprocess.run(["cp", "-a", str(old), str(new)], check=True)
        folders = sorted(p.name for p in new.iterdir())
        for name in folders[:60]:                       # renamed folders
            (new / name).rename(new / (name + "-renamed"))
        for name in folders[60:100]:                    # folders moved under another
            (new / "moved").mkdir(exist_ok=True)
            (new / name).rename(new / "moved" / name)
        files = sorted(p for p in new.rglob("*.txt"))
        rnd.shuffle(files)
        for path in files[:3000]:                       # files moved across folders
            target = new / "loose" / f"{path.parent.parent.name}-{path.name}"
            target.parent.mkdir(exist_ok=True)
            path.rename(target)
        for path in files[3000:5000]:                   # edited
            path.write_text("edited " + path.read_text())
        for path in files[5000:7000]:                   # removed
            path.unlink()
        for index in range(2000):                       # added
            path = new / "added" / f"a{index // 100}" / f"new{index}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"new {index}\n")
        (work / ".done").touch()
    walls = []
    for run in range(args.runs):
        storage = work / f"storage-{run}"
        remove_tree(storage)
        subprocess.run([args.agent, "publish", "--init", "--storage", str(storage), "--content", str(work / "v1"),
                        "--version", "1.0", "--base-url", "https://bench.invalid/s/"], check=True, capture_output=True)
        started = time.monotonic()
        done = subprocess.run([args.agent, "publish", "--dry-run", "--storage", str(storage), "--content", str(work / "v2"),
                               "--version", "1.1", "--base-url", "https://bench.invalid/s/"], capture_output=True, text=True)
        walls.append(time.monotonic() - started)
        print(f"run {run + 1}: {walls[-1]:.2f} s: {done.stdout.strip().splitlines()[0] if done.stdout.strip() else done.stderr.strip()[:200]}")
    print(f"median {statistics.median(walls):.2f} s over {len(walls)} runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--agent", required=True)
    r.add_argument("--label", default="run")
    r.add_argument("--out", required=True)
    r.add_argument("--sizes", default="100000,200000,400000,860000")
    r.add_argument("--cases", default="mix,cancel,one,noop,dup,deep")
    r.add_argument("--runs", type=int, default=3)
    r.add_argument("--full", type=int, default=0)
    d = sub.add_parser("differ")
    d.add_argument("--agent", required=True)
    d.add_argument("--runs", type=int, default=5)
    p = sub.add_parser("report")
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--doc", default="")
    p.add_argument("--notes", default="", help="a markdown file added to the section after the table")
    args = parser.parse_args()
    {"run": run, "report": report, "differ": differ}[args.command](args)


if __name__ == "__main__":
    main()
