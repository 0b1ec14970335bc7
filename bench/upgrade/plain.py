"""Run a command; write its exit code, wall time and output to OUT (JSON).

    python bench/upgrade/plain.py OUT.json COMMAND...
"""
import json
import subprocess
import sys
import time

out, cmd = sys.argv[1], sys.argv[2:]
t = time.monotonic()
proc = subprocess.run(cmd, capture_output=True, text=True)
secs = time.monotonic() - t
with open(out, "w") as f:
    json.dump({"rc": proc.returncode, "seconds": round(secs, 1), "stdout": proc.stdout, "stderr": proc.stderr[-4000:]}, f, indent=1)
print(out, proc.returncode, round(secs, 1))
