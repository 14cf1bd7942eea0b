"""Ad-hoc probe: python3 probe.py '<python expr giving list of Resp>' [get args...]"""
import os, sys, subprocess, shutil, time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from origin import Origin, Resp
from harness import R, H, seq, BIN, CACHES
o = Origin()
o.script("p", seq(*eval(sys.argv[1])))
cache = os.path.join(CACHES, "_probe")
shutil.rmtree(cache, ignore_errors=True)
for spec in sys.argv[2:]:
    if spec.startswith("sleep"):
        time.sleep(float(spec[5:])); continue
    args = [a for a in spec.split("|") if a]
    p = subprocess.run([BIN, "cache", "get", o.base + "/c/p/r", "--cache", cache] + args, capture_output=True)
    print("$ cache get URL --cache DIR", " ".join(repr(a) for a in args), "→ rc", p.returncode)
    print(p.stdout.decode("latin-1")); print(p.stderr.decode("latin-1"))
for r in o.requests("p"):
    print("REQ", r.target, r.lines)
