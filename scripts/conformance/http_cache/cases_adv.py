"""Validation, 304 update, response directives, Vary, SWR/SIE, Age/Date/-i, stored
headers, redirects, request no-store / only-if-cached."""
import time
from harness import case, addcase, R, H, seq
from cases_basic import reuse

CC = "Cache-Control: "

def cond_hdrs(c, i):
    return "INM=%r IMS=%r" % (c.req_hdr(i, "If-None-Match"), c.req_hdr(i, "If-Modified-Since"))

# ---------------------------------------------------------------- request no-store / only-if-cached
@case("req/no-store: response not stored", "2nd plain get reaches origin", "MUST", "9111 §5.2.1.5")
def _(c):
    c.serve(R(200, CC + "max-age=3600", body=b"x"))
    r1 = c.get(CC + "no-store"); r2 = c.get()
    return c.n == 2, "reqs=%d; %s; %s" % (c.n, r1.short(), r2.short())

@case("req/only-if-cached, nothing stored", "no origin request; 504-equivalent (exit 8)", "SHOULD", "9111 §5.2.1.7")
def _(c):
    c.serve(R(200, CC + "max-age=3600"))
    r = c.get(CC + "only-if-cached")
    return c.n == 0 and r.rc == 8, "reqs=%d; %s" % (c.n, r.short())

@case("req/only-if-cached, fresh stored", "served from cache, no request", "SHOULD", "9111 §5.2.1.7")
def _(c):
    c.serve(R(200, CC + "max-age=3600"))
    c.get(); r = c.get(CC + "only-if-cached")
    return c.n == 1 and r.rc == 0, "reqs=%d; %s" % (c.n, r.short())

@case("req/only-if-cached, stale stored", "no origin request; exit 8 (stale not usable)", "MUST", "9111 §5.2.1.7, §4.2.4")
def _(c):
    c.serve(R(200, CC + "max-age=1", 'ETag: "a"'))
    c.get(); time.sleep(2.5); r = c.get(CC + "only-if-cached")
    return c.n == 1 and r.rc == 8, "reqs=%d; %s" % (c.n, r.short())

@case("req/only-if-cached + max-stale, stale stored", "served stale, no request", "OPT", "9111 §5.2.1.2, §5.2.1.7")
def _(c):
    c.serve(R(200, CC + "max-age=1"))
    c.get(); time.sleep(2.5); r = c.get(CC + "only-if-cached, max-stale")
    return c.n == 1 and r.rc == 0, "reqs=%d; %s" % (c.n, r.short())

# ---------------------------------------------------------------- validation
def validate_case(name, level, section, hdrs, want_inm=None, want_ims=None, req2=(), pause=2.5, expected=None):
    def fn(c):
        c.serve(R(200, *hdrs, body=b"stored-body"), R(304, *[h for h in hdrs if not str(h).startswith("Cache")]))
        c.get(); time.sleep(pause); r2 = c.get(*req2)
        inm, ims = c.req_hdr(1, "If-None-Match"), c.req_hdr(1, "If-Modified-Since")
        ok = c.n == 2
        if want_inm is not None:
            ok = ok and inm == want_inm
        if want_ims == "*":
            ok = ok and ims is not None
        elif want_ims is not None:
            ok = ok and ims == want_ims
        ok = ok and r2.rc == 0
        return ok, "reqs=%d; 2nd req INM=%r IMS=%r; get2 %s" % (c.n, inm, ims, r2.short())
    addcase(name, expected or "stale → conditional request (INM=%s IMS=%s), 304 → stored body served" % (want_inm, want_ims),
            level, section, fn)

validate_case("valid/strong ETag → If-None-Match", "MUST", "9111 §4.3.1 (MUST send entity tags)",
              [CC + "max-age=1", 'ETag: "abcdef"'], want_inm='"abcdef"')
validate_case("valid/weak ETag → If-None-Match W/", "MUST", "9111 §4.3.1",
              [CC + "max-age=1", 'ETag: W/"abcdef"'], want_inm='W/"abcdef"')
validate_case("valid/unquoted ETag", "CHECK", "9110 §8.8.3 (invalid etag)",
              [CC + "max-age=1", "ETag: abcdef"], expected="either INM or full fetch")
LMV = "Wed, 01 Jan 2020 00:00:00 GMT"
validate_case("valid/Last-Modified → If-Modified-Since", "SHOULD", "9111 §4.3.1 (SHOULD send IMS)",
              [CC + "max-age=1", "Last-Modified: " + LMV], want_ims=LMV)
validate_case("valid/ETag + Last-Modified → both", "SHOULD", "9111 §4.3.1 (INM MUST, IMS SHOULD)",
              [CC + "max-age=1", 'ETag: "e1"', "Last-Modified: " + LMV], want_inm='"e1"', want_ims=LMV)
validate_case("valid/no-cache response + ETag", "MUST", "9111 §5.2.2.4",
              [CC + "no-cache", 'ETag: "nc"'], want_inm='"nc"', pause=0)
validate_case("valid/max-age=3600,no-cache + Expires", "MUST", "9111 §5.2.2.4",
              [CC + "max-age=10000, no-cache", H("Expires", 10000), 'ETag: "nc2"'], want_inm='"nc2"', pause=0)
validate_case("valid/No-CaChE (case) response", "MUST", "9111 §5.2, §5.2.2.4",
              [CC + "max-age=10000, No-CaChE", 'ETag: "nc3"'], want_inm='"nc3"', pause=0)
validate_case("valid/must-revalidate stale", "MUST", "9111 §5.2.2.2",
              [CC + "max-age=1, must-revalidate", 'ETag: "mr"'], want_inm='"mr"')
validate_case("valid/immutable stale", "MUST", "9111 §4.2.4 (RFC 8246)",
              [CC + "max-age=1, immutable", 'ETag: "im"'], want_inm='"im"')
validate_case("valid/req no-cache + ETag → INM", "DOC", "9111 §5.2.1.4; docs: conditional",
              [CC + "max-age=3600", 'ETag: "rq"'], want_inm='"rq"', req2=[CC + "no-cache"], pause=0)
validate_case("valid/req no-cache + LM → IMS", "DOC", "9111 §5.2.1.4; docs: conditional",
              [CC + "max-age=3600", "Last-Modified: " + LMV], want_ims=LMV, req2=[CC + "no-cache"], pause=0,
              expected="conditional with If-Modified-Since")
