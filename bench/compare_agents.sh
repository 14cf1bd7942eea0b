#!/usr/bin/env bash
# Compare two sync-agent binaries (say, before and after a change) on S1 full restore and S2 replay,
# on tmpfs, in the same session, alternating them round by round.
#
#   bash bench/compare_agents.sh BEFORE_AGENT AFTER_AGENT
#
# It reuses the other benchmarks' pieces: nginx on loopback with an access log (bench/nginx.sh),
# the storages of bench/make_storage.py and bench/scenarios.py (S1 is a restore of the
# make_storage.py storage that is also S2's version 1.0; S2's storage is published by BEFORE with
# `sync-agent publish`), and scenarios.py's Bench: timed runs under GNU time with the requests read
# from the access log, identical S2 clients hard-linked from a prepared one, and the check of every
# output tree (sha256 of every file, folder list, empty staging folder) after every run. The order of
# the agents cycles through all their permutations, round by round. A second GNU time around each
# sync-agent records its CPU time (user + system), steadier than wall time on a shared machine.
#
# Report (stdout, and BENCH_DOC's section COMPARE_HEADING, replaced whole if present): per scenario
# and agent the median wall time, min-max, spread, median ÷ before's median, the run-by-run ratios
# (same round), CPU time; a verdict per scenario with a 95 % bootstrap interval of after ÷ before
# (rounds resampled), a sign test, and the same figures for before against itself.
#
# The agents in each round: "before", "after" and, with SELF_CHECK=1 (default), "before (again)":
# the BEFORE binary a second time under another name, so the table shows how far two runs of the
# same binary drift apart in this session (the noise an after/before ratio must be judged against).
# Each agent replays S2 from a client it restored itself (its own state database).
#
# Environment (all optional):
#   RUNS=12 WARMUP=1          counted rounds and uncounted warm-up rounds per scenario (a multiple of 6
#                             with SELF_CHECK=1, of 2 without, gives every order of the agents equally often)
#   SCENARIOS=s1,s2           which to run
#   BASE_FILES=5000 BASE_MB=200   the make_storage.py content (S1's storage, S2's version 1.0)
#   SELF_CHECK=1              0 leaves out "before (again)"
#   BENCH_TMPFS=/dev/shm      where the runs happen (must be a tmpfs)
#   BENCH_WORK=/tmp/content-sync-compare   work folder: storages (kept and reused), nginx files
#   BENCH_DOC=""              markdown file to write the section into ("" = print only); e.g.
#                             docs/benchmarks.md with COMPARE_HEADING="## Restructure (issue 10): before and after"
#   COMPARE_HEADING="## Agent comparison (bench/compare_agents.sh)"   the section's heading
#   KEEP_RUNS=1               keep the tmpfs run folder
# The raw results stay in $BENCH_WORK/compare/scenario-results.jsonl.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: bash bench/compare_agents.sh BEFORE_AGENT AFTER_AGENT" >&2
  exit 2
fi
BEFORE=$(realpath "$1")
AFTER=$(realpath "$2")
for a in "$BEFORE" "$AFTER"; do
  [ -x "$a" ] || { echo "compare_agents.sh: $a is not an executable" >&2; exit 2; }
done
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${BENCH_WORK:-/tmp/content-sync-compare}/compare
export RUNS=${RUNS:-12} WARMUP=${WARMUP:-1} SCENARIOS=${SCENARIOS:-s1,s2} BASE_FILES=${BASE_FILES:-5000} \
  BASE_MB=${BASE_MB:-200} SELF_CHECK=${SELF_CHECK:-1} BENCH_TMPFS=${BENCH_TMPFS:-/dev/shm} \
  BENCH_DOC=${BENCH_DOC:-} COMPARE_HEADING=${COMPARE_HEADING:-"## Agent comparison (bench/compare_agents.sh)"} \
  KEEP_RUNS=${KEEP_RUNS:-0}
export COMMAND_LINE="RUNS=$RUNS WARMUP=$WARMUP SCENARIOS=$SCENARIOS BASE_FILES=$BASE_FILES BASE_MB=$BASE_MB SELF_CHECK=$SELF_CHECK bash bench/compare_agents.sh $BEFORE $AFTER"
export BEFORE AFTER REPO WORK

. "$REPO/bench/nginx.sh"   # bench_require_packages, nginx_start, nginx_stop
bench_require_packages nginx time python3 curl

