"""Hostile inputs: huge/negative numbers, garbage values, bare CR, NUL, obs-fold, many lines.
Any crash (exit >= 128, signal, Swift fatal error) is a FAIL."""
import time
from harness import case, addcase, R, H, seq
from origin import Resp

CC = "Cache-Control: "
BIG = "9223372036854775807"
HUGE = "9" * 40

def hostile(name, responses, gets, expect=None, expected="no crash", level="MUST", section="robustness", pause=0.0, pause_before=None):
    """gets: list of (headers tuple, mode). expect(c, results) -> (ok, text) or None."""
    def fn(c):
        c.serve(*responses)
        res = []
        for i, (hdrs, mode) in enumerate(gets):
            if i and pause:
                time.sleep(pause)
            if pause_before and i in pause_before:
                time.sleep(pause_before[i])
            res.append(c.get(*hdrs, mode=mode))
        base = "reqs=%d; " % c.n + "; ".join("%s" % r.short() for r in res)
        errs = [r.err.strip().splitlines()[-1][:160] for r in res if r.err.strip()]
        if errs:
            base += "; stderr: " + " | ".join(errs[:2])
        if expect:
            ok, txt = expect(c, res)
            return ok, txt + " | " + base
        return True, base
    addcase("hostile/" + name, expected, level, section, fn)

J = ((), "json")
def gets(*hdr_sets, mode="json"):
    return [(h, mode) for h in hdr_sets]

def reused(c, res):
    return c.n == 1, "reused" if c.n == 1 else "not reused"
def not_reused(c, res):
    return c.n >= 2, "reused" if c.n == 1 else "not reused"

