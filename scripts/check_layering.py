#!/usr/bin/env python3
"""The package's layering, as issue 10 set it, checked on the real manifest and sources.

- An app that only syncs links no publisher code: ContentSync's target closure holds no
  ContentPublishing source (ChangeDiffer.swift among them), and the reverse holds too.
- The client and the publisher share StorageFormat and import neither each other.
- Transport speaks of HTTP only: it imports no storage or file-format target.
- The item cache and the sync client share Transport and FileKit and import neither each other.
- SyncDaemon (the daemon's shell) builds on the client only: no publisher, cache or archive code,
  and not the test server (its hooks spawn through ProcessKit); its closure holds no StorageServer.
- ProcessKit (spawning programs) sits on the C shim alone.
- FileKit is the bottom: it imports none of the package's Swift targets; DatabaseKit (opening a
  shared WAL database) imports only GRDB.
- Libraries log at debug and trace only (swift-log's guidance): what a caller must know goes
  into the report or the events, and only the executable chooses levels.

    python3 scripts/check_layering.py      (exit 1 on any violation; `swift` on PATH or $SWIFT)
"""
import json
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
FORBIDDEN_IMPORTS = {
    "ContentSync": {"ContentPublishing", "ItemCache", "SyncDaemon"},
    "ItemCache": {"ContentSync", "ContentPublishing", "StorageFormat", "Archive", "SyncDaemon"},
    # The daemon's shell runs the client; the publisher and the item cache are the executable's business.
    "SyncDaemon": {"ContentPublishing", "ItemCache", "Archive", "StorageServer"},
    "ProcessKit": {"ContentSync", "ContentPublishing", "StorageFormat", "Transport", "Archive", "FileKit", "ItemCache", "StorageServer",
                   "SyncDaemon", "DatabaseKit", "ToolSupport", "PercentDecoding"},
    "ContentPublishing": {"ContentSync", "Transport"},
    "StorageFormat": {"ContentSync", "ContentPublishing", "Transport", "Archive"},
    "Transport": {"ContentSync", "ContentPublishing", "StorageFormat", "Archive", "FileKit"},
    "FileKit": {"ContentSync", "ContentPublishing", "StorageFormat", "Transport", "Archive"},
    "Archive": {"ContentSync", "ContentPublishing", "StorageFormat", "Transport"},
    "DatabaseKit": {"ContentSync", "ContentPublishing", "StorageFormat", "Transport", "Archive", "FileKit", "ItemCache"},
}


def main():
    swift = os.environ.get("SWIFT", "swift")
    described = json.loads(subprocess.run([swift, "package", "describe", "--type", "json"], cwd=ROOT, check=True,
                                          capture_output=True, text=True).stdout)
    targets = {target["name"]: target for target in described["targets"]}

    def closure(name, seen):
        if name in seen or name not in targets:
            return seen
        seen.add(name)
        for dependency in targets[name].get("target_dependencies", []):
            closure(dependency, seen)
        return seen

    problems = []
    sources = lambda names: {source for name in names for source in targets[name].get("sources", [])}
    client, publisher = closure("ContentSync", set()), closure("ContentPublishing", set())
    if "ChangeDiffer.swift" in sources(client) or "ContentPublishing" in client:
        problems.append("ContentSync's closure contains the publisher")
    if "ContentSync" in publisher:
        problems.append("ContentPublishing's closure contains the client")
    if "ChangeDiffer.swift" not in sources(publisher):
        problems.append("ChangeDiffer.swift is not in ContentPublishing (the check would prove nothing)")
    if "StorageServer" in closure("SyncDaemon", set()):
        problems.append("SyncDaemon's closure contains the test server (spawn through ProcessKit)")
    for target, forbidden in FORBIDDEN_IMPORTS.items():
        for path in sorted((ROOT / "Sources" / target).rglob("*.swift")):
            for number, line in enumerate(path.read_text().split("\n"), 1):
                match = re.match(r"^\s*(?:@testable\s+|@_exported\s+|public\s+|package\s+|internal\s+)?import\s+(\w+)", line)
                if match and match.group(1) in forbidden:
                    problems.append(f"{path.relative_to(ROOT)}:{number}: {target} imports {match.group(1)}")
    for target in ["FileKit", "Archive", "StorageFormat", "Transport", "ContentSync", "ContentPublishing", "ItemCache"]:
        for path in sorted((ROOT / "Sources" / target).rglob("*.swift")):
            for number, line in enumerate(path.read_text().split("\n"), 1):
                if re.search(r"\blogger\.(info|notice|warning|error|critical)\(", line):
                    problems.append(f"{path.relative_to(ROOT)}:{number}: a library logs above debug; put it in the report or events")
    for problem in problems:
        print("check_layering: " + problem)
    if problems:
        return 1
    print(f"check_layering: ContentSync links {len(client)} targets and no publisher code; imports follow the layers; libraries log at debug")
    return 0


if __name__ == "__main__":
    sys.exit(main())
