#!/usr/bin/env python3
"""Disk full: `sync-agent sync` into a client folder on a small tmpfs.

    python3 scripts/chaos/disk_full.py --agent PATH/TO/sync-agent [--size-mb 16] [--repeat 1]
                                       [--write-docs] [--work DIR]

Needs root (or passwordless sudo) to mount a tmpfs; when mounting is impossible it prints
"SKIP: ..." and exits 0. The tmpfs is always unmounted at the end (also on errors and Ctrl-C).

Storages (all published with `sync-agent publish`, served by nginx on loopback):
- small  1.0: about 1 MiB in 100 files: the version N every case starts from.
- big    2.0 (--minimal 2.0, so a client at 1.0 must restore): 1.0 plus 30 MiB of compressible
             files; the archive is small, the content does not fit. Its cacheStatus.json declares
             the true sizes.
- lying  2.0: the same storage, with cacheStatus.json rewritten by a "lying publisher":
             unzippedArchiveSizeInMB lowered so that archive + content seem to fit the free
             space (and still above what the extraction limit needs), the `integrity` block
             removed (a liar would have to rewrite it anyway).
- replay 2.0: 1.0 plus 20 MiB of incompressible files (16 over 1 MiB, resumable) as a replay
             (no restore); the protocol checks free space only before a restore (§2.2).

Cases (each on a freshly mounted tmpfs, the state database outside it unless said):
- declared-too-large-fresh: no local version; big → exit 5 before any archive request.
- declared-too-large-at-N: client at 1.0; big → exit 5, no archive request, N intact.
- lying-sizes-restore: client at 1.0; lying → archive fetched, ENOSPC while extracting → exit 5,
  an error naming the space problem, N intact, status opens. Then the publisher fixes the status
  and the tmpfs grows: the next sync completes to exactly 2.0 without fetching the complete
  archive again.
- lying-sizes-state-on-tmpfs: the same with the state database on the full tmpfs too.
- replay-larger-than-disk: client at 1.0; replay → ENOSPC part-way → exit 5, N intact. Then the
  tmpfs grows: the next sync completes to exactly 2.0 and fetches no file that was complete in
  next/ before the failure.
Everything the client wrote must be inside its folder, its staging area and its state files.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chaoslib as lib  # noqa: E402

V1, V2 = "1.0", "2.0"
SPACE_WORDS = re.compile(r"space|ENOSPC|disk (is )?full", re.I)
LIMIT_WORDS = re.compile(r"more than the limit|too large|exceed", re.I)


class Mount:
    def __init__(self, path: Path):
        self.path = path
        self.mounted = False

    def mount(self, size_mb: int) -> None:
        self.umount()
        self.path.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(lib.sudo_prefix() + ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755",
                                                     "chaos-tmpfs", str(self.path)], capture_output=True, text=True)
        if result.returncode != 0:
            raise PermissionError(result.stderr.strip() or f"mount exited {result.returncode}")
        self.mounted = True
        if os.geteuid() != 0:
            subprocess.run(["sudo", "-n", "chown", f"{os.getuid()}:{os.getgid()}", str(self.path)], check=True)

    def grow(self, size_mb: int) -> None:
        subprocess.run(lib.sudo_prefix() + ["mount", "-o", f"remount,size={size_mb}m", str(self.path)], check=True)

    def umount(self) -> None:
        if self.mounted or os.path.ismount(self.path):
            subprocess.run(lib.sudo_prefix() + ["umount", str(self.path)], check=False)
            self.mounted = False

    def free(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize


def files_of(rng: random.Random, prefix: str, count: int, size: int, compressible: bool) -> dict[str, bytes]:
    make = lib._compressible_bytes if compressible else lib._random_bytes
    return {f"{prefix}/x{i:03d}.bin": make(rng, size) for i in range(count)}


def mb(n: int) -> str:
    return f"{n / lib.MIB:.3f}"


class Suite:
    def __init__(self, args):
        self.args = args
        self.agent = os.path.realpath(args.agent)
        self.work = Path(args.work)
        self.mnt = Mount(self.work / "mnt")
        self.nginx = None
        self.results: list[dict] = []
        self.round = 0

    def setup(self) -> None:
        if self.mnt.path.exists() and os.path.ismount(self.mnt.path):
            self.mnt.umount()
        if self.work.exists():
            shutil.rmtree(self.work)
        self.work.mkdir(parents=True)
        rng = random.Random(5)
        small = {f"s{i // 10:02d}/f{i:03d}.txt": lib._random_bytes(rng, rng.randint(2048, 18000)) for i in range(100)}
        v1 = (["empty/a", "s00"], small)
        big_files = dict(small, **files_of(rng, "big", 30, lib.MIB, compressible=True))
        replay_files = dict(small, **files_of(rng, "more", 16, 1_200_000, compressible=False))
        replay_files.update({f"more/small/f{i:03d}.dat": lib._random_bytes(rng, 40_000) for i in range(40)})
        www = self.work / "www"
        contents = {"1.0": v1, "big": (v1[0], big_files), "replay": (v1[0] + ["more/empty"], replay_files)}
        for name, tree in contents.items():
            lib.write_tree(self.work / f"content-{name}", *tree)
        lib.publish(self.agent, www / "small", self.work / "content-1.0", V1, init=True)
        for name, minimal in (("big", V2), ("replay", None)):
            shutil.copytree(www / "small", www / name)
            lib.publish(self.agent, www / name, self.work / f"content-{name}", V2, minimal=minimal)
        shutil.copytree(www / "big", www / "lying-far")
        self.nginx = lib.Nginx(self.work, www).start()
        # The free space a client at N sees on a fresh tmpfs, to size the near lie: real content =
        # that free space + 1 MiB, within the client's tolerance for rounded sizes (+5% + 1 MiB).
        self.fresh("measure", True)
        free_at_n = self.mnt.free()
        self.mnt.umount()
        shutil.rmtree(self.work / "state" / "measure", ignore_errors=True)
        # Compressible content only (no incompressible 1.0 files), so the archive stays under the
        # 1 MiB a declared 0.001 MB archive is allowed.
        extra = free_at_n + lib.MIB
        near = {}
        chunk = 512 * 1024
        for i in range(extra // chunk):
            near[f"near/x{i:03d}.bin"] = lib._compressible_bytes(rng, chunk)
        near[f"near/rest.bin"] = lib._compressible_bytes(rng, extra % chunk or 1)
        lib.write_tree(self.work / "content-near", v1[0], near)
        shutil.copytree(www / "small", www / "lying-near")
        lib.publish(self.agent, www / "lying-near", self.work / "content-near", V2, minimal=V2)
        self.manifests = {V1: lib.manifest_of(self.work / "content-1.0"),
                          "big": lib.manifest_of(self.work / "content-big"),
                          "near": lib.manifest_of(self.work / "content-near"),
                          "replay": lib.manifest_of(self.work / "content-replay")}
        self.zip_size = {n: (www / n / "RXCacheContent.zip").stat().st_size for n in ("small", "big", "lying-near", "replay")}
        self.zip_size["lying-far"] = self.zip_size["big"]
        for name in ("lying-far", "lying-near"):
            shutil.copy(www / name / "RXCacheConfig" / "cacheStatus.json", self.work / f"honest-status-{name}.json")
        lib.log(f"nginx pid {self.nginx.proc.pid}; big archive {self.zip_size['big']} B for "
                f"{lib.tree_bytes(self.work / 'content-big')} B of content; replay adds "
                f"{lib.tree_bytes(self.work / 'content-replay') - lib.tree_bytes(self.work / 'content-1.0')} B")

    # ------------------------------------------------------------------ helpers
    def t(self, tag: str) -> str:
        """The X-Chaos-Tag of a run: unique per round, so rounds never share log lines."""
        return f"{tag}@{self.round}"

    def sync(self, storage: str, tag: str, state: Path, timeout: float = 300) -> subprocess.CompletedProcess:
        env = dict(os.environ, HOME=str(self.work / "home"), XDG_STATE_HOME=str(self.work / "home" / "state"))
        return lib.run_agent(self.agent, ["sync", "--base-url", self.nginx.url(storage + "/"), "--dir", str(self.content),
                                          "--state", str(state), "--header", f"X-Chaos-Tag: {self.t(tag)}"], env=env, timeout=timeout)

    def fresh(self, case: str, at_n: bool, state_on_tmpfs: bool = False) -> Path:
        self.mnt.mount(self.args.size_mb)
        self.client = self.mnt.path / "client"
        self.client.mkdir()
        self.content = self.client / "content"
        state_dir = self.client if state_on_tmpfs else self.work / "state" / case
        if state_dir.exists() and not state_on_tmpfs:
            shutil.rmtree(state_dir)
        state_dir.mkdir(parents=True, exist_ok=True)
        state = state_dir / "state.sqlite"
        if at_n:
            result = self.sync("small", f"{case}-setup", state)
            if result.returncode != 0:
                raise SystemExit(f"{case}: setup sync to 1.0 failed: {result.stderr}")
        return state

    def requests(self, tag: str, storage: str) -> tuple[int, int, int]:
        """(archive requests, archive bytes, content-file bytes) of one run."""
        self.nginx.settle()
        rs = [r for r in self.nginx.by_tag(self.t(tag)) if r["status"] in ("200", "206")]
        archive = [r for r in rs if r["path"] == f"/{storage}/RXCacheContent.zip"]
        files = [r for r in rs if r["path"].startswith(f"/{storage}/RXCacheContent/")]
        return len(archive), sum(r["body"] for r in archive), sum(r["body"] for r in files)

    def check_outside(self, problems: list[str], state_on_tmpfs: bool) -> None:
        allowed = {"content", ".content.content-sync"}
        if state_on_tmpfs:
            allowed |= {"state.sqlite", "state.sqlite-wal", "state.sqlite-shm", "state.sqlite.lock"}
        extra = sorted(set(os.listdir(self.mnt.path)) - {"client"}) + \
            sorted(set(os.listdir(self.client)) - allowed)
        if extra:
            problems.append(f"written outside the folder/staging/state: {extra}")
        home = self.work / "home"
        if home.exists() and any(fs for _, _, fs in os.walk(home)):
            problems.append("wrote under $HOME / $XDG_STATE_HOME")

    def check_failure(self, result, problems: list[str], expect_n: bool, rec: dict, state: Path,
                      expect_exit: int = 5) -> None:
        rec["exit"] = result.returncode
        rec["error"] = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""
        rec["stderr_lines"] = len(result.stderr.strip().splitlines())
        if result.returncode != expect_exit:
            problems.append(f"exit {result.returncode}, expected {expect_exit} ({lib.EXIT_NAMES[expect_exit]}): {rec['error']}")
        words = SPACE_WORDS if expect_exit == 5 else LIMIT_WORDS
        if not words.search(result.stderr):
            problems.append(f"the error does not name the problem ({words.pattern}): {rec['error']!r}")
        which, _, notes = lib.classify(self.content, {V1: self.manifests[V1]})
        rec["content_after"] = which
        if expect_n and which != V1:
            problems.append("version N is not intact: " + (" | ".join(notes) or str(which)))
        if not expect_n and which not in ("absent",) and not (which is None and self.content.is_dir() and not os.listdir(self.content)):
            problems.append(f"a fresh client's folder holds something after the refusal: {which} {notes[:1]}")
        ok, status = lib.status_json(self.agent, self.content, state)
        if not ok:
            problems.append(f"status --json fails after the failure: {status}")
        else:
            rec["status_state"] = status.get("state")
            # The failure is recorded even when the state database shares the full disk: a
            # replay that filled it once left `status --check` saying "succeeded" (exit 0).
            if status.get("state") != "failed" or not status.get("lastError"):
                problems.append(f"status says state {status.get('state')!r}, lastError {status.get('lastError')!r}: "
                                "the failure was not recorded")
            last = json.dumps(status.get("lastError"))
            rec["status_last_error"] = last[:200]
            if expect_n and str(status.get("version")) != V1:
                problems.append(f"status says version {status.get('version')!r} after the failure")
        staging = self.client / ".content.content-sync"
        rec["staging_bytes"] = lib.tree_bytes(staging) if staging.exists() else 0
        rec["free_after"] = self.mnt.free()

    # ------------------------------------------------------------------ cases
    def case_declared(self, name: str, at_n: bool) -> dict:
        problems: list[str] = []
        rec = {"case": name, "problems": problems, "notes": []}
        state = self.fresh(name, at_n)
        rec["free_before"] = self.mnt.free()
        result = self.sync("big", name, state)
        self.check_failure(result, problems, at_n, rec, state)
        n_zip, zip_bytes, file_bytes = self.requests(name, "big")
        rec["archive_requests"], rec["archive_bytes"] = n_zip, zip_bytes
        if n_zip or file_bytes:
            problems.append(f"downloaded before refusing: {n_zip} archive requests ({zip_bytes} B), {file_bytes} B of files")
        self.check_outside(problems, False)
        self.mnt.umount()
        return rec

    def write_lying_status(self, storage: str, free: int) -> None:
        """Rewrites `storage`'s status as a lying publisher would: no integrity block, sizes that
        seem to fit `free`. lying-far: the archive's size is true, the content's is lowered to
        fit (the real content is twice the free space). lying-near: the archive is declared as
        1 KB and the content just under the free space; the real content is free + 1 MiB."""
        path = self.work / "www" / storage / "RXCacheConfig" / "cacheStatus.json"
        status = json.loads((self.work / f"honest-status-{storage}.json").read_text())
        status.pop("integrity", None)
        status.pop("signature", None)
        if storage == "lying-far":
            zipped = -(-self.zip_size[storage] * 1000 // lib.MIB) / 1000
            unzipped = (free - zipped * lib.MIB - lib.MIB // 4) / lib.MIB
            real = self.manifests["big"]
        else:
            zipped = 0.001
            unzipped = (free - zipped * lib.MIB - lib.MIB // 10) / lib.MIB
            real = self.manifests["near"]
            real_bytes = sum(f["size"] for f in real["files"].values())
            if unzipped * lib.MIB * 1.05 + lib.MIB < real_bytes or self.zip_size[storage] > lib.MIB:
                raise RuntimeError("the near lie does not fit the client's tolerance; adjust the sizes")
        status["zippedArchiveSizeInMB"] = f"{zipped:.3f}"
        status["unzippedArchiveSizeInMB"] = f"{unzipped:.3f}"
        path.write_text(json.dumps(status, indent=2))
        self.lie = {"declared_zipped_mb": status["zippedArchiveSizeInMB"], "declared_unzipped_mb": status["unzippedArchiveSizeInMB"],
                    "real_zipped_mb": mb(self.zip_size[storage]),
                    "real_unzipped_mb": mb(sum(f["size"] for f in real["files"].values())), "free_mb": mb(free)}

    def case_lying(self, name: str, storage: str, expect_exit: int, state_on_tmpfs: bool) -> dict:
        problems: list[str] = []
        rec = {"case": name, "problems": problems, "notes": []}
        state = self.fresh(name, True, state_on_tmpfs)
        rec["free_before"] = self.mnt.free()
        self.write_lying_status(storage, rec["free_before"])
        rec["lie"] = self.lie
        result = self.sync(storage, name, state)
        self.check_failure(result, problems, True, rec, state, expect_exit)
        n_zip, zip_bytes, _ = self.requests(name, storage)
        rec["archive_bytes"] = zip_bytes
        if n_zip == 0:
            problems.append("the lying storage's archive was never requested (the lie did not get past the space check)")
        self.check_outside(problems, state_on_tmpfs)
        staging = self.client / ".content.content-sync"
        kept = (staging / "archive.zip.part").stat().st_size if (staging / "archive.zip.part").exists() else 0
        # The publisher fixes its status; the filesystem grows. The next run must complete.
        shutil.copy(self.work / f"honest-status-{storage}.json", self.work / "www" / storage / "RXCacheConfig" / "cacheStatus.json")
        self.mnt.grow(self.args.size_mb * 6)
        result = self.sync(storage, name + "-after", state)
        rec["after_exit"] = result.returncode
        if result.returncode != 0:
            problems.append(f"after fixing the status and growing the disk, sync exited {result.returncode}: {result.stderr.strip()}")
        expected = self.manifests["big" if storage == "lying-far" else "near"]
        if lib.compare(lib.manifest_of(self.content), expected):
            problems.append("after the recovery run the content is not exactly 2.0")
        # A restore with room to spare links its twin (`retired/`, exactly what it restored).
        if staging.exists() and sorted(os.listdir(staging)) == ["retired"]:
            if lib.compare(lib.manifest_of(staging / "retired"), expected):
                problems.append("the twin the restore left in retired/ is not exactly 2.0")
        elif staging.exists():
            problems.append(f"staging area left after the recovery run: {os.listdir(staging)}")
        _, again, _ = self.requests(name + "-after", storage)
        rec["recovery_archive_bytes"] = again
        rec["archive_kept"] = kept
        # Only downloads over 1 MiB keep an ETag and resume (§4.3); a smaller archive restarts.
        resumable = kept if kept > lib.MIB else 0
        if again > self.zip_size[storage] - resumable:
            problems.append(f"recovery fetched {again} B of the archive, {kept} B were kept (resumable)")
        elif again and kept:
            rec["notes"].append(f"the kept archive ({kept} B, under 1 MiB so not resumable) was fetched again")
        self.mnt.umount()
        return rec

    def case_replay(self, name: str, state_on_tmpfs: bool = False) -> dict:
        problems: list[str] = []
        rec = {"case": name, "problems": problems, "notes": []}
        state = self.fresh(name, True, state_on_tmpfs)
        rec["free_before"] = self.mnt.free()
        result = self.sync("replay", name, state)
        self.check_failure(result, problems, True, rec, state)
        _, _, file_bytes = self.requests(name, "replay")
        rec["file_bytes"] = file_bytes
        self.check_outside(problems, state_on_tmpfs)
        staging = self.client / ".content.content-sync"
        completed = set()
        if (staging / "next").is_dir():
            snap = lib.manifest_of(staging / "next")
            for path, fp in snap["files"].items():
                if self.manifests["replay"]["files"].get(path) == fp:
                    completed.add(path)
                else:
                    problems.append(f"next/ holds an incomplete file {path} after ENOSPC")
        new_files = set(self.manifests["replay"]["files"]) - set(self.manifests[V1]["files"])
        rec["completed_before"] = len(completed & new_files)
        self.mnt.grow(self.args.size_mb * 6)
        result = self.sync("replay", name + "-after", state)
        rec["after_exit"] = result.returncode
        if result.returncode != 0:
            problems.append(f"after growing the disk, sync exited {result.returncode}: {result.stderr.strip()}")
        if lib.compare(lib.manifest_of(self.content), self.manifests["replay"]):
            problems.append("after the recovery run the content is not exactly 2.0")
        # A replay keeps the previous version as the twin: `retired/` alone, holding exactly 1.0.
        if staging.exists() and sorted(os.listdir(staging)) == ["retired"]:
            if lib.compare(lib.manifest_of(staging / "retired"), self.manifests[V1]):
                problems.append("the twin kept in retired/ after the recovery run is not exactly 1.0")
        elif staging.exists():
            problems.append(f"staging area left after the recovery run: {os.listdir(staging)}")
        self.nginx.settle()
        again = {r["path"].split("/RXCacheContent/", 1)[1] for r in self.nginx.by_tag(self.t(name + "-after"))
                 if r["status"] in ("200", "206") and "/RXCacheContent/" in r["path"] and r["body"] > 0}
        refetched = sorted(again & completed)
        rec["refetched"] = len(refetched)
        if refetched:
            problems.append(f"re-downloaded {len(refetched)} files complete before ENOSPC, e.g. {refetched[:3]}")
        self.mnt.umount()
        return rec

    # ------------------------------------------------------------------ main
    def run(self) -> int:
        args = self.args
        probe = self.work / "probe"
        try:
            self.work.mkdir(parents=True, exist_ok=True)
            probe_mount = Mount(probe)
            probe_mount.mount(1)
            probe_mount.umount()
        except (PermissionError, FileNotFoundError, subprocess.CalledProcessError) as error:
            print(f"SKIP: disk-full cases need a tmpfs mount, which failed here ({error})")
            return 0
        finally:
            if probe.exists() and not os.path.ismount(probe):
                probe.rmdir()
        started = time.monotonic()
        self.setup()
        for r in range(args.repeat):
            self.round = r + 1
            for name, fn in (("declared-too-large-fresh", lambda: self.case_declared("declared-too-large-fresh", False)),
                             ("declared-too-large-at-N", lambda: self.case_declared("declared-too-large-at-N", True)),
                             ("lie-beyond-tolerance", lambda: self.case_lying("lie-beyond-tolerance", "lying-far", 4, False)),
                             ("lie-within-tolerance", lambda: self.case_lying("lie-within-tolerance", "lying-near", 5, False)),
                             ("lie-within-tolerance-state-on-tmpfs",
                              lambda: self.case_lying("lie-within-tolerance-state-on-tmpfs", "lying-near", 5, True)),
                             ("replay-larger-than-disk", lambda: self.case_replay("replay-larger-than-disk")),
                             # The state database on the full disk too: the failure is still recorded.
                             ("replay-larger-than-disk-state-on-tmpfs",
                              lambda: self.case_replay("replay-larger-than-disk-state-on-tmpfs", True))):
                try:
                    rec = fn()
                except Exception as error:  # a crash of the harness is a failure of the case, not of the run
                    rec = {"case": name, "problems": [f"harness error: {error!r}"]}
                    self.mnt.umount()
                rec["round"] = r + 1
                self.results.append(rec)
                short = {k: v for k, v in rec.items() if k not in ("problems", "notes", "case", "round")}
                print(f"{name:36s} {'FAIL' if rec['problems'] else 'ok  '} {json.dumps(short, default=str)}", flush=True)
                for p in rec["problems"]:
                    print(f"      - FAIL: {p}", flush=True)
                for p in rec.get("notes", []):
                    print(f"      - note: {p}", flush=True)
        elapsed = time.monotonic() - started
        rows = []
        for name in dict.fromkeys(r["case"] for r in self.results):
            rs = [r for r in self.results if r["case"] == name]
            last = rs[-1]
            rows.append([name, str(len(rs)), str(sum(1 for r in rs if r["problems"])), str(last.get("exit", "-")),
                         describe(last, str(self.mnt.path))])
        header = ["case", "runs", "failures", "exit", "observed (last run)"]
        print()
        lib.print_table(rows, header)
        failed = sum(1 for r in self.results if r["problems"])
        print(f"\n{len(self.results)} runs in {elapsed:.0f} s, {failed} failed; tmpfs {args.size_mb} MiB")
        (self.work / "records.json").write_text(json.dumps(self.results, indent=1, default=str))
        if args.write_docs:
            lib.write_doc_section("diskfull", doc_section(rows, header, self, elapsed))
        return 1 if failed else 0

    def cleanup(self) -> None:
        if self.nginx:
            self.nginx.stop()
        self.mnt.umount()
        if not self.args.keep:
            for name in ("www", "state", "home", "content-1.0", "content-big", "content-near", "content-replay"):
                shutil.rmtree(self.work / name, ignore_errors=True)


def describe(r: dict, mnt: str) -> str:
    c = r["case"]
    err = (r.get("error") or "").replace("|", "/").replace(mnt, "$TMPFS").removeprefix("sync-agent: ")
    if c.startswith("declared"):
        return (f"refused with {mb(r.get('free_before', 0))} MiB free, {r.get('archive_requests', '?')} archive requests; "
                f"content after: {r.get('content_after')}; “{err}”")
    if c.startswith("lie"):
        lie = r.get("lie", {})
        return (f"declared {lie.get('declared_zipped_mb')} + {lie.get('declared_unzipped_mb')} MB, real "
                f"{lie.get('real_zipped_mb')} + {lie.get('real_unzipped_mb')} MiB, {lie.get('free_mb')} MiB free; N after: "
                f"{r.get('content_after')}; staging kept {mb(r.get('staging_bytes', 0))} MiB ({mb(r.get('free_after', 0))} MiB "
                f"left free); recovery run: exit {r.get('after_exit')}, archive fetched again {r.get('recovery_archive_bytes')} B; "
                f"“{err}”")
    return (f"{mb(r.get('file_bytes', 0))} MiB sent by nginx for {mb(r.get('free_before', 0))} MiB free; N after: "
            f"{r.get('content_after')}; staging kept {mb(r.get('staging_bytes', 0))} MiB ({mb(r.get('free_after', 0))} MiB left "
            f"free), {r.get('completed_before')} downloads complete in next/; recovery run: exit {r.get('after_exit')}, "
            f"{r.get('refetched')} of them fetched again; “{err}”")


def doc_section(rows, header, suite, elapsed) -> str:
    a = suite.args
    notes = []
    for name in dict.fromkeys(r["case"] for r in suite.results):
        rs = [r for r in suite.results if r["case"] == name]
        for note in sorted({n for r in rs for n in r.get("notes", [])}):
            count = sum(1 for r in rs if note in r.get("notes", []))
            notes.append(f"- `{name}` ({count} of {len(rs)} runs): {note}.")
    return "\n".join([
        "## Disk full",
        "",
        f"Measured by `scripts/chaos/disk_full.py` ({a.repeat} round(s), {elapsed:.0f} s, {time.strftime('%Y-%m-%d')}): "
        f"the client folder on a {a.size_mb} MiB tmpfs (`$TMPFS` below), storages from `sync-agent publish` served by "
        "nginx on loopback, version N = 1.0 (about 1 MiB) synced first; the state database outside the tmpfs "
        "unless the case says otherwise.",
        "",
        "- **declared-too-large**: an honest `cacheStatus.json` declares 2.0 at more than the free space (a restore, "
        "forced by `minimalCacheVersion`): refused with exit 5 before any archive or file request (nginx log), "
        "N intact (or no folder for a fresh client), status opens.",
        "- **lie-beyond-tolerance**: the same storage with `unzippedArchiveSizeInMB` lowered to fit and the "
        "`integrity` block removed. The archive is fetched (1.2 MB), then refused before extraction because its "
        "entries declare far more than the status (§5 size limit): exit 4, N intact.",
        "- **lie-within-tolerance**: a liar that stays inside the client's rounding tolerance (archive declared as "
        "0.001 MB, content just under the free space; real content = free space + 1 MiB). The space check passes, "
        "extraction runs into ENOSPC: exit 5, an error naming the space problem, N intact. Then the publisher fixes "
        "its status and the tmpfs grows: the next run completes to exactly 2.0, fetching at most the archive bytes "
        "not kept resumably (only downloads over 1 MiB resume, §4.3). Once with the state database on the tmpfs too.",
        "- **replay-larger-than-disk**: a replay adding 20 MiB (the protocol checks free space only before a restore, "
        "§2.2): ENOSPC part-way, exit 5, N intact; after the tmpfs grows the next run completes to exactly 2.0 and "
        "fetches no file that was complete in `next/`.",
        "- Every case checks that nothing was written outside the folder, its staging area and the state files "
        "(nor under `$HOME`/`$XDG_STATE_HOME`).",
        "",
        lib.table(rows, header),
        "",
    ] + (["Notes (observed, not counted as failures):", ""] + notes + [""] if notes else []))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", required=True)
    parser.add_argument("--size-mb", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--work", default="/tmp/content-sync-chaos/diskfull")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the storages and state files")
    args = parser.parse_args()
    suite = Suite(args)
    return lib.run_until_done(suite.run, suite.cleanup)


if __name__ == "__main__":
    sys.exit(main())
