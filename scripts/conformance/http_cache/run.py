#!/usr/bin/env python3
"""Run the RFC 9110/9111/5861 conformance cases against sync-agent.

    python3 scripts/conformance/http_cache/run.py            # all cases (make conformance-http)
    python3 scripts/conformance/http_cache/run.py vary/ -j 8 # cases whose name contains 'vary/'
SYNC_AGENT names the binary (default .build/debug/sync-agent). Writes results.json and
results.md into the run's work folder (CONFORMANCE_WORK, else a fresh temporary one); exit 1 if
any FAIL."""
import argparse, json, os, sys, time, shutil
from concurrent.futures import ThreadPoolExecutor
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness, cases_basic, cases_adv, cases_hostile  # noqa: registers cases
from origin import Origin

ap = argparse.ArgumentParser()
ap.add_argument("filter", nargs="*")
ap.add_argument("-j", type=int, default=24)
a = ap.parse_args()
cases = [c for c in harness.CASES if not a.filter or any(f in c["name"] for f in a.filter)]
names = [c["name"] for c in harness.CASES]
dups = {n for n in names if names.count(n) > 1}
assert not dups, dups
os.makedirs(harness.CACHES, exist_ok=True)
origin = Origin()
t0 = time.time()
with ThreadPoolExecutor(a.j) as ex:
    results = list(ex.map(lambda c: harness.run_case(origin, c), cases))
el = time.time() - t0
out = harness.ROOT
json.dump(results, open(os.path.join(out, "results.json"), "w"), indent=1)
with open(os.path.join(out, "results.md"), "w") as f:
    f.write("| # | case | level | RFC | expected | observed | verdict |\n|---|---|---|---|---|---|---|\n")
    for i, r in enumerate(results, 1):
        f.write("| %d | %s | %s | %s | %s | %s | %s |\n" % (i, r["name"], r["level"], r["section"], r["expected"],
                r["observed"].replace("|", "\\|").replace("\n", " ")[:400], r["verdict"]))
counts = {}
for r in results:
    counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
for r in results:
    if r["verdict"] != "PASS":
        print("%-9s %-60s %s" % (r["verdict"], r["name"], r["observed"][:300]))
print("\n%d cases in %.0fs: %s (results in %s)" % (len(results), el, counts, out))
sys.exit(1 if counts.get("FAIL") else 0)
