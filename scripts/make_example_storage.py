#!/usr/bin/env python3
"""Generate ExampleStorage/: versioned fixture storages for the RXCacheManager protocol.

One declarative spec (SPEC below: a list of versions, each a list of operations) describes
what each version's content is and which changes the publisher is expected to find:

* each version's content tree is the previous tree with that version's ops applied in order;
* `sync-agent publish` then builds the storage from those trees, exactly as a publisher
  would: the first version with `--init`, every later one as the next version. Its change
  list must hold exactly the spec's ops (in the publisher's order), so the fixture also pins
  down what the differ finds: folder renames and moves, moved-and-edited files, deep folder
  redownloads.

Output (all under ExampleStorage/):

    versions/<v>/RXCacheConfig/cacheStatus.json                          (with integrity data)
    versions/<v>/RXCacheConfig/contentManifest.json
    versions/<v>/RXCacheConfig/listOfURLsToUpdatesByVersion.json
    versions/<v>/RXCacheConfig/HistoryOfVersions/changes_<a>_<b>.json   (every list up to v)
    versions/<v>/RXCacheContent/...                                       (content as of v)
    versions/<v>/RXCacheContent.zip                                       (archive of it)
    manifests/<v>.json       expected client tree at v (folders incl. empty ones, file sizes/hashes)
    versions.json            {"versions": [...], "latest": ..., "base": BASE}
    README.md                version table, every change with its kind and the case it covers

Output is deterministic: running the generator twice gives byte-identical files. After
publishing, the output is verified independently of the publisher: each zip and each content
folder is compared with its manifest, each change list is replayed from the JSON on disk, and
every allowed multi-version update is composed (downloading only from the latest storage) and
compared with the target manifest.

Usage:
    python3 scripts/make_example_storage.py --sync-agent PATH           # (re)write ExampleStorage/
    python3 scripts/make_example_storage.py --sync-agent PATH --check   # exit 1 if stale

`make example-storage` and `make check-example-storage` build sync-agent and pass it.
Standard library only (Python 3.11+).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote

# The canonical published base. `.invalid` is never resolved; clients rebase every URL under
# this prefix onto wherever the storage is actually served.
BASE = "https://content-sync.invalid/ExampleStorage/"
CONFIG_DIR = "RXCacheConfig"
HISTORY_DIR = "RXCacheConfig/HistoryOfVersions"
CONTENT_DIR = "RXCacheContent"
ZIP_NAME = "RXCacheContent.zip"

# The deterministic zip metadata `publish` writes (checked by scan_zip).
ZIP_DATE_TIME = (1980, 1, 1, 0, 0, 0)
ZIP_FILE_ATTR = 0o100644 << 16
ZIP_DIR_ATTR = (0o40755 << 16) | 0x10  # + MS-DOS directory flag
ZIP_CREATE_SYSTEM = 3  # Unix

MIB = 1_048_576


# ---------------------------------------------------------------------------------------------
# Deterministic content
# ---------------------------------------------------------------------------------------------

def text(*lines: str) -> bytes:
    """A UTF-8 text file made of fixed lines, newline-terminated."""
    return ("\n".join(lines) + "\n").encode("utf-8")


def blob(label: str, size: int) -> bytes:
    """`size` pseudo-random (incompressible) bytes: a SHA-256 counter stream seeded by `label`."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(f"{label}:{counter}".encode()).digest()
        counter += 1
    return bytes(out[:size])


def _zlib_stored(raw: bytes) -> bytes:
    """A zlib stream made of stored (uncompressed) deflate blocks.

    Built by hand rather than with zlib.compress so the PNG bytes do not depend on the zlib
    version installed (compressed output may differ between zlib builds; stored blocks cannot).
    """
    out = bytearray(b"\x78\x01")  # CMF/FLG: deflate, 32K window, no dictionary, check bits ok
    chunk = 65_535
    pos = 0
    while True:
        piece = raw[pos:pos + chunk]
        pos += len(piece)
        final = pos >= len(raw)
        out += struct.pack("<BHH", 1 if final else 0, len(piece), len(piece) ^ 0xFFFF)
        out += piece
        if final:
            break
    out += struct.pack(">I", zlib.adler32(raw) & 0xFFFFFFFF)
    return bytes(out)


