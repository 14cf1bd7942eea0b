#!/usr/bin/env python3
"""Item cache kill loop: `kill -9` of cache writers and readers sharing one folder, then checks.

    python3 scripts/chaos/cache_kill_loop.py --chaos PATH/TO/cache-chaos [--iterations 200] [--seed S]
                                             [--profile full|short] [--write-docs] [--work DIR] [--keep]

Several `cache-chaos` processes share one cache folder. Its disk limit alternates, one verify cycle
each: a small limit, so eviction runs on nearly every write, then a roomy one, so no eviction can
happen (see "Evictions" below):
- w0 stores one value at a time (`store`, `storeNow`, some `update`s and removes);
- w1 uses group writes (a group every 20 items or 0.25 s);
- w2 stores from 3 tasks at once (concurrent file writes in one process);
- r0, r1 read random keys of every writer (synchronous and async paths, a 1 MiB memory tier so
  most reads go to disk) and exit 2 on the first value that is not whole ("TORN").
Values are self-verifying (key, generation, SHA-256 of the payload), both inline (≤ 16 KiB) and
files up to 1 MiB. Each writer prints what is durable: every store that returned, or a group once
flushed, and every remove.

Each iteration sleeps a random moment, SIGKILLs one process picked at random (seeded: the seed is
printed; --seed replays the same choices and delays), and restarts it (a restart opens the cache,
which reconciles). Every few iterations (and after the last) it SIGKILLs all of them and runs
`cache-chaos verify` on the quiet folder, which opens it (reconciling what the kills left: the
"orphans reconciled") and then checks with its own reading of index.sqlite and blobs/:
- every value whole and under its own key (no torn value), SQLite's integrity check;
- every row's file present with the row's size, every file named by a row (after reconciliation:
  0 unreconciled orphans), and no row whose file a kill could have lost (opening removed 0 rows);
- the stats row equal to the rows' sum, and the total within the limit;
- each writer's durable lines: a key's last committed generation is on disk (or, in a cycle where
  eviction can happen, the key was evicted), never an older generation; a removed key never comes
  back with a value from before. A key whose remove a kill interrupted ("removing" without
  "removed") may be there or gone.
Processes that exit by themselves (a reader's TORN, a writer's error) are failures too.

Evictions: a committed key that is missing is a lost store unless eviction could have removed it.
The disk tier evicts only when its rows cost more than the limit's row budget (DiskTier+Footprint:
a value's bytes, a file's rounded up to 4 KiB blocks, plus 256 bytes a row; the budget is the limit
less the log's and the folder's reserve; there is no count limit). The writers keep at most one
value per key, each at most 1 MiB, so when writers x keys such rows fit the budget no eviction can
happen (`can_evict`). A cycle whose limit can evict verifies with `--evictions allowed` on every
line so far; a cycle whose limit cannot verifies with `--evictions none` on the lines of the runs
since the last cycle that could evict (a key evicted before then is not expected back), so a
committed store that is lost fails the loop.

--known-issue ID reports the symptom of a known, not yet fixed, bug (KNOWN_ISSUES) as a note
instead of a failure; the counts still show it.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chaoslib as lib  # noqa: E402

# Bugs this loop found, and their symptoms. --known-issue ID turns a symptom into a note while a
# fix is pending; both are fixed (commit b1eaf0c), and the loop still watches for them.
KNOWN_ISSUES = {
    "shared-write-window": "two file writes of one process share its lock file's write window (one open file "
                           "description): the first to commit releases it for both, and another process's "
                           "reconciliation can unlink the second's linked, uncommitted file; the second then commits "
                           "a row without its file, a store that returned is lost, and the next open removes the row "
                           "(seen as orphan rows; ReconciliationRaceTests reproduces it in a second). Fixed: RangeLockFile "
                           "counts each thread's hold",
    "remove-during-group-write": "a remove does not wait for a group write under way: when the group commits after "
                                 "the remove, the removed item is stored again (seen as a removed key back with a value "
                                 "from before; RemoveDuringGroupWriteTests reproduces it every time). Fixed: a remove or "
                                 "storeNow of a pending key waits for the group write under way",
}

PROFILES = {
    # disk limit of the evicting cycles, keys per writer, kills between verifies, delay before each
    # kill (s); every other verify cycle runs with roomy_limit() instead, where nothing can be evicted
    "short": dict(limit=16 * lib.MIB, keys=200, verify_every=4, delay=(0.15, 0.8)),
    "full": dict(limit=24 * lib.MIB, keys=300, verify_every=5, delay=(0.05, 1.5)),
}
WRITERS = 3
# What the disk tier keeps before it evicts (Sources/ItemCache/Disk/DiskTier+Footprint.swift): each
# row costs its value (a file's rounded up to 4 KiB blocks) plus ROW_OVERHEAD, and eviction keeps
# that total within the limit less a reserve (twice the log's budget, 96 KiB, a block per shard folder).
ROW_OVERHEAD = 256
BLOCK = 4096
SHARD_FOLDERS = 256
MAX_VALUE = lib.MIB  # cache-chaos --sizes mixed: at most 1 MiB - 1 bytes, 256 blocks as a file


def row_budget(limit: int) -> int:
    wal_budget = min(16 * lib.MIB, max(16 * 1024, limit // 16))
    return limit - (2 * wal_budget + 96 * 1024 + SHARD_FOLDERS * BLOCK)


def can_evict(limit: int, keys: int) -> bool:
    """False when the most the writers can keep (one value per key, each at its largest) fits
    under `limit`: the disk tier then never evicts, and a committed key that is missing was lost."""
    return WRITERS * keys * (MAX_VALUE + ROW_OVERHEAD) > row_budget(limit)


def roomy_limit(keys: int) -> int:
    """The smallest whole-MiB limit under which the writers of `keys` keys each cannot evict."""
    limit = lib.MIB
    while can_evict(limit, keys):
        limit += lib.MIB
    return limit


class Role:
    """One writer or reader: its command line, its current process and its runs' output files."""

    def __init__(self, name: str, mode: str, args: list[str], work: Path):
        self.name, self.mode, self.args, self.work = name, mode, args, work
        self.proc: subprocess.Popen | None = None
        self.runs: list[Path] = []

    def start(self, chaos: str, seed: int, limit: int) -> None:
        epoch = len(self.runs)
        out = self.work / f"{self.name}.run{epoch:04d}.out"
        self.runs.append(out)
        extra = ["--epoch", str(epoch), "--limit", str(limit)] if self.mode == "writer" else []
        with open(out, "wb") as stdout, open(out.with_suffix(".err"), "wb") as stderr:
            self.proc = subprocess.Popen([chaos, self.mode] + self.args + ["--seed", str(seed)] + extra,
                                         stdout=stdout, stderr=stderr)

    def kill(self) -> int | None:
        """SIGKILLs the current process (by its PID) and waits; returns its exit code, or None when
        it had already ended by itself."""
        if self.proc is None:
            return None
        ended = self.proc.poll() is not None
        if not ended:
            self.proc.send_signal(signal.SIGKILL)
        code = self.proc.wait()
        self.proc = None
        return None if ended else code


