"""Read an (old) index with this code, on a copy of it: the Python API (with a source glob,
at chunk level, with a metadata filter), `propdex mcp` + one `search` tool call, `propdex
serve` + one HTTP /search. Prints what each returned.

    PYTHONPATH=. python bench/upgrade/reads.py OLD_DB
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import anyio
from mcp.client import client as mcp_client
from mcp.client.stdio import StdioServerParameters

from propdex.api import open_index

src = sys.argv[1]
db = tempfile.mkdtemp(prefix="upg-reads-") + "/db"
shutil.copytree(src, db)
out = {}
idx = open_index(db)
try:
    hits = idx.search("What are the levels of AGI?", k=3)
    out["api"] = [f"{h.score:.3f} {h.title} p{h.page_start}" for h in hits]
    out["api_filter"] = len(idx.search("energy", k=3, source="*mck*"))
    out["api_chunks"] = len(idx.search("energy", k=3, level="chunks"))
    out["api_where"] = len(idx.search("energy", k=3, where={"team": "x"}))
    out["status_docs"] = len(idx.documents())
except Exception as e:
    out["api"] = f"ERROR {type(e).__name__}: {e}"
server = StdioServerParameters(command=sys.executable, args=["-m", "propdex.cli", "mcp", "--db", db], env=dict(os.environ))
async def session():
    async with mcp_client.Client(server, read_timeout_seconds=120) as client:
        r = await client.call_tool("search", {"query": "What are the levels of AGI?", "k": 2})
        return str(r)[:300]
try:
    out["mcp"] = anyio.run(session)
except Exception as e:
    out["mcp"] = f"ERROR {type(e).__name__}: {e}"
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
proc = subprocess.Popen([sys.executable, "-m", "propdex.cli", "serve", "--db", db, "--port", str(port)],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    for _ in range(240):
        try:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/search", data=json.dumps({"query": "What are the levels of AGI?", "k": 3}).encode(), headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=60) as r:
                body = json.loads(r.read()); out["http"] = [f"{h.get('score', 0):.3f} {h.get('title')}" for h in body][:3]
            break
        except urllib.error.HTTPError as e:
            out["http"] = f"HTTP {e.code}: {e.read()[:400]}"; break
        except Exception:
            time.sleep(0.5)
    else:
        out["http"] = "no answer"
finally:
    proc.terminate(); proc.wait(20)
shutil.rmtree(os.path.dirname(db))
print(json.dumps(out, indent=1))