validate_case("valid/req max-age=0 + ETag → INM", "DOC", "9111 §5.2.1.1",
              [CC + "max-age=3600", 'ETag: "ma0"'], want_inm='"ma0"', req2=[CC + "max-age=0"], pause=0)

@case("valid/304 keeps body, re-freshens", "304 → stored body, then fresh again (no 3rd request)", "SHOULD", "9111 §4.3.4")
def _(c):
    c.serve(R(200, CC + "max-age=2", 'ETag: "k"', body=b"original"), R(304, 'ETag: "k"'))
    c.get(); time.sleep(3); r2 = c.get(mode="include"); r3 = c.get()
    ok = c.n == 2 and r2.body == b"original" and r3.src in ("disk", "memory")
    return ok, "reqs=%d; body2=%r; get3 %s" % (c.n, r2.body, r3.short())

@case("valid/no-cache without validators → full request each time", "each get: unconditional request", "MUST", "9111 §5.2.2.4")
def _(c):
    c.serve(R(200, CC + "no-cache", body=b"nv"))
    c.get(); c.get(); c.get()
    ok = c.n == 3 and not any(c.req_hdr(i, "If-None-Match") or c.req_hdr(i, "If-Modified-Since") for i in range(3))
    return ok, "reqs=%d; %s" % (c.n, [cond_hdrs(c, i) for i in range(c.n)])

@case("valid/200 on revalidation replaces stored", "new body served and stored", "SHOULD", "9111 §4.3.3")
def _(c):
    c.serve(R(200, CC + "max-age=1", 'ETag: "v1"', body=b"one"), R(200, CC + "max-age=3600", 'ETag: "v2"', body=b"two"))
    c.get(mode="raw"); time.sleep(2.5); r2 = c.get(mode="raw"); r3 = c.get(mode="raw")
    ok = c.n == 2 and r2.body == b"two" and r3.body == b"two"
    return ok, "reqs=%d; body2=%r body3=%r" % (c.n, r2.body, r3.body)

@case("valid/304 with different strong ETag", "MUST NOT update stored response; body from a full (unconditional) fetch", "MUST", "9111 §4.3.4")
def _(c):
    c.serve(R(200, CC + "max-age=1", 'ETag: "v1"', "X-V: 1", body=b"one"),
            R(304, 'ETag: "v2"', "X-V: 2", CC + "max-age=3600"),
            R(200, CC + "max-age=3600", 'ETag: "v2"', "X-V: 3", body=b"three"))
    c.get(); time.sleep(2.5); r2 = c.get(mode="include"); r3 = c.get(mode="include")
    served = (r2.body, r2.hdr("x-v"))
    ok = not (r2.body == b"one" and r2.hdr("x-v") == ["2"]) and not (r3.body == b"one" and r3.hdr("x-v") == ["2"])
    return ok, "reqs=%d; get2 body=%r x-v=%s; get3 body=%r x-v=%s; req3 %s" % (
        c.n, r2.body, r2.hdr("x-v"), r3.body, r3.hdr("x-v"), cond_hdrs(c, 2) if c.n > 2 else "-")

@case("valid/304 with matching weak ETag updates", "stored response updated (X-V: 2)", "SHOULD", "9111 §4.3.4")
def _(c):
    c.serve(R(200, CC + "max-age=1", 'ETag: W/"w"', "X-V: 1", body=b"one"),
            R(304, 'ETag: W/"w"', "X-V: 2", CC + "max-age=3600"))
    c.get(); time.sleep(2.5); r2 = c.get(mode="include"); r3 = c.get(mode="include")
    ok = r2.body == b"one" and r2.hdr("x-v") == ["2"] and r3.hdr("x-v") == ["2"] and c.n == 2
    return ok, "reqs=%d; get2 body=%r x-v=%s; get3 x-v=%s" % (c.n, r2.body, r2.hdr("x-v"), r3.hdr("x-v"))

@case("valid/304 carrying no-store", "response not kept afterwards (design: removed, served once)", "CHECK", "9111 §4.3.4, §3")
def _(c):
    c.serve(R(200, CC + "max-age=1", 'ETag: "ns"', body=b"one"), R(304, 'ETag: "ns"', CC + "no-store"),
            R(200, CC + "max-age=1", 'ETag: "ns"', body=b"one"))
    c.get(); time.sleep(2.5); r2 = c.get(mode="raw"); r3 = c.get(mode="raw")
    return c.n == 3, "reqs=%d; body2=%r body3=%r" % (c.n, r2.body, r3.body)

# ------------------------------------------------ 304 header update (update304)
def upd304(field, v1, v2, level, section):
    def fn(c):
        c.serve(R(200, "%s: %s" % (field, v1), CC + "max-age=2", 'ETag: "u"', body=b"updbody"),
                R(304, "%s: %s" % (field, v2), CC + "max-age=2", 'ETag: "u"'))
        c.get(); time.sleep(3); r2 = c.get(mode="include"); r3 = c.get(mode="include")
        ok = r2.hdr(field) == [v2] and r3.hdr(field) == [v2] and r2.body == b"updbody"
        return ok, "reqs=%d; after 304: %s=%s; next cached: %s=%s (src-reqs=%d)" % (
            c.n, field, r2.hdr(field), field, r3.hdr(field), c.n)
    addcase("304/update %s" % field, "304's %s replaces stored (%s)" % (field, v2), level, section, fn)

for f, a, b in [("Test-Header", "aaa", "bbb"), ("X-Test-Header", "x1", "x2"), ("Content-Foo", "c1", "c2"),
                ("X-Content-Foo", "xc1", "xc2"), ("Content-Location", "/foo", "/bar"),
                ("Expires", "Fri, 01 Jan 2038 01:01:01 GMT", "Mon, 11 Jan 2038 11:11:11 GMT"),
                ("X-Frame-Options", "deny", "sameorigin"),
                ("Content-Security-Policy", "default-src 'self'", "default-src 'self' cdn.example.com"),
                ("Link", "</a>; rel=preload", "</b>; rel=preload")]:
    upd304(f, a, b, "MUST", "9111 §3.2 (MUST replace stored fields)")
upd304("Content-Type", "text/plain", "text/plain;charset=utf-8", "CHECK", "9111 §3.2 (MAY omit fields the stored result depends on)")