mkdir -p "$WORK/www" "$WORK/nginx"
ACCESS_LOG="$WORK/nginx/access.log"
: > "$ACCESS_LOG"
trap nginx_stop EXIT
trap 'exit 130' INT TERM
nginx_start "$WORK/nginx" "$WORK/www" "$ACCESS_LOG"
export PORT=$NGINX_PORT ACCESS_LOG NGINX_BIN=$(nginx_binary)   # not $NGINX: nginx reads that variable

python3 - <<'PY'
import argparse, datetime, itertools, math, os, random, re, shutil, statistics, subprocess, sys, time
from pathlib import Path

env = os.environ
sys.path.insert(0, str(Path(env["REPO"]) / "bench"))
import report      # noqa: E402  (summary, machine_line, binary_line, replace_section, fs_type)
import scenarios as sc   # noqa: E402  (Bench, listing, swap_symlink, group, Result)


def log(msg):
    print(f"[compare_agents {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


BEFORE, AFTER = env["BEFORE"], env["AFTER"]
AGENTS = {"before": BEFORE, "after": AFTER, "before (again)": BEFORE}
TOOLS = ["before", "after"] + (["before (again)"] if env["SELF_CHECK"] == "1" else [])
b = sc.Bench(argparse.Namespace(agent=BEFORE, work=env["WORK"], port=int(env["PORT"]), access_log=env["ACCESS_LOG"]))
b.results_path.write_text("")
tmpfs = Path(env["BENCH_TMPFS"])
if report.fs_type(str(tmpfs)) != "tmpfs":
    sc.die(f"{tmpfs} is not a tmpfs (set BENCH_TMPFS)")
FS = f"tmpfs ({tmpfs})"
root = tmpfs / f"content-sync-compare-{b.stamp}"
root.mkdir(parents=True)
scen = env["SCENARIOS"].split(",")
loads = {}
started = datetime.datetime.now(datetime.timezone.utc)


def built_from(agent):
    """binary_line for the git work tree the binary was built in (its folder may be inside .build)."""
    top = report.sh("git", "-C", str(Path(agent).parent), "rev-parse", "--show-toplevel") or str(Path(agent).parent)
    return report.binary_line(top, agent)


def agent_cmd(agent, url, folder, cpu_file):
    """The timed command: sync-agent under a second GNU time that records its own CPU time (user, system)."""
    return ["/usr/bin/time", "-f", "%U %S", "-o", str(cpu_file),
            agent, "sync", "--base-url", url, "--dir", str(folder / "content"), "--state", str(folder / "state.sqlite")]


CPU = {}   # (scenario, tool, run) -> user + system seconds of sync-agent


def timed_agent(scenario, tool, i, folder, url, prefix):
    cpu_file = folder.parent / f".cpu-{scenario}-{re.sub(r'[^a-z0-9]+', '-', tool)}-{i}.txt"
    b.timed(scenario, FS, tool, i, folder, agent_cmd(AGENTS[tool], url, folder, cpu_file), content_prefix=prefix)
    user, system = map(float, cpu_file.read_text().split()[-2:])
    cpu_file.unlink()
    CPU[(scenario, tool, i)] = user + system


def rounds(root):
    """Like Bench.rounds, but the order of the agents cycles through all their permutations (with three agents a
    plain rotation would always run each one right after the same other one)."""
    orders = list(itertools.permutations(TOOLS))
    for i in range(1 - b.warmup, b.runs + 1):
        for tool in orders[(i - 1) % len(orders)]:
            d = root / f"{re.sub(r'[^a-z0-9]+', '-', tool).strip('-')}-{i}"
            d.mkdir()
            yield i, tool, d


try:
    if "s1" in scen:
        gen = b.base_content().parent          # the make_storage.py storage: status, update list, zip
        sc.swap_symlink(b.www / "s1", gen)
        expected = sc.listing(gen / "RXCacheContent")
        s1 = root / "s1"
        s1.mkdir()
        log(f"S1: restore of {gen} ({sum(1 for v in expected.values() if v != 'dir')} files) into fresh folders on {FS}")
        loads["S1"] = [os.getloadavg()[0]]
        for i, tool, d in rounds(s1):
            timed_agent("S1", tool, i, d, b.url("s1"), "/s1/RXCacheContent")
            b.check_agent(tool, d, expected)
            shutil.rmtree(d)
        loads["S1"].append(os.getloadavg()[0])
    if "s2" in scen:
        old, final, _ = b.s2_storage()         # published by BEFORE (b.agent)
        expected = sc.listing(final / "RXCacheContent")
        slot = root / "slot-s2"                # one path for every client: the state database names it
        pristine = {}
        for label, agent in (("before", BEFORE), ("after", AFTER)):
            pristine[label] = root / f"pristine-s2-{label}"
            b.agent = agent                    # prepare_client restores 1.0 with b.agent
            b.prepare_client("s2", old, final, slot, pristine[label],
                             {"publisher": b.agent_sha, "agent": sc.sha256(Path(agent))[:16],
                              "files": b.base_files, "mb": b.base_mb})
        b.agent = BEFORE
        pristine["before (again)"] = pristine["before"]
        s2 = root / "s2"
        s2.mkdir()
        log(f"S2: replay 1.0 -> 1.1 on {FS}, clients prepared by each agent")
        loads["S2"] = [os.getloadavg()[0]]
        for i, tool, d in rounds(s2):
            d.rmdir()
            b.restore_slot(pristine[tool], slot)
            timed_agent("S2", tool, i, slot, b.url("s2"), "/s2/RXCacheContent/")
            b.check_agent(tool, slot, expected)
            shutil.rmtree(slot)
        loads["S2"].append(os.getloadavg()[0])
finally:
    if env["KEEP_RUNS"] != "1":
        shutil.rmtree(root, ignore_errors=True)

# ---------------------------------------------------------------- report


def pct(x):
    return f"{x * 100:+.1f} %"


def sign_p(ratios):
    """Two-sided sign test: how likely so lopsided a count of slower rounds is if either agent is as likely to win."""
    n, k = len(ratios), sum(p > 1 for p in ratios)
    k = min(k, n - k)
    return min(1.0, 2 * sum(math.comb(n, j) for j in range(k + 1)) / 2 ** n) if n else 1.0


def boot_interval(base, other, n=4000):
    """95 % bootstrap interval of median(other) / median(base), resampling whole rounds (pairs stay together)."""
    runs = sorted(set(base) & set(other))
    rng = random.Random(2026)
    stats = []
    for _ in range(n):
        pick = [rng.choice(runs) for _ in runs]
        stats.append(statistics.median(other[i] for i in pick) / statistics.median(base[i] for i in pick))
    stats.sort()
    return stats[int(0.025 * n)], stats[int(0.975 * n) - 1]


def compare(base, other):
    """base, other: {round: value}. -> ratio of medians, run-by-run ratios, 95 % interval, rounds other > base."""
    pairs = [other[i] / base[i] for i in sorted(set(base) & set(other))]
    r = statistics.median(other.values()) / statistics.median(base.values())
    return r, pairs, boot_interval(base, other), sum(p > 1 for p in pairs)


def describe(r, pairs, interval, slower):
    return (f"{r:.3f}× on the medians (95 % interval {interval[0]:.3f}–{interval[1]:.3f}×), run by run median "
            f"{statistics.median(pairs):.3f}× ({min(pairs):.2f}–{max(pairs):.2f}×), slower in {slower} of {len(pairs)} "
            f"rounds (sign test p = {sign_p(pairs):.2f})")


lines = ["| scenario | agent | runs | median wall (s) | min–max (s) | spread (max−min) ÷ median | median ÷ before median "
         "| run-by-run ÷ before (same round) | slower than before in | median CPU user+sys (s) | CPU median ÷ before "
         "| median peak RSS (MiB) | requests |",
         "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
verdicts, details = [], []
for scenario in ("S1", "S2"):
    g = sc.group(b.results, scenario)
    if not g:
        continue
    wall = {t: {r.run: r.wall for r in g[(FS, t)]} for t in TOOLS}
    cpu = {t: {r.run: CPU[(scenario, t, r.run)] for r in g[(FS, t)]} for t in TOOLS}
    bmed = statistics.median(wall["before"].values())
    bcpu = statistics.median(cpu["before"].values())
    for tool in TOOLS:
        rs = g[(FS, tool)]
        med, lo, hi = report.summary(list(wall[tool].values()))
        cmed = statistics.median(cpu[tool].values())
        reqs = "–".join(sorted({str(r.requests) for r in rs}))
        if tool == "before":
            rel, rbr, slower, crel = "1.000×", "–", "–", "1.000×"
        else:
            r, ps, _, k = compare(wall["before"], wall[tool])
            rel = f"**{r:.3f}×**"
            rbr = f"{', '.join(f'{p:.2f}' for p in ps)} (median **{statistics.median(ps):.3f}×**, {min(ps):.2f}–{max(ps):.2f}×)"
            slower = f"{k} of {len(ps)} rounds"
            crel = f"{cmed / bcpu:.3f}×"
        lines.append(f"| {scenario} | {tool} | {len(rs)} | {med:.3f} | {lo:.3f}–{hi:.3f} | {(hi - lo) / med * 100:.0f} % "
                     f"| {rel} | {rbr} | {slower} | {cmed:.3f} | {crel} "
                     f"| {statistics.median(r.rss_kb for r in rs) / 1024:.1f} | {reqs} |")
    wa = compare(wall["before"], wall["after"])
    ca = compare(cpu["before"], cpu["after"])
    blo, bhi = min(wall["before"].values()) / bmed, max(wall["before"].values()) / bmed
    within = wa[2][0] <= 1 <= wa[2][1]
    if "before (again)" in TOOLS:   # or no further from 1 than the same binary was from itself
        within = within or abs(wa[0] - 1) <= abs(compare(wall["before"], wall["before (again)"])[0] - 1)
    text = (f"- **{scenario}: {'within noise' if within else 'beyond noise'}.** after ÷ before, wall time: "
            f"**{describe(*wa)}**; {pct(wa[0] - 1)} on the medians. CPU time (user + system): {describe(*ca)}. ")
    if "before (again)" in TOOLS:
        text += (f"For scale, the same binary against itself (\"before (again)\" ÷ before), wall time: "
                 f"{describe(*compare(wall['before'], wall['before (again)']))}; CPU time: "
                 f"{describe(*compare(cpu['before'], cpu['before (again)']))}. ")
    verdicts.append(text + f"Before's own wall times lie at {blo:.2f}–{bhi:.2f}× its median.")
    if scenario in loads:
        details.append(f"{scenario}: 1-minute load average {loads[scenario][0]:.2f} at the start of the pass, "
                       f"{loads[scenario][1]:.2f} at its end")

machine = report.machine_line(env["WORK"], [("nginx", [env.get("NGINX_BIN", "nginx"), "-v"])])
heading = env["COMPARE_HEADING"]
text = [heading, "",
        f"Measured {started.strftime('%Y-%m-%d %H:%M')} UTC by `bench/compare_agents.sh`.", "",
        f"- **before**: {built_from(BEFORE)}.",
        f"- **after**: {built_from(AFTER)}.", "",
        f"**Machine.** {machine}; runs on {FS}.", "",
        f"**Command.** `{env['COMMAND_LINE']}`", "",
        "**Method.** One nginx on loopback (`bench/nginx.sh`, `sendfile on`, access log on) serves both storages. "
        f"S1 = `sync-agent sync` restoring the `make_storage.py --files {b.base_files} --mb {b.base_mb:g}` storage "
        "(status file + zip) into a fresh folder on tmpfs. S2 = the S2 storage of `bench/scenarios.py` (published by "
        "the before binary: 1.0 = the same content, 1.1 adds 2,000 × 4 KiB + 100 × 1 MiB), each run replaying 1.0 → 1.1 "
        "from an identical client (content hard-linked from a client that agent restored itself, state file copied, "
        "untimed). "
        f"{b.warmup} uncounted warm-up round(s), then {b.runs} counted rounds per scenario; every agent runs once per "
        "round, the order cycling through every permutation of the agents. \"before (again)\" is the before binary run a second time under "
        "another name, to show the session's noise. Every run's tree is checked (sha256 of every file, folder list, "
        "empty staging folder); wall time from the run's start to its exit, peak RSS from GNU time, CPU time (user + system) of sync-agent from a second GNU time around it, requests from "
        "nginx's access log. " + ("; ".join(details) + "." if details else ""), "",
        *lines, "", "**Verdict** on wall time. Within noise = the 95 % interval of after ÷ before (ratio of medians, bootstrap "
        "over whole rounds, 4,000 resamples) contains 1, or after ÷ before is no further from 1 than \"before (again)\" "
        "÷ before, two identical binaries, in this session:", *verdicts, ""]
out = "\n".join(text)
print("\n" + out)
if env["BENCH_DOC"]:
    report.replace_section(env["BENCH_DOC"], heading, out)
    log(f"section {heading!r} written to {env['BENCH_DOC']}")
PY

nginx_stop
trap - EXIT
rm -f "$ACCESS_LOG"
