"""Freshness, parsing, Age, Expires, heuristic, status, request-directive, Pragma cases."""
import time
from harness import case, addcase, R, H, seq

CC = "Cache-Control: "

def reuse(name, level, section, headers, cached, status=200, pause=0.0, req1=(), req2=(),
          body=b"body", expected=None, reason=None):
    """Two gets; `cached` True: the 2nd must be served without a request; False: the 2nd
    must reach the origin; None: either is allowed (observation only)."""
    if expected is None:
        expected = {True: "2nd get served from cache (1 origin request)",
                    False: "2nd get reaches origin (2 requests)",
                    None: "either (RFC allows both)"}[cached]
    def fn(c):
        c.serve(R(status, *headers, body=body, reason=reason))
        r1 = c.get(*req1)
        if pause:
            time.sleep(pause)
        r2 = c.get(*req2)
        got = (c.n == 1)
        ok = True if cached is None else (got == cached)
        return ok, "reqs=%d (%s); get1 %s; get2 %s" % (c.n, "reused" if got else "not reused",
                                                       r1.short(), r2.short())
    addcase(name, expected, level, section, fn)


# ---------------------------------------------------------------- freshness (cc-freshness)
reuse("fresh/max-age=3600 reused", "OPT", "9111 §4.2", [CC + "max-age=3600"], True)
reuse("fresh/max-age=2 stale after 3s", "MUST", "9111 §4.2.4", [CC + "max-age=2"], False, pause=3)
reuse("fresh/max-age=0", "MUST", "9111 §4.2.4", [CC + "max-age=0"], False)
reuse("fresh/max-age=2147483647", "OPT", "9111 §1.2.2", [CC + "max-age=2147483647"], True)
for v in ["2147483648", "2147483649", "99999999999", "9223372036854775808",
          "99999999999999999999999999999999999999999"]:
    reuse("fresh/max-age=%s (overflow→2^31)" % v[:24], "MUST", "9111 §1.2.2 (MUST treat as 2^31)",
          [CC + "max-age=" + v], True)
reuse("fresh/max-age=3600 Age=7200", "MUST", "9111 §4.2.3/§4.2.4", [H("Date", 0), CC + "max-age=3600", "Age: 7200"], False)
reuse("fresh/max-age=3600 Date=-7200 (apparent_age)", "CHECK", "9111 §4.2.3",
      [H("Date", -7200), CC + "max-age=3600"], False, expected="not reused (apparent_age=7200 > 3600)")
reuse("fresh/max-age=3600 + past Expires", "MUST", "9111 §5.3 (MUST ignore Expires when max-age)",
      [CC + "max-age=3600", H("Expires", -7200), H("Date", 0)], True)
reuse("fresh/max-age=3600 + Expires: 0", "MUST", "9111 §5.3 (MUST ignore Expires when max-age)",
      [CC + "max-age=3600", "Expires: 0", H("Date", 0)], True)
reuse("fresh/max-age=0 + future Expires", "MUST", "9111 §5.3/§4.2.4",
      [H("Expires", 3600), CC + "max-age=0", H("Date", 0)], False)
reuse("fresh/unknown extension + max-age", "OPT", "9111 §5.2.3 (MUST ignore unknown directives)",
      [CC + "foobar, max-age=3600"], True)
reuse("fresh/MaX-aGe=3600 (case-insensitive name)", "OPT", "9111 §5.2 (names case-insensitive)",
      [CC + "MaX-aGe=3600"], True)
reuse("fresh/max-age=-3600", "CHECK", "9111 §4.2.1 (invalid → encouraged stale)",
      [CC + "max-age=-3600"], False)
reuse("fresh/s-maxage=3600, max-age=1 (private ignores s-maxage)", "MUST", "9111 §5.2.2.10, §4.2.4",
      [CC + "s-maxage=3600, max-age=1"], False, pause=2.5)