@case("304/update Cache-Control max-age=1 → 3600", "after 304 the response is fresh for 3600 s (3rd get: no request)", "MUST", "9111 §3.2, §4.3.4")
def _(c):
    c.serve(R(200, CC + "max-age=1", 'ETag: "cc"'), R(304, CC + "max-age=3600", 'ETag: "cc"'))
    c.get(); time.sleep(2.5); r2 = c.get(mode="include"); time.sleep(2); r3 = c.get(mode="include")
    ok = c.n == 2 and r3.hdr("cache-control") == ["max-age=3600"]
    return ok, "reqs=%d; cc2=%s cc3=%s" % (c.n, r2.hdr("cache-control"), r3.hdr("cache-control"))

@case("304/omitted header kept (LM validation)", "Test-Header from stored response still served", "MUST", "9111 §3.2")
def _(c):
    c.serve(R(200, CC + "max-age=2", "Last-Modified: " + LMV, "Test-Header: keepme"),
            R(304, "Last-Modified: " + LMV))
    c.get(); time.sleep(3); r2 = c.get(mode="include")
    ok = r2.hdr("test-header") == ["keepme"] and c.req_hdr(1, "If-Modified-Since") == LMV
    return ok, "reqs=%d; IMS=%r; test-header=%s" % (c.n, c.req_hdr(1, "If-Modified-Since"), r2.hdr("test-header"))

@case("304/Content-Length in 304 not applied", "body/length unchanged (36 bytes), no Content-Length: 10", "MUST", "9111 §3.2 (Content-Length excepted)")
def _(c):
    body = b"x" * 36
    c.serve(R(200, CC + "max-age=2", 'ETag: "cl"', body=body),
            R(304, CC + "max-age=2", 'ETag: "cl"', "Content-Length: 10"))
    c.get(); time.sleep(3); r2 = c.get(mode="include"); r3 = c.get(mode="include")
    ok = r2.body == body and r3.body == body and "10" not in r2.hdr("content-length") + r3.hdr("content-length")
    return ok, "reqs=%d; len2=%d cl2=%s len3=%d cl3=%s" % (c.n, len(r2.body or b""), r2.hdr("content-length"),
                                                        len(r3.body or b""), r3.hdr("content-length"))

@case("304/Age in 304 response", "no crash; served, Age sane", "CHECK", "9111 §4.3.4")
def _(c):
    c.serve(R(200, CC + "max-age=2", 'ETag: "ag"'), R(304, 'ETag: "ag"', "Age: 1"))
    c.get(); time.sleep(3); r2 = c.get(mode="include")
    return r2.rc == 0, "reqs=%d; age=%s" % (c.n, r2.hdr("age"))

# ---------------------------------------------------------------- response directives
reuse("resp/private, max-age=3600", "OPT", "9111 §5.2.2.7 (private cache may store)", [CC + "private, max-age=3600"], True)
reuse('resp/private="Set-Cookie", max-age=3600', "OPT", "9111 §5.2.2.7", [CC + 'private="Set-Cookie", max-age=3600'], True)
reuse("resp/public, max-age=3600", "OPT", "9111 §5.2.2.9", [CC + "public, max-age=3600"], True)
reuse("resp/no-store", "MUST", "9111 §5.2.2.5", [CC + "no-store"], False)
reuse("resp/No-StOrE (case)", "MUST", "9111 §5.2, §5.2.2.5", [CC + "No-StOrE"], False)
reuse("resp/max-age=10000, no-store + Expires", "MUST", "9111 §5.2.2.5", [CC + "max-age=10000, no-store", H("Expires", 10000), H("Date", 0)], False)
reuse("resp/no-cache, max-age=10000 (no validator)", "MUST", "9111 §5.2.2.4", [CC + "max-age=10000, no-cache", H("Expires", 10000), H("Date", 0)], False)
reuse("resp/must-revalidate fresh", "OPT", "9111 §5.2.2.2", [CC + "max-age=10000, must-revalidate", 'ETag: "abcd"'], True)
reuse("resp/immutable fresh", "OPT", "RFC 8246", [CC + "max-age=10000, immutable", 'ETag: "abcd"'], True)
reuse("resp/max-age=0, must-revalidate", "MUST", "9111 §5.2.2.2", [CC + "max-age=0, must-revalidate"], False)
reuse("resp/public only (heuristic)", "CHECK", "9111 §4.2.2", [CC + "public"], None)
reuse("resp/302 + public (no freshness)", "CHECK", "9111 §3 (public makes it storable)", [CC + "public"], None, status=302)
reuse("resp/302 + private (no freshness)", "CHECK", "9111 §3; docs: stored but stale at once", [CC + "private"], None, status=302)

@case('resp/no-cache="a" with max-age', "field a never served without revalidation", "MUST", "9111 §5.2.2.4 (qualified)")
def _(c):
    c.serve(R(200, CC + 'no-cache="a"', "a: 1", "b: 2", CC + "max-age=3600", H("Date", 0)))
    c.get(); r2 = c.get(mode="include")
    ok = c.n == 2 or r2.hdr("a") == []
    return ok, "reqs=%d; a=%s b=%s" % (c.n, r2.hdr("a"), r2.hdr("b"))

@case('resp/no-cache="a, b" with max-age', "fields a,b never served without revalidation", "MUST", "9111 §5.2.2.4 (qualified)")
def _(c):
    c.serve(R(200, CC + 'no-cache="a, b"', "a: 1", "b: 2", "c: 3", CC + "max-age=3600", H("Date", 0)))
    c.get(); r2 = c.get(mode="include")
    ok = c.n == 2 or (r2.hdr("a") == [] and r2.hdr("b") == [])
    return ok, "reqs=%d; a=%s b=%s c=%s" % (c.n, r2.hdr("a"), r2.hdr("b"), r2.hdr("c"))

@case("resp/must-revalidate stale + max-stale request", "stale not served: request sent", "MUST", "9111 §5.2.2.2")
def _(c):
    c.serve(R(200, CC + "max-age=1, must-revalidate", 'ETag: "m"'), R(304, 'ETag: "m"'))
    c.get(); time.sleep(2.5); r = c.get(CC + "max-stale=1000")
    return c.n == 2, "reqs=%d; %s" % (c.n, r.short())

