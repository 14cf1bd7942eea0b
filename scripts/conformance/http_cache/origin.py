"""Scripted loopback HTTP/1.1 origin written on raw sockets.

Each test case owns the URL prefix /c/<case>/. A case registers a script: a
function (req, n) -> Resp | "close" | "reset" | "hang:<secs>", where n counts the
requests that case has received (0-based). Every request (method, target, raw
header lines) is logged per case so the runner can count them.
"""
import socket, threading, time, email.utils, re

def httpdate(offset=0.0):
    return email.utils.formatdate(time.time() + offset, usegmt=True)

class Resp:
    def __init__(self, status=200, headers=(), body=b"", reason=None, date=True,
                 content_length=True, raw_head=None):
        self.status = status
        self.headers = list(headers)      # raw strings or bytes, sent verbatim
        self.body = body if isinstance(body, bytes) else body.encode()
        self.reason = reason
        self.date = date                  # True: add Date now; False: none
        self.content_length = content_length
        self.raw_head = raw_head          # bytes: whole head verbatim (no CRLFCRLF)

REASONS = {200: "OK", 203: "Non-Authoritative Information", 204: "No Content",
           206: "Partial Content", 300: "Multiple Choices", 301: "Moved Permanently",
           302: "Found", 304: "Not Modified", 307: "Temporary Redirect",
           308: "Permanent Redirect", 404: "Not Found", 405: "Method Not Allowed",
           410: "Gone", 414: "URI Too Long", 500: "Internal Server Error",
           501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
           504: "Gateway Timeout"}

class Request:
    def __init__(self, method, target, header_lines, t):
        self.method, self.target, self.lines, self.time = method, target, header_lines, t
    def get_all(self, name):
        out = []
        for l in self.lines:
            k, _, v = l.partition(":")
            if k.strip().lower() == name.lower():
                out.append(v.strip())
        return out
    def get(self, name):
        v = self.get_all(name)
        return ", ".join(v) if v else None
    def __repr__(self):
        return "%s %s %s" % (self.method, self.target, self.lines)

class Origin:
    def __init__(self):
        self.scripts = {}
        self.log = {}
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.port = self.sock.getsockname()[1]
        self.base = "http://127.0.0.1:%d" % self.port
        threading.Thread(target=self._accept, daemon=True).start()

    def script(self, case, fn):
        with self.lock:
            self.scripts[case] = fn
            self.log[case] = []

    def requests(self, case):
        with self.lock:
            return list(self.log.get(case, []))

    def _accept(self):
        while True:
            c, _ = self.sock.accept()
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        buf = b""
        try:
            c.settimeout(30)
            while True:
                while b"\r\n\r\n" not in buf:
                    d = c.recv(65536)
                    if not d:
                        return
                    buf += d
                head, _, buf = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
                req = Request(method, target, lines[1:], time.time())
                m = re.match(r"/c/([^/?]+)", target)
                case = m.group(1) if m else None
                with self.lock:
                    fn = self.scripts.get(case)
                    log = self.log.setdefault(case, [])
                    n = len(log)
                    log.append(req)
                if fn is None:
                    out = Resp(404, ["Cache-Control: no-store"], b"no script")
                else:
                    out = fn(req, n)
                if out == "close":
                    c.close(); return
                if out == "reset":
                    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    c.close(); return
                if isinstance(out, str) and out.startswith("hang:"):
                    time.sleep(float(out[5:])); c.close(); return
                c.sendall(self._encode(out, method))
                c.close()       # one exchange per connection
                return
        except Exception:
            pass
        finally:
            try: c.close()
            except Exception: pass

    def _encode(self, r, method):
        if r.raw_head is not None:
            return r.raw_head + b"\r\n\r\n" + r.body
        reason = r.reason if r.reason is not None else REASONS.get(r.status, "X")
        out = [("HTTP/1.1 %d %s" % (r.status, reason)).encode()]
        if r.date is True:
            out.append(b"Date: " + httpdate().encode())
        for h in r.headers:
            if callable(h):
                h = h()
            out.append(h if isinstance(h, bytes) else h.encode("latin-1"))
        if r.content_length and r.status not in (204, 304) and r.status >= 200:
            out.append(b"Content-Length: %d" % len(r.body))
        if not any((h() if callable(h) else h if isinstance(h, str) else h.decode("latin-1")).lower().startswith("connection:") for h in r.headers):
            out.append(b"Connection: close")
        body = b"" if (method == "HEAD" or r.status in (204, 304)) else r.body
        return b"\r\n".join(out) + b"\r\n\r\n" + body
