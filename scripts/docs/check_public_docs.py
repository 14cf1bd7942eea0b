#!/usr/bin/env python3
"""Every public symbol of the libraries has a `///` summary (house style 19).

Scans Sources/<library target>/*.swift for declarations marked `public` or `open` and reports
those not preceded by a `///` line (attributes such as @discardableResult may sit between).
Members of a public protocol are declared without `public`; their docs are not checked here.

    python3 scripts/docs/check_public_docs.py [TARGET ...]      exit 1 when any summary is missing
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIBRARIES = ["FileKit", "Archive", "StorageFormat", "Transport", "ContentSync", "ContentPublishing", "StorageServer", "ItemCache", "ImageCache", "ImageCatalog", "SyncDaemon", "ProcessKit"]
DECLARATION = re.compile(r"^\s*(?:@[\w.]+(?:\([^)]*\))?\s+)*(?:public|open)\s+(?!import\b)(?:(?:static|final|class|override|mutating|nonisolated|indirect|convenience|required|private\(set\)|internal\(set\)|fileprivate\(set\))\s+)*(struct|class|enum|actor|protocol|func|init\??|var|let|typealias|subscript|case|extension)\b")


def missing(path):
    lines = path.read_text().split("\n")
    found = []
    for number, line in enumerate(lines):
        match = DECLARATION.match(line)
        if not match or match.group(1) == "extension":
            continue
        # `public var description` of CustomStringConvertible and the like are documented by the protocol.
        if re.search(r"\bvar (description|debugDescription)\b|\bfunc (hash\(into|==|<|>|<=|>=)", line) and match.group(1) in ("var", "func"):
            continue
        above = number - 1
        while above >= 0 and lines[above].strip().startswith("@"):
            above -= 1
        if above < 0 or not lines[above].strip().startswith("///"):
            found.append((number + 1, line.strip()))
    return found


def main(targets):
    problems = 0
    for target in targets or LIBRARIES:
        for path in sorted((ROOT / "Sources" / target).rglob("*.swift")):
            for number, text in missing(path):
                problems += 1
                print(f"{path.relative_to(ROOT)}:{number}: public symbol without a /// summary: {text[:100]}")
    if problems:
        print(f"check_public_docs: {problems} public symbol(s) lack a /// summary; add one line saying what each is")
        return 1
    print("check_public_docs: every public symbol has a /// summary")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