reuse("fresh/s-maxage=3600 + max-age=1 on 2 lines", "MUST", "9111 §5.2.2.10, §4.2.4",
      [CC + "s-maxage=3600", CC + "max-age=1"], False, pause=2.5)
reuse("fresh/s-maxage=1 only (private: heuristic)", "CHECK", "9111 §5.2.2.10, §4.2.2",
      [CC + "s-maxage=1"], None, pause=2.5)
reuse("fresh/no freshness, no validator (1-day default)", "DESIGN", "9111 §4.2.2 (MAY heuristic); design: 1 day",
      [], True, expected="reused (heuristic, design: one day)")
reuse("fresh/proxy-revalidate max-age=1 (ignored by private)", "MUST", "9111 §5.2.2.8, §4.2.4",
      [CC + "max-age=1, proxy-revalidate"], False, pause=2.5)

# ---------------------------------------------------------------- cc-parse
reuse("parse/max-age=1800, max-age=1 (one line)", "CHECK", "9111 §4.2.1 (first or stale)",
      [CC + "max-age=1800, max-age=1"], None, pause=2.5)
reuse("parse/max-age=1800 / max-age=1 (two lines)", "CHECK", "9111 §4.2.1 (first or stale)",
      [CC + "max-age=1800", CC + "max-age=1"], None, pause=2.5)
reuse("parse/max-age=1, max-age=1800 (one line)", "SHOULD", "9111 §4.2.1 (first or stale → stale)",
      [CC + "max-age=1, max-age=1800"], False, pause=2.5)
reuse("parse/max-age=1 / max-age=1800 (two lines)", "SHOULD", "9111 §4.2.1 (first or stale → stale)",
      [CC + "max-age=1", CC + "max-age=1800"], False, pause=2.5)
reuse('parse/max-age="3600" quoted', "OPT", "9111 §5.2 (recipients 'ought to accept both forms')",
      [CC + 'max-age="3600"'], True)
reuse('parse/ext="max-age=3600", max-age=1', "MUST", "9111 §5.2 quoted-string, §4.2.4",
      [CC + 'extension="max-age=3600", max-age=1'], False, pause=2.5)
reuse('parse/max-age=1, ext="max-age=3600"', "MUST", "9111 §5.2 quoted-string, §4.2.4",
      [CC + 'max-age=1, extension="max-age=3600"'], False, pause=2.5)
reuse("parse/max-age =3600 (space before =)", "CHECK", "9111 §5.2 grammar", [CC + "max-age =3600"], None)
reuse("parse/max-age= 3600 (space after =)", "CHECK", "9111 §5.2 grammar", [CC + "max-age= 3600"], None)
reuse("parse/max-age=003600 (leading zeros)", "OPT", "9111 §1.2.2 delta-seconds = 1*DIGIT", [CC + "max-age=003600"], True)
reuse("parse/max-age='3600' single quotes", "CHECK", "9111 §4.2.1 (invalid → encouraged stale)", [CC + "max-age='3600'"], False)
for v in ["3600.0", "3600.5", "a3600", "3600a", "+3600", "", "0x10"]:
    reuse("parse/max-age=%s (invalid)" % (v or "<empty>"), "CHECK", "9111 §4.2.1 (invalid → encouraged stale)",
          [CC + "max-age=" + v], False)
reuse("parse/max-age (no value)", "CHECK", "9111 §4.2.1", [CC + "max-age"], False)
reuse("parse/empty list members ', ,max-age=3600,,'", "OPT", "9110 §5.6.1 (MUST ignore empty elements)",
      [CC + ", ,max-age=3600,,"], True)
reuse('parse/foo="no-store", max-age=3600', "OPT", "9111 §5.2 (quoted-string is not a directive)",
      [CC + 'foo="no-store", max-age=3600'], True)
reuse('parse/foo="a, no-cache", max-age=3600', "OPT", "9111 §5.2 (comma inside quoted-string)",
      [CC + 'foo="a, no-cache", max-age=3600'], True)
