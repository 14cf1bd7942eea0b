#!/usr/bin/env python3
"""Every public symbol of the libraries has a `///` summary (house style 19).

Scans Sources/<library target>/*.swift for declarations marked `public` or `open` and reports
those not preceded by a `///` line (attributes such as @discardableResult may sit between).
Members of a public protocol are declared without `public`; their docs are not checked here.

It also checks that every ``link`` in the doc comment of a declaration DocC shows starts with a
public symbol of the same module: `make docs` (warnings as errors) fails on a link to another
module's symbol or to an internal one, and it is too slow for `make test`.

    python3 scripts/docs/check_public_docs.py [TARGET ...]      exit 1 when any summary is missing
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIBRARIES = ["FileKit", "Archive", "StorageFormat", "Transport", "ContentSync", "ContentPublishing", "StorageServer", "ItemCache", "ImageCache", "ImageCatalog", "SyncDaemon", "ProcessKit"]
# The targets `make docs` builds (Makefile DOC_TARGETS).
DOC_TARGETS = ["ContentSync", "ContentPublishing", "StorageFormat", "FileKit", "Transport", "StorageServer", "ItemCache", "ImageCache"]
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


DECL = re.compile(r"^\s*(?:@[\w.]+(?:\([^)]*\))?\s+)*((?:public|open|package|internal|private|fileprivate)\s+)?(?:(?:static|final|class|override|mutating|nonisolated|indirect|convenience|required|private\(set\)|internal\(set\)|fileprivate\(set\)|package\(set\))\s+)*(struct|class|enum|actor|protocol|func|init\??|var|let|typealias|subscript|case|extension)\b\s*([A-Za-z_][A-Za-z0-9_]*)?")
LINK = re.compile(r"``([^`]+)``")

def public_names(target):
    """The names a link in `target`'s reference can start with: its public declarations, its
    public protocols' members and its public enums' cases."""
    names = set()
    for path in (ROOT / "Sources" / target).rglob("*.swift"):
        stack = []  # public-scope flags per open brace: True if members are public by default (protocol) or the decl is public
        for line in path.read_text().split("\n"):
            code = line.split("//")[0]
            m = DECL.match(code)
            in_public_protocol = any(kind == "protocol-public" for kind in stack)
            in_public_enum = any(kind == "enum-public" for kind in stack)
            opened = None
            if m:
                access, kind, name = m.group(1), m.group(2), m.group(3)
                public = bool(access) and access.strip() in ("public", "open")
                if kind == "case" and in_public_enum:
                    for c in re.findall(r"(?:case|,)\s*([A-Za-z_]\w*)", code):
                        names.add(c)
                elif public or (in_public_protocol and kind not in ("extension",)):
                    if kind.startswith("init"): names.add("init")
                    elif kind == "subscript": names.add("subscript")
                    elif name: names.add(name)
                if kind == "protocol" and public: opened = "protocol-public"
                elif kind == "enum" and public: opened = "enum-public"
                elif kind == "extension": opened = "extension"
                else: opened = "other"
            for ch in code:
                if ch == "{":
                    stack.append(opened or "other"); opened = None
                elif ch == "}" and stack:
                    stack.pop()
    return names

def documented_lines(path):
    """The `///` lines whose declaration DocC shows: public or open, a public protocol's member,
    a public enum's case."""
    lines = path.read_text().split("\n")
    stack, shown, block = [], [], []
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        code = line.split("//")[0]
        if stripped.startswith("///"):
            block.append((number, line)); continue
        if stripped.startswith("@") and block:
            continue
        m = DECL.match(code)
        if m and block:
            access, kind = m.group(1), m.group(2)
            public = bool(access) and access.strip() in ("public", "open")
            in_protocol = bool(stack) and stack[-1] == "protocol-public"
            in_enum = bool(stack) and stack[-1] == "enum-public"
            in_ext = bool(stack) and stack[-1] == "extension-public"
            if public or (in_protocol and not access) or (in_enum and kind == "case"):
                shown.extend(block)
        block = []
        opened = None
        if m:
            access, kind = m.group(1), m.group(2)
            public = bool(access) and access.strip() in ("public", "open")
            opened = {"protocol": "protocol-public", "enum": "enum-public"}.get(kind) if public else None
        for ch in code:
            if ch == "{":
                stack.append(opened or "other"); opened = None
            elif ch == "}" and stack:
                stack.pop()
    return shown



def broken_links(target):
    """The ``links`` in `target`'s shown doc comments whose first name is no public symbol of it."""
    names = public_names(target)
    found = []
    for path in sorted((ROOT / "Sources" / target).rglob("*.swift")):
        for number, line in documented_lines(path):
            for link in LINK.findall(line):
                if link.startswith("doc:"):
                    continue
                first = re.split(r"[/(.<\-]", link, 1)[0].strip()
                if first and first not in names:
                    found.append((path, number, link, first))
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
    links = 0
    for target in [t for t in (targets or DOC_TARGETS) if t in DOC_TARGETS]:
        for path, number, link, first in broken_links(target):
            links += 1
            print(f"{path.relative_to(ROOT)}:{number}: ``{link}``: {first} is no public symbol of {target}; "
                  f"write it in code voice (`{link}`), or link a public one")
    if links:
        print(f"check_public_docs: {links} link(s) that `make docs` refuses")
        return 1
    print("check_public_docs: every public symbol has a /// summary, and their links resolve in their module")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
