#!/usr/bin/env python3
"""The manifest bench/s2_floor.c reads: S2's new files as byte ranges of the archive.

    python3 bench/s2_floor_manifest.py STORAGE_DIR OUT_FILE [MAX_GAP_BYTES] [MAX_RANGE_BYTES]

STORAGE_DIR is the S2 storage (bench/scenarios.sh prepares it at
/tmp/content-sync-bench/scenarios/www/s2): its RXCacheContent.zip and the change list
RXCacheConfig/HistoryOfVersions/changes_*.json (the only one there, or the newest by name). The new
files are the changes with no oldPath whose newPath does not end with "/"; a newPath is a URL or a
path, and the part after "RXCacheContent/" is the file's relative path, which is also its entry's
name in the archive after the same prefix.

Ranges are cut as sync-agent's ArchiveRangePlan cuts them: in archive order, an entry joins the
range before it while the bytes between them are at most MAX_GAP_BYTES and the range is still under
MAX_RANGE_BYTES (so a range may pass it by one entry); otherwise it starts a new range. An entry's
span, for that rule, runs from its local header to the next entry's local header (sync-agent's
ArchiveDirectory.Entry.end). The defaults are sync-agent's on S2: a gap of 16 KiB
(ArchiveRangeFetcher.maxGap) and 2 MiB (ArchiveRangePlan.target: the wanted bytes over 8
connections x 4, clamped to 256 KiB..2 MiB), which give its 54 ranges. A range is requested from its
first entry's local header through its last entry's last data byte (the few bytes sync-agent also
fetches after it, up to the next local header, are not needed).

The ranges are written in sync-agent's launch order (ArchiveRangePlan.launchOrder: most entries
first, ties in archive order); s2_floor.c deals them round-robin to its threads in that order.

Manifest format, one record a line, fields separated by one space:
    # comment
    D <relative/dir>                                  the folders to create, in order; index from 0
    R <start> <end_inclusive> <entries>               a range, followed by its entries:
    F <local_header_offset> <size> <sha256hex> <dir_index> <relative/path>
The path is the rest of the line (it may hold spaces); every entry is stored (method 0), so its
data is `size` bytes right after its local header, name and extra field.
"""
import hashlib
import json
import pathlib
import sys
import zipfile


def main() -> int:
    if not 3 <= len(sys.argv) <= 5:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    storage, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    max_gap = int(sys.argv[3]) if len(sys.argv) > 3 else 16 << 10
    max_range = int(sys.argv[4]) if len(sys.argv) > 4 else 2 << 20
    archive = storage / "RXCacheContent.zip"
    lists = sorted((storage / "RXCacheConfig" / "HistoryOfVersions").glob("changes_*.json"))
    if not lists:
        print(f"no change list under {storage}/RXCacheConfig/HistoryOfVersions", file=sys.stderr)
        return 2
    change_list = json.loads(lists[-1].read_text())
    prefix = "RXCacheContent/"
    new = {}
    for change in change_list["changes"]:
        path = change.get("newPath") or ""
        if change.get("oldPath") or not path or path.endswith("/"):
            continue
        if prefix not in path:
            print(f"a new file outside {prefix}: {path}", file=sys.stderr)
            return 1
        new[path.split(prefix, 1)[1]] = change

    with zipfile.ZipFile(archive) as zf, open(archive, "rb") as raw:
        infos = sorted(zf.infolist(), key=lambda i: i.header_offset)
        starts = [i.header_offset for i in infos] + [zf.start_dir]
        entries = []  # (offset, span_end, data_end, size, sha256, path)
        computed = 0
        for index, info in enumerate(infos):
            if not info.filename.startswith(prefix) or info.filename[len(prefix):] not in new:
                continue
            path = info.filename[len(prefix):]
            change = new[path]
            if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
                print(f"{info.filename} is not stored (method {info.compress_type})", file=sys.stderr)
                return 1
            if change.get("size") is not None and change["size"] != info.file_size:
                print(f"{path}: {info.file_size} bytes in the archive, {change['size']} in the change list",
                      file=sys.stderr)
                return 1
            raw.seek(info.header_offset)
            header = raw.read(30)
            if header[:4] != b"PK\x03\x04":
                print(f"{info.filename}: no local header at {info.header_offset}", file=sys.stderr)
                return 1
            data = info.header_offset + 30 + int.from_bytes(header[26:28], "little") + \
                int.from_bytes(header[28:30], "little")
            digest = change.get("sha256")
            if not digest:
                digest = hashlib.sha256(zf.read(info)).hexdigest()
                computed += 1
            entries.append((info.header_offset, starts[index + 1], data + info.file_size, info.file_size,
                            digest, path))
    missing = len(new) - len(entries)
    if missing:
        print(f"{missing} of the {len(new)} new files are not in {archive}", file=sys.stderr)
        return 1

    # Cut the ranges: [start, span_end, data_end, entries] (sync-agent's ArchiveRangePlan).
    ranges = []
    for entry in entries:
        offset, span_end, data_end = entry[:3]
        last = ranges[-1] if ranges else None
        if last and offset >= last[1] and offset - last[1] <= max_gap and last[1] - last[0] < max_range:
            last[1], last[2] = span_end, data_end
            last[3].append(entry)
        else:
            ranges.append([offset, span_end, data_end, [entry]])
    launch = sorted(enumerate(ranges), key=lambda r: (-len(r[1][3]), r[0]))

    folders = sorted({e[5].rpartition("/")[0] for e in entries})
    folder_index = {f: i for i, f in enumerate(folders)}
    lines = [f"# {archive}: {len(entries)} new files of {lists[-1].name} in {len(ranges)} ranges "
             f"(max gap {max_gap}, range target {max_range})"]
    lines += [f"D {f}" for f in folders]
    for _, (start, _, data_end, members) in launch:
        lines.append(f"R {start} {data_end - 1} {len(members)}")
        lines += [f"F {e[0]} {e[3]} {e[4]} {folder_index[e[5].rpartition('/')[0]]} {e[5]}" for e in members]
    out.write_text("\n".join(lines) + "\n")

    sizes = sorted(r[2] - r[0] for r in ranges)
    counts = sorted(len(r[3]) for r in ranges)
    mib = 1 << 20
    print(f"{len(entries)} files, {sum(e[3] for e in entries)} bytes of data, {len(folders)} folders; "
          f"{len(ranges)} ranges, {sum(sizes)} bytes requested", file=sys.stderr)
    print(f"range bytes: min {sizes[0]} ({sizes[0] / mib:.2f} MiB), median {sizes[len(sizes) // 2]}, "
          f"max {sizes[-1]} ({sizes[-1] / mib:.2f} MiB); entries per range: min {counts[0]}, "
          f"median {counts[len(counts) // 2]}, max {counts[-1]}", file=sys.stderr)
    if computed:
        print(f"{computed} digests were not in the change list: computed from the archive", file=sys.stderr)
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
