#!/usr/bin/env python3
"""The filesystem floor under a small catch-up (issue 23): what its removals, downloads and flush
cost at their cheapest, each way the engine could do them, on the filesystem holding WORK.

Each round makes a fresh tree of FOLDERS folders of 10 files of 512 bytes, flushes it, then times
one way of doing a 100-file change (one file per folder):

- `free+create`: unlink each old file (it has one link: its inode and block are freed) and create
  the new one (an inode and a block allocated): what a catch-up did before spares, and what
  `rclone`'s rename over the old file costs the filesystem too;
- `recycle`: rename each old file into a spare folder, write the new bytes over it from the start,
  cut it at their end, rename it into place (sync-agent's `SpareFiles`): nothing freed or
  allocated;
- `fsync each`: after such a change, an fsync of each new file and changed folder, 8 at once (as
  `DiskFlush.entries`);
- `syncfs`: the same change flushed with one `syncfs` of the filesystem (`DiskFlush.written` on a
  quiet system).

The ways alternate within each round. Run: `python3 bench/fs_floor.py [WORK] [ROUNDS]`
(default WORK `.build-bench-scale/fs-floor` on this disk, 8 rounds). Prints the median and every
round, in milliseconds. WORK is deleted at the end.
"""
import ctypes
import os
import shutil
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

FOLDERS = 100
libc = ctypes.CDLL(None, use_errno=True)


def make_tree(root: str) -> None:
    for i in range(FOLDERS):
        os.makedirs(f"{root}/s{i}", exist_ok=True)
        for j in range(10):
            with open(f"{root}/s{i}/f{j}", "wb") as f:
                f.write(os.urandom(512))
    os.makedirs(f"{root}/spare", exist_ok=True)
    os.sync()
    time.sleep(0.3)


def free_create(root: str) -> list:
    for i in range(FOLDERS):
        os.unlink(f"{root}/s{i}/f0")
    for i in range(FOLDERS):
        fd = os.open(f"{root}/s{i}/f0", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.write(fd, os.urandom(512))
        os.close(fd)
    return [f"{root}/s{i}/f0" for i in range(FOLDERS)] + [f"{root}/s{i}" for i in range(FOLDERS)]


def recycle(root: str) -> list:
    for i in range(FOLDERS):
        os.rename(f"{root}/s{i}/f0", f"{root}/spare/{i}")
    for i in range(FOLDERS):
        fd = os.open(f"{root}/spare/{i}", os.O_RDWR)
        os.pwrite(fd, os.urandom(512), 0)
        os.ftruncate(fd, 512)
        os.close(fd)
        os.rename(f"{root}/spare/{i}", f"{root}/s{i}/f0")
    return [f"{root}/s{i}/f0" for i in range(FOLDERS)] + [f"{root}/s{i}" for i in range(FOLDERS)] + [f"{root}/spare"]


def fsync_each(paths: list) -> None:
    def one(path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, paths))


def syncfs(root: str) -> None:
    fd = os.open(root, os.O_RDONLY)
    try:
        if libc.syncfs(fd) != 0:
            raise OSError(ctypes.get_errno(), "syncfs")
    finally:
        os.close(fd)


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    work = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".build-bench-scale/fs-floor")
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    results = {"free+create": [], "recycle": [], "fsync each": [], "syncfs": []}
    os.makedirs(work, exist_ok=True)
    try:
        for r in range(rounds):
            order = [("free+create", free_create), ("recycle", recycle)]
            for name, change in order if r % 2 == 0 else reversed(order):
                root = f"{work}/r{r}-{name.replace('+', '-')}"
                make_tree(root)
                results[name].append(timed(lambda: change(root)))
                os.sync()
            flushes = [("fsync each", None), ("syncfs", None)]
            for name, _ in flushes if r % 2 == 0 else reversed(flushes):
                root = f"{work}/r{r}-flush-{name.replace(' ', '-')}"
                make_tree(root)
                paths = recycle(root)
                results[name].append(timed(lambda: fsync_each(paths) if name == "fsync each" else syncfs(root)))
            shutil.rmtree(f"{work}", ignore_errors=True)
            os.makedirs(work, exist_ok=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"filesystem floor of a {FOLDERS}-file change in {FOLDERS} folders ({rounds} rounds, ms):")
    for name, values in results.items():
        print(f"  {name:<12} median {statistics.median(values):7.1f}   rounds {' '.join(f'{v:.1f}' for v in values)}")


if __name__ == "__main__":
    main()