@case("resp/no-cache + max-stale request", "stale/unvalidated not served: request sent", "MUST", "9111 §5.2.2.4")
def _(c):
    c.serve(R(200, CC + "no-cache", 'ETag: "m"'), R(304, 'ETag: "m"'))
    c.get(); r = c.get(CC + "max-stale=1000")
    return c.n == 2, "reqs=%d; %s" % (c.n, r.short())

@case("resp/no-store newer response after stored one", "either (old may stay or go)", "CHECK", "9111 §3")
def _(c):
    c.serve(R(200, CC + "max-age=10000", "A: 1"), R(200, CC + "no-store", "A: 2"))
    c.get(); r2 = c.get(CC + "no-cache", mode="include"); r3 = c.get(mode="include")
    return True, "reqs=%d; A2=%s A3=%s (%s)" % (c.n, r2.hdr("a"), r3.hdr("a"), "old copy kept" if c.n == 2 else "refetched")

# ---------------------------------------------------------------- Vary
def vary(name, level, section, vary_lines, req1, req2, cached, expected=None):
    def fn(c):
        c.serve(R(200, CC + "max-age=5000", H("Last-Modified", -3000), H("Date", 0), *["Vary: " + v for v in vary_lines]))
        r1 = c.get(*req1); r2 = c.get(*req2)
        got = c.n == 1
        ok = True if cached is None else got == cached
        return ok, "reqs=%d (%s); 2nd req hdrs seen: %s" % (
            c.n, "reused" if got else "not reused",
            [l for l in (c.reqs[1].lines if c.n > 1 else []) if not l.lower().startswith(("host", "user-agent", "accept:", "accept-encoding"))])
    addcase(name, expected or {True: "reused", False: "not reused (request sent)", None: "either"}[cached], level, section, fn)

vary("vary/match", "OPT", "9111 §4.1", ["Foo"], ["Foo: 1"], ["Foo: 1"], True)
vary("vary/no match", "MUST", "9111 §4.1", ["Foo"], ["Foo: 1"], ["Foo: 2"], False)
vary("vary/stored omits header, request has it", "MUST", "9111 §4.1", ["Foo"], [], ["Foo: 1"], False)
vary("vary/stored has header, request omits", "MUST", "9111 §4.1", ["Foo"], ["Foo: 1"], [], False)
vary("vary/both omit header", "OPT", "9111 §4.1", ["Foo"], [], [], True)
vary("vary/cache key ignores non-Vary header", "OPT", "9111 §4.1", ["Foo"], ["Foo: 1", "Other: 2"], ["Foo: 1", "Other: 3"], True)
vary("vary/2-way match", "OPT", "9111 §4.1", ["Foo, Bar"], ["Foo: 1", "Bar: abc"], ["Foo: 1", "Bar: abc"], True)
vary("vary/2-way no match", "MUST", "9111 §4.1", ["Foo, Bar"], ["Foo: 1", "Bar: abc"], ["Foo: 2", "Bar: abc"], False)
vary("vary/2-way request omits one", "MUST", "9111 §4.1", ["Foo, Bar"], ["Foo: 1", "Bar: abc"], ["Foo: 1"], False)
vary("vary/2 Vary lines no match", "MUST", "9111 §4.1, 9110 §5.3", ["Foo", "Bar"], ["Foo: 1", "Bar: abc"], ["Foo: 1", "Bar: xyz"], False)
vary("vary/3-way match", "OPT", "9111 §4.1", ["Foo, Bar, Baz"], ["Foo: 1", "Bar: abc", "Baz: 789"], ["Foo: 1", "Bar: abc", "Baz: 789"], True)
vary("vary/3-way no match", "MUST", "9111 §4.1", ["Foo, Bar, Baz"], ["Foo: 1", "Bar: abc", "Baz: 789"], ["Foo: 2", "Bar: abc", "Baz: 789"], False)
vary("vary/3-way order differs, value differs", "MUST", "9111 §4.1", ["Foo, Bar, Baz"], ["Foo: 1", "Bar: abc", "Baz: 789"], ["Foo: 1", "Baz: 789", "Bar: abcde"], False)
vary("vary/3-way order differs, same values", "OPT", "9111 §4.1", ["Foo, Bar, Baz"], ["Foo: 1", "Bar: abc", "Baz: 789"], ["Baz: 789", "Foo: 1", "Bar: abc"], True)
vary("vary/3-way both omit one", "OPT", "9111 §4.1", ["Foo, Bar, Baz"], ["Foo: 1", "Baz: 789"], ["Foo: 1", "Baz: 789"], True)
for v in ["*", "*, *", ", *", "*, Foo", "Foo, *", "foo,*"]:
    vary("vary/Vary: %s" % v, "MUST", "9111 §4.1 ('*' always fails to match)", [v], ["Foo: 1", "Baz: 789"], ["Foo: 1", "Baz: 789"], False)
vary("vary/Vary: * on two lines", "MUST", "9111 §4.1", ["*", "*"], ["Foo: 1"], ["Foo: 1"], False)
vary("vary/Vary: '' + '*' lines", "MUST", "9111 §4.1", ["", "*"], ["Foo: 1"], ["Foo: 1"], False)
vary("vary/Vary: Foo + '*' lines", "MUST", "9111 §4.1", ["Foo", "*"], ["Foo: 1"], ["Foo: 1"], False)
vary("vary/name case: Vary FOO, req foo", "OPT", "9110 §5.1 (names case-insensitive)", ["FOO"], ["foo: 1"], ["Foo: 1"], True)
vary("vary/name case no match: Vary foo", "MUST", "9110 §5.1, 9111 §4.1", ["foo"], ["Foo: 1"], ["FOO: 2"], False)
vary("vary/whitespace '1,2' vs ' 1, 2 '", "OPT", "9111 §4.1 (normalisation MAY)", ["Foo"], ["Foo: 1,2"], ["Foo:  1, 2 "], True)
vary("vary/combine 'Foo: 1, 2' vs two lines", "OPT", "9111 §4.1, 9110 §5.3", ["Foo"], ["Foo: 1, 2"], ["Foo: 1", "Foo: 2"], True)
vary("vary/value case differs (1 vs A/a)", "MUST", "9111 §4.1", ["Foo"], ["Foo: a"], ["Foo: A"], False)
vary("vary/Accept-Language order (optimal)", "OPT", "9111 §4.1", ["Accept-Language"], ["Accept-Language: en, de"], ["Accept-Language: de, en"], None)
vary("vary/Accept-Encoding gzip vs br", "MUST", "9111 §4.1", ["Accept-Encoding"], ["Accept-Encoding: gzip"], ["Accept-Encoding: br"], False)
vary("vary/17 names (design: not stored)", "DESIGN", "design: >16 names not stored", [", ".join("H%d" % i for i in range(17))], [], [], False,
     expected="not stored (design)")

