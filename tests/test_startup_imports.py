"""What a CLI ingest's processes import before doing any work: each process starts with only
the libraries its job needs (each import here is a fresh interpreter's)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def imported_after(code: str, modules: list[str]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has imported after running ``code``."""
    script = textwrap.dedent(code) + textwrap.dedent(f"""
        import json, sys
        print(json.dumps([m for m in {modules!r} if m in sys.modules]))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, check=True, timeout=120)
    return json.loads(done.stdout.splitlines()[-1])


def test_the_extraction_worker_starts_without_pydantic_or_markdown():
    # What the worker imports before its first request (propdex.extract.worker.main).
    code = "import propdex.extract.worker, propdex.extract.pdf"
    assert [] == imported_after(code, ["pydantic", "pydantic_settings", "markdown_it"])
