#!/usr/bin/env python3
"""Publish kill loop: `kill -9` of `sync-agent publish` at random moments, then the same command again.

    python3 scripts/chaos/publish_kill_loop.py --agent PATH/TO/sync-agent [--iterations 100] [--seed S]
                                               [--profile full|short] [--concurrent 3] [--write-docs]
                                               [--work DIR] [--keep] [--only N]

Setup: the versions of `chaoslib.make_versions(profile)` (full: 2406 files → 2462 after adds, moves,
renames, deletes, edits and empty-folder changes; short: about 460), a storage published at N = 1.0
over an N-1 (`--init`; so it carries the publisher's base: the retired N-1 and the index), the storage a clean publish of N+1 = 2.0 over it gives (the reference), the duration of
that clean publish, and a client synced to N. nginx on loopback serves the storage under test.

Each iteration picks, with a seeded RNG (the seed is printed; --seed replays the same fractions), a
delay of T × a fraction: odd iterations uniform in [0, 1.15], even ones in the last part, [0.8, 1.15]
(the steps after the archive, lists, status, install and cleanup, take a few percent of a release
build's publish, so uniform delays alone rarely land there). T is the duration of a whole publish
as the loop runs: the median of the last five re-runs that published from the start, or the clean
publish timed at setup until there are three (a long loop's page cache makes a publish much slower
than on the quiet machine of the setup: timed only there, 93 of 100 kills landed while copying). It starts `sync-agent publish` of N+1 over a fresh copy of the
N storage, and SIGKILLs it after the delay (or lets it finish). The phase the kill landed in is read
from the disk: the publish's work folder, its journal and the visible status.

Right after the kill (the storage as served):
1. cacheStatus.json parses and says N or N+1;
2. N+1: the storage (work folder aside) is exactly the reference, and changes_N_N+1 is in the update
   list; N: the storage is exactly N, or (a kill inside the install, between its first rename and the
   status rename) every file is N's or N+1's and RXCacheContent/ is one of them whole;
3. `sync-agent sync` into a fresh folder and from a client at N: exit 0 and content exactly N or
   N+1. Inside the install window only, a refusal (non-zero exit, folder unchanged) also passes: the
   integrity data of N's status then does not match N+1's archive or lists.
Then the same publish again, which must:
4. exit 0, say what it recovered, and leave the storage byte-identical to the reference (every file
   and folder, hidden ones included: no work folder left);
5. a client at N replays to exactly N+1.

--concurrent K (after the loop): K times, two publishes of N+1 started at once over a copy of N:
exactly one exits 0; the other exits 6 with "another publish of … is running (process P)", P being
the first one's PID; the storage is then exactly the reference.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chaoslib as lib  # noqa: E402

V1, V2 = "1.0", "2.0"
WORK_FOLDER = ".content-sync-publish"
# What a publish keeps for the next one (the retired version and an index of inode numbers): shortcuts the
# next publish checks before use, different in every storage, so left out of byte-identical comparisons.
BASE_FOLDER = ".content-sync-publish-base"
STATUS = "RXCacheConfig/cacheStatus.json"
CHANGE_LIST = f"RXCacheConfig/HistoryOfVersions/changes_{V1}_{V2}.json"
# In the order a publish passes them.
PHASES = ["checks", "snapshot", "hash+diff", "archive", "lists+status", "install", "cleanup", "finished"]
PHASE_TEXT = {
    "checks": "before the work folder: lock, recovery, status, hashing the current content",
    "snapshot": "copying --content into the work folder",
    "hash+diff": "hashing the snapshot, diffing",
    "archive": "building the archive",
    "lists+status": "writing the change list, update list, manifest, status and the install journal",
    "install": "journal says installing, status not yet renamed (syncfs, then the renames)",
    "cleanup": "committed: deleting the work folder",
    "finished": "the publish was done (it exited by itself, or the kill came after its last step)",
}
# What the re-run must say it recovered, by phase.
RECOVERY_WORDS = {
    "checks": None,
    "snapshot": "had installed nothing", "hash+diff": "had installed nothing", "archive": "had installed nothing",
    "lists+status": "had installed nothing",
    "install": "rolled it back",
    "cleanup": "had committed",
    "finished": None,
}
LOCK_MESSAGE = re.compile(r"another publish of (\S+) is running \(process (\d+)\); wait for it to finish, or stop it")


def sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def client_env(client: Path) -> dict:
    home = client / "home"
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    return dict(os.environ, HOME=str(home), XDG_STATE_HOME=str(home / "state"), XDG_CACHE_HOME=str(home / "cache"),
                XDG_CONFIG_HOME=str(home / "config"), TMPDIR=str(home / "tmp"))


def storage_manifest(path: Path) -> dict:
    """A storage's manifest without the publisher's base folder."""
    manifest = lib.manifest_of(path)
    return {"folders": [f for f in manifest["folders"] if f != BASE_FOLDER and not f.startswith(BASE_FOLDER + "/")],
            "files": {p: v for p, v in manifest["files"].items() if not p.startswith(BASE_FOLDER + "/")},
            "others": [o for o in manifest["others"] if not str(o).startswith(BASE_FOLDER)]}


def without_work_folder(manifest: dict) -> dict:
    return {"folders": [f for f in manifest["folders"] if f != WORK_FOLDER and not f.startswith(WORK_FOLDER + "/")],
            "files": {p: v for p, v in manifest["files"].items() if not p.startswith(WORK_FOLDER + "/")},
            "others": manifest["others"]}


def subtree(manifest: dict, prefix: str) -> dict:
    return {"folders": [f for f in manifest["folders"] if f.startswith(prefix + "/")],
            "files": {p: v for p, v in manifest["files"].items() if p.startswith(prefix + "/")}, "others": []}


class Suite:
    def __init__(self, args):
        self.args = args
        self.agent = os.path.realpath(args.agent)
        self.work = Path(args.work)
        self.proc: subprocess.Popen | None = None
        self.procs: list[subprocess.Popen] = []

    # ------------------------------------------------------------------ setup
    def publish_cmd(self, storage: Path) -> list[str]:
        return [self.agent, "publish", "--storage", str(storage), "--content", str(self.work / "content-v2"),
                "--version", V2, "--base-url", lib.PUBLISHED_BASE]

    def setup(self) -> None:
        if self.work.exists():
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True)
        lib.log(f"generating the {self.args.profile} versions under {self.work}")
        v1, v2 = lib.make_versions(self.args.profile)
        lib.write_tree(self.work / "content-v1", *v1)
        lib.write_tree(self.work / "content-v2", *v2)
        self.content = {V1: lib.manifest_of(self.work / "content-v1"), V2: lib.manifest_of(self.work / "content-v2")}
        self.www = self.work / "www"
        self.www.mkdir()
        self.template = self.work / "storage-1.0"
        # N is published over an earlier version (N-1: N's content with one file edited), so the N storage
        # carries what a publish keeps for the next one (the retired N-1 and the index), and every publish
        # of N+1 catches that retired tree up (in the copies, every entry of it is replaced).
        earlier = self.work / "content-v0"
        shutil.copytree(self.work / "content-v1", earlier)
        first = sorted(p for p in earlier.rglob("*") if p.is_file())[0]
        first.write_bytes(first.read_bytes() + b" (N-1)")
        lib.publish(self.agent, self.template, earlier, "0.9", init=True)
        lib.publish(self.agent, self.template, self.work / "content-v1", V1, minimal=V1)
        if not (self.template / BASE_FOLDER / "retired").is_dir():
            raise SystemExit(f"the publish of {V1} kept no retired version in {self.template / BASE_FOLDER}")
        self.storage_n = storage_manifest(self.template)
        # The clean publish of N+1, timed three times; the delays scale with the median (a shared
        # machine's load makes single runs vary by several times).
        self.storage = self.www / "s"
        durations = []
        for _ in range(3):
            self.fresh_storage()
            started = time.monotonic()
            result = subprocess.run(self.publish_cmd(self.storage), capture_output=True, text=True)
            durations.append(time.monotonic() - started)
            if result.returncode != 0:
                raise SystemExit(f"clean publish of {V2} failed ({result.returncode}): {result.stderr}")
        self.clean_seconds = sorted(durations)[1]
        self.reference = storage_manifest(self.storage)
        if (self.storage / WORK_FOLDER).exists():
            raise SystemExit("the clean publish left its work folder")
        self.zip_bytes = (self.storage / "RXCacheContent.zip").stat().st_size
        self.nginx = lib.Nginx(self.work, self.www).start()
        self.base = self.nginx.url("s/")
        # The client at N: synced from the N storage, copied for every iteration.
        # Its state database names its folder, so every copy of it goes back to the same path.
        self.fresh_storage()
        self.client = self.work / "client"
        self.client_template = self.work / "client-1.0"
        result = self.sync(self.client)
        if result.returncode != 0 or lib.compare(lib.manifest_of(self.client / "content"), self.content[V1]):
            raise SystemExit(f"setup: the client did not sync to {V1}: {result.stderr}")
        self.client.rename(self.client_template)
        lib.log(f"nginx pid {self.nginx.proc.pid} on port {self.nginx.port}; {V1} {len(self.content[V1]['files'])} files, "
                f"{V2} {len(self.content[V2]['files'])} files, archive {self.zip_bytes / lib.MIB:.1f} MiB; "
                f"clean publish {', '.join(f'{d:.2f}' for d in durations)} s")

    def fresh_storage(self) -> None:
        if self.storage.exists():
            shutil.rmtree(self.storage)
        shutil.copytree(self.template, self.storage)

    def sync(self, client: Path) -> subprocess.CompletedProcess:
        return lib.run_agent(self.agent, ["sync", "--base-url", self.base, "--dir", str(client / "content"),
                                          "--state", str(client / "state.sqlite")], env=client_env(client), timeout=300)

    def client_run(self, name: str, at_n: bool) -> tuple[subprocess.CompletedProcess, str | None]:
        """Syncs a fresh client (at N, or empty) against the storage as served; returns the result and
        which version's content the folder is exactly (None: neither, "absent": no folder)."""
        client = self.client
        if client.exists():
            shutil.rmtree(client)
        if at_n:
            shutil.copytree(self.client_template, client)
        else:
            client.mkdir(parents=True)
        result = self.sync(client)
        which, _, _ = lib.classify(client / "content", self.content)
        shutil.rmtree(client)
        return result, which

    # ------------------------------------------------------------------ phase of a kill
    def phase(self, killed: bool) -> str:
        if not killed:
            return "finished"
        work = self.storage / WORK_FOLDER
        if not work.exists():
            # Work folder gone and the new status visible: killed after its last step.
            return "finished" if sha256(self.storage / STATUS) == self.reference["files"][STATUS]["sha256"] else "checks"
        try:
            journal = json.loads((work / "journal.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            journal = None
        if journal and journal.get("phase") == "installing":
            return "cleanup" if sha256(self.storage / STATUS) == journal.get("statusSHA256") else "install"
        stage = work / "stage"
        if (stage / STATUS).exists() or (stage / CHANGE_LIST).exists():
            return "lists+status"
        if (stage / "RXCacheContent.zip").exists() or any(p.name.startswith("RXCacheContent.zip.") for p in stage.glob("RXCacheContent.zip.*")):
            return "archive"
        if not (stage / "RXCacheContent").exists():
            return "snapshot"
        copied = lib.manifest_of(stage / "RXCacheContent")
        return "hash+diff" if not lib.compare(copied, self.content[V2]) else "snapshot"

    # ------------------------------------------------------------------ one iteration
    def iteration(self, n: int, delay: float) -> dict:
        self.fresh_storage()
        problems: list[str] = []
        rec = {"n": n, "delay": round(delay, 3), "problems": problems}
        out = self.work / "publish.out"
        with open(out, "w") as sink:
            self.proc = subprocess.Popen(self.publish_cmd(self.storage), stdout=sink, stderr=subprocess.STDOUT)
            try:
                self.proc.wait(timeout=delay)
                rec["killed"] = False
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGKILL)
                rec["killed"] = True
            code = self.proc.wait()
        self.proc = None
        rec["exit_a"] = code
        if not rec["killed"] and code != 0:
            problems.append(f"the uninterrupted publish exited {code}: {out.read_text().strip()}")
        phase = self.phase(rec["killed"])
        rec["phase"] = phase

        # 1-2. the storage as served
        visible = without_work_folder(storage_manifest(self.storage))
        try:
            status = json.loads((self.storage / STATUS).read_text())
            version = str(status.get("actualCacheVersion"))
        except (OSError, json.JSONDecodeError) as error:
            version = None
            problems.append(f"cacheStatus.json does not parse after the kill: {error}")
        state = None
        if version == V2:
            state = "N+1"
            diff = lib.compare(visible, self.reference)
            if diff:
                problems.append("status says N+1 but the storage is not the clean N+1: " + "; ".join(diff[:4]))
            try:
                urls = json.loads((self.storage / "RXCacheConfig/listOfURLsToUpdatesByVersion.json").read_text())["updatesByVersions"]
                if lib.PUBLISHED_BASE + CHANGE_LIST not in urls:
                    problems.append(f"status says N+1 but the update list lacks {CHANGE_LIST}")
            except (OSError, json.JSONDecodeError, KeyError) as error:
                problems.append(f"update list unreadable at N+1: {error}")
        elif version == V1:
            if not lib.compare(visible, self.storage_n):
                state = "N"
            else:
                state = "N, install window"
                for path, facts in visible["files"].items():
                    if path.startswith("RXCacheContent/"):
                        continue
                    if facts not in (self.storage_n["files"].get(path), self.reference["files"].get(path)):
                        problems.append(f"{path} is neither N's nor N+1's after the kill")
                content = subtree(visible, "RXCacheContent")
                if lib.compare(content, subtree(self.storage_n, "RXCacheContent")) and lib.compare(content, subtree(self.reference, "RXCacheContent")):
                    problems.append("RXCacheContent/ is a mix of N and N+1 after the kill")
        elif version is not None:
            problems.append(f"status says {version!r}, neither {V1} nor {V2}")
        rec["after_kill"] = state

        # 3. clients against the storage as served
        clients = {}
        for name, at_n in (("fresh", False), ("at-N", True)):
            result, which = self.client_run(f"i{n}-{name}", at_n)
            clients[name] = {"exit": result.returncode, "content": which}
            exact = which in (V1, V2) if state != "N+1" else which == V2
            if state == "N" and which == V2:
                exact = False
            if result.returncode == 0 and exact:
                continue
            refused_cleanly = result.returncode != 0 and which == (V1 if at_n else "absent")
            if state == "N, install window" and refused_cleanly:
                clients[name]["note"] = "refused (install window)"
                continue
            problems.append(f"{name} client after the kill: exit {result.returncode}, content {which}: {result.stderr.strip()[:300]}")
        rec["clients"] = clients

        # 4. the same publish again
        started = time.monotonic()
        result = subprocess.run(self.publish_cmd(self.storage), capture_output=True, text=True)
        rec["rerun_seconds"] = round(time.monotonic() - started, 3)
        rec["exit_b"] = result.returncode
        rec["rerun_said"] = result.stdout.splitlines()[:2]
        if result.returncode != 0:
            problems.append(f"the re-run exited {result.returncode}: {result.stderr.strip()}")
        if (self.storage / WORK_FOLDER).exists():
            problems.append("the work folder is left after the re-run")
        diff = lib.compare(storage_manifest(self.storage), self.reference)
        if diff:
            problems.append("after the re-run the storage is not byte-identical to the clean N+1: " + "; ".join(diff[:4]))
        words = RECOVERY_WORDS[phase]
        said = result.stdout
        if words and f"recovered: " not in said or (words and words not in said):
            problems.append(f"the re-run after a kill in {phase} did not say '{words}': {said.splitlines()[:1]}")
        if phase in ("cleanup", "finished") and "is already published with this content" not in said:
            problems.append(f"the re-run after {phase} did not report the publish complete: {said.splitlines()[:2]}")
        if phase not in ("cleanup", "finished") and f"published {V2} (minimal {V1}) over {V1}:" not in said:
            problems.append(f"the re-run after {phase} did not publish {V2} over {V1}: {said.splitlines()[:2]}")

        # 5. a client at N replays to exactly N+1
        replay, which = self.client_run(f"i{n}-replay", True)
        if replay.returncode != 0 or which != V2:
            problems.append(f"a client at N after the re-run: exit {replay.returncode}, content {which}: {replay.stderr.strip()[:300]}")
        rec["replay"] = {"exit": replay.returncode, "content": which}
        return rec

    # ------------------------------------------------------------------ two at once
    def concurrent(self, k: int) -> dict:
        self.fresh_storage()
        problems: list[str] = []
        rec = {"k": k, "problems": problems}
        outs = [self.work / f"concurrent-{i}.out" for i in range(2)]
        errs = [self.work / f"concurrent-{i}.err" for i in range(2)]
        sinks = [(open(o, "w"), open(e, "w")) for o, e in zip(outs, errs)]
        self.procs = [subprocess.Popen(self.publish_cmd(self.storage), stdout=so, stderr=se) for so, se in sinks]
        codes = [p.wait(timeout=600) for p in self.procs]
        pids = [p.pid for p in self.procs]
        self.procs = []
        for so, se in sinks:
            so.close()
            se.close()
        rec["exits"] = codes
        winners = [i for i, c in enumerate(codes) if c == 0]
        losers = [i for i, c in enumerate(codes) if c == 6]
        if len(winners) != 1 or len(losers) != 1:
            problems.append(f"exits {codes}, wanted one 0 and one 6: " + " | ".join(e.read_text().strip() for e in errs))
        else:
            message = errs[losers[0]].read_text().strip()
            match = LOCK_MESSAGE.search(message)
            rec["message"] = message
            if not match:
                problems.append(f"the refused publish did not give the lock message: {message!r}")
            elif int(match.group(2)) != pids[winners[0]]:
                problems.append(f"the refused publish named process {match.group(2)}, the holder was {pids[winners[0]]}")
        diff = lib.compare(storage_manifest(self.storage), self.reference)
        if diff:
            problems.append("after two publishes at once the storage is not the clean N+1: " + "; ".join(diff[:4]))
        return rec

    # ------------------------------------------------------------------ loop
    def run(self) -> int:
        args = self.args
        seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
        print(f"publish kill loop: seed {seed}, {args.iterations} iterations, profile {args.profile}, agent {self.agent}", flush=True)
        started = time.monotonic()
        self.setup()
        rng = random.Random(seed)
        records = []
        whole: list[float] = []  # durations of re-runs that published from the start
        for n in range(1, args.iterations + 1):
            # Odd iterations anywhere, even ones in the last part, where the short steps are.
            fraction = rng.uniform(0, 1.15) if n % 2 else rng.uniform(0.8, 1.15)
            if args.only is not None and n != args.only:
                continue
            scale = statistics.median(whole[-5:]) if len(whole) >= 3 else self.clean_seconds
            delay = fraction * scale
            rec = self.iteration(n, delay)
            records.append(rec)
            if rec["killed"] and rec["phase"] in ("checks", "snapshot", "hash+diff", "archive", "lists+status") and not rec["problems"]:
                whole.append(rec["rerun_seconds"])
            c = rec["clients"]
            print(f"#{n:3d} kill@{delay:5.2f}s {'killed' if rec['killed'] else 'done  '} phase={rec['phase']:12s} "
                  f"after-kill={rec['after_kill']!s:17s} clients fresh={c['fresh']['content']}/{c['fresh']['exit']} "
                  f"at-N={c['at-N']['content']}/{c['at-N']['exit']} re-run={rec['exit_b']} {rec['rerun_seconds']:.2f}s"
                  + ("  FAIL" if rec["problems"] else "  ok"), flush=True)
            for p in rec["problems"]:
                print(f"      - FAIL: {p}", flush=True)
            if rec["problems"]:
                keep = self.work / "failures" / f"iteration-{n}"
                keep.parent.mkdir(parents=True, exist_ok=True)
                (keep.parent / f"iteration-{n}.json").write_text(json.dumps(rec, indent=2, default=str))
        concurrent = []
        for k in range(1, args.concurrent + 1):
            rec = self.concurrent(k)
            concurrent.append(rec)
            print(f"concurrent #{k}: exits {rec['exits']}" + ("  FAIL" if rec["problems"] else "  ok"), flush=True)
            for p in rec["problems"]:
                print(f"      - FAIL: {p}", flush=True)
        elapsed = time.monotonic() - started
        self.nginx.stop()
        rows = summarize(records)
        header = ["phase of the kill", "kills", "after kill N / install window / N+1", "clients after kill ok",
                  "re-run exit 0, storage = clean N+1", "client at N → N+1", "failures"]
        print()
        lib.print_table(rows, header)
        failed = sum(1 for r in records if r["problems"]) + sum(1 for r in concurrent if r["problems"])
        print(f"\nseed {seed}: {len(records)} iterations + {len(concurrent)} concurrent pairs in {elapsed:.0f} s "
              f"(clean publish {self.clean_seconds:.2f} s), {failed} failed")
        (self.work / "records.json").write_text(json.dumps({"iterations": records, "concurrent": concurrent}, indent=1, default=str))
        if args.write_docs:
            lib.write_doc_section("publishkill", doc_section(rows, header, seed, records, concurrent, self, elapsed))
        if not args.keep:
            for name in ("www", "content-v1", "content-v2", "storage-1.0", "client-1.0", "client"):
                shutil.rmtree(self.work / name, ignore_errors=True)
        return 1 if failed else 0


def summarize(records: list[dict]) -> list[list[str]]:
    rows = []
    for phase in PHASES + ["all"]:
        rs = [r for r in records if phase == "all" or r["phase"] == phase]
        if not rs and phase != "all":
            rows.append([phase, "0", "-", "-", "-", "-", "0"])
            continue
        states = [sum(1 for r in rs if r["after_kill"] == s) for s in ("N", "N, install window", "N+1")]
        clients_ok = sum(1 for r in rs if not any(p.startswith(("fresh client", "at-N client")) for p in r["problems"]))
        rerun_ok = sum(1 for r in rs if r["exit_b"] == 0 and not any("after the re-run the storage" in p or "work folder is left" in p
                                                                     for p in r["problems"]))
        replay_ok = sum(1 for r in rs if r["replay"]["exit"] == 0 and r["replay"]["content"] == V2)
        rows.append([phase if phase == "all" else f"{phase}", str(len(rs)), " / ".join(map(str, states)),
                     f"{clients_ok}/{len(rs)}", f"{rerun_ok}/{len(rs)}", f"{replay_ok}/{len(rs)}",
                     str(sum(1 for r in rs if r["problems"]))])
    return rows


def doc_section(rows, header, seed, records, concurrent, suite, elapsed) -> str:
    args = suite.args
    c = suite.content
    failing = [r for r in records if r["problems"]]
    pair_failures = [r for r in concurrent if r["problems"]]
    windows = sum(1 for r in records if r["after_kill"] == "N, install window")
    lines = [
        "## Crashes: `kill -9` during `publish`",
        "",
        f"Measured by `scripts/chaos/publish_kill_loop.py` ({'`make chaos`' if args.profile == 'full' else '`make chaos-short`'}): "
        f"{len(records)} iterations and {len(concurrent)} concurrent pairs, seed {seed}, profile `{args.profile}`, "
        f"{elapsed:.0f} s, {time.strftime('%Y-%m-%d')}, {'release' if '/release/' in suite.agent else 'debug'} build of `sync-agent`. "
        f"Replay the same sequence with "
        f"`python3 scripts/chaos/publish_kill_loop.py --agent BIN --profile {args.profile} --iterations {args.iterations} "
        f"--concurrent {args.concurrent} --seed {seed}` (`--only N` runs one iteration).",
        "",
        f"- The storage: N = 1.0 published over 0.9 (`--init`; one file differs) from {len(c[V1]['files'])} files, {len(c[V1]['folders'])} folders; "
        f"N+1 = 2.0 from {len(c[V2]['files'])} files (adds, file and folder moves, a folder rename, deletes, small and "
        f"large edits, a deep folder redownload, empty-folder changes); archive {suite.zip_bytes / lib.MIB:.1f} MiB. "
        f"A clean `publish` of 2.0 over 1.0 took {suite.clean_seconds:.2f} s (the median of three).",
        "- Each iteration: a fresh copy of the 1.0 storage, `sync-agent publish` of 2.0, SIGKILL after T × a fraction "
        "uniform in [0, 1.15] (odd iterations) or in [0.8, 1.15] (even ones, where the short steps after the archive are), "
        "T being the median of the last five re-runs that published from the start (the clean publish until there are "
        "three): a long loop's page cache makes a publish slower than on the quiet machine of the setup; the phase is read from the disk (work folder, journal, visible status).",
        "- Right after the kill, the storage as served by nginx: `cacheStatus.json` parses and says N or N+1; at N+1 the "
        "storage is exactly the clean N+1 and its update list names `changes_1.0_2.0.json`; at N the storage is exactly N, "
        "or (a kill between the install's first rename and the status rename: the *install window*) every file is N's or "
        "N+1's and `RXCacheContent/` is one of them whole. A fresh client and a client at N (`sync-agent sync`) end with "
        "exit 0 and content exactly N or N+1; in the install window a refusal that leaves the client unchanged also passes "
        "(N's integrity data does not match N+1's archive and lists).",
        "- Then the same `publish` command again: exit 0, it says what it recovered (nothing installed → work folder "
        "deleted; installing → rolled back, then published; committed → completed, “already published”), the storage is "
        "byte-identical to the clean N+1 (every file and folder, hidden ones included, so no work folder), and a client "
        "at N replays to exactly N+1.",
        f"- Concurrency: {len(concurrent)} times two `publish` commands started at once over a copy of N: exactly one "
        f"exited 0, the other exited 6 with `another publish of … is running (process P); wait for it to finish, or stop it` "
        f"naming the winner's PID, and the storage was the clean N+1: {len(concurrent) - len(pair_failures)} of {len(concurrent)} passed.",
        "",
        lib.table(rows, header),
        "",
        "Phases: " + "; ".join(f"*{p}*: {PHASE_TEXT[p]}" for p in PHASES) + ".",
        "",
        f"The install window lasts well under a millisecond (a hard link and a rename per file, one `renameat2` for the "
        f"content), so random kills rarely land in it ({windows} of {len(records)} here); `PublishInterruptionTests` stop "
        f"an in-process publish before every one of its steps (and every step of a rollback) instead.",
        "",
    ]
    if failing or pair_failures:
        lines.append(f"Failures ({len(failing) + len(pair_failures)}):")
        lines.append("")
        for r in failing[:20]:
            lines.append(f"- iteration {r['n']} (kill at {r['delay']} s, {r['phase']}): " + "; ".join(r["problems"][:3]))
        for r in pair_failures:
            lines.append(f"- concurrent pair {r['k']}: " + "; ".join(r["problems"][:3]))
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", required=True)
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--profile", choices=sorted(lib.PROFILES), default="full")
    parser.add_argument("--concurrent", type=int, default=3, help="pairs of publishes started at once, after the loop")
    parser.add_argument("--work", help="work folder (default /tmp/content-sync-chaos/publish-PROFILE)")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the storages and contents")
    parser.add_argument("--only", type=int, help="run only iteration N of the seeded sequence (to reproduce one)")
    args = parser.parse_args()
    args.work = args.work or f"/tmp/content-sync-chaos/publish-{args.profile}"
    suite = Suite(args)

    def stop_what_it_started() -> None:
        for proc in ([suite.proc] if suite.proc else []) + suite.procs:
            if proc.poll() is None:  # a sync-agent this script started, by its PID
                proc.kill()
                proc.wait()
        if getattr(suite, "nginx", None):
            suite.nginx.stop()
    return lib.run_until_done(suite.run, stop_what_it_started)


if __name__ == "__main__":
    sys.exit(main())
