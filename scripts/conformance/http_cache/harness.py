"""Case framework: a Ctx per case (own cache dir, own URL prefix on the origin),
helpers to script responses, run `sync-agent cache get`, and record verdicts."""
import json, os, re, shutil, subprocess, time, threading
from origin import Origin, Resp, httpdate

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BIN = os.environ.get("SYNC_AGENT", os.path.join(_REPO, ".build", "debug", "sync-agent"))
# Every case's cache folder, and the results: a fresh folder per run unless CONFORMANCE_WORK names one.
ROOT = os.environ.get("CONFORMANCE_WORK") or __import__("tempfile").mkdtemp(prefix="http-cache-conformance-")
CACHES = os.path.join(ROOT, "caches")

CASES = []

def case(name, expected, level, section):
    """level: MUST / SHOULD (a miss is FAIL), OPT (optimal/MAY: a miss is DEV),
    CHECK (either outcome allowed: INFO), DESIGN (documented choice: a miss vs RFC is DESIGN)."""
    def deco(fn):
        CASES.append(dict(name=name, expected=expected, level=level, section=section, fn=fn))
        return fn
    return deco

def addcase(name, expected, level, section, fn):
    CASES.append(dict(name=name, expected=expected, level=level, section=section, fn=fn))


def H(name, off):
    """A date header evaluated when sent: now + off seconds."""
    return lambda: "%s: %s" % (name, httpdate(off))

def R(status=200, *headers, body=b"body", reason=None, date=None, raw_head=None, content_length=True):
    hdrs = list(headers)
    if date is None:
        date = True
        for h in hdrs:
            s = h() if callable(h) else (h.decode("latin-1") if isinstance(h, bytes) else h)
            if s.lower().startswith("date:"):
                date = False
    return Resp(status, hdrs, body, reason=reason, date=date, raw_head=raw_head,
                content_length=content_length)

def seq(*items):
    """n-th request gets items[n]; the last repeats. Items: Resp, 'close', callable(req, n)."""
    def fn(req, n):
        it = items[min(n, len(items) - 1)]
        return it(req, n) if callable(it) and not isinstance(it, Resp) else it
    return fn


class Result:
    def __init__(self, args, rc, out, err, mode):
        self.args, self.rc, self.out, self.err, self.mode = args, rc, out, err, mode
        self.j = None
        self.status = None
        self.hlines = []     # -i header lines
        self.body = None
        self.raw_head = None
        if mode == "json":
            try:
                self.j = json.loads(out.decode("utf-8", "replace"))
            except Exception:
                self.j = None
        elif mode == "include":
            o = out
            sep = b"\r\n\r\n" if b"\r\n\r\n" in o else b"\n\n"
            head, _, body = o.partition(sep)
            self.raw_head = head
            self.body = body
            lines = head.decode("latin-1").replace("\r\n", "\n").split("\n")
            if lines and lines[0].startswith("HTTP/"):
                try:
                    self.status = int(lines[0].split()[1])
                except Exception:
                    pass
                self.hlines = lines[1:]
        else:
            self.body = out

    @property
    def src(self):
        return self.j.get("source") if self.j else None

    @property
    def jstatus(self):
        return self.j.get("status") if self.j else None

    def hdr(self, name):
        """From -i output: list of values for name; from --json: [value]."""
        if self.mode == "include":
            out = []
            for l in self.hlines:
                k, _, v = l.partition(":")
                if k.strip().lower() == name.lower():
                    out.append(v.strip())
            return out
        if self.j:
            v = (self.j.get("headers") or {}).get(name.lower())
            return [v] if v is not None else []
        return []

    def crashed(self):
        return (self.rc < 0 or self.rc >= 128 or "Fatal error" in self.err
                or "fatalError" in self.err or "Illegal instruction" in self.err)

    def short(self):
        s = "rc=%d" % self.rc
        if self.j:
            s += " src=%s st=%s" % (self.src, self.jstatus)
            if self.j.get("stale"):
                s += " stale"
        elif self.status is not None:
            s += " st=%s" % self.status
        return s


class Ctx:
    def __init__(self, origin, name):
        self.origin = origin
        self.name = name
        self.slug = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
        self.cache = os.path.join(CACHES, self.slug)
        shutil.rmtree(self.cache, ignore_errors=True)
        self.url = "%s/c/%s/r" % (origin.base, self.slug)
        self.runs = []
        self.crashes = []
        self.notes = []

    def serve(self, *items):
        if len(items) == 1 and callable(items[0]) and not isinstance(items[0], Resp):
            self.origin.script(self.slug, items[0])
        else:
            self.origin.script(self.slug, seq(*items))

    def get(self, *headers, mode="json", url=None, extra=(), timeout=120):
        args = [BIN, "cache", "get", url or self.url, "--cache", self.cache]
        for h in headers:
            args += ["-H", h]
        if mode == "json":
            args.append("--json")
        elif mode == "include":
            args.append("-i")
        args += list(extra)
        t = time.time()
        try:
            p = subprocess.run(args, capture_output=True, timeout=timeout)
            rc, out, err = p.returncode, p.stdout, p.stderr.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as e:
            rc, out, err = -999, e.stdout or b"", "TIMEOUT"
        r = Result(args, rc, out, err, mode)
        r.elapsed = time.time() - t
        self.runs.append(r)
        if r.crashed():
            self.crashes.append("CRASH rc=%d: %s" % (rc, err.strip()[-400:]))
        return r

    @property
    def reqs(self):
        return self.origin.requests(self.slug)

    @property
    def n(self):
        return len(self.reqs)

    def req_hdr(self, i, name):
        rs = self.reqs
        return rs[i].get(name) if i < len(rs) else None

    def note(self, s):
        self.notes.append(s)


def run_case(origin, c):
    ctx = Ctx(origin, c["name"])
    try:
        res = c["fn"](ctx)
    except Exception as e:
        import traceback
        res = (False, "HARNESS ERROR: %r %s" % (e, traceback.format_exc()[-600:]))
    ok, observed = res
    lvl = c["level"]
    if ctx.crashes:
        verdict = "FAIL"
        observed = "; ".join(ctx.crashes) + " | " + observed
    elif ok:
        verdict = "PASS"
    else:
        verdict = {"MUST": "FAIL", "SHOULD": "FAIL", "OPT": "DEV", "CHECK": "INFO",
                   "DESIGN": "DESIGN", "DOC": "FAIL-DOC"}[lvl]
    if ctx.notes:
        observed += " | " + "; ".join(ctx.notes)
    return dict(name=c["name"], expected=c["expected"], level=lvl, section=c["section"],
                observed=observed, verdict=verdict,
                commands=[" ".join(shq(a) for a in r.args) for r in ctx.runs],
                requests=[dict(method=q.method, target=q.target, headers=q.lines) for q in ctx.reqs])

def shq(a):
    return a if re.fullmatch(r"[A-Za-z0-9_./:=@%+-]+", a) else "'" + a.replace("'", "'\\''") + "'"
