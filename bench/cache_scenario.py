#!/usr/bin/env python3
"""HTTP scenario (issue 11): ItemLoader against requests-cache, counting requests and bytes.

    cache_scenario.py run CACHE_BENCH_BINARY   both tools, print the subsection (and write it
                                               into BENCH_DOC when SCENARIO_WRITE_DOC=1)
    cache_scenario.py client --base URL --steps FILE --start EPOCH --folder DIR
                                               (internal) the requests-cache replay

A loopback server (stdlib ThreadingHTTPServer, 127.0.0.1, ephemeral port) serves RESOURCES, each
with its own caching headers, and answers conditional requests (If-None-Match first, else
If-Modified-Since) with 304 and no body when the validator matches. SCHEDULE says when each
resource is read and when it changes (a new version: new body, ETag and Last-Modified). Both
tools replay the same step list, each as a fresh process in an empty cache folder, against a
server reset to version 0: `cache-bench scenario` (ItemLoader, `freshness: .server`) and the
`client` command here (requests-cache, SQLite backend, `cache_control=True`, its default
`expire_after`). A change is a GET of /_control/change?res=NAME made by the client as one of its
steps, so both see the server change at the same point of their run; control requests are not
counted.

Time: the steps run at whole seconds after a start chosen at a whole second + 0.05 s, so the
server's one-second `Date` (which an RFC 9111 cache counts age from) costs at most ~0.1 s of a
lifetime, and no read falls within 0.9 s of an expiry: the counts do not depend on timing noise.
A run takes about 10 s per tool.

Every read is judged against the server's log: a read that reached the server must return the
version the server had; a read served from the cache must be within the freshness the server last
gave that client (max-age less Age, or Expires; none for no-cache, max-age=0, a past Expires,
no-store). A stale value served within that freshness, or under no explicit freshness at all
(heuristic freshness, RFC 9111 §4.2.2), is reported as allowed; anything else is a violation.
"""
from __future__ import annotations

import email.utils
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

SUBHEADING = "### HTTP scenario vs requests-cache"
SECTION = "## Item cache (issue 11)"
OURS, PEER, IDEAL = "ItemCache", "requests-cache", "RFC 9111 minimum"
PEER_PIN = "requests-cache==1.3.3"
START_FRACTION = 0.05
TOLERANCE = 0.25  # seconds of clock slack allowed when judging a cache hit's freshness
KIB = 1 << 10
LM_BASE = 1_700_000_000  # Last-Modified of version v: this + 60·v (whole seconds, in the past)


@dataclass
class Resource:
    """A resource's caching headers. `expires` is seconds after `Date` (negative: in the past)."""
    cc: str | None = None
    etag: bool = False
    lm: bool = False
    expires: int | None = None
    age: int | None = None
    size: int = 16 * KIB
    changes: list[float] = field(default_factory=list)  # scenario times of the changes
    reads: list[float] | None = None  # scenario times of the reads; None: READS

    def headers_text(self) -> str:
        parts = [f"Cache-Control: {self.cc}"] if self.cc else []
        if self.expires is not None:
            parts.append(f"Expires: Date {'+' if self.expires >= 0 else '−'} {abs(self.expires)} s")
        if self.age is not None:
            parts.append(f"Age: {self.age}")
        parts += [v for v, on in (("ETag", self.etag), ("Last-Modified", self.lm)) if on]
        return ", ".join(parts) or "none"


