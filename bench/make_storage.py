#!/usr/bin/env python3
"""Generate a benchmark storage: N files totalling about S MiB, plus its zip and status files.

The output is deterministic: the same arguments give the same bytes (file contents, the zip and
the JSON files), whatever the machine. Layout of OUT:

    RXCacheConfig/cacheStatus.json
    RXCacheConfig/listOfURLsToUpdatesByVersion.json      {"updatesByVersions": []}
    RXCacheContent/gNN/dNNN/fNNNNN.{bin,txt}              the files
    RXCacheContent.zip                                    one top folder RXCacheContent/, with
                                                          directory entries; ZIP_DEFLATED level 6
    .bench-params.json                                    what was generated (for reuse checks)

Files: FOLDERS_PER_GROUP folders per group, FILES_PER_FOLDER (100) files per folder. Most files
are small (4-40 KiB); a few, spread evenly, are large (1-4 MiB), as many as needed to reach the
requested total. Half of each size class is incompressible (seeded random bytes, `.bin`), the
other half text-like (lines of words from a seeded vocabulary, `.txt`, deflates about 3x).

Usage:
    python3 bench/make_storage.py --out /tmp/storage            # 5,000 files, 200 MiB
    python3 bench/make_storage.py --out /tmp/big --files 5000 --mb 1000
    python3 bench/make_storage.py --out /tmp/s1 --archive-mb 200   # content sized for a 200 MiB zip
    python3 bench/make_storage.py --out DIR --if-changed        # reuse DIR if generated alike
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
import zipfile
from pathlib import Path

GENERATOR_VERSION = 1
MIB = 1_048_576
KIB = 1024
FILES_PER_FOLDER = 100
FOLDERS_PER_GROUP = 10
SMALL_RANGE = (4 * KIB, 40 * KIB)
LARGE_RANGE = (1 * MIB, 4 * MIB)
ZIP_DATE_TIME = (1980, 1, 1, 0, 0, 0)
ZIP_FILE_ATTR = 0o100644 << 16
ZIP_DIR_ATTR = (0o40755 << 16) | 0x10  # + MS-DOS directory flag
ZIP_CREATE_SYSTEM = 3  # Unix
ZIP_LEVEL = 6
BASE = "https://bench.invalid/s/"
CONTENT = "RXCacheContent"
CONFIG = "RXCacheConfig"
ZIP_NAME = "RXCacheContent.zip"
PARAMS = ".bench-params.json"


def size_in_mib(n_bytes: int) -> str:
    """MiB rounded UP to 3 decimals, so a size is never under-declared."""
    milli = -(-n_bytes * 1000 // MIB)
    return f"{milli // 1000}.{milli % 1000:03d}"


def plan_sizes(files: int, total: int, rng: random.Random) -> list[tuple[int, bool]]:
    """(size, is_large) for each file: small ones everywhere, large ones spread evenly."""
    sizes = [rng.randint(*SMALL_RANGE) for _ in range(files)]
    small_sum = sum(sizes)
    if total <= small_sum:
        # Too little room even for the small files: scale them down.
        scale = total / small_sum
        return [(max(1, int(s * scale)), False) for s in sizes]
    extra = total - small_sum
    large: list[int] = []
    while extra > 0 and len(large) < files:
        size = rng.randint(*LARGE_RANGE)
        # Each conversion drops one small file (about 22 KiB on average) and adds a large one.
        gain = size - SMALL_RANGE[0]
        if gain >= extra:
            size = max(LARGE_RANGE[0], extra + SMALL_RANGE[0])
            large.append(size)
            break
        large.append(size)
        extra -= gain
    # Spread the large files evenly over the index range.
    step = files / len(large)
    positions = sorted({int(i * step + step / 2) for i in range(len(large))})
    result = [(s, False) for s in sizes]
    for position, size in zip(positions, large):
        result[position] = (size, True)
    # Trim or pad the last small file so the total is exact (when it can be).
    difference = total - sum(s for s, _ in result)
    for index in range(files - 1, -1, -1):
        size, is_large = result[index]
        if not is_large and size + difference >= 1:
            result[index] = (size + difference, False)
            break
    return result


class TextSource:
    """Text-like bytes: a seeded corpus of word lines, read from varying offsets per file."""

    def __init__(self, rng: random.Random) -> None:
        letters = "abcdefghijklmnopqrstuvwxyz"
        vocabulary = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 10))) for _ in range(2000)]
        lines: list[str] = []
        length = 0
        number = 0
        while length < 2 * MIB:
            number += 1
            words = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(4, 14)))
            line = f"{number:06d} {words}\n"
            lines.append(line)
            length += len(line)
        self.corpus = "".join(lines).encode()

    def make(self, size: int, rng: random.Random, header: bytes) -> bytes:
        parts = [header]
        have = len(header)
        corpus = self.corpus
        while have < size:
            start = rng.randrange(0, len(corpus) - 64 * KIB)
            chunk = corpus[start:start + min(size - have, rng.randint(4 * KIB, 64 * KIB))]
            parts.append(chunk)
            have += len(chunk)
        return b"".join(parts)[:size]


def generate(out: Path, files: int, megabytes: float, seed: int) -> dict:
    started = time.monotonic()
    rng = random.Random(seed)
    total = int(megabytes * MIB)
    plan = plan_sizes(files, total, rng)
    text = TextSource(random.Random(seed + 1))
    content_rng = random.Random(seed + 2)

    tmp = out.with_name(out.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    (tmp / CONFIG).mkdir(parents=True)
    content_root = tmp / CONTENT

    folders: list[str] = []
    entries: list[tuple[str, int, bool, bool]] = []  # (relative path, size, large, random)
    balance = {False: 0, True: 0}  # per size class: random bytes minus text bytes so far
    for index, (size, is_large) in enumerate(plan):
        folder_index = index // FILES_PER_FOLDER
        folder = f"g{folder_index // FOLDERS_PER_GROUP:02d}/d{folder_index:03d}"
        if not folders or folders[-1] != folder:
            group = folder.split("/")[0]
            if group not in folders:
                folders.append(group)
            folders.append(folder)
        # Keep each size class half random, half text, by bytes.
        is_random = balance[is_large] <= 0
        balance[is_large] += size if is_random else -size
        name = f"{folder}/f{index:05d}.{'bin' if is_random else 'txt'}"
        entries.append((name, size, is_large, is_random))

    stats = {"random_bytes": 0, "text_bytes": 0, "large_files": 0, "large_bytes": 0}
    archive_path = tmp / ZIP_NAME
    with zipfile.ZipFile(archive_path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=ZIP_LEVEL) as zf:
        def add_dir(name: str) -> None:
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE_TIME)
            info.create_system = ZIP_CREATE_SYSTEM
            info.external_attr = ZIP_DIR_ATTR
            info.compress_type = zipfile.ZIP_STORED
            zf.writestr(info, b"")

        add_dir(f"{CONTENT}/")
        made: set[str] = set()
        for name, size, is_large, is_random in entries:
            folder = name.rsplit("/", 1)[0]
            parts = folder.split("/")
            for depth in range(1, len(parts) + 1):
                sub = "/".join(parts[:depth])
                if sub not in made:
                    made.add(sub)
                    (content_root / sub).mkdir(parents=True, exist_ok=True)
                    add_dir(f"{CONTENT}/{sub}/")
            if is_random:
                data = content_rng.randbytes(size)
                stats["random_bytes"] += size
            else:
                data = text.make(size, content_rng, f"# {name} ({size} bytes)\n".encode())
                stats["text_bytes"] += size
            if is_large:
                stats["large_files"] += 1
                stats["large_bytes"] += size
            (content_root / name).write_bytes(data)
            info = zipfile.ZipInfo(f"{CONTENT}/{name}", date_time=ZIP_DATE_TIME)
            info.create_system = ZIP_CREATE_SYSTEM
            info.external_attr = ZIP_FILE_ATTR
            zf.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=ZIP_LEVEL)

    unzipped = stats["random_bytes"] + stats["text_bytes"]
    zipped = archive_path.stat().st_size
    dumps = lambda doc: (json.dumps(doc, indent=2) + "\n").encode()
    (tmp / CONFIG / "listOfURLsToUpdatesByVersion.json").write_bytes(dumps({"updatesByVersions": []}))
    (tmp / CONFIG / "cacheStatus.json").write_bytes(dumps({
        "actualCacheVersion": "1.0",
        "minimalCacheVersion": "1.0",
        "urlAtListOfURLsToUpdatesByVersion": f"{BASE}{CONFIG}/listOfURLsToUpdatesByVersion.json",
        "urlAtZipArchiveOfCacheContent": f"{BASE}{ZIP_NAME}",
        "zippedArchiveSizeInMB": size_in_mib(zipped),
        "unzippedArchiveSizeInMB": size_in_mib(unzipped),
    }))
    params = {
        "generator": GENERATOR_VERSION, "files": files, "mb": megabytes, "seed": seed,
        "folders": len([f for f in folders if "/" in f]), "unzipped_bytes": unzipped, "zipped_bytes": zipped,
        **stats, "seconds": round(time.monotonic() - started, 1),
    }
    (tmp / PARAMS).write_bytes(dumps(params))
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return params


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path, help="the storage folder to create (replaced)")
    parser.add_argument("--files", type=int, default=5000, help="number of files (default 5000)")
    parser.add_argument("--mb", type=float, default=200, help="total content size in MiB (default 200)")
    parser.add_argument("--archive-mb", type=float,
                        help="size the content so that the archive is at least this many MiB (and within 5%% "
                             "above it); replaces --mb")
    parser.add_argument("--seed", type=int, default=20261, help="random seed (default 20261)")
    parser.add_argument("--if-changed", action="store_true",
                        help="keep OUT as it is when it was generated with the same parameters")
    args = parser.parse_args()
    if args.files < 1 or args.mb <= 0 or (args.archive_mb is not None and args.archive_mb <= 0):
        parser.error("--files, --mb and --archive-mb must be positive")
    wanted = {"generator": GENERATOR_VERSION, "files": args.files, "seed": args.seed}
    if args.archive_mb is None:
        wanted["mb"] = args.mb
    else:
        wanted["archive_mb"] = args.archive_mb
    if args.if_changed:
        try:
            have = json.loads((args.out / PARAMS).read_text())
            if all(have.get(k) == v for k, v in wanted.items()) and (args.out / ZIP_NAME).is_file():
                print(f"reusing {args.out}: {json.dumps(have)}", file=sys.stderr)
                return 0
        except (OSError, ValueError):
            pass
    if args.archive_mb is None:
        params = generate(args.out, args.files, args.mb, args.seed)
    else:
        # Half the bytes are random and half deflate about 3x, so the archive is about 0.7 of the
        # content; the content is then scaled by what the archive came to, until it lands.
        megabytes = args.archive_mb / 0.7
        for _ in range(4):
            params = generate(args.out, args.files, megabytes, args.seed)
            zipped_mib = params["zipped_bytes"] / MIB
            if args.archive_mb <= zipped_mib <= args.archive_mb * 1.05:
                break
            megabytes = round(megabytes * args.archive_mb * 1.01 / zipped_mib, 1)
        else:
            print(f"make_storage.py: the archive is {zipped_mib:.1f} MiB, not within 5% above {args.archive_mb} MiB",
                  file=sys.stderr)
            return 1
        params["archive_mb"] = args.archive_mb
        (args.out / PARAMS).write_bytes((json.dumps(params, indent=2) + "\n").encode())
    print(f"generated {args.out}: {json.dumps(params)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
