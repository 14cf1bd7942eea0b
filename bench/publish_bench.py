#!/usr/bin/env python3
"""publish_bench.py SYNC_AGENT: the cost of a 1-file publish over a big tree (issue 23), by step.

Builds a tree of PUBLISH_FILES (100,000) 512-byte files in folders of 100 under PUBLISH_WORK
(.build-bench-publish/work), publishes it with --init, then PUBLISH_VERSIONS (8) versions that each
edit one file (a new inode: the old one stays the previous version's), alternating the two ways an
operator's content changes:
- "cp -al": each version's content is a hard-linked copy of the previous one (every source's
  status-change time moves, so every file is compared: hashed against the publisher's index);
- "in place": the same content folder, one file replaced (identities unchanged).
Every publish runs with --verbose: its steps' times, wall, CPU and peak RSS (GNU time) are printed
as a table, with the medians of the versions after the second (the publisher's base is in place from
the third publish on). The storage is checked after the last publish: its status's tree digest is
recomputed by `sync-agent verify`-equivalent hashing in Python (every path and byte).
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

FILES = int(os.environ.get("PUBLISH_FILES", "100000"))
VERSIONS = int(os.environ.get("PUBLISH_VERSIONS", "8"))
WORK = Path(os.environ.get("PUBLISH_WORK", ".build-bench-publish/work")).resolve()
BASE_URL = "https://bench.invalid/storage/"


def rel(i: int) -> str:
    return f"d{i // 10000:03d}/s{(i // 100) % 100:03d}/f{i:07d}.bin"


def publish(agent: str, storage: Path, content: Path, version: str, init: bool = False) -> dict:
    cmd = [agent, "publish", "--verbose", "--storage", str(storage), "--content", str(content), "--version", version,
           "--base-url", BASE_URL] + (["--init"] if init else [])
    started = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "TIME %U %S %M"] + cmd, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if p.returncode != 0:
        sys.exit(f"publish {version} failed ({p.returncode}): {p.stderr[-2000:]}")
    phases: dict[str, float] = {}
    cpu = rss = 0.0
    for line in p.stderr.splitlines():
        if line.startswith("phase "):
            name, _, ms = line[len("phase "):].rpartition(": ")
            phases[name.split(" (")[0]] = float(ms.split()[0]) / 1000
        elif line.startswith("TIME "):
            user, system, kib = line.split()[1:]
            cpu, rss = float(user) + float(system), int(kib) / 1024
    return {"version": version, "wall": wall, "cpu": cpu, "rss": rss, "phases": phases}


def tree_digest(root: Path) -> str:
    """TreeDigest (docs/protocol.md §7): per folder, sorted lines `f\\0name\\0sha\\0size\\n` / `d\\0name\\0digest\\n`."""
    def folder(path: Path) -> str:
        lines = []
        for entry in sorted(os.scandir(path), key=lambda e: e.name.encode()):
            if entry.is_dir(follow_symlinks=False):
                lines.append(b"d\0" + entry.name.encode() + b"\0" + folder(Path(entry.path)).encode() + b"\n")
            else:
                data = Path(entry.path).read_bytes()
                lines.append(b"f\0" + entry.name.encode() + b"\0" + hashlib.sha256(data).hexdigest().encode()
                             + b"\0" + str(len(data)).encode() + b"\n")
        return hashlib.sha256(b"".join(lines)).hexdigest()
    return folder(root)


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    agent = sys.argv[1]
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    storage, contents = WORK / "storage", WORK / "content"
    rng = random.Random(23)
    first = contents / "v0"
    for i in range(FILES):
        path = first / rel(i)
        if i % 100 == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rng.randbytes(512))
    print(f"{FILES:,} files written to {first}", flush=True)
    time.sleep(2.5)  # settled: their identities are recorded
    rows = [publish(agent, storage, first, "1.0", init=True)]
    current = first
    for n in range(1, VERSIONS + 1):
        mode = "cp -al" if n % 2 else "in place"
        if mode == "cp -al":
            nxt = contents / f"v{n}"
            subprocess.run(["cp", "-al", str(current), str(nxt)], check=True)
            current = nxt
        victim = current / rel(rng.randrange(FILES))
        victim.unlink()
        victim.write_bytes(rng.randbytes(512))
        time.sleep(2.5)
        row = publish(agent, storage, current, f"1.{n}")
        row["mode"] = mode
        rows.append(row)
        print(f"  1.{n} ({mode}): {row['wall']:.2f} s wall, {row['cpu']:.2f} s CPU, {row['rss']:.0f} MiB", flush=True)
    status = json.loads((storage / "RXCacheConfig" / "cacheStatus.json").read_text())
    if status["integrity"]["treeDigest"] != tree_digest(storage / "RXCacheContent"):
        sys.exit("the published tree digest is not the storage's content")
    if tree_digest(storage / "RXCacheContent") != tree_digest(current):
        sys.exit("the storage's content is not the last version's")
    names = list(dict.fromkeys(name for row in rows[1:] for name in row["phases"]))
    print(f"\n1-file publishes over {FILES:,} files (release build, {WORK}):\n")
    print("| version | content | wall s | CPU s | RSS MiB | " + " | ".join(names) + " |")
    print("|---|---|---|---|---|" + "---|" * len(names))
    for row in rows[1:]:
        cells = [f"{row['phases'].get(name, 0):.2f}" for name in names]
        print(f"| {row['version']} | {row['mode']} | {row['wall']:.2f} | {row['cpu']:.2f} | {row['rss']:.0f} | "
              + " | ".join(cells) + " |")
    for mode in ("cp -al", "in place"):
        later = [row for row in rows[3:] if row["mode"] == mode]
        if later:
            print(f"\nmedian of {len(later)} later {mode} publishes: {statistics.median(r['wall'] for r in later):.2f} s wall, "
                  f"{statistics.median(r['cpu'] for r in later):.2f} s CPU")
    print("storage checked: its tree digest is the last version's content")
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
