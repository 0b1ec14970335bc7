"""Run a command against a scripted OpenAI-compatible server (tests/scripted_server.py);
write its exit code, wall time, output and the requests by step to OUT (JSON).

    python bench/upgrade/served.py OUT.json COMMAND...
"""
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.scripted_server import ScriptedServer  # noqa: E402

out, cmd = sys.argv[1], sys.argv[2:]
with ScriptedServer() as server:
    env = dict(os.environ, PROPDEX_LLM_BASE_URL=server.url + "/v1", PROPDEX_LLM_API_KEY="sk-test")
    t = time.monotonic()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    secs = time.monotonic() - t
    steps = collections.Counter(r.step or r.path for r in server.requests)
with open(out, "w") as f:
    json.dump({"rc": proc.returncode, "seconds": round(secs, 1), "requests": len(server.requests),
               "by_step": dict(steps), "stdout": proc.stdout, "stderr": proc.stderr[-4000:]}, f, indent=1)
print(out, proc.returncode, round(secs, 1), len(server.requests), dict(steps))