@case("vary/two variants stored", "Foo:1 → A, Foo:2 → B, Foo:1 again served from cache", "OPT", "9111 §4.1")
def _(c):
    def fn(req, n):
        return R(200, CC + "max-age=5000", "Vary: Foo", body=("var-" + (req.get("Foo") or "none")).encode())
    c.serve(fn)
    c.get("Foo: 1"); c.get("Foo: 2"); r3 = c.get("Foo: 1", mode="raw"); r4 = c.get("Foo: 2", mode="raw")
    ok = c.n == 2 and r3.body == b"var-1" and r4.body == b"var-2"
    return ok, "reqs=%d; body3=%r body4=%r" % (c.n, r3.body, r4.body)

@case("vary/conditional request carries Vary headers", "revalidation request includes Abc: 123", "MUST", "9111 §4.1/§4.3.1")
def _(c):
    c.serve(R(200, CC + "max-age=1", 'ETag: "abcdef"', "Vary: Abc"), R(304, 'ETag: "abcdef"'))
    c.get("Abc: 123"); time.sleep(2.5); r = c.get("Abc: 123")
    ok = c.n == 2 and c.req_hdr(1, "Abc") == "123" and c.req_hdr(1, "If-None-Match") == '"abcdef"'
    return ok, "reqs=%d; 2nd Abc=%r INM=%r; %s" % (c.n, c.req_hdr(1, "Abc"), c.req_hdr(1, "If-None-Match"), r.short())

@case("vary/empty header value vs absent", "Foo absent ≠ Foo '' (or header not sent at all)", "MUST", "9111 §4.1")
def _(c):
    c.serve(R(200, CC + "max-age=5000", "Vary: Foo"))
    c.get(); r2 = c.get("Foo: ")
    sent = c.reqs[1].get_all("Foo") if c.n > 1 else None
    return True, "reqs=%d; 2nd request Foo lines seen: %r; rc=%d" % (c.n, sent, r2.rc)

# ---------------------------------------------------------------- stale-while-revalidate
@case("swr/served stale within window, background revalidation", "stale served at once; a conditional request revalidates it", "OPT", "RFC 5861 §3")
def _(c):
    c.serve(R(200, CC + "max-age=1, stale-while-revalidate=3600", 'ETag: "abc"', body=b"old"),
            R(304, CC + "max-age=3600, stale-while-revalidate=3600", 'ETag: "abc"'))
    c.get(); time.sleep(2.5)
    r2 = c.get(); n_after = c.n; time.sleep(1.5); n_later = c.n
    r3 = c.get()
    ok = r2.src == "stale" and n_later == 2 and c.req_hdr(1, "If-None-Match") == '"abc"' and c.n == 2
    return ok, "get2 %s (elapsed %.2fs); reqs right after=%d, +1.5s=%d; INM=%r; get3 %s; total reqs=%d" % (
        r2.short(), r2.elapsed, n_after, n_later, c.req_hdr(1, "If-None-Match"), r3.short(), c.n)

@case("swr/window over → not served stale", "after max-age+swr the stale copy is not served; sync request", "MUST", "RFC 5861 §3, 9111 §4.2.4")
def _(c):
    c.serve(R(200, CC + "max-age=1, stale-while-revalidate=1", body=b"old"),
            R(200, CC + "max-age=3600", body=b"new"))
    c.get(); time.sleep(3.5); r2 = c.get(mode="raw")
    return r2.body == b"new" and c.n == 2, "reqs=%d; body=%r" % (c.n, r2.body)

@case("swr/window test (cache-tests stale-while-revalidate-window)", "3rd request must reach origin (no-cache after bg revalidation)", "MUST", "RFC 5861 §3, 9111 §5.2.2.4")
def _(c):
    c.serve(R(200, CC + "max-age=1, stale-while-revalidate=4", 'ETag: "abc"', body=b"a"),
            R(200, CC + "no-cache", 'ETag: "def"', body=b"b"),
            R(200, CC + "no-cache", 'ETag: "def"', body=b"b"))
    c.get(); time.sleep(2); r2 = c.get(); time.sleep(2); r3 = c.get()
    return c.n == 3, "reqs=%d; get2 %s; get3 %s" % (c.n, r2.short(), r3.short())

@case("swr/must-revalidate forbids stale", "sync revalidation, not stale", "MUST", "9111 §5.2.2.2")
def _(c):
    c.serve(R(200, CC + "max-age=1, must-revalidate, stale-while-revalidate=3600", 'ETag: "m"', body=b"old"),
            R(200, CC + "max-age=1", body=b"new"))
    c.get(); time.sleep(2.5); r2 = c.get(mode="raw")
    return r2.body == b"new", "reqs=%d; body=%r" % (c.n, r2.body)

@case("swr/no-cache forbids stale", "sync request, not stale", "MUST", "9111 §5.2.2.4")
def _(c):
    c.serve(R(200, CC + "no-cache, stale-while-revalidate=3600", body=b"old"), R(200, CC + "no-cache", body=b"new"))
    c.get(); r2 = c.get(mode="raw")
    return r2.body == b"new", "reqs=%d; body=%r" % (c.n, r2.body)

@case("swr/stale Age in -i", "Age header ≥ 2 on the stale-served copy", "MUST", "9111 §4 (Age MUST be generated)")
def _(c):
    c.serve(R(200, CC + "max-age=1, stale-while-revalidate=3600", 'ETag: "x"'), R(304, 'ETag: "x"'))
    c.get(); time.sleep(2.5); r2 = c.get(mode="include")
    a = r2.hdr("age")
    ok = len(a) == 1 and a[0].isdigit() and int(a[0]) >= 2
    return ok, "age=%s; hdrs=%s" % (a, r2.hlines)

