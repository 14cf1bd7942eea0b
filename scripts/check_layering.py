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
- All of it as an allow-list (ALLOWED_DEPENDENCIES): each target's dependencies in Package.swift
  stay inside its entry, every target has one, and a source imports only the package targets
  Package.swift declares for its target (so no import slips through a dependency's closure).
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
LIBRARIES = {"CLinux", "CCurl", "CZip", "CZlib", "CVips", "ImageCatalog", "ImageCache", "PercentDecoding", "DateText", "ThreadKit", "ToolSupport", "ProcessKit", "FileKit", "DatabaseKit",
             "Transport", "Archive", "StorageFormat", "ContentSync", "ContentPublishing", "ItemCache",
             "StorageServer", "SyncDaemon", "ContentSyncFuzzing"}
# The layering as an allow-list: the package targets each target may depend on at all. Package.swift
# declares a target's actual dependencies, which must stay inside this list, and a target's sources
# may import only what Package.swift declares for it (the list below is the architecture; the
# manifest is the implementation). A new target needs an entry here before the check passes.
ALLOWED_DEPENDENCIES = {
    # C shims and leaves.
    "CLinux": set(), "CCurl": set(), "CZip": set(), "CZlib": set(), "CVips": set(), "PercentDecoding": set(), "DateText": set(), "ToolSupport": set(),
    "DatabaseKit": set(),
    # Spawning programs sits on the C shim alone; FileKit is the bottom of the Swift targets.
    # ThreadKit (pthread_create, a failure seen) is a leaf every target that makes threads uses.
    "ThreadKit": {"CLinux"},
    "ProcessKit": {"CLinux", "ThreadKit"},
    "FileKit": {"CLinux", "ThreadKit"},
    # Transport speaks of HTTP only: no storage, file-format or file code (URL escapes are HTTP's).
    "Transport": {"CCurl", "CZlib", "DateText", "PercentDecoding", "ThreadKit"},
    "Archive": {"CLinux", "CZip", "FileKit", "ThreadKit"},
    "StorageFormat": {"CLinux", "DateText", "FileKit", "PercentDecoding"},
    # The client and the publisher share StorageFormat and depend on neither each other.
    "ContentSync": {"Archive", "CLinux", "DatabaseKit", "FileKit", "StorageFormat", "ThreadKit", "Transport"},
    "ContentPublishing": {"Archive", "CLinux", "DateText", "FileKit", "StorageFormat", "ThreadKit"},
    # The item cache and the client share Transport and FileKit and depend on neither each other.
    # Keys read URL escapes (PercentDecoding, a leaf).
    "ItemCache": {"DatabaseKit", "DateText", "FileKit", "PercentDecoding", "Transport"},
    # The test server speaks HTTP with Transport's HTTP dates.
    "StorageServer": {"PercentDecoding", "ProcessKit", "ThreadKit", "ToolSupport", "Transport"},
    # Images on libvips: only ImageCache links CVips, and it builds on the item cache alone.
    "ImageCache": {"ImageCatalog", "ItemCache", "CVips", "FileKit", "Transport"},
    # What the cache CLI reads of images, without libvips.
    "ImageCatalog": {"ItemCache"},
    # The daemon's shell runs the client: no publisher, cache, archive or test-server code.
    "SyncDaemon": {"CLinux", "ContentSync", "DateText", "FileKit", "ProcessKit", "StorageFormat", "ThreadKit", "Transport"},
    "ContentSyncFuzzing": {"DateText", "FileKit", "ItemCache", "StorageFormat", "Transport"},
    # sync-agent's commands: any library but the ones that load libvips (sync-agent-image adds them).
    "SyncAgent": LIBRARIES - {"ImageCache", "CVips"},
    "SyncAgentMain": {"SyncAgent"},
    "SyncAgentImage": LIBRARIES | {"SyncAgent"},
    # Executables are the top: any library.
    "ContentSyncFuzz": LIBRARIES, "CacheBench": LIBRARIES, "CacheChaos": LIBRARIES,
    "FleetSim": LIBRARIES, "ImageBench": LIBRARIES,
}
IMPORT = re.compile(
    r"^\s*(?:@\w+\s+)*(?:public\s+|package\s+|internal\s+|private\s+|fileprivate\s+)?import\s+"
    r"(?:(?:struct|class|enum|protocol|typealias|func|var|let)\s+)?(\w+)")


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
    if "CVips" in closure("SyncAgentMain", set()):
        problems.append("sync-agent's closure contains CVips: every command would load libvips (sync-agent-image makes images)")
    if "StorageServer" in closure("SyncDaemon", set()):
        problems.append("SyncDaemon's closure contains the test server (spawn through ProcessKit)")
    for name, target in sorted(targets.items()):
        declared = set(target.get("target_dependencies", []))
        if target["type"] != "test":
            allowed = ALLOWED_DEPENDENCIES.get(name)
            if allowed is None:
                problems.append(f"{name} is not in the layering; add it to ALLOWED_DEPENDENCIES in scripts/check_layering.py")
                continue
            for dependency in sorted(declared - allowed - {name}):
                problems.append(f"Package.swift: {name} depends on {dependency}, which the layering does not allow")
        folder = ROOT / target.get("path", ("Tests/" if target["type"] == "test" else "Sources/") + name)
        for path in sorted(folder.rglob("*.swift")):
            for number, line in enumerate(path.read_text().split("\n"), 1):
                match = IMPORT.match(line)
                if match and match.group(1) in targets and match.group(1) != name and match.group(1) not in declared:
                    problems.append(
                        f"{path.relative_to(ROOT)}:{number}: {name} imports {match.group(1)}, which Package.swift does not declare for it")
    for target in ["FileKit", "Archive", "StorageFormat", "Transport", "ContentSync", "ContentPublishing", "ItemCache",
                   "ImageCatalog", "ImageCache", "DatabaseKit"]:
        for path in sorted((ROOT / "Sources" / target).rglob("*.swift")):
            for number, line in enumerate(path.read_text().split("\n"), 1):
                if re.search(r"\blogger\.(info|notice|warning|error|critical)\(", line):
                    problems.append(f"{path.relative_to(ROOT)}:{number}: a library logs above debug; put it in the report or events")
                # The library's messages name its settings, never a CLI flag: the CLI adds its own.
                if not line.lstrip().startswith("//") and re.search(r'"[^"]*(^|[ (`])--[a-z][a-z-]+', line):
                    problems.append(f"{path.relative_to(ROOT)}:{number}: a library message names a CLI flag; name the setting (the CLI adds the flag)")
    # Foundation's Thread.start() fails in silence at a task limit, and whoever waits for the
    # work waits for good: every non-test thread is made with ThreadKit's DetachedThread.
    for path in sorted((ROOT / "Sources").rglob("*.swift")):
        for number, line in enumerate(path.read_text().split("\n"), 1):
            code = line.split("//")[0]
            if re.search(r"\bThread\s*[({]|\bThread\.detachNewThread", code):
                problems.append(f"{path.relative_to(ROOT)}:{number}: a Foundation Thread; make it with DetachedThread.start (ThreadKit), whose failure is seen")
    for problem in problems:
        print("check_layering: " + problem)
    if problems:
        return 1
    print(f"check_layering: ContentSync links {len(client)} targets and no publisher code; imports follow the layers; libraries log at debug and name no CLI flag; threads are made with DetachedThread")
    return 0


if __name__ == "__main__":
    sys.exit(main())