# numbers
hostile("max-age=1000 digits", [R(200, CC + "max-age=" + "9" * 1000)], [J, J], reused, "no crash; fresh (2^31 cap)", "MUST", "9111 §1.2.2")
hostile("Age=1000 digits", [R(200, CC + "max-age=3600", "Age: " + "9" * 1000)], [J, J], not_reused, "no crash; stale", "MUST", "9111 §1.2.2")
hostile("max-age=Int64.max + Age=Int64.max", [R(200, CC + "max-age=" + BIG, "Age: " + BIG)], [J, J], not_reused, "no crash; stale (age 2^31 ≥ lifetime 2^31)", "CHECK")
hostile("max-age=Int64.max + Date year 0001", [R(200, CC + "max-age=" + BIG, "Date: Mon, 01 Jan 0001 00:00:00 GMT")], [J, J], None, "no crash")
hostile("Date year 0001 + max-age=3600", [R(200, CC + "max-age=3600", "Date: Mon, 01 Jan 0001 00:00:00 GMT")], [J, J], not_reused, "no crash; stale (apparent_age huge)", "CHECK", "9111 §4.2.3")
hostile("Date year 9999 + max-age=3600", [R(200, CC + "max-age=3600", "Date: Fri, 31 Dec 9999 23:59:59 GMT")], [J, J], reused, "no crash; fresh (apparent_age = 0)", "CHECK", "9111 §4.2.3")
hostile("Date year 9999 + Expires 2050", [R(200, "Expires: Thu, 18 Aug 2050 02:01:18 GMT", "Date: Fri, 31 Dec 9999 23:59:59 GMT")], [J, J], not_reused, "no crash; Expires < Date → stale", "MUST", "9111 §4.2.1")
hostile("Last-Modified year 0001, no freshness", [R(200, "Last-Modified: Mon, 01 Jan 0001 00:00:00 GMT")], [J, J], None, "no crash")
hostile("Last-Modified year 9999, no freshness", [R(200, "Last-Modified: Fri, 31 Dec 9999 23:59:59 GMT")], [J, J], None, "no crash")
hostile("Expires year 99999999999", [R(200, "Expires: Fri, 31 Dec 99999999999 23:59:59 GMT", H("Date", 0))], [J, J], not_reused, "no crash; invalid → stale", "MUST", "9111 §5.3")
hostile("Expires -99999999999999999999", [R(200, "Expires: -99999999999999999999", H("Date", 0))], [J, J], not_reused, "no crash; invalid → stale", "MUST", "9111 §5.3")
hostile("req max-stale=Int64.max on stale", [R(200, CC + "max-age=1")], [J, (("Cache-Control: max-stale=" + BIG,), "json")], reused, "no crash; stale served", "CHECK", pause=2.5)
hostile("req max-stale=40 digits on stale", [R(200, CC + "max-age=1")], [J, (("Cache-Control: max-stale=" + HUGE,), "json")], reused, "no crash; stale served", "CHECK", pause=2.5)
hostile("req max-stale=-1 on stale", [R(200, CC + "max-age=1")], [J, (("Cache-Control: max-stale=-1",), "json")], not_reused, "no crash; invalid → not stale-served", "CHECK", pause=2.5)
hostile("req min-fresh=Int64.max", [R(200, CC + "max-age=3600")], [J, (("Cache-Control: min-fresh=" + BIG,), "json")], not_reused, "no crash; not fresh enough", "CHECK")
hostile("req min-fresh=40 digits", [R(200, CC + "max-age=3600")], [J, (("Cache-Control: min-fresh=" + HUGE,), "json")], not_reused, "no crash", "CHECK")
hostile("req max-age=-1", [R(200, CC + "max-age=3600")], [J, (("Cache-Control: max-age=-1",), "json")], None, "no crash")
hostile("req max-age=40 digits", [R(200, CC + "max-age=3600")], [J, (("Cache-Control: max-age=" + HUGE,), "json")], reused, "no crash; reused", "CHECK")
hostile("req max-age=Int64.max", [R(200, CC + "max-age=3600")], [J, (("Cache-Control: max-age=" + BIG,), "json")], reused, "no crash; reused", "CHECK")
hostile("swr=Int64.max, stale", [R(200, CC + "max-age=1, stale-while-revalidate=" + BIG, 'ETag: "s"'), R(304, 'ETag: "s"')], [J, J], None, "no crash", pause=2.5)
hostile("swr=40 digits, stale", [R(200, CC + "max-age=1, stale-while-revalidate=" + HUGE, 'ETag: "s"'), R(304, 'ETag: "s"')], [J, J], None, "no crash", pause=2.5)
hostile("swr=-5, stale", [R(200, CC + "max-age=1, stale-while-revalidate=-5", 'ETag: "s"'), R(304, 'ETag: "s"')], [J, J],
        lambda c, r: (r[1].src != "stale", "src=%s" % r[1].src), "no crash; invalid swr → no stale serving", "SHOULD", "RFC 5861 §3, 9111 §4.2.4", pause=2.5)
hostile("max-age=Int64.max, swr=Int64.max fresh", [R(200, CC + "max-age=%s, stale-while-revalidate=%s" % (BIG, BIG))], [J, J], reused, "no crash; reused", "CHECK")
hostile("sie=Int64.max + 503", [R(200, CC + "max-age=1, stale-if-error=" + BIG), R(503)], [J, J], None, "no crash", pause=2.5)
hostile("sie=40 digits + close", [R(200, CC + "max-age=1, stale-if-error=" + HUGE), "close"], [J, J], None, "no crash", pause=2.5)
hostile("req sie=Int64.max + 503", [R(200, CC + "max-age=1"), R(503)], [J, (("Cache-Control: stale-if-error=" + BIG,), "json")], None, "no crash", pause=2.5)
hostile("sie=-1 + must-revalidate + 503", [R(200, CC + "max-age=1, must-revalidate, stale-if-error=-1"), R(503)], [J, J],
        lambda c, r: (r[1].rc != 0, "rc=%d" % r[1].rc), "no crash; not stale", "MUST", "9111 §5.2.2.2", pause=2.5)