def png(width: int, height: int, seed: int) -> bytes:
    """A real (decodable) 8-bit RGB PNG with a deterministic gradient pattern."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    rows = bytearray()
    for y in range(height):
        rows.append(0)  # filter type: None
        for x in range(width):
            rows += bytes(((x * 255 // max(width - 1, 1) + seed * 40) % 256,
                           (y * 255 // max(height - 1, 1) + seed * 85) % 256,
                           ((x ^ y) * 16 + seed * 60) % 256))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit, truecolour
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", _zlib_stored(bytes(rows))) + chunk(b"IEND", b""))


def css(name: str, revision: int, color: str) -> bytes:
    return text(f"/* {name} — revision {revision} */",
                f".{name.split('.')[0]} {{", f"  color: {color};",
                f"  --revision: {revision};", "}")


# ---------------------------------------------------------------------------------------------
# Operations
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Op:
    kind: str          # add-file | add-folder | remove | rename | move | redownload |
                       # redownload+move | deep-redownload
    old: str           # relative path before the op ("" for adds)
    new: str           # relative path after the op ("" for removes)
    case: str          # which case this op covers (goes to README.md)
    data: bytes | None = None                              # new content (add-file, redownloads)
    tree_data: dict[str, bytes] = field(default_factory=dict)  # deep-redownload: rel -> content


def add_file(path: str, data: bytes, case: str) -> Op:
    return Op("add-file", "", path, case, data=data)


def add_folder(path: str, case: str) -> Op:
    return Op("add-folder", "", path, case)


def remove(path: str, case: str) -> Op:
    return Op("remove", path, "", case)


def rename(old: str, new: str, case: str) -> Op:
    return Op("rename", old, new, case)


def move(old: str, new: str, case: str) -> Op:
    return Op("move", old, new, case)


def redownload(path: str, data: bytes, case: str) -> Op:
    return Op("redownload", path, path, case, data=data)


def redownload_move(old: str, new: str, data: bytes, case: str) -> Op:
    return Op("redownload+move", old, new, case, data=data)


def deep_redownload(folder: str, files: dict[str, bytes], case: str) -> Op:
    return Op("deep-redownload", folder, folder, case, tree_data=dict(files))


@dataclass(frozen=True)
class Version:
    name: str
    minimal: str
    ops: list[Op]
    note: str = ""


# ---------------------------------------------------------------------------------------------
# THE SPEC. Ops apply in list order; the comment above each op names the case it covers.
# Naming rule (the client treats "no extension" as a folder): every file name has an
# extension, no folder name contains a dot. Names are NFC.
# ---------------------------------------------------------------------------------------------

SPEC: list[Version] = [
    Version("1.0", minimal="1.0", note="initial publish (no change list)", ops=[
        # 1.0: a text file at the content root (depth 0).
        add_file("README.txt", text(
            "Example storage for content-sync.",
            "Every file here is generated by scripts/make_example_storage.py."),
            "text file at the content root"),
        # 1.0: text file in a first-level folder; redownloaded in 1.2 AND again in 1.3.
        add_file("docs/intro.md", text("# Introduction", "", "Revision 1 of the introduction."),
                 "text file; later redownloaded twice (1.2, 1.3)"),
        # 1.0: file name with a space (URL component "Guide%20Notes.md").
        add_file("docs/Guide Notes.md", text("# Guide notes", "", "A name with a space."),
                 "file name with a space (%20)"),
        # 1.0: file that 1.1 removes.
        add_file("docs/obsolete.txt", text("This file is removed in 1.1."),
                 "file removed in 1.1"),
        # 1.0: file that 1.1 moves to archive/ and 1.4 removes from there.
        add_file("docs/changelog.txt", text("Changelog", "1.0: first publish."),
                 "file moved in 1.1, removed in 1.4"),
        # 1.0: nesting >= 3 levels (docs/api/v1/reference); 1.2 redownloads+moves this file.
        add_file("docs/api/v1/reference/errors.md",
                 text("# Errors", "", "E1: revision 1."),
                 "nested 4 folders deep; redownload+move in 1.2"),
        # 1.0: sibling in the nested folders that never changes.
        add_file("docs/api/v1/endpoints.md", text("# Endpoints", "", "GET /items"),
                 "nested file that never changes"),
        # 1.0: real PNG (zlib + struct); its folder images/ is moved whole in 1.4.
        add_file("images/logo.png", png(16, 16, 1), "real PNG"),
        # 1.0: second PNG one level deeper, travels with images/ in 1.4.
        add_file("images/icons/star.png", png(8, 8, 2), "PNG in a subfolder of a folder moved in 1.4"),
        # 1.0: >= 64 KiB binary (65,537 bytes: one byte past 64 KiB); redownloaded in 1.4.
        add_file("data/blob.bin", blob("blob-revision-1", 65_537),
                 "binary >= 64 KiB (65,537 B)"),
        # 1.0: non-ASCII file name (NFC UTF-8, URL component "cr%C3%A8me.json"); its folder is
        # renamed in 1.2.
        add_file("recipes/crème.json", text(
            '{', '  "name": "Crème brûlée",', '  "serves": 4', '}'),
            "non-ASCII file name (UTF-8 %XX)"),
        # 1.0: second file in the folder renamed in 1.2.
        add_file("recipes/bread.json", text('{', '  "name": "Bread",', '  "serves": 8', '}'),
                 "file in a folder renamed in 1.2"),
        # 1.0: file renamed in place in 1.1.
        add_file("notes/todo.txt", text("- write the sync engine", "- test it"),
                 "file renamed in 1.1"),
        # 1.0: folder with nested content that 1.2 removes whole.
        add_file("legacy/old-notes.txt", text("Old notes, removed with their folder in 1.2."),
                 "folder removed recursively in 1.2"),
        # 1.0: nested content inside the folder removed in 1.2.
        add_file("legacy/deep/more/stuff.txt", text("Deep legacy content."),
                 "nested content of the folder removed in 1.2"),
        # 1.0: files of the folder deep-redownloaded in 1.3 (one in a subfolder).
        add_file("styles/main.css", css("main.css", 1, "#000000"),
                 "deep folder redownload target (1.3)"),
        # 1.0: second file of the deep-redownloaded folder.
        add_file("styles/theme.css", css("theme.css", 1, "#112233"),
                 "deep folder redownload target (1.3)"),
        # 1.0: file in a subfolder of the deep-redownloaded folder (recursion).
        add_file("styles/print/print.css", css("print.css", 1, "#444444"),
                 "deep folder redownload reaches subfolders (1.3)"),
        # 1.0: empty folder (only the zip and the manifest keep it; git does not).
        add_folder("drafts", "empty folder, stays empty in every version"),
    ]),

    Version("1.1", minimal="1.0", ops=[
        # 1.1 add file: into an existing folder (moved in 1.2: a 1.0 client must download it
        # once, from its final place help/faq.md).
        add_file("docs/faq.md", text("# FAQ", "", "Q: Why? A: Because."),
                 "add file (moved in 1.2)"),
        # 1.1 add folder: empty, no extension.
        add_folder("uploads", "add empty folder"),
        # 1.1 add file in a new nested folder: guides/ and guides/start/ are implicit parents.
        # 1.2 removes the file (added then removed: a 1.0 client going to 1.2 never downloads
        # it; the implicit parent folders stay).
        add_file("guides/start/quickstart.md", text("# Quickstart", "", "Removed in 1.2."),
                 "add file in new nested folder (implicit parents)"),
        # 1.1 remove file.
        remove("docs/obsolete.txt", "remove file"),
        # 1.1 rename a file in place (rename: true).
        rename("notes/todo.txt", "notes/tasks.txt", "rename file in place"),
        # 1.1 move a file to another folder (archive/ does not exist yet: parent created).
        # 1.4 removes the moved file.
        move("docs/changelog.txt", "archive/changelog.txt",
             "move file to another (new) folder"),
    ]),

    Version("1.2", minimal="1.0", ops=[
        # 1.2 move the file ADDED in 1.1 (1.0 client: one download, from help/faq.md).
        move("docs/faq.md", "help/faq.md", "move the file added in 1.1"),
        # 1.2 remove a folder with nested content (recursive delete).
        remove("legacy", "remove folder with nested content"),
        # 1.2 remove the file added in 1.1 in a new folder (added then removed: never downloaded
        # by a 1.0 client; guides/start stays as an empty folder).
        remove("guides/start/quickstart.md", "remove the file added in 1.1"),
        # 1.2 redownload a file (content changes; redownloaded again in 1.3).
        redownload("docs/intro.md",
                   text("# Introduction", "", "Revision 2 of the introduction."),
                   "redownload file (1st time)"),
        # 1.2 redownload + move a file (content changes, new place and new folder v2/; the old
        # folder docs/api/v1/reference stays, empty).
        redownload_move("docs/api/v1/reference/errors.md", "docs/api/v2/errors.md",
                        text("# Errors", "", "E1: revision 2.", "E2: added in revision 2."),
                        "redownload + move file"),
        # 1.2 rename a folder that has files (incl. the non-ASCII one) (rename: true).
        rename("recipes", "cookbook", "rename folder with files"),
    ]),

    Version("1.3", minimal="1.1",
            note="minimalCacheVersion bump: a 1.0 client must restore from the zip", ops=[
        # 1.3 deep folder redownload: every file under styles/ (incl. styles/print/) changed.
        deep_redownload("styles", {
            "main.css": css("main.css", 2, "#0a0a0a"),
            "theme.css": css("theme.css", 2, "#223344"),
            "print/print.css": css("print.css", 2, "#555555"),
        }, "deep folder redownload"),
        # 1.3 redownload the same file as 1.2 again (a 1.1 client going to 1.3 fetches it once).
        redownload("docs/intro.md",
                   text("# Introduction", "", "Revision 3 of the introduction.",
                        "Longer than revision 2."),
                   "redownload file again (2nd time, across versions)"),
        # 1.3 add a nested empty folder; archive/y2023 is an implicit parent.
        add_folder("archive/y2023/q4", "add nested empty folder (implicit parent)"),
    ]),

    Version("1.4", minimal="1.1", ops=[
        # 1.4 move a whole folder (with files and a subfolder) to another (new) parent.
        move("images", "assets/images", "move folder with files to another parent"),
        # 1.4 remove the file that 1.1 moved.
        remove("archive/changelog.txt", "remove a file moved in 1.1"),
        # 1.4 redownload the binary (new content, new size 98,304 B).
        redownload("data/blob.bin", blob("blob-revision-2", 98_304),
                   "redownload binary (size changes)"),
        # 1.4 add a file into the folder moved earlier in THIS list (order matters: the target
        # folder only exists once the move above has been applied).
        add_file("assets/images/banner.png", png(32, 8, 3),
                 "add file into the folder moved in this same version"),
    ]),
]


# ---------------------------------------------------------------------------------------------
# In-memory tree
# ---------------------------------------------------------------------------------------------

class SpecError(Exception):
    pass


def version_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


def check_component(part: str, is_file: bool, path: str) -> None:
    if not part or part in (".", "..") or "/" in part or "\\" in part:
        raise SpecError(f"bad path component {part!r} in {path!r}")
    if not unicodedata.is_normalized("NFC", part):
        raise SpecError(f"{path!r} is not NFC")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in part):
        raise SpecError(f"control character in {path!r}")
    if is_file:
        stem, dot, ext = part.rpartition(".")
        if not dot or not stem or not ext:
            raise SpecError(f"file name {part!r} needs an extension ({path!r})")
    elif "." in part:
        raise SpecError(f"folder name {part!r} must not contain a dot ({path!r})")


def check_path(path: str, is_file: bool) -> None:
    parts = path.split("/")
    for i, part in enumerate(parts):
        check_component(part, is_file and i == len(parts) - 1, path)


def parents_of(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def parent_of(path: str) -> str:
    return path.rpartition("/")[0]


def within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + "/")


class Tree:
    """Files (path -> bytes) and folders (set of paths); the root is implicit."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.folders: set[str] = set()

    def copy(self) -> "Tree":
        t = Tree()
        t.files = dict(self.files)
        t.folders = set(self.folders)
        return t

    def exists(self, path: str) -> bool:
        return path in self.files or path in self.folders

    def make_parents(self, path: str) -> None:
        for p in parents_of(path):
            if p in self.files:
                raise SpecError(f"{p!r} is a file, cannot hold {path!r}")
            self.folders.add(p)

    def files_under(self, folder: str) -> list[str]:
        return sorted(p for p in self.files if within(p, folder) and p != folder)

    def delete(self, path: str) -> None:
        if path in self.files:
            del self.files[path]
        elif path in self.folders:
            self.folders = {f for f in self.folders if not within(f, path)}
            self.files = {p: d for p, d in self.files.items() if not within(p, path)}
        else:
            raise SpecError(f"cannot remove missing {path!r}")

    def relocate(self, old: str, new: str) -> None:
        if not self.exists(old):
            raise SpecError(f"cannot move missing {old!r}")
        if self.exists(new):
            raise SpecError(f"cannot move {old!r} onto existing {new!r}")
        if within(new, old):
            raise SpecError(f"cannot move {old!r} into itself ({new!r})")
        self.make_parents(new)
        if old in self.files:
            self.files[new] = self.files.pop(old)
            return

        def rebase(p: str) -> str:
            return new + p[len(old):]

        self.folders = {rebase(f) if within(f, old) else f for f in self.folders}
        self.files = {(rebase(p) if within(p, old) else p): d for p, d in self.files.items()}

    def apply(self, op: Op) -> None:
        k = op.kind
        if k == "add-file":
            check_path(op.new, is_file=True)
            if self.exists(op.new):
                raise SpecError(f"add: {op.new!r} exists")
            self.make_parents(op.new)
            self.files[op.new] = op.data
        elif k == "add-folder":
            check_path(op.new, is_file=False)
            if self.exists(op.new):
                raise SpecError(f"add: {op.new!r} exists")
            self.make_parents(op.new)
            self.folders.add(op.new)
        elif k == "remove":
            self.delete(op.old)
        elif k in ("rename", "move"):
            check_path(op.new, is_file=op.old in self.files)
            if op.old == op.new:
                raise SpecError(f"{k}: {op.old!r} onto itself")
            same_parent = parent_of(op.old) == parent_of(op.new)
            if k == "rename" and not same_parent:
                raise SpecError(f"rename {op.old!r} -> {op.new!r} changes folder: use move")
            if k == "move" and same_parent:
                raise SpecError(f"move {op.old!r} -> {op.new!r} stays in its folder: use rename")
            self.relocate(op.old, op.new)
        elif k in ("redownload", "redownload+move"):
            if op.old not in self.files:
                raise SpecError(f"{k}: {op.old!r} is not a file")
            if self.files[op.old] == op.data:
                raise SpecError(f"{k}: content of {op.old!r} does not change")
            if k == "redownload+move":
                check_path(op.new, is_file=True)
                if op.old == op.new:
                    raise SpecError("redownload+move needs two different paths")
                self.relocate(op.old, op.new)
            self.files[op.new] = op.data
        elif k == "deep-redownload":
            if op.old not in self.folders:
                raise SpecError(f"deep redownload: {op.old!r} is not a folder")
            inside = [p[len(op.old) + 1:] for p in self.files_under(op.old)]
            if sorted(op.tree_data) != inside:
                raise SpecError(f"deep redownload of {op.old!r} must give every file: {inside}")
            for rel, data in op.tree_data.items():
                path = f"{op.old}/{rel}"
                if self.files[path] == data:
                    raise SpecError(f"deep redownload: {path!r} does not change")
                self.files[path] = data
        else:
            raise SpecError(f"unknown op kind {k!r}")


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------