reuse("parse/max-age=3600 + no-cache on 2 lines", "MUST", "9110 §5.3, 9111 §5.2.2.4",
      [CC + "max-age=3600", CC + "no-cache"], False)
reuse("parse/no-store + max-age=3600 on 2 lines", "MUST", "9110 §5.3, 9111 §5.2.2.5",
      [CC + "no-store", CC + "max-age=3600"], False)
reuse("parse/max-age=3600, NO-STORE", "MUST", "9111 §5.2, §5.2.2.5", [CC + "max-age=3600, NO-STORE"], False)
reuse("parse/max-age=3600;foo (garbage param)", "CHECK", "9111 §5.2", [CC + "max-age=3600;foo"], None)
reuse("parse/max-age=3600, max-age=3600 (duplicate same)", "CHECK", "9111 §4.2.1", [CC + "max-age=3600, max-age=3600"], None)

# ---------------------------------------------------------------- Age parsing (age-parse)
for name, ages, cached, level, sec in [
    ("abc", ["abc"], True, "SHOULD", "9111 §5.1 (invalid Age SHOULD be ignored)"),
    ("-7200", ["-7200"], True, "SHOULD", "9111 §5.1 (invalid Age SHOULD be ignored)"),
    ("7200.0", ["7200.0"], True, "SHOULD", "9111 §5.1 (invalid Age SHOULD be ignored)"),
    ("2147483647", ["2147483647"], False, "MUST", "9111 §4.2.4"),
    ("2147483648", ["2147483648"], False, "MUST", "9111 §1.2.2, §4.2.4"),
    ("2147483649", ["2147483649"], False, "MUST", "9111 §1.2.2, §4.2.4"),
    ("1e40 digits", ["1" + "0" * 40], False, "MUST", "9111 §1.2.2, §4.2.4"),
    ("'7200, 0'", ["7200, 0"], False, "SHOULD", "9111 §5.1 (list: SHOULD use first member)"),
    ("'0, 7200'", ["0, 7200"], True, "SHOULD", "9111 §5.1 (list: SHOULD use first member)"),
    ("7200 / 0 (two lines)", ["7200", "0"], False, "SHOULD", "9111 §5.1 (first member)"),
    ("0 / 7200 (two lines)", ["0", "7200"], True, "SHOULD", "9111 §5.1 (first member)"),
    ("'0, 0'", ["0, 0"], True, "SHOULD", "9111 §5.1"),
    ("0 / 0 (two lines)", ["0", "0"], True, "SHOULD", "9111 §5.1"),
    ("'7200;foo=bar'", ["7200;foo=bar"], None, "CHECK", "9111 §5.1"),
    ("empty", [""], True, "SHOULD", "9111 §5.1 (invalid Age SHOULD be ignored)"),
]:
    ma = "max-age=3600"
    reuse("age/Age: %s" % name, level, sec, [H("Date", 0), CC + ma] + ["Age: " + a for a in ages], cached)
reuse("age/Age 3600 / 3600 two lines, max-age=10000", "SHOULD", "9111 §5.1",
      [H("Date", 0), CC + "max-age=10000", "Age: 3600", "Age: 3600"], True)

# ---------------------------------------------------------------- Expires
reuse("expires/future +30d", "OPT", "9111 §5.3", [H("Expires", 2592000), H("Date", 0)], True)
reuse("expires/past -30d", "MUST", "9111 §4.2.4", [H("Expires", -2592000), H("Date", 0)], False)
reuse("expires/present (= Date)", "MUST", "9111 §4.2.4", [H("Expires", 0), H("Date", 0)], False, pause=1.1)
reuse("expires/Expires < Date (both in future)", "MUST", "9111 §4.2.1", [H("Expires", 300), H("Date", 400)], False)
reuse("expires/Expires: 0", "MUST", "9111 §5.3 (MUST treat invalid, esp. '0', as past)", ["Expires: 0", H("Date", 0)], False)
reuse("expires/Date invalid + Expires +10", "OPT", "9111 §4.2.1", ["Date: foo", H("Expires", 10)], True)
reuse("expires/no Date + Expires +3600", "OPT", "9111 §4.2.1", [H("Expires", 3600)], True, )
reuse("expires/Age > Expires-Date, slow Date", "MUST", "9111 §4.2.3/§4.2.4",
      [H("Date", -10), H("Expires", 10), "Age: 25"], False)