hostile("Retry-After 40 digits on 503", [R(503, "Retry-After: " + HUGE)], [J, J], None, "no crash")
hostile("Retry-After date year 9999 on 503", [R(503, "Retry-After: Fri, 31 Dec 9999 23:59:59 GMT")], [J, J], None, "no crash")
hostile("Retry-After -5 on 503", [R(503, "Retry-After: -5")], [J, J], None, "no crash")
hostile("Age -0 / +5", [R(200, CC + "max-age=3600", "Age: +5")], [J, J], reused, "no crash; invalid Age ignored", "SHOULD", "9111 §5.1")
hostile("max-age=1e3", [R(200, CC + "max-age=1e3")], [J, J], None, "no crash")
hostile("Cache-Control: (empty)", [R(200, "Cache-Control:")], [J, J], None, "no crash")
hostile("unterminated quote in CC", [R(200, CC + 'max-age=3600, foo="bar')], [J, J], None, "no crash")
hostile("unterminated no-cache=\"", [R(200, CC + 'max-age=3600, no-cache="')], [J, J], None, "no crash")
hostile("CC garbage '=,=,,==;;\"\\'", [R(200, CC + '=,=,,==;;"\\')], [J, J], None, "no crash")

# sizes / many lines
hostile("Cache-Control 100 KB line", [R(200, CC + "a, " * 33000 + "max-age=3600")], [J, J], None, "no crash")
hostile("20000 header lines", [R(200, CC + "max-age=3600", *["X-F%d: v" % i for i in range(20000)])], [J, J], None, "no crash")
hostile("5000 Cache-Control lines", [R(200, *[CC + "max-age=3600"] * 5000)], [J, J], None, "no crash")
hostile("5000 Cache-Control lines, last no-store", [R(200, *([CC + "max-age=3600"] * 5000 + [CC + "no-store"]))], [J, J], not_reused,
        "no crash; no-store honoured (or fetch refused)", "MUST", "9111 §5.2.2.5, 9110 §5.3")
hostile("Vary 2000 names", [R(200, CC + "max-age=3600", "Vary: " + ", ".join("H%d" % i for i in range(2000)))], [J, J], None, "no crash")
hostile("1000 Vary lines 'Foo'", [R(200, CC + "max-age=3600", *["Vary: Foo"] * 1000)], [(("Foo: 1",), "json"), (("Foo: 1",), "json")], None, "no crash")
hostile("ETag 100 KB", [R(200, CC + "max-age=1", 'ETag: "' + "e" * 100000 + '"'), R(304, 'ETag: "' + "e" * 100000 + '"')], [J, J], None, "no crash", pause=2.5)
hostile("header name 8 KB", [R(200, CC + "max-age=3600", "X" * 8192 + ": v")], [J, J], None, "no crash")
hostile("header value 1 MB", [R(200, CC + "max-age=3600", "X-Big: " + "v" * 1000000)], [J, J], None, "no crash")
hostile("1000 Set-Cookie lines", [R(200, CC + "max-age=3600", *["Set-Cookie: c%d=v" % i for i in range(1000)])], [((), "include"), ((), "include")], None, "no crash")

# bytes
hostile("ETag with bare CR", [R(200, CC + "max-age=1", b'ETag: "a\rb"'), R(200, CC + "max-age=1", b'ETag: "a\rb"')], [J, J, J], None, "no crash (design: validator dropped)", pause=2.5)
hostile("Cache-Control with bare CR before no-store", [R(200, b"Cache-Control: max-age=3600\rno-store")], [J, J], None,
        "no crash; bare CR → invalid or SP (9112 §2.2)", "CHECK", "9112 §2.2")
hostile("Cache-Control bare CR between list members", [R(200, b"Cache-Control: max-age=3600,\rno-store")], [J, J], not_reused,
        "no crash; CR→SP gives 'max-age=3600, no-store' → not stored (or message rejected)", "MUST", "9112 §2.2, 9111 §5.2.2.5")
