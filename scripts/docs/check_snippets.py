#!/usr/bin/env python3
"""Every Swift example in the README and the DocC catalogs is code that `make test` compiles.

A fenced ```swift block in README.md or in Sources/*/*.docc/**/*.md must be preceded by a
marker naming where its code lives:

    <!-- snippet: Tests/DocumentationExamples/QuickStart.swift#quick-start -->
    ```swift
    ...
    ```

and the file must hold the same lines between `// snippet:begin quick-start` and
`// snippet:end quick-start` (compared after removing their common indentation). The examples
live in the DocumentationExamples test target, which `make test` builds and runs; a manifest
snippet lives in Examples/App/Package.swift, which `make test` loads with `swift package
dump-package`. A block without a marker, a marker without its region, or a block that differs
from its region fails the check.

    python3 scripts/docs/check_snippets.py           check (exit 1 on any finding)
    python3 scripts/docs/check_snippets.py --write   rewrite the documents' blocks from the code
"""
import pathlib
import re
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- snippet: (?P<file>[^#\s]+)#(?P<region>[\w-]+) -->$")


def documents():
    yield ROOT / "README.md"
    for catalog in sorted((ROOT / "Sources").glob("*/*.docc")):
        yield from sorted(catalog.rglob("*.md"))


def region(file, name):
    path = ROOT / file
    if not path.exists():
        raise LookupError(f"{file} does not exist")
    lines = path.read_text().split("\n")
    begin = [i for i, line in enumerate(lines) if line.strip() == f"// snippet:begin {name}"]
    end = [i for i, line in enumerate(lines) if line.strip() == f"// snippet:end {name}"]
    if len(begin) != 1 or len(end) != 1 or end[0] <= begin[0]:
        raise LookupError(f"{file} has no single region '{name}' (// snippet:begin {name} … // snippet:end {name})")
    body = [line for line in lines[begin[0] + 1:end[0]] if not line.strip().startswith("// snippet:")]
    return textwrap.dedent("\n".join(body)).strip("\n")


def check(write):
    findings = []
    blocks = 0
    for document in documents():
        lines = document.read_text().split("\n")
        output = []
        index = 0
        while index < len(lines):
            line = lines[index]
            output.append(line)
            if line.strip() != "```swift":
                index += 1
                continue
            close = next((j for j in range(index + 1, len(lines)) if lines[j].strip() == "```"), None)
            if close is None:
                findings.append(f"{document.relative_to(ROOT)}:{index + 1}: a ```swift block that never closes")
                break
            blocks += 1
            previous = next((lines[j] for j in range(index - 1, -1, -1) if lines[j].strip()), "")
            marker = MARKER.match(previous.strip())
            body = "\n".join(lines[index + 1:close])
            if not marker:
                findings.append(f"{document.relative_to(ROOT)}:{index + 1}: a Swift example without a "
                                "<!-- snippet: FILE#REGION --> marker; move its code into a compiled file and name the region")
                output.extend(lines[index + 1:close + 1])
            else:
                try:
                    code = region(marker["file"], marker["region"])
                except LookupError as error:
                    findings.append(f"{document.relative_to(ROOT)}:{index + 1}: {error}")
                    code = None
                if code is not None and textwrap.dedent(body).strip("\n") != code:
                    if write:
                        output.extend(code.split("\n"))
                        output.append("```")
                        index = close + 1
                        continue
                    findings.append(f"{document.relative_to(ROOT)}:{index + 1}: the example differs from "
                                    f"{marker['file']}#{marker['region']}; run python3 scripts/docs/check_snippets.py --write")
                output.extend(lines[index + 1:close + 1])
            index = close + 1
        if write:
            document.write_text("\n".join(output))
    # Doc comments show no Swift of their own: it could not be checked. They point to the guide.
    for source in sorted((ROOT / "Sources").rglob("*.swift")):
        for number, line in enumerate(source.read_text().split("\n"), 1):
            if line.strip() == "/// ```swift":
                findings.append(f"{source.relative_to(ROOT)}:{number}: a code block in a doc comment; "
                                "move the example into DocumentationExamples and link the article instead")
                break
    for finding in findings:
        print(finding)
    if findings:
        print(f"check_snippets: {len(findings)} problem(s) in {blocks} Swift example(s)")
        return 1
    print(f"check_snippets: all {blocks} Swift examples are compiled code")
    return 0


if __name__ == "__main__":
    sys.exit(check("--write" in sys.argv[1:]))