reuse("expires/Age > Expires-Date, fast Date", "MUST", "9111 §4.2.3/§4.2.4",
      [H("Date", 10), H("Expires", 20), "Age: 15"], False)
for name, val, cached, level in [
    ("32-bit 2038", "Tue, 19 Jan 2038 14:14:08 GMT", True, "OPT"),
    ("far future 2286", "Sun, 21 Nov 2286 04:46:39 GMT", True, "OPT"),
    ("year 9999", "Fri, 31 Dec 9999 23:59:59 GMT", True, "OPT"),
    ("RFC 850 two-digit year 50", "Thursday, 18-Aug-50 02:01:18 GMT", True, "OPT"),
    ("asctime", "Thu Aug  8 02:01:18 2050", True, "OPT"),
    ("wrong case weekday", "THU, 18 Aug 2050 02:01:18 GMT", None, "CHECK"),
    ("wrong case month", "Thu, 18 AUG 2050 02:01:18 GMT", None, "CHECK"),
    ("wrong case tz", "Thu, 18 Aug 2050 02:01:18 gMT", None, "CHECK"),
    ("invalid UTC", "Thu, 18 Aug 2050 02:01:18 UTC", False, "MUST"),
    ("invalid AEST", "Thu, 18 Aug 2050 02:01:18 AEST", False, "MUST"),
    ("invalid 2-digit year IMF", "Thu, 18 Aug 50 02:01:18 GMT", False, "MUST"),
    ("invalid no comma", "Thu 18 Aug 2050 02:01:18 GMT", False, "MUST"),
    ("invalid double spaces", "Thu, 18  Aug  2050 02:01:18 GMT", False, "MUST"),
    ("invalid date dashes", "Thu, 18-Aug-2050 02:01:18 GMT", False, "MUST"),
    ("invalid time periods", "Thu, 18 Aug 2050 02.01.18 GMT", False, "MUST"),
    ("invalid 1-digit hour", "Thu, 18 Aug 2050 2:01:18 GMT", False, "MUST"),
    ("invalid trailing text", "Thu, 18 Aug 2050 02:01:18 GMT xyz", False, "MUST"),
    ("invalid 5-digit year", "Thu, 18 Aug 20500 02:01:18 GMT", False, "MUST"),
    ("invalid day 32", "Thu, 32 Aug 2050 02:01:18 GMT", False, "MUST"),
    ("invalid hour 25", "Thu, 18 Aug 2050 25:01:18 GMT", False, "MUST"),
    ("invalid garbage", "soon", False, "MUST"),
    ("invalid -1", "-1", False, "MUST"),
    ("invalid empty", "", False, "MUST"),
]:
    reuse("expires/%s" % name, level, "9111 §5.3 (invalid → MUST treat as past)" if level == "MUST" else "9110 §5.6.7 / 9111 §5.3",
          ["Expires: " + val, H("Date", 0)], cached)
reuse("expires/two lines (1-digit hour)", "MUST", "9111 §5.3",
      ["Expires: Thu, 18 Aug 2050 2:01:18 GMT", "Expires: Thu, 18 Aug 2050 2:01:19 GMT", H("Date", 0)], False)
