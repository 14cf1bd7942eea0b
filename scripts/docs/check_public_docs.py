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

def shown_declarations(path):
    """Each declaration of `path` that DocC shows (public or open, a member of a public protocol,
    a case of a public enum): the names it declares and the `///` lines above it, numbered."""
    stack, block = [], []
    for number, line in enumerate(path.read_text().split("\n"), 1):
        stripped = line.strip()
        if stripped.startswith("///"):
            block.append((number, line))
            continue
        code = line.split("//")[0]
        match = DECL.match(code)
        if stripped.startswith("@") and block and not match:
            continue  # an attribute on a line of its own: the declaration follows
        opened = None
        if match:
            access, kind, name = match.group(1), match.group(2), match.group(3)
            public = bool(access) and access.strip() in ("public", "open")
            parent = stack[-1] if stack else None
            if kind != "extension" and (public or (parent == "protocol" and not access) or (parent == "enum" and kind == "case")):
                if kind == "case":
                    names = re.findall(r"(?:case|,)\s*([A-Za-z_]\w*)", code)
                elif kind.startswith("init"):
                    names = ["init"]
                elif kind == "subscript":
                    names = ["subscript"]
                else:
                    names = [name] if name else []
                yield names, block
            if public and kind in ("protocol", "enum"):
                opened = kind
        block = []
        for character in code:
            if character == "{":
                stack.append(opened or "other")
                opened = None
            elif character == "}" and stack:
                stack.pop()


def broken_links(target):
    """The ``links`` in `target`'s shown doc comments whose first name is no public symbol of it."""
    paths = sorted((ROOT / "Sources" / target).rglob("*.swift"))
    # The names a link may start with: what the module's reference shows.
    names = {name for path in paths for declared, _ in shown_declarations(path) for name in declared}
    found = []
    for path in paths:
        for _, block in shown_declarations(path):
            for number, line in block:
                for link in LINK.findall(line):
                    first = re.split(r"[/(.<\-]", link, 1)[0].strip()
                    if not link.startswith("doc:") and first and first not in names:
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