RESOURCES: dict[str, Resource] = {
    "max-age": Resource(cc="max-age=2", etag=True, changes=[4.5]),
    "max-age-changes": Resource(cc="max-age=2", etag=True, changes=[0.5, 2.5]),
    "max-age-no-validator": Resource(cc="max-age=2", changes=[2.5]),
    "etag-only": Resource(etag=True, changes=[2.5]),
    "last-modified-only": Resource(lm=True, changes=[2.5]),
    "max-age-etag-lm": Resource(cc="max-age=2", etag=True, lm=True, size=64 * KIB),
    "no-cache": Resource(cc="no-cache", etag=True, changes=[2.5]),
    "no-cache-lm": Resource(cc="no-cache", lm=True, changes=[4.5]),
    "no-store": Resource(cc="no-store", size=4 * KIB),
    "expires": Resource(expires=3, etag=True, changes=[0.5]),
    "expires-past": Resource(expires=-60, lm=True, changes=[4.5]),
    "age": Resource(cc="max-age=6", age=3, etag=True, changes=[2.5]),
    "max-age-0": Resource(cc="max-age=0", etag=True, changes=[4.5]),
    # Read 0.75 s into a second and again 1.7 s later: by `Date` (whole seconds) the copy is then
    # 2.45 s old, past max-age=2, though only 1.7 s have passed on the cache's clock.
    "max-age-date": Resource(cc="max-age=2", etag=True, reads=[5.7, 7.4]),
}
READS = [0.0, 1.0, 4.0, 5.0, 8.0]  # when a resource is read, unless it has reads of its own


def schedule() -> list[dict]:
    """The step list both tools replay, in time order (a change before a read at the same time)."""
    steps = [{"t": t, "op": "change", "res": name} for name, r in RESOURCES.items() for t in r.changes]
    steps += [{"t": t, "op": "get", "res": name} for name, r in RESOURCES.items() for t in (READS if r.reads is None else r.reads)]
    order = list(RESOURCES)
    return sorted(steps, key=lambda s: (s["t"], s["op"] != "change", order.index(s["res"])))


def body(name: str, version: int) -> bytes:
    size = RESOURCES[name].size
    head = f"{name} v{version}\n".encode()
    return head + random.Random(f"{name}/{version}").randbytes(size - len(head))


def etag(name: str, version: int) -> str:
    return f'"{name}-v{version}"'


def freshness_end(r: Resource, sent: float, date: float) -> float | None:
    """Until when (epoch) the response sent at `sent` (with `Date` `date`) is fresh by the server's
    own headers, as RFC 9111 §4.2 computes it with no transit delay: the freshness lifetime
    (max-age, else Expires − Date) less the age, which is the larger of `Age` and the time since
    `Date` (§4.2.3); None when the headers give no explicit freshness (a cache may then use
    heuristic freshness, §4.2.2)."""
    directives = {d.strip().split("=")[0]: d.strip().split("=")[-1] for d in (r.cc or "").split(",") if d.strip()}
    if "no-store" in directives or "no-cache" in directives:
        return sent
    if "max-age" in directives:
        return sent + int(directives["max-age"]) - max(r.age or 0, sent - date)
    if r.expires is not None:
        return date + r.expires
    return None


# ---------------------------------------------------------------------------------------------
# The server.