reuse("expires/two valid future lines", "CHECK", "9111 §4.2.1 (first or stale)",
      ["Expires: Thu, 18 Aug 2050 02:01:18 GMT", "Expires: Fri, 19 Aug 2050 02:01:18 GMT", H("Date", 0)], None)

# ---------------------------------------------------------------- heuristic freshness & status
LM = H("Last-Modified", -86400)
for st in [200, 203, 204, 404, 405, 410, 414, 501]:
    reuse("heuristic/%d + Last-Modified" % st, "OPT", "9111 §4.2.2, 9110 §15.1",
          [LM, H("Date", 0)], True, status=st)
for st in [201, 202, 403, 502, 503, 504, 599]:
    reuse("heuristic/%d + Last-Modified not reused" % st, "MUST", "9111 §3 (not storable), §4.2.2",
          [LM, H("Date", 0)], False, status=st)
reuse("heuristic/599 + Last-Modified + public", "OPT", "9111 §3, §5.2.2.9",
      [LM, H("Date", 0), CC + "public"], True, status=599, reason="Whatever")
reuse("heuristic/Last-Modified 5 s ago", "DESIGN", "9111 §4.2.2 (10%% encouraged; design: 1 day)",
      [H("Last-Modified", -5), H("Date", 0)], True, pause=1.0, expected="reused (design: one day)")
reuse("heuristic/Last-Modified in future", "CHECK", "9111 §4.2.2", [H("Last-Modified", 86400), H("Date", 0)], None)

# statuses named in the brief, no freshness information at all
for st in [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]:
    reuse("status/%d no freshness (heuristically cacheable)" % st, "OPT", "9110 §15.1, 9111 §4.2.2",
          [], True, status=st)
for st in [302, 307, 500, 503]:
    reuse("status/%d no freshness (not heuristically cacheable)" % st, "MUST", "9111 §3 (MUST NOT store)",
          [], False, status=st)
for st in [200, 203, 204, 299, 300, 301, 302, 307, 308, 400, 404, 405, 410, 414, 499, 500, 501, 502, 503, 504, 599]:
    reuse("status/%d max-age=100000 reused" % st, "OPT", "9111 §3, §4.2",
          [CC + "max-age=100000", H("Date", 0)], True, status=st, reason="Whatever" if st in (299, 499, 599) else None)
for st in [200, 203, 204, 299, 300, 301, 302, 307, 308, 400, 404, 405, 410, 414, 499, 500, 501, 502, 503, 504, 599]:
    reuse("status/%d stale (Expires past) not reused" % st, "MUST", "9111 §4.2.4",
          [H("Expires", -5000), H("Last-Modified", -100000), H("Date", 0)], False, status=st,
          reason="Whatever" if st in (299, 499, 599) else None)
reuse("status/599 no-store, must-understand not stored", "MUST", "9111 §5.2.2.3",
      [CC + "max-age=3600, no-store, must-understand"], False, status=599, reason="Whatever")
reuse("status/200 no-store, must-understand stored", "OPT", "9111 §5.2.2.3",
      [CC + "max-age=3600, no-store, must-understand"], True)
reuse("status/206 to a plain GET not reused", "MUST", "9111 §3.3/§3.4 (design: never stored)",
      [CC + "max-age=3600", "Content-Range: bytes 0-3/10"], False, status=206)

# ---------------------------------------------------------------- request directives
CCq = "Cache-Control: "
reuse("req/max-age=0 on fresh", "DOC", "9111 §5.2.1.1 ('prefers'); docs: honoured",
      [CC + "max-age=100000", H("Date", 0)], False, req2=[CCq + "max-age=0"])
reuse("req/max-age=1 on 2.5 s old fresh", "DOC", "9111 §5.2.1.1; docs: honoured",
      [CC + "max-age=100000", H("Date", 0)], False, pause=2.5, req2=[CCq + "max-age=1"])
reuse("req/max-age=600 vs Age 1800", "DOC", "9111 §5.2.1.1; docs: honoured",
      [CC + "max-age=100000", H("Date", 0), "Age: 1800"], False, req2=[CCq + "max-age=600"])