def dumps(obj) -> bytes:
    """Stable key order (insertion order), 2-space indent, UTF-8, trailing newline."""
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def content_url(path: str) -> str:
    if path == "":
        return ""
    return BASE + CONTENT_DIR + "/" + "/".join(quote(c, safe="") for c in path.split("/"))


def changes_name(a: str, b: str) -> str:
    return f"changes_{a}_{b}.json"


def classify(entry: dict) -> tuple[str, str, str]:
    """A published change as (kind, old, new), in the spec's vocabulary."""
    old, new = decode_url(entry["oldPath"]), decode_url(entry["newPath"])
    if entry.get("isDeepFolderRedownload"):
        return ("deep-redownload", old, new)
    if entry["redownload"]:
        return ("redownload" if old == new else "redownload+move", old, new)
    if old == "":
        return ("add-file" if "." in new.rsplit("/", 1)[-1] else "add-folder", old, new)
    if new == "":
        return ("remove", old, new)
    return ("rename" if entry["rename"] else "move", old, new)


def manifest(version: str, tree: Tree) -> dict:
    return {
        "version": version,
        "folders": sorted(tree.folders),
        "files": {p: {"size": len(d), "sha256": hashlib.sha256(d).hexdigest()}
                  for p, d in sorted(tree.files.items())},
    }


