#!/usr/bin/env python3
"""Deterministic reproductions of the two crash-loop findings.

    python3 scripts/chaos/repro.py --agent PATH/TO/sync-agent [--window archive-deleted|retiring]

--window archive-deleted ("archive-refetch"): a restore downloads the archive to the staging area,
  extracts it into next/, verifies the staged tree, then switches. SIGKILL once next/ is complete
  and before the switch, run sync again, count the archive bytes the second run fetches (nginx
  access log). Before the fix the archive was deleted after extraction and fetched again in full;
  now it is kept until the switch, and the second run fetches 0 bytes of it.
--window retiring ("staging-leftover"): a replay swaps next/ in, records 2.0, then deletes the
  staging area, whose retired/ holds version N. SIGKILL once that deletion has started, run sync
  again (which finds 2.0 current), check that the staging area is gone. Reproduced: it stays, with
  what is left of N, for good (SyncEngine deletes leftover staging only while a plan is pending).
  Since issue 23 a replay keeps retired/ as the twin (no deletion to kill), so this window exists
  only where the switch does not keep one (a restore, or a repair).

Exit 0 when fixed, 1 when reproduced, 2 when the window was missed (try again).
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import chaoslib as lib  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agent", required=True)
    parser.add_argument("--window", choices=["archive-deleted", "retiring"], default="archive-deleted")
    parser.add_argument("--work", default="/tmp/content-sync-chaos/repro")
    args = parser.parse_args()
    agent = os.path.realpath(args.agent)
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    v1, v2 = lib.make_versions("short")
    info = lib.build_pair(agent, work, v1, v2)
    nginx = lib.Nginx(work, info["www"]).start()
    try:
        client = work / "client"
        client.mkdir()
        staging = client / ".content.content-sync"
        archive = staging / "archive.zip.part"
        cmd = [agent, "sync", "--dir", str(client / "content"), "--state", str(client / "state.sqlite")]
        if args.window == "retiring":
            first = subprocess.run(cmd + ["--base-url", nginx.url("v1/")], capture_output=True, text=True)
            if first.returncode != 0:
                raise SystemExit(f"sync to 1.0 failed: {first.stderr}")
        cmd += ["--base-url", nginx.url("v2/")]
        proc = subprocess.Popen(cmd + ["--header", "X-Chaos-Tag: killed"], stderr=subprocess.DEVNULL)
        expected_files = len(info["manifests"]["2.0"]["files"])
        seen_archive = False
        killed = False
        first_count = None
        while proc.poll() is None:
            if args.window == "retiring":
                # Kill once the deletion of retired/ (version N) has started: the switch and its
                # database transaction are done by then.
                try:
                    count = len(os.listdir(staging / "retired"))
                except OSError:
                    count = None
                if count is not None and first_count is None:
                    first_count = count
                hit = count is not None and first_count is not None and count < first_count
            else:
                # next/ complete (every file of 2.0 extracted), no switch yet.
                seen_archive = seen_archive or archive.exists()
                hit = (seen_archive and not (client / "content").exists() and (staging / "next").is_dir()
                       and sum(len(files) for _, _, files in os.walk(staging / "next")) >= expected_files)
            if hit:
                proc.send_signal(signal.SIGKILL)
                killed = True
                break
            time.sleep(0.0002)
        proc.wait()
        if not killed:
            print("missed the window (the run finished first); try again")
            return 2
        print(f"killed in the {args.window} window: staging holds {sorted(os.listdir(staging))}, "
              f"content folder exists: {(client / 'content').exists()}")
        result = subprocess.run(cmd + ["--header", "X-Chaos-Tag: next"], capture_output=True, text=True)
        nginx.settle()
        fetched = sum(r["body"] for r in nginx.by_tag("next")
                      if r["path"] == "/v2/RXCacheContent.zip" and r["status"] in ("200", "206"))
        exact = not lib.compare(lib.manifest_of(client / "content"), info["manifests"]["2.0"])
        left = lib.tree_bytes(staging) if staging.exists() else None
        print(f"next run: exit {result.returncode}, content exactly 2.0: {exact}, "
              f"archive bytes fetched again: {fetched} of {info['zip']['2.0']}, "
              f"staging area after it: {'gone' if left is None else f'{sorted(os.listdir(staging))}, {left} B'}")
        if args.window == "retiring":
            return 1 if left is not None else 0
        return 1 if fetched else 0
    finally:
        nginx.stop()


if __name__ == "__main__":
    sys.exit(main())