# ---------------------------------------------------------------- stale-if-error
def sie(name, level, section, hdrs, fail, want_stale, pause=2.5, req2=(), expected=None):
    def fn(c):
        c.serve(R(200, *hdrs, body=b"stored"), fail)
        c.get(); time.sleep(pause); r2 = c.get(*req2, mode="raw")
        served_stale = r2.rc == 0 and r2.body == b"stored"
        ok = served_stale == want_stale
        return ok, "reqs=%d; rc=%d body=%r; stderr=%s" % (c.n, r2.rc, r2.body[:40], r2.err.strip()[:160])
    addcase(name, expected or ("stale served (exit 0)" if want_stale else "stale NOT served (error surfaced)"), level, section, fn)

F503 = R(503, body=b"down")
sie("sie/stale-if-error=60, 503", "OPT", "RFC 5861 §4", [CC + "max-age=1, stale-if-error=60"], F503, True)
sie("sie/stale-if-error=60, 500", "OPT", "RFC 5861 §4", [CC + "max-age=1, stale-if-error=60"], R(500, body=b"err"), True)
sie("sie/stale-if-error=60, 502", "OPT", "RFC 5861 §4", [CC + "max-age=1, stale-if-error=60"], R(502, body=b"err"), True)
sie("sie/stale-if-error=60, 504", "OPT", "RFC 5861 §4", [CC + "max-age=1, stale-if-error=60"], R(504, body=b"err"), True)
sie("sie/stale-if-error=60, connection closed", "OPT", "RFC 5861 §4", [CC + "max-age=1, stale-if-error=60"], "close", True)
sie("sie/stale-if-error=60, 404 (not an error)", "MUST", "RFC 5861 §4 (errors = 500-504), 9111 §4.2.4",
    [CC + "max-age=1, stale-if-error=60"], R(404, body=b"nf"), False, expected="404 passed through, stale not served")
sie("sie/window passed (sie=1, 3.5s stale)", "SHOULD", "RFC 5861 §4 (SHOULD NOT beyond window)",
    [CC + "max-age=1, stale-if-error=1"], F503, False, pause=3.5)
sie("sie/request stale-if-error=60 widens window", "OPT", "RFC 5861 §4 (request form)",
    [CC + "max-age=1, stale-if-error=1"], F503, True, pause=3.5, req2=[CC + "stale-if-error=60"])
sie("sie/no directive, 503 (design default)", "DESIGN", "9111 §4.2.4 vs design: stale on 5xx",
    [CC + "max-age=1"], F503, True, expected="design: stale served on 503")
sie("sie/must-revalidate, 503", "MUST", "9111 §5.2.2.2, §4.2.4", [CC + "max-age=1, must-revalidate"], F503, False)
sie("sie/must-revalidate + sie=60, 503", "MUST", "9111 §5.2.2.2 (must-revalidate wins)", [CC + "max-age=1, must-revalidate, stale-if-error=60"], F503, False)
sie("sie/must-revalidate, connection closed", "MUST", "9111 §5.2.2.2 (MUST generate error)", [CC + "max-age=1, must-revalidate"], "close", False)
sie("sie/no-cache, connection closed", "MUST", "9111 §5.2.2.4, §4.2.4", [CC + "max-age=1, no-cache"], "close", False, pause=0.2)
sie("sie/no-cache, 503", "MUST", "9111 §5.2.2.4, §4.2.4", [CC + "no-cache", 'ETag: "q"'], F503, False, pause=0.2)

@case("sie/stale served: status and Age in -i", "status 200 of stored response, Age ≥ 2", "MUST", "9111 §4 (Age)")
def _(c):
    c.serve(R(200, CC + "max-age=1, stale-if-error=60", body=b"stored"), F503)
    c.get(); time.sleep(2.5); r = c.get(mode="include")
    a = r.hdr("age")
    ok = r.status == 200 and r.rc == 0 and len(a) == 1 and a[0].isdigit() and int(a[0]) >= 2
    return ok, "rc=%d status=%s age=%s warning=%s" % (r.rc, r.status, a, r.hdr("warning"))

# ---------------------------------------------------------------- Age / Date / -i
def age_case(name, hdrs, minimum, level="MUST", section="9111 §4, §5.1 (Age = current_age)"):
    def fn(c):
        c.serve(R(200, *hdrs))
        c.get(); time.sleep(3); r = c.get(mode="include")
        a = r.hdr("age")
        ok = c.n == 1 and len(a) == 1 and a[0].isdigit() and int(a[0]) > minimum
        return ok, "reqs=%d; age lines=%s" % (c.n, a)
    addcase(name, "cached -i shows one Age > %d" % minimum, level, section, fn)

age_case("age/generated on cached response", [CC + "max-age=100000", H("Date", 0)], 2)
age_case("age/updated (max-age, Age: 30)", [CC + "max-age=100000", H("Date", 0), "Age: 30"], 32)
age_case("age/updated (Expires, Age: 30)", [H("Expires", 2592000), H("Date", 0), "Age: 30"], 32)
age_case("age/Date 100 s old → Age ≥ 100", [CC + "max-age=100000", H("Date", -100)], 100,
         level="SHOULD", section="9111 §4.2.3 (apparent_age)")

@case("date/Date not updated on cached response", "cached -i Date == origin Date", "SHOULD", "9110 §6.6.1, 9111 §3.1")
def _(c):
    d = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() - 5))
    c.serve(R(200, CC + "max-age=100000", "Date: " + d))
    c.get(); time.sleep(1.5); r = c.get(mode="include")
    return r.hdr("date") == [d], "origin Date=%r; cached Date=%s" % (d, r.hdr("date"))

@case("date/missing Date appended when cached", "cached -i shows a Date", "MUST", "9110 §6.6.1 (recipient MUST append Date if cached)")
def _(c):
    c.serve(R(200, CC + "max-age=100000", date=False))
    r1 = c.get(mode="include"); r2 = c.get(mode="include")
    return len(r2.hdr("date")) == 1, "reqs=%d; network Date=%s; cached Date=%s" % (c.n, r1.hdr("date"), r2.hdr("date"))

@case("date/Expires left alone", "cached Expires == origin Expires", "CHECK", "9111 §3.1")
def _(c):
    e = "Thu, 18 Aug 2050 02:01:18 GMT"
    c.serve(R(200, "Expires: " + e))
    c.get(); r = c.get(mode="include")
    return r.hdr("expires") == [e], "expires=%s" % r.hdr("expires")