reuse("req/max-age=3600 vs Age 1800 (ok)", "OPT", "9111 §5.2.1.1",
      [CC + "max-age=100000", H("Date", 0), "Age: 1800"], True, req2=[CCq + "max-age=3600"])
reuse("req/max-stale=1000 on stale", "DOC", "9111 §5.2.1.2 (MAY); docs: served",
      [CC + "max-age=1", H("Date", 0)], True, pause=2.5, req2=[CCq + "max-stale=1000"])
reuse("req/max-stale=1000 on Age-stale", "DOC", "9111 §5.2.1.2; docs: served",
      [CC + "max-age=1500", "Age: 2000"], True, req2=[CCq + "max-stale=1000"])
reuse("req/max-stale=1 on 2+ s stale", "MUST", "9111 §4.2.4 (beyond max-stale: not permitted)",
      [CC + "max-age=1", H("Date", 0)], False, pause=3.5, req2=[CCq + "max-stale=1"])
reuse("req/max-stale (no value) on stale", "DOC", "9111 §5.2.1.2; docs: any age",
      [CC + "max-age=1", H("Date", 0)], True, pause=2.5, req2=[CCq + "max-stale"])
reuse("req/min-fresh=2000 vs max-age=1500", "DOC", "9111 §5.2.1.3; docs: honoured",
      [CC + "max-age=1500"], False, req2=[CCq + "min-fresh=2000"])
reuse("req/min-fresh=1000 vs max-age=1500 Age=1000", "DOC", "9111 §5.2.1.3; docs: honoured",
      [CC + "max-age=1500", "Age: 1000"], False, req2=[CCq + "min-fresh=1000"])
reuse("req/min-fresh=10 vs max-age=1500 (ok)", "OPT", "9111 §5.2.1.3",
      [CC + "max-age=1500"], True, req2=[CCq + "min-fresh=10"])
reuse("req/no-cache on fresh", "DOC", "9111 §5.2.1.4; docs: validated",
      [CC + "max-age=3600"], False, req2=[CCq + "no-cache"])
reuse("req/NO-CACHE upper-case on fresh", "DOC", "9111 §5.2 (case-insensitive), §5.2.1.4",
      [CC + "max-age=3600"], False, req2=[CCq + "NO-CACHE"])
reuse("req/no-store on fresh stored (served)", "CHECK", "9111 §5.2.1.5 (only forbids storing)",
      [CC + "max-age=100000", H("Date", 0)], None, req2=[CCq + "no-store"])
reuse("req/Pragma: no-cache (no Cache-Control)", "MUST", "9111 §5.4 (MUST act as CC: no-cache)",
      [CC + "max-age=100000", H("Date", 0)], False, req2=["Pragma: no-cache"])
reuse("req/Pragma: no-cache + CC max-stale=5", "DOC", "9111 §5.4 (Pragma ignored when CC present)",
      [CC + "max-age=100000", H("Date", 0)], True, req2=["Pragma: no-cache", CCq + "max-stale=5"])
reuse("req/Pragma: unknown-extension", "OPT", "9111 §5.4",
      [CC + "max-age=100000", H("Date", 0)], True, req2=["Pragma: unrecognised-extension"])
reuse("resp/Pragma: no-cache + max-age=3600", "CHECK", "9111 §5.4 (response Pragma undefined)",
      [CC + "max-age=3600", "Pragma: no-cache"], None)
reuse("resp/Pragma: no-cache heuristic", "CHECK", "9111 §5.4",
      [H("Date", 0), H("Last-Modified", -10000), "Pragma: no-cache"], None)
reuse("req/Cookie header does not block reuse", "OPT", "9111 §4",
      [CC + "max-age=100000", H("Date", 0)], True, req1=["Cookie: a=b"], req2=["Cookie: a=b"])
