"""Connections an ingest opens to an OpenAI-compatible embeddings server, and its wall time.

    python bench/bench_connections.py [--documents 20] [--rounds 5] TREE [TREE ...]

Each round runs `propdex ingest` (a new process, the offline LLM backend, embeddings from the
scripted server of tests/scripted_server.py) over --documents new small Markdown files, once
per TREE in turn (a checkout of propdex: its code runs the ingest), so trees alternate and
share the host's load. The files' texts are new each run: no cache answers them. Reported per
run: the TCP connections the server accepted, its POSTs, and the wall time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.scripted_fixtures import scripted_environment  # noqa: E402
from tests.scripted_server import ScriptedServer  # noqa: E402


def write_documents(folder: Path, count: int) -> None:
    folder.mkdir(parents=True)
    nonce = uuid.uuid4().hex  # new texts: neither cache of an earlier run answers them
    for i in range(count):
        (folder / f"note{i}.md").write_text(
            f"# Note {i}\n\nNote {i} ({nonce}) says that herons nest in tall trees near water. "
            "Herons eat fish and frogs.\n", encoding="utf-8")


def ingest_once(tree: str, count: int, work: Path) -> tuple[int, int, float]:
    """(connections accepted, POSTs, wall seconds) of one ingest run with ``tree``'s code."""
    folder = work / "docs"
    write_documents(folder, count)
    with ScriptedServer() as server:
        env = {**os.environ, **scripted_environment(server), "PYTHONPATH": tree,
               "PROPDEX_LLM": "offline"}
        started = time.perf_counter()
        # From the tree: `python -m` puts the working directory first on the path.
        subprocess.run([sys.executable, "-m", "propdex.cli", "ingest", str(folder),
                        "--db", str(work / "db")], env=env, cwd=tree, check=True,
                       capture_output=True)
        wall = time.perf_counter() - started
        return server.connections_opened, len(server.requests), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", help="propdex checkouts whose code runs the ingest")
    parser.add_argument("--documents", type=int, default=20, help="documents per ingest")
    parser.add_argument("--rounds", type=int, default=5, help="runs per tree, alternated")
    args = parser.parse_args()
    print("| round | tree | connections | POSTs | wall (s) | load (1 min) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for round_ in range(1, args.rounds + 1):
        for tree in args.trees:
            with tempfile.TemporaryDirectory(prefix="bench-connections-") as work:
                connections, posts, wall = ingest_once(tree, args.documents, Path(work))
            print(f"| {round_} | {tree} | {connections} | {posts} | {wall:.1f} | "
                  f"{os.getloadavg()[0]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
