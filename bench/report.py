#!/usr/bin/env python3
"""Summarise bench/restore.sh results: print a table and write it into docs/benchmarks.md.

Called by restore.sh with its settings in the environment:
  RESULTS      TSV lines: filesystem, tool, run, wall seconds, peak RSS in KiB
  STORAGE      the storage folder (its .bench-params.json describes it)
  DOC          the markdown file to update ("" = print only)
  COMMAND_LINE the command as run, BIG_LINE the 1 GB result line (may be empty)
  AGENT, REPO, RUNS, PEER_SYNC, NGINX

The section "## S1 full restore (issue 2 measurement)" of DOC is replaced (or appended); every
other section of the file is kept as it is.

bench/scenarios.py (S2-S4, ceiling) and bench/fleet/fleet_sim.py import the shared helpers below:
`sh`, `fs_type`, `summary`, `ratio`, `machine_line`, `binary_line`, `replace_section` and `AccessLog`;
bench/cache_bench.py and bench/images_bench.py use `tool_binary_line`, `command_line` and `bar_chart`;
bench/scale_bench.py also `line_chart`.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import platform
import re
import statistics
import subprocess
import time
from collections import defaultdict
from pathlib import Path

HEADING = "## S1 full restore (issue 2 measurement)"
BASELINE = "curl+unzip"


def sh(*args: str) -> str:
    try:
        return subprocess.run(args, capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "?"


def fs_type(path: str) -> str:
    out = sh("df", "--output=fstype", path).splitlines()
    return out[-1].strip() if out else "?"


def settle(path, pause: float = 0.1) -> None:
    """Flush the dirty pages of the filesystem holding path (untimed), so a run does not pay for
    the one before, then pause briefly."""
    subprocess.run(["sync", "-f", str(path)], check=False)
    time.sleep(pause)


def swap_symlink(link, target) -> None:
    """Points the symlink `link` at `target` in one step (a new link renamed over it), so a
    server reading through it sees the old target or the new one."""
    link = Path(link)
    tmp = link.with_name(link.name + ".new")
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(target, tmp)
    os.replace(tmp, link)


GNU_TIME = "/usr/bin/time"


def under_gnu_time(cmd: list, usage_file) -> list[str]:
    """cmd run under GNU time, which writes "%e %U %S %M" (wall, user, system, peak RSS KiB) into
    usage_file. Peak RSS must come from there, not from os.wait4 on a child of a Python script: a
    child's ru_maxrss starts at the RSS of the process it was forked from (the kernel keeps the
    pre-exec high-water mark), where GNU time forks the tool from a 2 MiB process."""
    return [GNU_TIME, "-f", "%e %U %S %M", "-o", str(usage_file), *[str(c) for c in cmd]]


def read_gnu_time(usage_file) -> dict | None:
    """What GNU time wrote (its last line; a failing command's exit note comes first), or None."""
    try:
        _, user, system, rss = Path(usage_file).read_text().split()[-4:]
        return {"user_s": float(user), "sys_s": float(system), "maxrss_kib": int(rss)}
    except (OSError, ValueError):
        return None


def summary(values: list[float]) -> tuple[float, float, float]:
    """(median, min, max) of a list of numbers."""
    return statistics.median(values), min(values), max(values)


def ratio(value: float, base: float | None) -> str:
    return f"{value / base:.2f}×" if base else "–"


def machine_line(work: str, tools: list[tuple[str, list[str]]] = ()) -> str:
    """One sentence on the machine: cores, CPU, RAM, kernel, the work folder's filesystem, tool versions.

    tools: (label, command) pairs; the first line of the command's stdout (or stderr) is quoted."""
    mem_kib = next((int(l.split()[1]) for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal:")), 0)
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines() if l.startswith("model name")), "?")
    versions = []
    for label, command in tools:
        try:
            out = subprocess.run(command, capture_output=True, text=True, check=False)
            first = (out.stdout.strip() or out.stderr.strip()).splitlines()
            versions.append(first[0].strip() if first else f"{label} ?")
        except OSError:
            versions.append(f"{label} ?")
    text = (f"{os.cpu_count()} cores ({cpu}), {mem_kib / 1024 / 1024:.0f} GiB RAM, Linux {platform.release()}; "
            f"work folder {work} on {fs_type(work)}")
    return text + (f"; {', '.join(versions)}" if versions else "")


def binary_line(repo: str, agent_path: str) -> str:
    commit = sh("git", "-C", repo, "rev-parse", "--short", "HEAD")
    dirty = " (with uncommitted changes in the work tree)" if sh("git", "-C", repo, "status", "--porcelain", "--", "Sources") else ""
    built = (datetime.datetime.fromtimestamp(os.path.getmtime(agent_path), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
             if agent_path and os.path.exists(agent_path) else "at an unknown time")
    return f"work tree at commit {commit}{dirty}; the sync-agent binary `{agent_path}` was built {built}"


def tool_binary_line(binary: str, sources: list[str], what: str) -> str:
    """The commit a bench tool's binary was built from (the git work tree that holds its .build
    folder), whether `sources` had uncommitted changes, and when it was built."""
    repo = Path(binary).resolve()
    while repo != repo.parent and not (repo / ".git").exists():
        repo = repo.parent
    commit = sh("git", "-C", str(repo), "rev-parse", "--short", "HEAD")
    dirty = sh("git", "-C", str(repo), "status", "--porcelain", "--", *sources)
    built = datetime.datetime.fromtimestamp(os.path.getmtime(binary), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (f"{what} at commit {commit}{' with uncommitted changes in ' + ' or '.join(sources) if dirty else ''} "
            f"(`{Path(binary).name}` built in release {built})")


def command_line(script: str, binary: str, keys: list[str]) -> str:
    """How a bench script was run: the environment knobs that were set, the interpreter, the binary."""
    env = " ".join(f"{k}={os.environ[k]}" for k in keys if os.environ.get(k))
    return f"{env + ' ' if env else ''}{Path(__import__('sys').executable).as_posix()} {script} {binary}"


def esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def bar_chart(path: Path, panels: list, colors: dict[str, str], caption: str) -> None:
    """Horizontal bars, one panel per measure on its own scale, whiskers from the lowest to the
    highest round; red dashed lines mark the panel's goals. A panel is (title, unit, bars, goals):
    bars are (name, median, low, high), a bar's colour is `colors` of its name's first word, and
    goals are (value, label)."""
    width, label_w, bar_h, gap, right = 860, 200, 18, 6, 110
    plot_w = width - label_w - right
    y, parts = 20, []
    for title, unit, bars, goals in panels:
        parts.append(f'<text x="10" y="{y + 14}" font-size="13" font-weight="bold">{esc(title)}</text>')
        y += 22
        top = max([max(med, hi) for _, med, _, hi in bars] + [g for g, _ in goals]) * 1.05 or 1
        marks, gy2 = [], y + len(bars) * (bar_h + gap)
        for k, (g, label) in enumerate(goals):  # drawn after the bars, so they do not hide them
            gx = label_w + plot_w * g / top
            marks += [f'<line x1="{gx:.1f}" y1="{y - 2}" x2="{gx:.1f}" y2="{gy2 + 2 + 12 * k}" stroke="#d62728" stroke-width="2" stroke-dasharray="4,3"/>',
                      f'<text x="{gx + 4:.1f}" y="{gy2 + 11 + 12 * k}" font-size="10" fill="#d62728">{esc(label)}</text>']
        for name, med, lo, hi in bars:
            w = plot_w * med / top
            parts.append(f'<text x="{label_w - 8}" y="{y + 13}" font-size="12" text-anchor="end">{esc(name)}</text>')
            parts.append(f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{colors.get(name.split()[0], "#555")}"/>')
            if hi > 0:
                x1, x2, ym = label_w + plot_w * lo / top, label_w + plot_w * hi / top, y + bar_h / 2
                parts.append(f'<line x1="{x1:.1f}" y1="{ym}" x2="{x2:.1f}" y2="{ym}" stroke="#000"/>')
                parts.append(f'<line x1="{x1:.1f}" y1="{ym - 5}" x2="{x1:.1f}" y2="{ym + 5}" stroke="#000"/>')
                parts.append(f'<line x1="{x2:.1f}" y1="{ym - 5}" x2="{x2:.1f}" y2="{ym + 5}" stroke="#000"/>')
            value = f"{med:,.0f}" if med >= 100 else f"{med:.2f}"
            parts.append(f'<text x="{max(label_w + w, label_w + plot_w * hi / top) + 6:.1f}" y="{y + 13}" font-size="12">{value} {unit}</text>')
            y += bar_h + gap
        parts += marks
        y += 12 + (10 + 12 * (len(goals) - 1) if goals else 0)
    path.write_text(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y + 20}" viewBox="0 0 {width} {y + 20}" '
                    f'font-family="sans-serif">\n<rect width="100%" height="100%" fill="#fff"/>\n' + "\n".join(parts) +
                    f'\n<text x="10" y="{y + 8}" font-size="11" fill="#555">{caption}</text>\n</svg>\n')


def line_chart(path: Path, panels: list, colors: dict[str, str], caption: str,
               x_label=lambda x: f"{x:g}", x_title: str = "") -> None:
    """Lines over a logarithmic x axis, one panel each, a logarithmic y axis (decades), whiskers
    from the lowest to the highest round at each point; red dashed lines mark the panel's goals.
    A panel is (title, unit, series, goals): series are (name, points) with points
    (x, median, low, high), a line's colour is `colors` of its name (else of its first word),
    and goals are (value, label). x_label writes an x tick (one at each x of the data)."""
    width, left, right, top, plot_h, bottom = 900, 70, 250, 26, 200, 44
    plot_w = width - left - right
    y, parts = 10, []
    for title, unit, series, goals in panels:
        xs = sorted({p[0] for _, points in series for p in points})
        values = [v for _, points in series for p in points for v in p[1:] if v > 0] + [g for g, _ in goals if g > 0]
        if not xs or not values:
            continue
        lx0, lx1 = math.log10(xs[0]) - 0.15, math.log10(xs[-1]) + 0.15
        ly0, ly1 = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
        if ly1 == ly0:
            ly1 += 1
        px = lambda x: left + plot_w * (math.log10(x) - lx0) / (lx1 - lx0)  # noqa: E731
        py = lambda v: y + top + plot_h * (1 - (math.log10(max(v, 10 ** ly0)) - ly0) / (ly1 - ly0))  # noqa: E731
        parts.append(f'<text x="10" y="{y + 16}" font-size="13" font-weight="bold">{esc(title)}</text>')
        for d in range(ly0, ly1 + 1):  # decades, with 2 and 5 between them
            for m in (1, 2, 5):
                v = m * 10.0 ** d
                if d == ly1 and m > 1:
                    break
                yy = py(v)
                parts.append(f'<line x1="{left}" y1="{yy:.1f}" x2="{left + plot_w}" y2="{yy:.1f}" stroke="{"#ccc" if m == 1 else "#eee"}"/>')
                parts.append(f'<text x="{left - 6}" y="{yy + 4:.1f}" font-size="10" text-anchor="end">{v:g} {esc(unit) if m == 1 else ""}</text>')
        for x in xs:
            xx = px(x)
            parts.append(f'<line x1="{xx:.1f}" y1="{y + top}" x2="{xx:.1f}" y2="{y + top + plot_h}" stroke="#eee"/>')
            parts.append(f'<text x="{xx:.1f}" y="{y + top + plot_h + 14}" font-size="11" text-anchor="middle">{esc(x_label(x))}</text>')
        if x_title:
            parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{y + top + plot_h + 30}" font-size="11" text-anchor="middle">{esc(x_title)}</text>')
        parts.append(f'<rect x="{left}" y="{y + top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>')
        for k, (name, points) in enumerate(series):
            colour = colors.get(name, colors.get(name.split()[0], "#555"))
            shift = (k - (len(series) - 1) / 2) * 4  # whiskers side by side, not on top of each other
            pts = sorted(points)
            if len(pts) > 1:
                parts.append('<polyline fill="none" stroke-width="2" stroke="' + colour + '" points="' +
                             " ".join(f"{px(x):.1f},{py(med):.1f}" for x, med, _, _ in pts) + '"/>')
            for x, med, lo, hi in pts:
                xx = px(x) + shift
                parts.append(f'<line x1="{xx:.1f}" y1="{py(lo):.1f}" x2="{xx:.1f}" y2="{py(hi):.1f}" stroke="{colour}"/>')
                parts.append(f'<circle cx="{px(x):.1f}" cy="{py(med):.1f}" r="3.5" fill="{colour}"/>')
            last = pts[-1]
            ly = y + top + 14 + 16 * k
            parts.append(f'<rect x="{left + plot_w + 12}" y="{ly - 9}" width="12" height="10" fill="{colour}"/>')
            value = f"{last[1]:,.0f}" if last[1] >= 100 else f"{last[1]:.3g}"
            parts.append(f'<text x="{left + plot_w + 28}" y="{ly}" font-size="10">{esc(name)}: {value} {esc(unit)} at {esc(x_label(last[0]))}</text>')
        for g, label in goals:
            gy = py(g)
            parts.append(f'<line x1="{left}" y1="{gy:.1f}" x2="{left + plot_w}" y2="{gy:.1f}" stroke="#d62728" stroke-width="1.5" stroke-dasharray="5,3"/>')
            parts.append(f'<text x="{left + 4}" y="{gy - 4:.1f}" font-size="10" fill="#d62728">{esc(label)}</text>')
        y += top + plot_h + bottom + 10
    path.write_text(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y + 20}" viewBox="0 0 {width} {y + 20}" '
                    f'font-family="sans-serif">\n<rect width="100%" height="100%" fill="#fff"/>\n' + "\n".join(parts) +
                    f'\n<text x="10" y="{y + 8}" font-size="11" fill="#555">{esc(caption)}</text>\n</svg>\n')


def replace_section(doc: str, heading: str, text: str, after: str | None = None) -> None:
    """Replace the markdown section that starts with `heading` (up to the next `## `) by `text`.

    A missing section is inserted before the section headed `after` when given and present,
    else appended. Every other section is kept as it is."""
    path = Path(doc)
    old = path.read_text() if path.exists() else "# Benchmarks\n\nResults of the scripts in `bench/` (see bench/README.md).\n"
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(old):
        new = pattern.sub(lambda _: text.rstrip("\n") + "\n\n", old, count=1)
    elif after and re.search(rf"^{re.escape(after)}\n", old, re.M):
        at = re.search(rf"^{re.escape(after)}\n", old, re.M).start()
        new = old[:at] + text.rstrip("\n") + "\n\n" + old[at:]
    else:
        new = old.rstrip("\n") + "\n\n" + text
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(new.rstrip("\n") + "\n")


class AccessLog:
    """nginx's access log, read from an offset. A subclass gives LINE (its log_format as a regex)
    and entry(match) (the fields it keeps); `strict` refuses a line LINE does not match."""
    LINE: re.Pattern
    # How long the file must stay the same size before it counts as written.
    settle = 0.1
    strict = False

    def __init__(self, path: Path) -> None:
        self.path = path

    def entry(self, m: re.Match) -> dict:
        raise NotImplementedError

    def mark(self) -> int:
        """The log's size once nginx has stopped writing (it logs after the response is sent)."""
        last, stable_since = -1, time.monotonic()
        while True:
            size = self.path.stat().st_size if self.path.exists() else 0
            if size != last:
                last, stable_since = size, time.monotonic()
            elif time.monotonic() - stable_since >= self.settle:
                return size
            time.sleep(0.02)

    def since(self, offset: int) -> list[dict]:
        """The entries written after `offset` (a `mark()`)."""
        with open(self.path, "rb") as f:
            f.seek(offset)
            data = f.read().decode("utf-8", "replace")
        entries = []
        for line in data.splitlines():
            m = self.LINE.match(line)
            if m:
                entries.append(self.entry(m))
            elif self.strict:
                raise ValueError(f"unexpected access log line: {line[:200]}")
        return entries


RSS_GOAL_KIB = 64_000_000 / 1024  # issue 4's 64 MB, in the KiB GNU time reports


def goal_lines(rows, filesystems, big_rss_kib: str) -> list[str]:
    """One verdict per goal and filesystem, from the medians of the same runs."""
    def verdict(met: bool) -> str:
        return "**met**" if met else "**not met**"
    lines = []
    for fs in filesystems:
        agent, base = rows.get((fs, "sync-agent")), rows.get((fs, BASELINE))
        if not agent:
            continue
        rss = statistics.median(r for _, _, r in agent)
        if base:
            ratio = statistics.median(w for _, w, _ in agent) / statistics.median(w for _, w, _ in base)
            lines.append(f"- {fs}: wall {ratio:.2f}× curl+unzip (goal ≤ 0.9×: {verdict(ratio <= 0.9)}); "
                         f"peak RSS {rss / 1024:.1f} MiB (goal ≤ 61.0 MiB: {verdict(rss <= RSS_GOAL_KIB)}).")
        else:
            lines.append(f"- {fs}: peak RSS {rss / 1024:.1f} MiB (goal ≤ 61.0 MiB: {verdict(rss <= RSS_GOAL_KIB)}); "
                         "no curl+unzip runs to compare the wall time with.")
    if big_rss_kib.strip():
        rss = int(big_rss_kib)
        lines.append(f"- 1 GB archive: peak RSS {rss / 1024:.1f} MiB (goal ≤ 61.0 MiB: {verdict(rss <= RSS_GOAL_KIB)}).")
    return lines


def main() -> None:
    env = os.environ
    rows: dict[tuple[str, str], list[tuple[int, float, int]]] = defaultdict(list)
    filesystems: list[str] = []
    tools: list[str] = []
    for line in Path(env["RESULTS"]).read_text().splitlines():
        fs, tool, run, wall, rss = line.split("\t")
        rows[(fs, tool)].append((int(run), float(wall), int(rss)))
        if fs not in filesystems:
            filesystems.append(fs)
        if tool not in tools:
            tools.append(tool)

    table = ["| tool | filesystem | runs | median wall (s) | min–max wall (s) | median peak RSS (MiB) | median wall ÷ curl+unzip median |",
             "|---|---|---:|---:|---:|---:|---:|"]
    notes: list[str] = []
    for fs in filesystems:
        base = rows.get((fs, BASELINE))
        base_median = statistics.median(w for _, w, _ in base) if base else None
        for tool in tools:
            runs = rows.get((fs, tool))
            if not runs:
                continue
            walls = [w for _, w, _ in runs]
            rsses = [r for _, _, r in runs]
            median = statistics.median(walls)
            ratio = f"{median / base_median:.2f}×" if base_median else "–"
            if tool == BASELINE:
                ratio = "1.00× (baseline)"
            elif tool == "sync-agent" and base_median:
                ratio = f"**{median / base_median:.2f}×**"
            table.append(f"| {tool} | {fs} | {len(runs)} | {median:.2f} | {min(walls):.2f}–{max(walls):.2f} "
                         f"| {statistics.median(rsses) / 1024:.1f} | {ratio} |")
        agent = {run: w for run, w, _ in rows.get((fs, "sync-agent"), [])}
        for peer in tools:
            if peer == "sync-agent":
                continue
            other = {run: w for run, w, _ in rows.get((fs, peer), [])}
            paired = sorted(agent[r] / other[r] for r in agent if r in other and other[r] > 0)
            if paired:
                notes.append(f"- {fs}: sync-agent ÷ {peer}, run by run (same round): median "
                             f"{statistics.median(paired):.2f}×, range {paired[0]:.2f}–{paired[-1]:.2f}×.")

    params = json.loads((Path(env["STORAGE"]) / ".bench-params.json").read_text())
    mib = 1_048_576
    storage = (f"{params['files']} files in {params['folders']} folders, {params['unzipped_bytes'] / mib:.0f} MiB "
               f"({params['large_files']} files of 1–4 MiB holding {params['large_bytes'] / mib:.0f} MiB, the rest 4–40 KiB; "
               f"{params['random_bytes'] / mib:.0f} MiB random, {params['text_bytes'] / mib:.0f} MiB text-like); "
               f"archive {params['zipped_bytes'] / mib:.0f} MiB (Python zipfile, deflate level 6, seed {params['seed']})")

    mem_kib = next((int(l.split()[1]) for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal:")), 0)
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines() if l.startswith("model name")), "?")
    repo = env.get("REPO", ".")
    commit = sh("git", "-C", repo, "rev-parse", "--short", "HEAD")
    dirty = " (with uncommitted changes in the work tree)" if sh("git", "-C", repo, "status", "--porcelain", "--", "Sources") else ""
    work = env.get("WORK") or os.path.dirname(os.path.dirname(env["STORAGE"]))
    versions = ", ".join([
        sh(env.get("NGINX", "nginx"), "-v") or subprocess.run([env.get("NGINX", "nginx"), "-v"], capture_output=True, text=True).stderr.strip(),
        sh("curl", "--version").splitlines()[0].split(" (")[0] if sh("curl", "--version") else "curl ?",
        sh("unzip", "-v").splitlines()[0].split(" of ")[0] if sh("unzip", "-v") else "unzip ?",
    ])
    agent_path = env.get("AGENT", "")
    built = (datetime.datetime.fromtimestamp(os.path.getmtime(agent_path), datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
             if agent_path and os.path.exists(agent_path) else "at an unknown time")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

    section = [HEADING, "",
               f"Measured {date} by `bench/restore.sh` (work tree at commit {commit}{dirty}; the sync-agent "
               f"binary was built {built}).", "",
               "**What is compared.** A fresh restore of the whole content from the storage's archive, served by nginx on "
               "loopback (`sendfile on`, `access_log off`):",
               "- **sync-agent**: `sync-agent sync --base-url http://127.0.0.1:PORT/… --dir FRESH --state FRESH.sqlite` "
               "(fetches cacheStatus.json, streams the zip into its staging folder, extracts it with libzip on 2 threads, "
               "`syncfs`, renames into place, records the state in SQLite). Each run's tree is checked against the storage "
               "(sorted sha256 list of every file and folder).",
               "- **curl+unzip**: `curl -s -o FRESH/x.zip URL && unzip -q FRESH/x.zip -d FRESH/out` in one `bash -c`.",
               ]
    if "curl+unzip+sync" in tools:
        section.append("- **curl+unzip+sync**: the same followed by `sync -f FRESH/out`, i.e. the same durability work as "
                       "sync-agent's `syncfs` before its swap (on tmpfs that is a no-op).")
    section += ["",
                f"**Storage.** {storage}.", "",
                f"**Machine.** {os.cpu_count()} cores ({cpu}), {mem_kib / 1024 / 1024:.0f} GiB RAM, Linux {platform.release()}; "
                f"work folder {work} on {fs_type(work)}, tmpfs pass on /dev/shm ({fs_type('/dev/shm')}); {versions}.", "",
                f"**Command.** `{env['COMMAND_LINE']}` (`make bench` runs it with the defaults).", "",
                f"**Method.** The tools alternate within each round (sync-agent, curl+unzip{', curl+unzip+sync' if 'curl+unzip+sync' in tools else ''}; "
                f"{env.get('RUNS', '?')} counted rounds per filesystem after {env.get('WARMUP', '?')} uncounted warm-up round(s): "
                "the first writes into memory this VM has not touched since boot are slow, which is not the tools' cost). Every run writes into fresh folders; before each run the "
                "filesystem is flushed (`sync -f`, untimed) so earlier runs' dirty pages do not land on it. On ext4 no run "
                "folder is deleted before the end (a mass delete slows ext4 file creation for minutes). Wall time and peak "
                "RSS come from GNU `time -f \"%e %M\"`; for the curl+unzip rows the RSS is that of the largest child, "
                "not the sum.", "",
                *table, "",
                *notes, ""]
    big = env.get("BIG_LINE", "").strip()
    if big:
        section += [f"**1 GB archive.** {big}", ""]
    section += ["**Goals** (issue 4: wall ≤ 0.9× curl+unzip; sync-agent's peak RSS ≤ 64 MB, for this archive and a "
                "1 GB one; 64 MB = 61.0 MiB):", *goal_lines(rows, filesystems, env.get("BIG_RSS_KB", "")), ""]
    section += ["**Noise.** The disk is a shared virtual disk: the same operation can take 0.04 s or 2 s minutes apart, "
                "and ext4 file creation is the noisiest figure. Trust the medians and the ratios taken within one session, "
                "not single runs or numbers from different sessions; the tmpfs rows show CPU and protocol cost without the "
                "disk, the ext4 rows what a real disk adds.", ""]
    text = "\n".join(section)
    print()
    print(text)

    doc = env.get("DOC", "")
    if not doc:
        return
    replace_section(doc, HEADING, text)
    path = Path(doc)
    print(f"\n(written to {path})")


if __name__ == "__main__":
    main()