hostile("X-Header with bare CR", [R(200, CC + "max-age=3600", b"X-A: a\rb")], [((), "include"), ((), "include")], None, "no crash")
hostile("NUL in header value", [R(200, CC + "max-age=3600", b"X-A: a\x00b")], [((), "include"), ((), "include")], None, "no crash")
hostile("NUL in Cache-Control", [R(200, b"Cache-Control: max-age=3600\x00, no-store")], [J, J], None, "no crash")
hostile("obs-fold continuation no-store", [R(200, b"Cache-Control: max-age=3600,\r\n no-store")], [J, J], not_reused,
        "no crash; obs-fold replaced by SP → 'max-age=3600, no-store' → not stored", "MUST", "9112 §5.2 (UA MUST replace obs-fold with SP)")
hostile("obs-fold continuation with tab", [R(200, b"Cache-Control: max-age=3600,\r\n\tno-cache")], [J, J], not_reused,
        "no crash; 'max-age=3600, no-cache' → validated", "MUST", "9112 §5.2, 9111 §5.2.2.4")
hostile("non-UTF-8 header value", [R(200, CC + "max-age=3600", b"X-Bin: \xff\xfe\x80abc")], [((), "include"), ((), "include"), J], None, "no crash")
hostile("non-UTF-8 ETag", [R(200, CC + "max-age=1", b'ETag: "\xff\xfe"'), R(304, b'ETag: "\xff\xfe"')], [J, J], None, "no crash", pause=2.5)
hostile("non-UTF-8 Vary name", [R(200, CC + "max-age=3600", b"Vary: F\xffoo")], [J, J], None, "no crash")
hostile("Vary with control char", [R(200, CC + "max-age=3600", b"Vary: Fo\x01o")], [J, J], None, "no crash")
hostile("header line without colon", [R(200, CC + "max-age=3600", "Garbage line here")], [J, J], None, "no crash")
hostile("header with empty name ': v'", [R(200, CC + "max-age=3600", ": v")], [J, J], None, "no crash")
hostile("duplicate differing Date lines", [R(200, CC + "max-age=3600", H("Date", 0), H("Date", -86400))], [J, J], None, "no crash")
hostile("Date garbage bytes", [R(200, CC + "max-age=3600", b"Date: \xff\xff\xff")], [J, J], None, "no crash")

# framing / status
hostile("status line without reason", [R(200, CC + "max-age=3600", raw_head=b"HTTP/1.1 200\r\nCache-Control: max-age=3600\r\nContent-Length: 2", body=b"ok")], [((), "include"), ((), "include")], None, "no crash")
hostile("status 999", [R(999, CC + "max-age=3600", reason="Weird")], [J, J], None, "no crash")
hostile("status 2000", [R(200, raw_head=b"HTTP/1.1 2000 OK\r\nContent-Length: 2", body=b"ok")], [J, J], None, "no crash")
hostile("status 099", [R(200, raw_head=b"HTTP/1.1 099 Low\r\nContent-Length: 2", body=b"ok")], [J, J], None, "no crash")
hostile("not HTTP at all", [R(200, raw_head=b"SSH-2.0-OpenSSH", body=b"")], [J, J], None, "no crash")
TRUNC = R(200, raw_head=b"HTTP/1.1 200 OK\r\nCache-Control: max-age=3600\r\nContent-Length: 100", body=b"0123456789")
hostile("truncated body (Content-Length 100, 10 sent)", [TRUNC, TRUNC, R(200, CC + "max-age=3600", body=b"complete")],
        [((), "raw"), ((), "raw"), ((), "raw")],
        lambda c, r: (r[0].rc != 0 and r[0].body != b"0123456789" and r[1].body == b"complete" and c.n == 3,
                      "rc1=%d body1=%r body2=%r" % (r[0].rc, r[0].body, r[1].body)),
        "1st get fails (incomplete, retried once), nothing stored; 2nd (after 1 s backoff) fetches the complete body",
        "MUST", "9111 §3.3 (incomplete response MUST NOT be used)", pause_before={1: 1.6})