def build_trees() -> list[tuple[Version, Tree]]:
    names = [v.name for v in SPEC]
    if names != sorted(names, key=version_key) or len(set(names)) != len(names):
        raise SpecError(f"versions must be unique and ascending: {names}")
    tree = Tree()
    out = []
    for v in SPEC:
        if version_key(v.minimal) > version_key(v.name):
            raise SpecError(f"{v.name}: minimal {v.minimal} is above the version")
        if v.minimal not in names:
            raise SpecError(f"{v.name}: minimal {v.minimal} is not a published version")
        for op in v.ops:
            try:
                tree.apply(op)
            except SpecError as e:
                raise SpecError(f"version {v.name}: {e}") from None
        # Every download a single-step client makes (from this version's storage) must exist
        # with exactly that content once the whole list is applied.
        for op in v.ops:
            if op.kind in ("add-file", "redownload", "redownload+move"):
                if tree.files.get(op.new) != op.data:
                    raise SpecError(f"version {v.name}: {op.new!r} is not served as added; "
                                    "a later op in the same list changed it")
        out.append((v, tree.copy()))
    return out


def write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def write_content(tree: Tree, root: Path) -> None:
    root.mkdir(parents=True)
    for folder in sorted(tree.folders):
        (root / folder).mkdir(parents=True, exist_ok=True)
    for path, data in sorted(tree.files.items()):
        write(root / path, data)


