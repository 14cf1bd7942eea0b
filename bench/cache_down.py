"""Failing origin, in-process (issue 21): requests-cache's side of `cache-bench down-origin`.

One 4 KiB item is fetched with `Cache-Control: max-age=1` and let go stale; then CALLS loads,
INTERVAL ms apart, while the origin refuses connections (`refused`) or answers 503 (`503`).
requests-cache (SQLite backend, `cache_control=True`, `stale_if_error=True`) must return the stale
value each time. The origin counts what reached it: for `refused`, the connection attempts
(a listening socket that is closed and reopened costs none, so the count comes from a transport
adapter that counts sends); for `503`, the requests. Emits one JSON line per mode, in the shape
cache-bench emits.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BODY = bytes(range(256)) * 16  # 4 KiB


class _Handler(BaseHTTPRequestHandler):
    failing = False
    requests = 0

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base class's name)
        pass

    def do_GET(self) -> None:  # noqa: N802 (the base class's name)
        type(self).requests += 1
        if type(self).failing:
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Cache-Control", "max-age=1")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(folder: str, calls: int, interval_ms: int) -> list[dict]:
    import requests
    import requests_cache
    from requests.adapters import HTTPAdapter

    out = []
    for mode in ("refused", "503"):
        handler = type(f"Handler{mode}", (_Handler,), {"failing": False, "requests": 0})
        port = _free_port()
        server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        attempts = [0]

        class Counting(HTTPAdapter):
            def send(self, *args, **kwargs):
                attempts[0] += 1
                return super().send(*args, **kwargs)

        session = requests_cache.CachedSession(f"{folder}-{mode}/http_cache", backend="sqlite", cache_control=True,
                                               stale_if_error=True)
        session.mount("http://", Counting())
        url = f"http://127.0.0.1:{port}/down.bin"
        session.get(url)
        time.sleep(1.1)
        if mode == "refused":
            server.shutdown()
            server.server_close()
        else:
            handler.failing = True
        before = (attempts[0], handler.requests)
        lat = []
        started = time.perf_counter()
        for call in range(calls):
            t = time.perf_counter_ns()
            response = session.get(url)
            lat.append(time.perf_counter_ns() - t)
            if response.content != BODY:
                raise SystemExit(f"requests-cache call {call} with the origin {mode}: status {response.status_code}, not the stale value")
            time.sleep(interval_ms / 1000)
        elapsed = time.perf_counter() - started
        requests_seen = attempts[0] - before[0] if mode == "refused" else handler.requests - before[1]
        if mode != "refused":
            server.shutdown()
            server.server_close()
        session.close()
        rest = sorted(lat[1:])
        out.append({"measure": "down-origin", "op": mode, "first_ns": lat[0], "requests": requests_seen,
                    "calls": calls, "seconds": elapsed, "lat_ns": lat[1:], "p50_ns": rest[len(rest) // 2]})
    return out


if __name__ == "__main__":
    import sys
    opts = dict(zip(sys.argv[1::2], sys.argv[2::2]))
    for line in run(opts["--folder"], int(opts.get("--calls", 100)), int(opts.get("--interval-ms", 20))):
        print(json.dumps(line))