@case("-i/format network response", "status line, header lines 'name: value', blank line, exact body; Age present; repeated lines kept", "CHECK", "9110 §5.3 (Set-Cookie not combinable)")
def _(c):
    c.serve(R(200, CC + "max-age=3600", "X-Multi: a", "X-Multi: b", "Set-Cookie: a=1", "Set-Cookie: b=2",
              "Content-Type: text/plain", body=b"hello\n"))
    r1 = c.get(mode="include"); r2 = c.get(mode="include")
    def desc(r):
        return "status_line=%r crlf=%s multi=%s cookies=%s age=%s cl=%s body=%r" % (
            (r.raw_head or b"").split(b"\n")[0], b"\r\n" in (r.raw_head or b""), r.hdr("x-multi"),
            r.hdr("set-cookie"), r.hdr("age"), r.hdr("content-length"), r.body)
    ok = (r1.status == 200 and r1.body == b"hello\n" and r2.body == b"hello\n"
          and len(r1.hdr("age")) == 1 and len(r2.hdr("age")) == 1
          and r1.hdr("set-cookie") in (["a=1", "b=2"],) and r1.hdr("x-multi") in (["a", "b"], ["a, b"]))
    return ok, "net: %s || cached: %s" % (desc(r1), desc(r2))

@case("-i/404 served", "status line 404, exit 22, body written", "CHECK", "CLI")
def _(c):
    c.serve(R(404, CC + "max-age=3600", body=b"nf"))
    r1 = c.get(mode="include"); r2 = c.get(mode="include")
    ok = r1.rc == 22 and r2.rc == 22 and r1.status == 404 and r2.status == 404 and r2.body == b"nf" and c.n == 1
    return ok, "rc=%d,%d status=%s,%s body=%r reqs=%d" % (r1.rc, r2.rc, r1.status, r2.status, r2.body, c.n)

@case("-i/203 reason phrase + custom reason", "status 203 line; origin reason may be replaced", "CHECK", "9112 §4 (reason phrase ignorable)")
def _(c):
    c.serve(R(203, CC + "max-age=3600", reason="Custom Words"))
    r1 = c.get(mode="include"); r2 = c.get(mode="include")
    return r2.status == 203, "net=%r cached=%r" % ((r1.raw_head or b"").split(b"\n")[0], (r2.raw_head or b"").split(b"\n")[0])

@case("-i/Age from origin replaced, not duplicated", "exactly one Age line on network and cached copies", "MUST", "9111 §4 (replace any Age present)")
def _(c):
    c.serve(R(200, CC + "max-age=100000", H("Date", 0), "Age: 10", "Age: 20"))
    r1 = c.get(mode="include"); r2 = c.get(mode="include")
    ok = len(r1.hdr("age")) == 1 and len(r2.hdr("age")) == 1
    return ok, "net age=%s cached age=%s" % (r1.hdr("age"), r2.hdr("age"))

# ---------------------------------------------------------------- stored header fields
def store_hdr(name, value, keep, level="MUST", section="9111 §3.1"):
    def fn(c):
        cc = [] if name.lower() == "cache-control" else [CC + "max-age=3600"]
        c.serve(R(200, H("Date", 0), "%s: %s" % (name, value), *cc))
        c.get(); r = c.get(mode="include")
        got = r.hdr(name)
        ok = c.n == 1 and ((got == [value]) if keep else (value not in got))
        return ok, "reqs=%d; cached %s=%s" % (c.n, name, got)
    addcase("hdr/%s %s" % ("store" if keep else "drop", name), ("%s kept" if keep else "%s NOT kept") % name, level, section, fn)

for n, v in [("Test-Header", "aywusqomkigecay"), ("X-Test-Header", "abcdefghijklmno"), ("Content-Foo", "auoicwqkeysmgau"),
             ("X-Content-Foo", "axurolifczwtqnk"), ("Content-Location", "/bar"), ("Content-MD5", "N7UdGUp1E+RbVvZSTy1R8g=="),
             ("X-Frame-Options", "sameorigin"), ("X-XSS-Protection", "1; mode=block"), ("Content-Language", "de"),
             ("Content-Disposition", "attachment; filename=a.txt"), ("Link", "</x>; rel=preload"), ("Access-Control-Allow-Origin", "*"),
             ("Strict-Transport-Security", "max-age=1")]:
    store_hdr(n, v, True)
store_hdr("Cache-Control", "max-age=3600", True)
store_hdr("Set-Cookie", "a=c", True, level="DESIGN", section="9111 §3.1 (MUST store all fields) vs design: Set-Cookie dropped")
for n in ["TE", "Upgrade", "Keep-Alive", "Proxy-Connection", "Trailer"]:
    store_hdr(n, "apetixmbqfujync", False, level="MUST", section="9110 §7.6.1, 9111 §3.1")
for n in ["Proxy-Authenticate", "Proxy-Authentication-Info"]:
    store_hdr(n, "apetixmbqfujync", False, level="MUST", section="9111 §3.1 (proxy-specific fields MUST NOT be stored)")

@case("hdr/Connection-listed fields dropped", "a, b (listed in Connection) not served from cache; c kept", "MUST", "9110 §7.6.1, 9111 §3.1")
def _(c):
    c.serve(R(200, CC + "max-age=100000", H("Date", 0), "Connection: close, a, b", "a: 1", "b: 2", "c: 3"))
    r1 = c.get(mode="include"); r2 = c.get(mode="include")
    ok = r2.hdr("a") == [] and r2.hdr("b") == [] and r2.hdr("c") == ["3"]
    return ok, "net a=%s b=%s; cached a=%s b=%s c=%s" % (r1.hdr("a"), r1.hdr("b"), r2.hdr("a"), r2.hdr("b"), r2.hdr("c"))

# ---------------------------------------------------------------- keys, redirects
@case("key/different query → different key", "2nd URL (other query) reaches origin", "MUST", "9111 §2, §4")
def _(c):
    c.serve(R(200, CC + "max-age=100000"))
    c.get(url=c.url + "?a=1"); c.get(url=c.url + "?a=2")
    return c.n == 2, "reqs=%d" % c.n

@case("key/same query → reused", "reused", "OPT", "9111 §4")
def _(c):
    c.serve(R(200, CC + "max-age=100000"))
    c.get(url=c.url + "?a=1"); c.get(url=c.url + "?a=1")
    return c.n == 1, "reqs=%d" % c.n