hostile("two different Content-Length", [R(200, raw_head=b"HTTP/1.1 200 OK\r\nCache-Control: max-age=3600\r\nContent-Length: 2\r\nContent-Length: 5", body=b"ok")], [J, J], None, "no crash")
hostile("bad chunked encoding", [R(200, raw_head=b"HTTP/1.1 200 OK\r\nCache-Control: max-age=3600\r\nTransfer-Encoding: chunked", body=b"zz\r\nabc\r\n0\r\n\r\n")], [J, J], None, "no crash")
hostile("close-delimited body (HTTP/1.0, no length)", [R(200, raw_head=b"HTTP/1.0 200 OK\r\nCache-Control: max-age=3600", body=b"closebody")], [((), "raw"), ((), "raw")], reused, "no crash; stored", "CHECK")
hostile("100 Continue before 200", [R(200, raw_head=b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nCache-Control: max-age=3600\r\nContent-Length: 2", body=b"ok")], [J, J], reused, "no crash; 200 stored", "CHECK")
hostile("unsolicited 304 (nothing stored)", [R(304, 'ETag: "x"')], [J, J], None, "no crash")
hostile("304 with body + Content-Length", [R(200, CC + "max-age=1", 'ETag: "x"', body=b"orig"),
                                             R(200, raw_head=b'HTTP/1.1 304 Not Modified\r\nETag: "x"\r\nContent-Length: 5', body=b"xxxxx")], [J, ((), "raw")],
        lambda c, r: (r[1].body in (b"orig", b""), "body=%r" % r[1].body), "no crash; stored body served", "CHECK", pause=2.5)
hostile("304 with huge max-age + Age", [R(200, CC + "max-age=1", 'ETag: "x"'), R(304, 'ETag: "x"', CC + "max-age=" + HUGE, "Age: " + HUGE)], [J, J, J], None, "no crash", pause=2.5)
hostile("304 adding Vary: *", [R(200, CC + "max-age=1", 'ETag: "x"'), R(304, 'ETag: "x"', "Vary: *", CC + "max-age=3600")], [J, J, J],
        lambda c, r: (c.n >= 3, "3rd get %s" % ("reached origin" if c.n >= 3 else "served from cache")), "after merge Vary: * → not reused", "CHECK", "9111 §4.1, §4.3.4", pause=1.5)
hostile("Location garbage on 302", [R(302, "Location: http://[::1")], [J, J], None, "no crash")
hostile("redirect loop", [lambda req, n: R(302, "Location: " + req.target)], [J], None, "no crash; error")

# caller-side
hostile("req header with CRLF injection", [R(200, CC + "max-age=3600")], [(("X-A: 1\r\nX-Injected: 2",), "json")],
        lambda c, r: (not any(l.lower().startswith("x-injected") for q in c.reqs for l in q.lines), "origin saw lines: %s" % [l for q in c.reqs for l in q.lines if l.lower().startswith("x-")]),
        "no header injection", "MUST", "9110 §5.5 (CR/LF not allowed in field values)")
hostile("req header value 100 KB", [R(200, CC + "max-age=3600")], [(("X-Big: " + "v" * 100000,), "json")], None, "no crash")
hostile("req 'Cache-Control: \"'", [R(200, CC + "max-age=3600")], [J, (('Cache-Control: "',), "json")], None, "no crash")
hostile("req 300 -H headers", [R(200, CC + "max-age=3600", "Vary: H1")], [(tuple("H%d: %d" % (i, i) for i in range(300)), "json")], None, "no crash")

hostile("obs-fold line with a colon smuggles a field", [R(200, "Expires: 0", b"X-Note: x\r\n Cache-Control: max-age=3600", body=b"v")], [J, J], not_reused,
        "unfolded: X-Note='x Cache-Control: max-age=3600'; Expires: 0 → stale → 2nd get reaches origin", "MUST", "9112 §5.2 (UA MUST unfold obs-fold), 9111 §5.3")

# date-arithmetic extremes (overflow hunting)
D0001 = "Date: Mon, 01 Jan 0001 00:00:00 GMT"
D9999 = "Date: Fri, 31 Dec 9999 23:59:59 GMT"
E9999 = "Expires: Fri, 31 Dec 9999 23:59:59 GMT"
hostile("Expires 9999 + Date 0001 (lifetime ~8000 y)", [R(200, E9999, D0001)], [((), "include"), J, J], None, "no crash")
hostile("Date 9999 + Age 2^31 + swr/sie Int64.max", [R(200, D9999, "Age: 2147483648", CC + "max-age=0, stale-while-revalidate=%s, stale-if-error=%s" % (BIG, BIG), 'ETag: "d"'), R(503)],
        [J, ((), "include"), J], None, "no crash")
hostile("Date 0001 + max-age/swr/sie 2^31", [R(200, D0001, CC + "max-age=2147483648, stale-while-revalidate=2147483648, stale-if-error=2147483648", 'ETag: "d"'), R(304, 'ETag: "d"', D0001)],
        [J, ((), "include"), J], None, "no crash")
hostile("Last-Modified 0001 + Date 9999, no freshness", [R(200, "Last-Modified: Mon, 01 Jan 0001 00:00:00 GMT", D9999)], [J, ((), "include")], None, "no crash")
hostile("Expires 9999, then 304 with Date 0001", [R(200, CC + "max-age=1", 'ETag: "q"'), R(304, 'ETag: "q"', D0001, E9999, CC + "max-age=" + HUGE)],
        [J, ((), "include"), J], None, "no crash", pause=2.5)
hostile("req max-stale=Int64.max + min-fresh=Int64.max + max-age=Int64.max", [R(200, CC + "max-age=1")],
        [J, (("Cache-Control: max-stale=%s, min-fresh=%s, max-age=%s" % (BIG, BIG, BIG),), "json")], None, "no crash", pause=2.5)
hostile("req stale-if-error=Int64.max on stale + close", [R(200, CC + "max-age=1, stale-if-error=" + BIG, D0001), "close"],
        [J, (("Cache-Control: stale-if-error=" + BIG,), "include")], None, "no crash", pause=2.5)

# caller-side CLI extremes
def cli(name, extra, expected="no crash; exit 0 or 6"):
    def fn(c):
        c.serve(R(200, CC + "max-age=3600"))
        r = c.get(extra=extra)
        r2 = c.get()
        if r.rc == 64:
            c.note("exit 64 (argument-parser usage error) where the docs say 6 for a bad option")
        return r.rc in (0, 6, 64) and r2.rc in (0, 6), "rc=%d,%d; %s" % (r.rc, r2.rc, r.err.strip().splitlines()[0][:160] if r.err.strip() else "")
    addcase("cli/" + name, expected, "MUST", "robustness", fn)
cli("--ttl 3153600000 (max)", ["--ttl", "3153600000"])
cli("--ttl 3153600001", ["--ttl", "3153600001"])
cli("--ttl -1", ["--ttl", "-1"])
cli("--ttl 40 digits", ["--ttl", HUGE])
cli("--expires 9999-12-31T23:59:59Z", ["--expires", "9999-12-31T23:59:59Z"])
cli("--expires 99999999999999999999", ["--expires", "99999999999999999999"])
cli("--expires 9223372036854775807", ["--expires", BIG])
cli("--expires -9223372036854775808", ["--expires", "-9223372036854775808"])
cli("--expires 1e300", ["--expires", "1e300"])
cli("--max-size 0", ["--max-size", "0"])
cli("--max-size Int64.max", ["--max-size", BIG])
cli("--max-size 40 digits", ["--max-size", HUGE])
cli("-H ':'", ["-H", ":"])
cli("-H 'NoColon'", ["-H", "NoColon"])
cli("-H 'Vary-unicode: ü€'", ["-H", "X-U: \u00fc\u20ac"])
