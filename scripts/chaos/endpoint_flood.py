"""Floods a `sync-agent watch --http PORT` endpoint the way a hostile local user could, and
prints how /healthz answers meanwhile (issue 12's audit: FlyingFox spent minutes of CPU on two
1 MB request lines and stopped at ~1,000 idle connections).

Usage: python3 scripts/chaos/endpoint_flood.py PORT
  1. two clients each send a 1,000,000-byte request line;
  2. after 1 s, `curl -m 30 /healthz` (code and time);
  3. 1,200 idle connections, then /healthz again.
Stop the agent afterwards by its PID (SIGTERM) and check it exits 0.
"""
import socket, sys, threading, time, subprocess
port = int(sys.argv[1])
def huge():
    try:
        s = socket.create_connection(("127.0.0.1", port)); s.settimeout(120)
        s.sendall(b"GET /" + b"a"*1000000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        try: s.recv(100)
        except Exception: pass
        s.close()
    except Exception as e: pass
ts = [threading.Thread(target=huge, daemon=True) for _ in range(2)]
for t in ts: t.start()
time.sleep(1.0)
t0 = time.time()
r = subprocess.run(["curl", "-s", "-m", "30", "-o", "/dev/null", "-w", "%{http_code}", f"http://127.0.0.1:{port}/healthz"], capture_output=True, text=True)
print(f"healthz during attack: {r.stdout} after {time.time()-t0:.3f} s")
idle = []
for i in range(1200):
    try: idle.append(socket.create_connection(("127.0.0.1", port), timeout=2))
    except Exception as e: print("connect", i, e); break
t0 = time.time()
r = subprocess.run(["curl", "-s", "-m", "30", "-o", "/dev/null", "-w", "%{http_code}", f"http://127.0.0.1:{port}/healthz"], capture_output=True, text=True)
print(f"healthz with {len(idle)} idle connections: {r.stdout} after {time.time()-t0:.3f} s")
