#!/usr/bin/env python3
"""Where one sync-agent run's time goes, from `perf script` output of `perf record -g`.

    python3 bench/perf_phases.py PERF.txt                 phases: first and last sample of each
    python3 bench/perf_phases.py PERF.txt --threads A B   busiest threads between A and B seconds

A phase is the span from the first to the last sample whose stack holds its function (Swift
names demangled with `swift demangle`), so phases that overlap show as overlapping spans. The
threads view lists, per thread, the share of its samples whose stack holds each function.
"""
import argparse
import collections
import re
import subprocess

PHASES = [
    ("status", r"fetchStatus"),
    ("change lists", r"ChangeList\.parse|ChangeListReader"),
    ("local tree scan", r"LocalTree\.scan"),
    ("plan", r"NetPlanner|VirtualTree"),
    ("hard links", r"linkOrCopy"),
    ("downloads", r"downloadFile\("),
    ("tree check", r"Stager\.checkTree"),
    ("state written", r"finishPlan"),
    ("swap", r"swapIn"),
    ("previous version deleted", r"removeTree|removeContents"),
]
NOISE = ("dispatch", "start_thread", "swift_job", "[unknown]", "thunk", "runJob", "entry_SYS", "do_syscall", "partial apply")


def read(path):
    samples, current = [], None
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if not line.strip():
            if current:
                samples.append(current)
            current = None
        elif not line.startswith((" ", "\t")):
            stamp = re.search(r"(\d+\.\d+):", line)
            current = [float(stamp.group(1)), line.split()[1], []] if stamp else None
        elif current is not None:
            parts = line.strip().split(" ", 1)
            if len(parts) == 2:
                current[2].append(re.sub(r"\+0x[0-9a-f]+$", "", parts[1].rsplit(" (", 1)[0]))
    if current:
        samples.append(current)
    names = sorted({frame for sample in samples for frame in sample[2]})
    out = subprocess.run(["swift", "demangle", "--simplified", "--compact"], input="\n".join(names),
                         capture_output=True, text=True).stdout.split("\n")
    demangled = dict(zip(names, out))
    for sample in samples:
        sample[2] = [demangled.get(frame, frame) for frame in sample[2]]
    return samples


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("perf_script_output")
    ap.add_argument("--threads", nargs=2, type=float, metavar=("FROM", "TO"))
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    samples = read(args.perf_script_output)
    t0 = min(s[0] for s in samples)
    span = max(s[0] for s in samples) - t0
    print(f"{len(samples)} samples over {span:.3f} s")
    if not args.threads:
        for label, pattern in PHASES:
            times = [s[0] - t0 for s in samples if any(re.search(pattern, f) for f in s[2])]
            if times:
                print(f"  {label:26s} {min(times):6.3f} – {max(times):6.3f} s  ({len(times)} samples)")
        return
    lo, hi = args.threads
    window = [s for s in samples if lo <= s[0] - t0 <= hi]
    by_thread = collections.defaultdict(list)
    for s in window:
        by_thread[s[1]].append(s)
    for tid, group in sorted(by_thread.items(), key=lambda item: -len(item[1]))[:4]:
        counts = collections.Counter()
        for s in group:
            for frame in set(f[:100] for f in s[2]):
                counts[frame] += 1
        print(f"thread {tid}: {len(group)} samples")
        shown = 0
        for frame, n in counts.most_common():
            if any(word in frame for word in NOISE):
                continue
            print(f"  {100 * n / len(group):5.1f}% {frame}")
            shown += 1
            if shown == args.top:
                break


if __name__ == "__main__":
    main()