def redirect_case(name, status, redir_hdrs, target_hdrs, level, section, expected, check):
    def fn(c):
        counts = {"r": 0, "t": 0}
        def script(req, n):
            if req.target.endswith("/t"):
                counts["t"] += 1
                return R(200, *target_hdrs, body=b"target-body")
            counts["r"] += 1
            return R(status, "Location: /c/%s/t" % c.slug, *redir_hdrs, body=b"redirect")
        c.serve(script)
        r1 = c.get(mode="raw"); r2 = c.get(mode="raw")
        ok = check(counts)
        return ok, "origin hits: redirecting URL=%d target=%d; rc=%d,%d body2=%r" % (counts["r"], counts["t"], r1.rc, r2.rc, r2.body)
    addcase(name, expected, level, section, fn)

redirect_case("redirect/302 (uncacheable) → 200 max-age=3600", 302, [], [CC + "max-age=3600"], "MUST",
              "9111 §4 (presented target URI must match stored); §3 (302 w/o freshness not storable)",
              "2nd get of the original URL reaches origin (the 302 is not storable)", lambda k: k["r"] == 2)
redirect_case("redirect/307 (uncacheable) → 200 max-age=3600", 307, [], [CC + "max-age=3600"], "MUST",
              "9111 §4, §3", "2nd get of the original URL reaches origin", lambda k: k["r"] == 2)
redirect_case("redirect/302 no-store → 200 max-age=3600", 302, [CC + "no-store"], [CC + "max-age=3600"], "MUST",
              "9111 §5.2.2.5, §4", "2nd get reaches origin for the original URL", lambda k: k["r"] == 2)
redirect_case("redirect/301 max-age=3600 → 200 no-store", 301, [CC + "max-age=3600"], [CC + "no-store"], "MUST",
              "9111 §5.2.2.5", "target (no-store) fetched again", lambda k: k["t"] == 2)
redirect_case("redirect/301 max-age=0 → 200 max-age=3600", 301, [CC + "max-age=0"], [CC + "max-age=3600"], "MUST",
              "9111 §4.2.4 (stale 301 not reused)", "original URL re-requested (301 max-age=0)", lambda k: k["r"] == 2)
redirect_case("redirect/308 max-age=3600 → 200 max-age=3600", 308, [CC + "max-age=3600"], [CC + "max-age=3600"], "OPT",
              "9111 §4", "reused (no request)", lambda k: k["r"] == 1 and k["t"] == 1)

# ---------------------------------------------------------------- extra edge cases
reuse("fresh/invalid Expires + Last-Modified (no heuristic)", "MUST", "9111 §5.3 (invalid = past), §4.2.2 (no heuristic when explicit)",
      ["Expires: 0", H("Last-Modified", -86400), H("Date", 0)], False)
reuse("fresh/max-age=3600, s-maxage=0 (private ignores s-maxage)", "OPT", "9111 §5.2.2.10",
      [CC + "max-age=3600, s-maxage=0"], True)

@case("304/ETag in 304 but stored has only Last-Modified", "MUST NOT update (no stored response has that strong validator)", "MUST", "9111 §4.3.4")
def _(c):
    c.serve(R(200, CC + "max-age=1", "Last-Modified: " + LMV, "X-V: 1", body=b"one"),
            R(304, 'ETag: "new"', "X-V: 2", CC + "max-age=3600"),
            R(200, CC + "max-age=3600", 'ETag: "new"', "X-V: 3", body=b"three"))
    c.get(); time.sleep(2.5); r2 = c.get(mode="include")
    ok = not (r2.body == b"one" and r2.hdr("x-v") == ["2"])
    return ok, "reqs=%d; get2 body=%r x-v=%s" % (c.n, r2.body, r2.hdr("x-v"))

@case("304/Last-Modified in 304 differs from stored", "not selected for update (weak validator does not correspond)", "CHECK", "9111 §4.3.4")
def _(c):
    c.serve(R(200, CC + "max-age=1", "Last-Modified: " + LMV, "X-V: 1", body=b"one"),
            R(304, "Last-Modified: Thu, 02 Jan 2020 00:00:00 GMT", "X-V: 2", CC + "max-age=3600"),
            R(200, CC + "max-age=3600", "X-V: 3", body=b"three"))
    c.get(); time.sleep(2.5); r2 = c.get(mode="include")
    ok = not (r2.body == b"one" and r2.hdr("x-v") == ["2"])
    return ok, "reqs=%d; get2 body=%r x-v=%s" % (c.n, r2.body, r2.hdr("x-v"))

@case("304/no validator in 304, stored has ETag", "RFC rules select nothing (most caches update anyway)", "CHECK", "9111 §4.3.4")
def _(c):
    c.serve(R(200, CC + "max-age=1", 'ETag: "a"', "X-V: 1", body=b"one"), R(304, "X-V: 2"))
    c.get(); time.sleep(2.5); r2 = c.get(mode="include")
    return True, "reqs=%d; get2 body=%r x-v=%s (%s)" % (c.n, r2.body, r2.hdr("x-v"), "updated" if r2.hdr("x-v") == ["2"] else "not updated")

@case("req/no-cache on fresh + origin 503", "either (client prefers validation; 5xx may be replaced by stored)", "CHECK", "9111 §4.3.3, §5.2.1.4")
def _(c):
    c.serve(R(200, CC + "max-age=3600", body=b"stored"), R(503, body=b"down"))
    c.get(); r2 = c.get(CC + "no-cache", mode="raw")
    return True, "reqs=%d; rc=%d body=%r" % (c.n, r2.rc, r2.body)

@case("req/only-if-cached within swr window", "design: served stale, no request", "CHECK", "9111 §5.2.1.7, RFC 5861 §3")
def _(c):
    c.serve(R(200, CC + "max-age=1, stale-while-revalidate=3600"))
    c.get(); time.sleep(2.5); r2 = c.get(CC + "only-if-cached"); time.sleep(1)
    return c.n == 1, "reqs=%d; %s" % (c.n, r2.short())

@case("req/user-supplied If-None-Match, nothing stored", "INM forwarded; a 304 answer is the origin's answer", "CHECK", "9111 §4.3.2")
def _(c):
    c.serve(R(304, 'ETag: "abcdef"'))
    r = c.get('If-None-Match: "abcdef"')
    return True, "reqs=%d; INM seen=%r; rc=%d; %s" % (c.n, c.req_hdr(0, "If-None-Match"), r.rc, r.err.strip()[:150])