def publish(agent: Path, v: Version, first: bool, storage: Path, content: Path) -> None:
    command = [str(agent), "publish", "--storage", str(storage), "--content", str(content),
               "--version", v.name, "--minimal", v.minimal, "--base-url", BASE]
    if first:
        command.append("--init")
    run = subprocess.run(command, capture_output=True, text=True)
    if run.returncode != 0:
        raise SpecError(f"`{' '.join(command)}` failed with exit code {run.returncode}:\n"
                        f"{run.stderr.strip() or run.stdout.strip()}")


def snapshot(storage: Path, target: Path) -> None:
    """Copies the storage as served: without the publisher's hidden work folders."""
    shutil.copytree(storage, target, ignore=lambda _, names: [n for n in names if n.startswith(".")])


def published_ops(v: Version, prev: str, root: Path) -> list[Op]:
    """The published change list of `v`, each change matched with its spec op (for the case
    text). Fails when the publisher and the spec disagree."""
    doc = load_json(root / HISTORY_DIR / changes_name(prev, v.name))
    by_key = {(op.kind, op.old, op.new): op for op in v.ops}
    published = [classify(entry) for entry in doc["changes"]]
    missing = sorted(set(by_key) - set(published))
    extra = [c for c in published if c not in by_key]
    if missing or extra or len(published) != len(by_key):
        raise SpecError(f"version {v.name}: `sync-agent publish` wrote {changes_name(prev, v.name)} "
                        f"with changes the spec does not list {extra} and without {missing}; "
                        "fix the differ or the spec")
    return [by_key[c] for c in published]


def generate(out: Path, agent: Path) -> None:
    built = build_trees()
    published: list[tuple[Version, list[Op]]] = []
    with tempfile.TemporaryDirectory(prefix="example-storage-work-") as tmp:
        work = Path(tmp)
        storage = work / "storage"
        prev: str | None = None
        for v, tree in built:
            content = work / f"content-{v.name}"
            write_content(tree, content)
            publish(agent, v, prev is None, storage, content)
            root = out / "versions" / v.name
            snapshot(storage, root)
            published.append((v, v.ops if prev is None else published_ops(v, prev, root)))
            write(out / "manifests" / f"{v.name}.json", dumps(manifest(v.name, tree)))
            prev = v.name
    write(out / "versions.json", dumps({
        "versions": [v.name for v, _ in built], "latest": built[-1][0].name, "base": BASE}))
    compositions = verify(out)
    check_composition_claims(compositions)
    write(out / "README.md", readme(out, built, published, compositions).encode("utf-8"))


# ---------------------------------------------------------------------------------------------
# Independent verification (reads only what was written to disk)
# ---------------------------------------------------------------------------------------------

class VerifyError(Exception):
    pass


def load_json(path: Path):
    return json.loads(path.read_bytes().decode("utf-8"))


def tree_from_manifest(m: dict) -> tuple[set[str], dict[str, tuple[int, str]]]:
    return set(m["folders"]), {p: (e["size"], e["sha256"]) for p, e in m["files"].items()}


def scan_folder(root: Path) -> tuple[set[str], dict[str, tuple[int, str]]]:
    folders, files = set(), {}
    for p in root.rglob("*"):
        rel = p.relative_to(root).as_posix()
        if p.is_dir():
            folders.add(rel)
        else:
            d = p.read_bytes()
            files[rel] = (len(d), hashlib.sha256(d).hexdigest())
    return folders, files


def scan_zip(data: bytes) -> tuple[set[str], dict[str, tuple[int, str]]]:
    folders, files = set(), {}
    names = []
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        if zf.testzip() is not None:
            raise VerifyError("zip CRC failure")
        for info in zf.infolist():
            names.append(info.filename)
            if info.date_time != ZIP_DATE_TIME or info.create_system != ZIP_CREATE_SYSTEM:
                raise VerifyError(f"zip entry {info.filename!r} has unstable metadata")
            if not info.filename.startswith(CONTENT_DIR + "/"):
                raise VerifyError(f"zip entry outside {CONTENT_DIR}/: {info.filename!r}")
            rel = info.filename[len(CONTENT_DIR) + 1:]
            if info.is_dir():
                if info.external_attr != ZIP_DIR_ATTR:
                    raise VerifyError(f"dir attr of {info.filename!r}")
                if rel:
                    folders.add(rel.rstrip("/"))
            else:
                if info.external_attr != ZIP_FILE_ATTR:
                    raise VerifyError(f"file attr of {info.filename!r}")
                d = zf.read(info)
                files[rel] = (len(d), hashlib.sha256(d).hexdigest())
    if names != sorted(names) or names[0] != CONTENT_DIR + "/":
        raise VerifyError("zip entries are not sorted / top folder entry missing")
    # Every folder (incl. intermediate ones) has its own directory entry.
    for rel in list(files) + list(folders):
        for p in parents_of(rel):
            if p not in folders:
                raise VerifyError(f"zip lacks a directory entry for {p!r}")
    return folders, files


def decode_url(url: str) -> str:
    if url == "":
        return ""
    prefix = BASE + CONTENT_DIR + "/"
    if not url.startswith(prefix):
        raise VerifyError(f"URL outside the content: {url!r}")
    parts = url[len(prefix):].split("/")
    for part in parts:
        if quote(unquote(part), safe="") != part:
            raise VerifyError(f"URL component not canonically percent-encoded: {part!r}")
    return "/".join(unquote(p) for p in parts)