class Suite:
    def __init__(self, args):
        self.args = args
        self.chaos = os.path.realpath(args.chaos)
        self.work = Path(args.work)
        self.p = PROFILES[args.profile]
        # The verify cycles' limits, in turn: the profile's (eviction on nearly every write) and
        # one under which nothing can be evicted (a lost committed store shows as missing).
        self.limits = [self.p["limit"], roomy_limit(self.p["keys"])]
        self.limit = self.limits[0]
        # Per writer, the first run since the last cycle whose limit could evict.
        self.no_eviction_since: dict[str, int] = {}
        self.roles: list[Role] = []
        self.failures: list[str] = []
        self.notes: list[str] = []
        self.totals = {"kills": 0, "random_kills": 0, "writer_kills": 0, "reader_kills": 0, "verifies": 0, "reads": 0, "values_read": 0,
                       "torn_reads": 0, "unexpected_exits": 0, "orphan_files_verify": 0, "orphan_files_restart": 0,
                       "orphan_rows": 0, "unreconciled_orphans": 0, "torn_stored": 0, "violations": 0,
                       "committed_checked": 0, "committed_present": 0, "evicted": 0, "pending_lost": 0,
                       "verifies_no_eviction": 0, "committed_checked_no_eviction": 0, "removed_in_flight": 0,
                       "rows_last": 0, "files_last": 0}

    def setup(self) -> None:
        if self.work.exists():
            shutil.rmtree(self.work)
        (self.work / "out").mkdir(parents=True)
        self.cache = self.work / "cache"
        out = self.work / "out"
        common = ["--cache", str(self.cache)]
        keys = ["--keys", str(self.p["keys"])]
        self.roles = [  # WRITERS writers: the writers' --limit is the cycle's (Role.start)
            Role("w0", "writer", common + keys + ["--id", "0"], out),
            Role("w1", "writer", common + keys + ["--id", "1", "--group-items", "20", "--group-seconds", "0.25"], out),
            Role("w2", "writer", common + keys + ["--id", "2", "--tasks", "3"], out),
            Role("r0", "reader", common + keys + ["--writers", "3"], out),
            Role("r1", "reader", common + keys + ["--writers", "3"], out),
        ]

    def start(self, role: Role) -> None:
        role.start(self.chaos, self.rng.randrange(1 << 31), self.limit)

    def start_cycle(self, cycle: int) -> None:
        """Sets the limit of verify cycle `cycle` (0, 1, ...) before its processes start."""
        self.limit = self.limits[cycle % len(self.limits)]
        if can_evict(self.limit, self.p["keys"]):
            self.no_eviction_since = {}
        elif not self.no_eviction_since:
            self.no_eviction_since = {role.name: len(role.runs) for role in self.roles if role.mode == "writer"}

    def collect(self, role: Role, killed: bool) -> None:
        """Reads what the run that just ended printed: its counts, a TORN line, repairs on open."""
        run = role.runs[-1]
        text = run.read_text(errors="replace")
        start = re.search(r"^start .*orphanFiles=(\d+) orphanRows=(\d+)$", text, re.M)
        if start:
            self.totals["orphan_files_restart"] += int(start.group(1))
            if int(start.group(2)):
                self.totals["orphan_rows"] += int(start.group(2))
                self.fail(f"{run.name}: opening removed {start.group(2)} rows whose file was missing or short",
                          issue="shared-write-window")
        reads = re.findall(r"^reads (\d+) hits (\d+)$", text, re.M)
        if reads:
            self.totals["reads"] += int(reads[-1][0])
            self.totals["values_read"] += int(reads[-1][1])
        for torn in re.findall(r"^TORN .*$", text, re.M):
            self.totals["torn_reads"] += 1
            self.fail(f"{run.name}: {torn}")
        if not killed:
            self.totals["unexpected_exits"] += 1
            err = run.with_suffix(".err").read_text(errors="replace").strip()
            self.fail(f"{run.name}: exited by itself before the kill: {err[-400:] or '(no stderr)'}")

    def fail(self, text: str, issue: str | None = None) -> None:
        if issue in self.args.known_issue:
            self.notes.append(f"[{issue}] {text}")
            print(f"      - known issue [{issue}]: {text}", flush=True)
            return
        self.failures.append(text)
        print(f"      - FAIL: {text}", flush=True)

    def kill(self, role: Role, random_pick: bool = False) -> None:
        code = role.kill()
        if code is not None:
            self.totals["kills"] += 1
            self.totals["random_kills"] += random_pick
            self.totals[f"{role.mode}_kills"] += 1
        self.collect(role, killed=code is not None)

    def verify(self, n: int) -> None:
        """All processes killed; `verify` on the quiet folder with the writers' lines: every line so
        far when this cycle's limit can evict (`--evictions allowed`), else the lines since the last
        cycle that could (`--evictions none`: every committed key must be on disk)."""
        evictions = "allowed" if can_evict(self.limit, self.p["keys"]) else "none"
        expect = []
        for role in self.roles:
            if role.mode == "writer":
                path = self.work / f"expect-{role.name}.txt"
                runs = role.runs[self.no_eviction_since[role.name]:] if evictions == "none" else role.runs
                path.write_text("".join(run.read_text(errors="replace") for run in runs))
                expect.append(str(path))
        result = subprocess.run([self.chaos, "verify", "--cache", str(self.cache), "--limit", str(self.limit),
                                 "--expect", ",".join(expect), "--evictions", evictions],
                                capture_output=True, text=True, timeout=300)
        self.totals["verifies"] += 1
        self.totals["verifies_no_eviction"] += evictions == "none"
        try:
            report = json.loads(result.stdout.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            self.fail(f"verify after iteration {n} exited {result.returncode} without a report: {result.stderr.strip()[-400:]}")
            return
        t = self.totals
        t["orphan_files_verify"] += report["orphanFilesReconciled"]
        t["orphan_rows"] += report["orphanRowsReconciled"]
        t["unreconciled_orphans"] += report["unreconciledOrphanFiles"] + report["rowsWithoutTheirFile"]
        t["torn_stored"] += report["tornValues"]
        e = report["expectations"]
        t["committed_checked"] += e["committed"]
        t["committed_present"] += e["committedPresent"]
        t["evicted"] += e["evicted"]
        t["pending_lost"] += e["pendingLost"]
        t["removed_in_flight"] += e["removedInFlight"]
        if evictions == "none":
            t["committed_checked_no_eviction"] += e["committed"]
        t["rows_last"], t["files_last"] = report["rows"], report["files"]
        print(f"  verify #{t['verifies']} after {n}: {report['rows']} rows ({report['fileRows']} files), "
              f"{report['bytes'] / lib.MIB:.1f} of {report['limit'] / lib.MIB:.0f} MiB; reconciled {report['orphanFilesReconciled']} "
              f"orphan files, {report['orphanRowsReconciled']} rows; committed keys {e['committedPresent']}/{e['committed']} "
              + (f"on disk ({e['evicted']} evicted)" if evictions == "allowed" else "on disk (no eviction possible)")
              + f", {e['pendingLost']}/{e['pendingAtEnd']} pending lost; "
              f"{report['violationCount']} violations" + ("  see below" if report["violationCount"] else "  ok"), flush=True)
        known = 0
        for violation in report["violations"]:
            issue = ("shared-write-window" if violation.startswith("opening removed")
                     else "remove-during-group-write" if "from before is on disk" in violation else None)
            known += issue in self.args.known_issue
            self.fail(f"verify after iteration {n}: {violation}", issue=issue)
        t["violations"] += report["violationCount"] - known
        if report["violationCount"] > known:
            keep = self.work / "failures" / f"verify-{n}"
            shutil.copytree(self.cache, keep)
            (keep / "report.json").write_text(json.dumps(report, indent=1))

    def run(self) -> int:
        args = self.args
        seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
        print(f"cache kill loop: seed {seed}, {args.iterations} kills, profile {args.profile}, limits "
              + " and ".join(f"{limit // lib.MIB} MiB (evictions {'allowed' if can_evict(limit, self.p['keys']) else 'none'})"
                             for limit in self.limits) + f" in turn, {self.chaos}", flush=True)
        self.rng = random.Random(seed)
        self.setup()
        started = time.monotonic()
        cycle = 0
        self.start_cycle(cycle)
        for role in self.roles:
            self.start(role)
        for n in range(1, args.iterations + 1):
            time.sleep(self.rng.uniform(*self.p["delay"]))
            for role in self.roles:  # anything that ended by itself is a failure; restart it
                if role.proc and role.proc.poll() is not None:
                    self.kill(role)
                    self.start(role)
            victim = self.rng.choice(self.roles)
            self.kill(victim, random_pick=True)
            self.start(victim)
            if n % self.p["verify_every"] == 0 or n == args.iterations:
                for role in self.roles:
                    self.kill(role)
                self.verify(n)
                cycle += 1
                self.start_cycle(cycle)
                if n < args.iterations:
                    for role in self.roles:
                        self.start(role)
        elapsed = time.monotonic() - started
        t = self.totals
        rows = [[f"{t['random_kills']} + {t['kills'] - t['random_kills']}", f"{t['writer_kills']} / {t['reader_kills']}", t["verifies"], t["reads"], t["values_read"],
                 t["torn_reads"], t["torn_stored"], f"{t['orphan_files_verify']} + {t['orphan_files_restart']}", t["orphan_rows"],
                 t["unreconciled_orphans"], f"{t['committed_present']} / {t['committed_checked']}", t["violations"],
                 t["unexpected_exits"]]]
        header = ["SIGKILLs (random + before verifies)", "writers / readers", "verifies", "reads", "values read and checked", "torn reads",
                  "torn values stored", "orphan files reconciled (verify + restarts)", "orphan rows",
                  "unreconciled orphans", "committed keys on disk / checked", "violations", "unexpected exits"]
        print()
        lib.print_table([[str(c) for c in row] for row in rows], header)
        print(f"\nseed {seed}: {t['kills']} SIGKILLs ({t['random_kills']} random), {t['verifies']} verifies in {elapsed:.0f} s, "
              f"{len(self.failures)} failures" + (f", {len(self.notes)} known-issue notes" if self.notes else "")
              + f"; {t['verifies_no_eviction']} verifies with no eviction possible "
              f"({self.limits[1] // lib.MIB} MiB limit) checked {t['committed_checked_no_eviction']} committed keys", flush=True)
        (self.work / "totals.json").write_text(json.dumps(dict(t, seed=seed, seconds=round(elapsed, 1),
                                                               failures=self.failures, notes=self.notes), indent=1))
        if args.write_docs:
            lib.write_doc_section("cachekill", doc_section(rows, header, seed, self, elapsed))
        if not args.keep:
            shutil.rmtree(self.cache, ignore_errors=True)
        return 1 if self.failures else 0


def doc_section(rows, header, seed, suite, elapsed) -> str:
    args, p, t = suite.args, suite.p, suite.totals
    lines = [
        "## Item cache kill loop",
        "",
        f"Measured by `scripts/chaos/cache_kill_loop.py` (`make chaos`): {t['random_kills']} random SIGKILLs plus "
        f"{t['kills'] - t['random_kills']} of everything before each verify, seed {seed}, profile "
        f"`{args.profile}`, {elapsed:.0f} s, {time.strftime('%Y-%m-%d')}. Replay with `python3 scripts/chaos/cache_kill_loop.py "
        f"--chaos BIN --profile {args.profile} --iterations {args.iterations} --seed {seed}` (BIN: `cache-chaos`, "
        "test support beside `sync-agent`).",
        "",
        f"- One cache folder shared by three writers of {p['keys']} keys each (one value at a time with some `update`s "
        "and removes; group writes of 20 items or 0.25 s; three concurrent tasks) and two readers. Values are "
        "self-verifying (key, generation, SHA-256), inline up to 16 KiB and files up to 1 MiB. The disk limit "
        f"alternates, one verify cycle each: {p['limit'] // lib.MIB} MiB (eviction on nearly every write) and "
        f"{suite.limits[1] // lib.MIB} MiB, under which the writers' {WRITERS * p['keys']} keys at 1 MiB each fit the "
        "disk tier's row budget, so nothing can be evicted.",
        f"- Each iteration: a random pause ({p['delay'][0]}–{p['delay'][1]} s), SIGKILL of one process picked at random, "
        f"restart (which reconciles). Every {p['verify_every']} kills all are killed and `cache-chaos verify` opens the "
        "quiet folder and checks it with its own reading of `index.sqlite` and `blobs/`: every value whole under its "
        "own key; each row's file present at the row's size and each file named by a row (after reconciliation); "
        "the stats row equal to the rows' sum and within the limit; SQLite's integrity check; every generation a "
        "writer reported durable on disk, never an older one (after a 'can evict' cycle, `--evictions allowed`: or "
        "evicted; after a roomy cycle, `--evictions none` on the lines since the last 'can evict' cycle: a missing "
        "committed key is a lost store and fails the loop); no removed key back with an older value.",
        "- *Orphan files reconciled*: files linked by a write the kill stopped before its row committed, or old files "
        "a kill stopped before their unlink or whose evicting process had not unlinked them yet when another opened (the "
        "first writer to open with the small limit evicts hundreds of items at once); removed by the next open. *Orphan rows* (a row without its whole file) "
        "and *unreconciled orphans* must be 0: a kill never leaves them.",
        "",
        lib.table([[str(c) for c in row] for row in rows], header),
        "",
        f"Committed keys not on disk after the cycles that can evict were evicted ({t['evicted']} over those verifies); "
        f"after the {t['verifies_no_eviction']} roomy cycles all {t['committed_checked_no_eviction']} committed keys "
        "checked had to be on disk. "
        f"{t['pending_lost']} group-write items still pending at a kill did not survive, as group writes allow.",
        "",
    ]
    if suite.failures:
        lines += [f"Failures ({len(suite.failures)}):", ""] + [f"- {f}" for f in suite.failures[:20]] + [""]
    for issue, text in KNOWN_ISSUES.items():
        hits = sum(1 for note in suite.notes if note.startswith(f"[{issue}]"))
        lines += [f"Bug `{issue}`, found by this loop ({hits} hits in this run{', reported as notes' if issue in args.known_issue else ''}): {text}.", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chaos", required=True, help="the built cache-chaos binary")
    parser.add_argument("--iterations", type=int, default=200, help="kills of one process (plus the kill-all before each verify)")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="full")
    parser.add_argument("--work", help="work folder (default /tmp/content-sync-chaos/cache-PROFILE)")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the cache folder")
    parser.add_argument("--known-issue", action="append", default=[], choices=sorted(KNOWN_ISSUES),
                        help="report this known issue as a note instead of a failure (see KNOWN_ISSUES)")
    args = parser.parse_args()
    args.work = args.work or f"/tmp/content-sync-chaos/cache-{args.profile}"
    suite = Suite(args)

    def stop_what_it_started() -> None:
        for role in suite.roles:
            if role.proc and role.proc.poll() is None:  # a cache-chaos this script started, by its PID
                role.proc.kill()
                role.proc.wait()
    return lib.run_until_done(suite.run, stop_what_it_started)


if __name__ == "__main__":
    sys.exit(main())