class ScenarioServer:
    """The resources, their versions, and a log of every counted request."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.versions: dict[str, int] = {}
        self.log: list[dict] = []
        handler = type("Handler", (ScenarioHandler,), {"scenario": self})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> "ScenarioServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def reset(self) -> list[dict]:
        """Back to version 0 of everything; returns the log of the run that ended."""
        with self.lock:
            log, self.log, self.versions = self.log, [], {name: 0 for name in RESOURCES}
        return log


class ScenarioHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    scenario: ScenarioServer

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base class's name)
        pass

    def do_GET(self) -> None:  # noqa: N802 (the base class's name)
        url = urlsplit(self.path)
        if url.path == "/_control/change":
            name = parse_qs(url.query).get("res", [""])[0]
            with self.scenario.lock:
                known = name in self.scenario.versions
                if known:
                    self.scenario.versions[name] += 1
            return self.reply(200 if known else 404, {"Cache-Control": "no-store"}, b"ok\n" if known else b"unknown\n")
        name = url.path.removeprefix("/r/")
        if not url.path.startswith("/r/") or name not in RESOURCES:
            return self.reply(404, {}, b"not found\n")
        r = RESOURCES[name]
        with self.scenario.lock:
            version = self.scenario.versions[name]
        sent = time.time()
        date = float(int(sent))  # HTTP dates have whole seconds
        headers = {"Date": email.utils.formatdate(date, usegmt=True), "Content-Type": "application/octet-stream"}
        if r.cc:
            headers["Cache-Control"] = r.cc
        if r.expires is not None:
            headers["Expires"] = email.utils.formatdate(date + r.expires, usegmt=True)
        if r.age is not None:
            headers["Age"] = str(r.age)
        current_etag = etag(name, version) if r.etag else None
        current_lm = LM_BASE + 60 * version if r.lm else None
        if current_etag:
            headers["ETag"] = current_etag
        if current_lm is not None:
            headers["Last-Modified"] = email.utils.formatdate(current_lm, usegmt=True)
        # RFC 9110 §13.2.2: If-None-Match first; If-Modified-Since only without it.
        inm, ims = self.headers.get("If-None-Match"), self.headers.get("If-Modified-Since")
        if inm is not None:
            tags = [t.strip().removeprefix("W/") for t in inm.split(",")]
            not_modified = current_etag is not None and ("*" in tags or current_etag in tags)
        elif ims is not None and current_lm is not None:
            try:
                not_modified = current_lm <= email.utils.parsedate_to_datetime(ims).timestamp()
            except (TypeError, ValueError):
                not_modified = False
        else:
            not_modified = False
        payload = b"" if not_modified else body(name, version)
        if not_modified:
            # RFC 9110 §15.4.5: a 304 repeats Cache-Control, Date, ETag and Expires; Last-Modified
            # is representation metadata it should not send (the cache keeps the stored one).
            headers.pop("Last-Modified", None)
            headers.pop("Content-Type", None)
        step = self.headers.get("X-Scenario-Step")
        with self.scenario.lock:
            self.scenario.log.append({"res": name, "step": int(step) if step and step.isdigit() else -1,
                                      "status": 304 if not_modified else 200, "bytes": len(payload), "version": version,
                                      "sent": sent, "fresh_until": freshness_end(r, sent, date),
                                      "no_store": "no-store" in (r.cc or ""),
                                      "inm": inm, "ims": ims})
        self.reply(304 if not_modified else 200, headers, payload)

    def reply(self, status: int, headers: dict[str, str], payload: bytes) -> None:
        self.send_response_only(status)
        for key, value in headers.items():
            self.send_header(key, value)
        if status != 304:
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if payload:
            self.wfile.write(payload)


# ---------------------------------------------------------------------------------------------
# The requests-cache client (a process of its own, like cache-bench).

def wait_until(moment: float) -> float:
    delay = moment - time.time()
    if delay > 0:
        time.sleep(delay)
    return max(0.0, time.time() - moment)


def client_main(argv: list[str]) -> None:
    opts = dict(zip(argv[0::2], argv[1::2]))
    import requests
    import requests_cache
    steps = json.loads(Path(opts["--steps"]).read_text())
    base, start = opts["--base"], float(opts["--start"])
    session = requests_cache.CachedSession(str(Path(opts["--folder"]) / "http_cache"), backend="sqlite", cache_control=True)
    control = requests.Session()
    for index, step in enumerate(steps):
        late = wait_until(start + step["t"])
        if step["op"] == "change":
            resp = control.get(f"{base}/_control/change", params={"res": step["res"]})
            if resp.status_code != 200:
                sys.exit(f"the control request for {step['res']} got {resp.status_code}")
            continue
        t0 = time.time()
        resp = session.get(f"{base}/r/{step['res']}", headers={"X-Scenario-Step": str(index)})
        t1 = time.time()
        source = ("revalidated" if getattr(resp, "revalidated", False) else "cache") if getattr(resp, "from_cache", False) else "network"
        print(json.dumps({"step": index, "res": step["res"], "t0": t0, "t1": t1, "late": late, "bytes": len(resp.content),
                          "head": resp.content.split(b"\n", 1)[0].decode(), "source": source, "status": resp.status_code,
                          "tool": "requests-cache"}), flush=True)
    session.close()


# ---------------------------------------------------------------------------------------------
# Running and judging.

def peer_version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version
        return f"requests-cache {version('requests-cache')}"
    except PackageNotFoundError:
        sys.exit(f"cache_scenario.py: requests-cache is missing: run through `make bench-cache`, or `pip install '{PEER_PIN}'`")


def run_tool(tool: str, binary: str, server: ScenarioServer, steps_file: Path, folder: Path) -> tuple[list[dict], list[dict]]:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    server.reset()
    start = math.ceil(time.time() + 1.5) + START_FRACTION  # process start-up and imports come first
    args = ["--base", server.base, "--steps", str(steps_file), "--start", repr(start), "--folder", str(folder)]
    cmd = [binary, "scenario", *args] if tool == OURS else [sys.executable, os.path.abspath(__file__), "client", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    log = server.reset()
    if res.returncode != 0:
        sys.exit(f"cache_scenario.py: FAILED: {' '.join(cmd)} exited {res.returncode}: {res.stderr.strip()[-2000:]}")
    gets = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    # A round's reads run one after another, so later ones start late by the earlier ones' time;
    # rounds are a second or more apart and no round falls near an expiry, so up to 0.85 s is fine.
    late = max((g["late"] for g in gets), default=0)
    if late > 0.85 or (gets and gets[0]["late"] > 0.3):
        sys.exit(f"cache_scenario.py: FAILED: {tool} ran a step {late:.2f} s late; the machine is too busy for the scenario's timing")
    shutil.rmtree(folder, ignore_errors=True)
    return gets, log


def judge(steps: list[dict], gets: list[dict], log: list[dict]) -> list[dict]:
    """One verdict per read: whether it reached the server, what it returned, and whether that
    was right."""
    version: dict[str, int] = {name: 0 for name in RESOURCES}
    by_step = {g["step"]: g for g in gets}
    out = []
    for index, step in enumerate(steps):
        if step["op"] == "change":
            version[step["res"]] += 1
            continue
        name, current = step["res"], version[step["res"]]
        got = by_step.get(index)
        if got is None:
            out.append({"step": index, "res": name, "t": step["t"], "verdict": "violation", "note": "no result"})
            continue
        m = re.fullmatch(rf"{re.escape(name)} v(\d+)", got["head"])
        got_version = int(m.group(1)) if m else None
        requests = [e for e in log if e["step"] == index]
        v = {"step": index, "res": name, "t": step["t"], "requests": len(requests), "statuses": [e["status"] for e in requests],
             "got": got_version, "current": current, "source": got.get("source")}
        if got_version is None or got["bytes"] != RESOURCES[name].size:
            v.update(verdict="violation", note=f"returned {got['bytes']} bytes starting '{got['head'][:40]}'")
        elif requests:
            ok = got_version == current
            v.update(verdict="ok" if ok else "violation", note="" if ok else f"reached the server but returned v{got_version}, not v{current}")
        else:
            earlier = [e for e in log if e["res"] == name and 0 <= e["step"] < index]
            last = earlier[-1] if earlier else None
            if last is None:
                v.update(verdict="violation", note="served without ever reaching the server")
            elif last["no_store"]:
                v.update(verdict="violation", note="served a no-store response from the cache")
            elif last["fresh_until"] is None:
                v.update(verdict="ok" if got_version == current else "stale-heuristic",
                         note="" if got_version == current else f"v{got_version} while the server had v{current}; "
                         "no explicit freshness (the cache's default lifetime)")
            elif got["t0"] <= last["fresh_until"] + TOLERANCE:
                v.update(verdict="ok" if got_version == current else "stale-fresh",
                         note="" if got_version == current else f"v{got_version} while the server had v{current}; "
                         "still fresh by the server's headers")
            else:
                late_by = got["t0"] - last["fresh_until"]
                v.update(verdict="violation", note=f"served from the cache {late_by:.2f} s after the server's freshness ended"
                         + ("" if got_version == current else f", v{got_version} while the server had v{current}"))
        out.append(v)
    return out


def ideal(steps: list[dict], start_fraction: float = START_FRACTION) -> list[dict]:
    """What an RFC 9111 private cache with no heuristic refetch must send: a request exactly when
    it holds nothing, holds a no-store or no-cache response, or its copy is past the server's
    freshness; a 304 when its validator still matches."""
    version: dict[str, int] = {name: 0 for name in RESOURCES}
    held: dict[str, tuple[int, float | None]] = {}
    log = []
    for index, step in enumerate(steps):
        name, t = step["res"], step["t"]
        if step["op"] == "change":
            version[name] += 1
            continue
        r = RESOURCES[name]
        copy = held.get(name)
        if copy is not None and (copy[1] is None or t < copy[1]):
            continue
        not_modified = copy is not None and (r.etag or r.lm) and copy[0] == version[name]
        date = math.floor(t + start_fraction) - start_fraction
        if "no-store" not in (r.cc or ""):
            held[name] = (version[name], freshness_end(r, t, date))
        log.append({"res": name, "step": index, "status": 304 if not_modified else 200, "bytes": 0 if not_modified else r.size})
    return log


def totals(log: list[dict]) -> dict:
    return {"requests": len(log), "200": sum(e["status"] == 200 for e in log), "304": sum(e["status"] == 304 for e in log),
            "bytes": sum(e["bytes"] for e in log)}


def run(binary: str) -> dict:
    """Both tools, one fresh run each; the totals, per-resource counts and verdicts."""
    steps = schedule()
    work = Path(os.environ.get("BENCH_WORK", "/tmp/content-sync-bench/cache")) / "scenario"
    work.mkdir(parents=True, exist_ok=True)
    steps_file = work / "steps.json"
    steps_file.write_text(json.dumps(steps))
    server = ScenarioServer().start()
    result = {"kind": "scenario", "peer": peer_version(), "steps": steps, "tools": {}, "started": time.time()}
    try:
        # Deterministic by design; the order alternates with the minute only to show it does not matter.
        order = [PEER, OURS] if int(time.time() // 60) % 2 else [OURS, PEER]
        for tool in order:
            print(f"[cache_scenario.py {time.strftime('%H:%M:%S')}] {tool}", file=sys.stderr, flush=True)
            gets, log = run_tool(tool, binary, server, steps_file, work / tool)
            result["tools"][tool] = {"totals": totals(log), "log": log, "gets": gets, "verdicts": judge(steps, gets, log)}
    finally:
        server.stop()
    result["tools"][IDEAL] = {"totals": totals(ideal(steps)), "log": ideal(steps)}
    return result


# ---------------------------------------------------------------------------------------------
# The report.

def per_resource(log: list[dict], name: str) -> str:
    rows = [e for e in log if e["res"] == name]
    return f"{len(rows)} ({sum(e['status'] == 200 for e in rows)}/{sum(e['status'] == 304 for e in rows)})"


def section_lines(result: dict) -> list[str]:
    tools = result["tools"]
    ours, peer, best = tools[OURS]["totals"], tools[PEER]["totals"], tools[IDEAL]["totals"]
    lines = [SUBHEADING, "",
             f"A scripted loopback server (`bench/cache_scenario.py`) serves {len(RESOURCES)} resources, read at "
             f"t = {', '.join(f'{t:g}' for t in READS)} s (one at times of its own) and some changed in between "
             "(new body, ETag, Last-Modified), "
             f"{sum(s['op'] == 'get' for s in result['steps'])} reads in all. Both tools replay the same steps in a fresh "
             "process with an empty cache: ItemLoader (`cache-bench scenario`, `CacheConfiguration.freshness = .server`, "
             f"other settings at their defaults) and {result['peer']} (`CachedSession(backend='sqlite', cache_control=True)`, "
             "default `expire_after`). The server counts requests, statuses and body bytes; control requests that change a "
             f"resource are not counted. \"{IDEAL}\" is what a cache that follows RFC 9111 to the letter (and uses no heuristic "
             "refetch) must send.", "",
             f"| tool | requests | 200 | 304 | body bytes | requests vs {PEER} | freshness violations | stale reads allowed |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for tool in (OURS, PEER, IDEAL):
        t = tools[tool]["totals"]
        verdicts = tools[tool].get("verdicts")
        bad = "–" if verdicts is None else str(sum(v["verdict"] == "violation" for v in verdicts))
        stale = "–" if verdicts is None else str(sum(v["verdict"].startswith("stale") for v in verdicts))
        lines.append(f"| {tool} | {t['requests']} | {t['200']} | {t['304']} | {t['bytes']:,} | "
                     f"{t['requests'] / peer['requests']:.2f}× | {bad} | {stale} |")
    met = ours["requests"] <= peer["requests"]
    peer_verdicts = {v["step"]: v for v in tools[PEER]["verdicts"]}
    extra = [v for v in tools[OURS]["verdicts"] if v.get("requests") and not peer_verdicts[v["step"]].get("requests")]
    fewer = [v for v in tools[OURS]["verdicts"] if not v.get("requests") and peer_verdicts[v["step"]].get("requests")]
    goal = (f"**Goal** (no more requests than {PEER}): {'**met**' if met else '**missed**'}, {ours['requests']} against "
            f"{peer['requests']} (the RFC minimum is {best['requests']}).")
    if extra:
        excused = [v for v in extra if peer_verdicts[v["step"]]["verdict"] == "violation"]
        goal += (f" {OURS} asked where {PEER} did not at {len(extra)} read(s): "
                 + "; ".join(f"`{v['res']}` at t = {v['t']:g} s" for v in extra) + ". "
                 + ("Each of these is a read " + PEER + " served past the server's freshness (below), so against a cache "
                    "that keeps to it the goal is met." if len(excused) == len(extra) else
                    f"{len(extra) - len(excused)} of them were not forced by the server's freshness: see below."))
    if fewer:
        goal += f" {PEER} asked where {OURS} did not at " + "; ".join(f"`{v['res']}` at t = {v['t']:g} s" for v in fewer) + "."
    lines += ["", goal, "",
              "Per resource, requests (200/304):", "",
              f"| resource | headers | read at (s) | changed at (s) | {OURS} | {PEER} | {IDEAL} |", "|---|---|---|---|---:|---:|---:|"]
    for name, r in RESOURCES.items():
        reads = "rounds" if r.reads is None else ", ".join(f"{t:g}" for t in r.reads)
        lines.append(f"| `{name}` | {r.headers_text()} | {reads} | {', '.join(f'{c:g}' for c in r.changes) or '–'} | "
                     f"{per_resource(tools[OURS]['log'], name)} | {per_resource(tools[PEER]['log'], name)} | "
                     f"{per_resource(tools[IDEAL]['log'], name)} |")
    notes = []
    for tool in (OURS, PEER):
        for v in tools[tool]["verdicts"]:
            if v["verdict"] != "ok":
                kind = "violation" if v["verdict"] == "violation" else "allowed"
                notes.append(f"- {tool}, `{v['res']}` at t = {v['t']:g} s ({kind}): {v['note']}.")
    if notes:
        lines += ["", "Reads that did not return the server's current version, or broke its freshness:", "", *notes]
    return lines + [""]


def replace_subsection(doc: str, text: str) -> None:
    """Replace this subsection inside the item cache section of `doc` (appended to the section, or
    the section made, when missing); the rest of the file is kept."""
    path = Path(doc)
    old = path.read_text() if path.exists() else ""
    sub = re.compile(rf"^{re.escape(SUBHEADING)}\n.*?(?=^### |^## |\Z)", re.S | re.M)
    if sub.search(old):
        new = sub.sub(lambda _: text.rstrip("\n") + "\n\n", old, count=1)
    else:
        section = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
        found = section.search(old)
        if found:
            new = old[:found.end()].rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n\n" + old[found.end():]
        else:
            new = old.rstrip("\n") + f"\n\n{SECTION}\n\n" + text
    path.write_text(new.rstrip("\n") + "\n")


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["client"]:
        client_main(argv[1:])
    elif argv[:1] == ["run"] and len(argv) == 2:
        result = run(os.path.abspath(argv[1]))
        out = Path(os.environ.get("BENCH_WORK", "/tmp/content-sync-bench/cache")) / "scenario" / "result.json"
        out.write_text(json.dumps(result))
        text = "\n".join(section_lines(result))
        print(text)
        doc = os.environ.get("BENCH_DOC", "docs/benchmarks.md")
        if doc and os.environ.get("SCENARIO_WRITE_DOC") == "1":
            replace_subsection(doc, text)
        print(f"[cache_scenario.py] raw result: {out}", file=sys.stderr)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(64)


if __name__ == "__main__":
    main()