class Replay:
    """Reference client: applies change lists; file contents are symbolic until downloaded.

    A file is either present with known (size, sha256) or PENDING (must be fetched). Adds and
    redownloads mark files pending; moves carry local and pending files alike; removes drop
    them. After the last list, every pending file is fetched once, from its final path, from
    the LATEST storage (a storage only serves its latest content).
    """

    PENDING = None

    def __init__(self, folders: set[str], files: dict) -> None:
        self.folders = set(folders)
        self.files = dict(files)

    def _parents(self, path: str) -> None:
        for p in parents_of(path):
            if p in self.files:
                raise VerifyError(f"{p!r} is a file")
            self.folders.add(p)

    def _move(self, old: str, new: str) -> None:
        if new in self.files or new in self.folders:
            raise VerifyError(f"move target {new!r} exists")
        self._parents(new)
        if old in self.files:
            self.files[new] = self.files.pop(old)
        elif old in self.folders:
            self.folders = {new + f[len(old):] if within(f, old) else f for f in self.folders}
            self.files = {(new + p[len(old):] if within(p, old) else p): d
                          for p, d in self.files.items()}
        else:
            raise VerifyError(f"move source {old!r} missing")

    def apply(self, changes: list[dict]) -> None:
        for ch in changes:
            old, new = decode_url(ch["oldPath"]), decode_url(ch["newPath"])
            if ch.get("isDeepFolderRedownload"):
                if not (ch["redownload"] and old == new and old in self.folders):
                    raise VerifyError(f"bad deep redownload {ch}")
                for p in self.files:
                    if within(p, old):
                        self.files[p] = self.PENDING
            elif ch["redownload"]:
                if old not in self.files or not new:
                    raise VerifyError(f"bad redownload {ch}")
                if old != new:
                    self._move(old, new)
                self.files[new] = self.PENDING
            elif old == "":
                if new in self.files or new in self.folders:
                    raise VerifyError(f"add target {new!r} exists")
                self._parents(new)
                if "." in new.rsplit("/", 1)[-1]:
                    self.files[new] = self.PENDING
                else:
                    self.folders.add(new)
            elif new == "":
                if old in self.files:
                    del self.files[old]
                elif old in self.folders:
                    self.folders = {f for f in self.folders if not within(f, old)}
                    self.files = {p: d for p, d in self.files.items() if not within(p, old)}
                else:
                    raise VerifyError(f"remove of missing {old!r}")
            else:
                if ch["rename"] != (parent_of(old) == parent_of(new)):
                    raise VerifyError(f"rename flag inconsistent with paths: {ch}")
                self._move(old, new)

    def finish(self, latest_content: Path) -> list[str]:
        fetched = sorted(p for p, d in self.files.items() if d is self.PENDING)
        for p in fetched:
            d = (latest_content / p).read_bytes()
            self.files[p] = (len(d), hashlib.sha256(d).hexdigest())
        return fetched


def size_value(v) -> float:
    return float(v)


def verify(out: Path) -> dict[tuple[str, str], list[str] | None]:
    """Check the written storage; returns {(from, to): fetched paths, or None = zip restore}."""
    index = load_json(out / "versions.json")
    versions = index["versions"]
    manifests = {v: load_json(out / "manifests" / f"{v}.json") for v in versions}
    statuses = {}
    for i, v in enumerate(versions):
        root = out / "versions" / v
        m = manifests[v]
        if m["version"] != v:
            raise VerifyError(f"manifest {v} names {m['version']}")
        expected = tree_from_manifest(m)
        for path in list(m["folders"]) + list(m["files"]):
            check_path(path, is_file=path in m["files"])
        if scan_folder(root / CONTENT_DIR) != expected:
            raise VerifyError(f"{v}: {CONTENT_DIR}/ differs from its manifest")
        archive = (root / ZIP_NAME).read_bytes()
        if scan_zip(archive) != expected:
            raise VerifyError(f"{v}: zip differs from its manifest")
        status = load_json(root / CONFIG_DIR / "cacheStatus.json")
        statuses[v] = status
        if status["actualCacheVersion"] != v:
            raise VerifyError(f"{v}: actualCacheVersion")
        if size_value(status["zippedArchiveSizeInMB"]) * MIB < len(archive):
            raise VerifyError(f"{v}: zipped size under-declared")
        total = sum(s for s, _ in expected[1].values())
        if size_value(status["unzippedArchiveSizeInMB"]) * MIB < total:
            raise VerifyError(f"{v}: unzipped size under-declared")
        listing = load_json(root / CONFIG_DIR / "listOfURLsToUpdatesByVersion.json")
        want = [f"{BASE}{HISTORY_DIR}/{changes_name(a, b)}"
                for a, b in zip(versions[:i], versions[1:i + 1])]
        if listing["updatesByVersions"] != want:
            raise VerifyError(f"{v}: listOfURLsToUpdatesByVersion")
        on_disk = sorted(p.name for p in (root / HISTORY_DIR).glob("*")) if i else []
        if on_disk != sorted(u.rsplit("/", 1)[1] for u in want):
            raise VerifyError(f"{v}: HistoryOfVersions holds {on_disk}")

    # Every allowed update (from >= minimal of the target) composes to the target manifest
    # using only the target's storage; older clients must restore from the zip.
    result: dict[tuple[str, str], list[str] | None] = {}
    for j, to in enumerate(versions):
        latest = out / "versions" / to
        minimal = statuses[to]["minimalCacheVersion"]
        for i, frm in enumerate(versions[:j]):
            if version_key(frm) < version_key(minimal):
                result[(frm, to)] = None
                continue
            client = Replay(*tree_from_manifest(manifests[frm]))
            for a, b in zip(versions[i:j], versions[i + 1:j + 1]):
                doc = load_json(latest / HISTORY_DIR / changes_name(a, b))
                if (doc["from"], doc["to"]) != (a, b):
                    raise VerifyError(f"{changes_name(a, b)} names {doc['from']}->{doc['to']}")
                client.apply(doc["changes"])
            fetched = client.finish(latest / CONTENT_DIR)
            if (client.folders, client.files) != tree_from_manifest(manifests[to]):
                raise VerifyError(f"update {frm} -> {to} does not reach manifest {to}")
            result[(frm, to)] = fetched
    return result


