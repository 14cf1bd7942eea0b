#!/usr/bin/env bash
# The example app manifest (Examples/App/Package.swift, whose lines the README shows) compiles,
# and every content-sync product it depends on is a product of this package.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
SWIFT=${SWIFT:-swift}
app=$("$SWIFT" package dump-package --package-path "$REPO/Examples/App")
ours=$("$SWIFT" package dump-package --package-path "$REPO")
python3 - "$app" "$ours" <<'PY'
import json, sys
app, ours = json.loads(sys.argv[1]), json.loads(sys.argv[2])
products = {product["name"] for product in ours["products"]}
wanted = []
for target in app["targets"]:
    for dependency in target.get("dependencies", []):
        if "product" in dependency and dependency["product"][1] == "content-sync":
            wanted.append(dependency["product"][0])
unknown = [name for name in wanted if name not in products]
if not wanted or unknown:
    print(f"check_manifest: Examples/App/Package.swift names {unknown or 'no'} content-sync product(s) that do not exist; products are {sorted(products)}")
    sys.exit(1)
print(f"check_manifest: the example manifest compiles and its products exist: {', '.join(wanted)}")
PY