def check_composition_claims(c: dict[tuple[str, str], list[str] | None]) -> None:
    """Guards the claims README.md makes under "Composition cases"."""
    claims = [
        # added in 1.1 then moved in 1.2: fetched once, from its final place
        ("1.0", "1.2", "help/faq.md" in c[("1.0", "1.2")]
         and "docs/faq.md" not in c[("1.0", "1.2")]),
        # added in 1.1 then removed in 1.2: never fetched
        ("1.0", "1.2", "guides/start/quickstart.md" not in c[("1.0", "1.2")]),
        # redownloaded in 1.2 and 1.3: fetched (once: the list holds each path once)
        ("1.1", "1.3", "docs/intro.md" in c[("1.1", "1.3")]),
        # minimalCacheVersion bump: a 1.0 client restores from the zip
        ("1.0", "1.3", c[("1.0", "1.3")] is None and c[("1.0", "1.4")] is None),
        # folder rename / folder move fetch nothing
        ("1.1", "1.4", not any(p.startswith(("cookbook/", "assets/images/icons/"))
                               or p == "assets/images/logo.png" for p in c[("1.1", "1.4")])),
    ]
    for frm, to, ok in claims:
        if not ok:
            raise VerifyError(f"composition claim for {frm} -> {to} no longer holds: {c}")


# ---------------------------------------------------------------------------------------------
# README
# ---------------------------------------------------------------------------------------------

def readme(out_dir: Path, built: list[tuple[Version, Tree]], published: list[tuple[Version, list[Op]]],
           compositions: dict[tuple[str, str], list[str] | None]) -> str:
    def code(p: str) -> str:
        return f"`{p}`" if p else "—"

    out = [
        "# ExampleStorage",
        "",
        "Generated by `scripts/make_example_storage.py`, which describes each version's content",
        "and publishes it with `sync-agent publish` — do not edit by hand. Regenerate with",
        "`make example-storage`; `make test` checks freshness with `make check-example-storage`.",
        "",
        f"Canonical base: `{BASE}`",
        "(the `.invalid` host is never fetched; clients rebase URLs under it onto wherever",
        "`versions/<v>/` is served).",
        "",
        "- `versions/<v>/` — the full storage as published at `<v>` (config with integrity data,",
        "  content manifest, change lists up to `<v>`, `RXCacheContent/`, `RXCacheContent.zip`).",
        "  A storage serves only its latest content, so each version is a separate snapshot.",
        "- `manifests/<v>.json` — the expected client tree at `<v>`: every folder (including",
        "  empty and intermediate ones; git does not keep empty folders, so compare against this,",
        "  not against the checkout) and every file's size and SHA-256. Paths are NFC, sorted by",
        "  code point.",
        "- `versions.json` — the version list, the latest version and the base.",
        "",
        "## Versions",
        "",
        "| Version | Minimal | Files | Folders | Content bytes | Zip bytes | Changes | Note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (v, tree), (_, ops) in zip(built, published):
        zip_bytes = (out_dir / "versions" / v.name / ZIP_NAME).stat().st_size
        changes = "—" if v is built[0][0] else str(len(ops))
        out.append(f"| {v.name} | {v.minimal} | {len(tree.files)} | {len(tree.folders)} | "
                   f"{sum(len(d) for d in tree.files.values()):,} | {zip_bytes:,} | "
                   f"{changes} | {v.note} |")
    out += [
        "",
        "## Changes",
        "",
        "Version 1.0 lists what the content starts with; every later row is a change of the",
        "list `publish` wrote, in its order. Kinds: add file (`oldPath` empty, name has an",
        "extension), add folder (no extension), remove (`newPath` empty), rename (`rename:",
        "true`, same folder), move (`rename: false`), redownload (`redownload: true`, same",
        "path), redownload + move (different paths), deep folder redownload",
        "(`isDeepFolderRedownload: true`).",
        "",
        "| Version | Minimal | # | Kind | Old path | New path | Case |",
        "|---|---|---|---|---|---|---|",
    ]
    for v, ops in published:
        for n, op in enumerate(ops, 1):
            if v is built[0][0]:
                kind = f"initial {op.kind}"
            else:
                kind = op.kind
            out.append(f"| {v.name} | {v.minimal} | {n} | {kind} | {code(op.old)} | "
                       f"{code(op.new)} | {op.case} |")
    out += [
        "",
        "## Composed updates",
        "",
        "Every update a client may take, as checked by the generator: the change lists from",
        "`from` to `to` are applied in order and every file that must be fetched is fetched",
        "once, from its final path in the `to` storage. A client below the target's minimal",
        "version restores from the zip instead.",
        "",
        "| From | To | Result | Files fetched |",
        "|---|---|---|---|",
    ]
    for (frm, to), fetched in compositions.items():
        if fetched is None:
            out.append(f"| {frm} | {to} | restore from zip (below minimal) | — |")
        else:
            listed = ", ".join(f"`{p}`" for p in fetched) or "none"
            out.append(f"| {frm} | {to} | apply change lists | {len(fetched)}: {listed} |")
    out += [
        "",
        "## Composition cases",
        "",
        "- **Added, then moved** (`docs/faq.md` added in 1.1, moved to `help/faq.md` in 1.2): a",
        "  1.0 client updating to 1.2 or later fetches it once, from `help/faq.md` (the 1.1 path",
        "  is no longer served).",
        "- **Added, then removed** (`guides/start/quickstart.md`, 1.1 → 1.2): a 1.0 client",
        "  updating to 1.2 never fetches it; the implicit parents `guides/start` stay (empty).",
        "- **Redownloaded twice** (`docs/intro.md`, 1.2 and 1.3): a 1.1 client updating to 1.3",
        "  or 1.4 fetches it once.",
        "- **Redownload + move** (`docs/api/v1/reference/errors.md` → `docs/api/v2/errors.md`,",
        "  1.2): fetched from the new path; the old folder stays, empty.",
        "- **Folder rename carries a non-ASCII file** (`recipes` → `cookbook`, 1.2): no fetch.",
        "- **Deep folder redownload** (`styles`, 1.3): every file below it is fetched, including",
        "  `styles/print/print.css` in a subfolder.",
        "- **minimalCacheVersion bump** (1.3 and 1.4 need 1.1): a 1.0 client restores from the",
        "  zip; the zip keeps empty folders (`drafts`, `uploads`, `guides/start`,",
        "  `docs/api/v1/reference`, `archive/y2023/q4`) as directory entries.",
        "- **Move a folder, then add into it, in one list** (`images` → `assets/images`, then",
        "  `assets/images/banner.png`, 1.4): order within a list matters.",
        "- **Moved, then removed** (`docs/changelog.txt` → `archive/changelog.txt` in 1.1,",
        "  removed in 1.4): a 1.1+ client removes it from its moved place; `archive` stays.",
        "- **Integrity extension**: every `cacheStatus.json` carries the tree digest and the",
        "  SHA-256 and size of the archive, the content manifest and each list; every change that",
        "  downloads names the bytes (a deep redownload names each file below its folder).",
        "  Sizes are strings, MiB rounded up to 3 decimals.",
        "- **Percent-encoding**: `docs/Guide%20Notes.md`, `cookbook/cr%C3%A8me.json` (each path",
        "  component is encoded separately; `/` separates components).",
        "",
    ]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------

MANAGED = ("versions", "manifests", "versions.json", "README.md")


def list_files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in root.rglob("*") if p.is_file()}


def zip_only_deflate_differs(a: bytes, b: bytes) -> bool:
    """True when two zips hold the same entries and data (only compressed bytes differ)."""
    try:
        with zipfile.ZipFile(io.BytesIO(a)) as za, zipfile.ZipFile(io.BytesIO(b)) as zb:
            ia, ib = za.infolist(), zb.infolist()
            return (len(ia) == len(ib) and all(
                (x.filename, x.CRC, x.file_size, x.external_attr, x.date_time)
                == (y.filename, y.CRC, y.file_size, y.external_attr, y.date_time)
                and za.read(x) == zb.read(y) for x, y in zip(ia, ib)))
    except zipfile.BadZipFile:
        return False


def check(committed: Path, agent: Path) -> int:
    with tempfile.TemporaryDirectory(prefix="example-storage-") as tmp:
        fresh = Path(tmp) / "ExampleStorage"
        generate(fresh, agent)
        want, have = list_files(fresh), list_files(committed)
        problems = []
        for rel in sorted(set(want) | set(have)):
            if rel not in have:
                problems.append(f"missing: {rel}")
            elif rel not in want:
                problems.append(f"unexpected: {rel}")
            else:
                a, b = want[rel].read_bytes(), have[rel].read_bytes()
                if a != b:
                    hint = ""
                    if rel.endswith(".zip") and zip_only_deflate_differs(a, b):
                        hint = (" (same entries and data; only the deflate bytes differ — a "
                                f"different zlib build? this one is {zlib.ZLIB_RUNTIME_VERSION})")
                    problems.append(f"differs: {rel}{hint}")
    if problems:
        print(f"ExampleStorage is stale ({len(problems)} difference(s)); regenerate with "
              "`make example-storage`:", file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        return 1
    print(f"ExampleStorage is up to date ({len(want)} files).")
    return 0


def main() -> int:
    repo = Path(__file__).resolve().parent.parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="regenerate into a temp dir; exit 1 if ExampleStorage/ differs")
    parser.add_argument("--out", type=Path, default=repo / "ExampleStorage",
                        help="output folder (default: ExampleStorage/ in the repo)")
    parser.add_argument("--sync-agent", type=Path, default=repo / ".build" / "debug" / "sync-agent",
                        help="the sync-agent binary that publishes (default: .build/debug/sync-agent)")
    args = parser.parse_args()
    if not os.access(args.sync_agent, os.X_OK):
        print(f"error: no sync-agent binary at {args.sync_agent}; build it with "
              "`swift build --product sync-agent`, or run `make example-storage`", file=sys.stderr)
        return 2
    try:
        if args.check:
            return check(args.out, args.sync_agent)
        args.out.mkdir(parents=True, exist_ok=True)
        for name in MANAGED:
            target = args.out / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
        generate(args.out, args.sync_agent)
    except (SpecError, VerifyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    n = len(list_files(args.out))
    print(f"wrote {n} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
