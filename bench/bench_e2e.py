"""End-to-end ingest speed, Prefect's share of it, and peak memory on a 400-page PDF.

    python bench/bench_e2e.py [--pdf PATH] [--latency-ms 0 200] [--rounds 3] [--pages 400]

(a) Pages per minute of a whole ingest (extraction, title/summary, chunking, propositions,
    grading, embeddings, LanceDB writes, index maintenance) with the LLM steps answered by
    the scripted OpenAI-compatible server (a child process, like a real server) at each
    latency, through propdex's real OpenAI client. Embeddings: local MiniLM by default.
(b) Prefect's bookkeeping: the same run twice, alternately, ROUNDS times each: through the
    Prefect flow, and as the very same task functions called in the same order without
    Prefect (``task.fn``: no task runs, states, result persistence, cache lookups, artifact).
    Share = (flow - plain) / flow, on medians. Both start after a warm-up of each (Prefect's
    ephemeral API and the embedding model are loaded once per process, as in a long run).
(c) Peak memory (max RSS) of one ingest process on a generated PDF of ``--pages`` pages of
    corpus sentences (each page a different draw, so chunks are not duplicates), at 0 ms.

Every round writes a fresh database, so no run reuses another's cached results.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from tests.scripted_server import DEFAULT_MODEL  # noqa: E402

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

CORPUS = REPO.parent / "shared" / "corpus"
DEFAULT_PDF = CORPUS / "levels_of_agi.pdf"
SENTENCE_SOURCE = CORPUS / "nike_2023_annual_report.txt"
CHARS_PER_PAGE = 2500


def llm_environment(url: str, embedder: str) -> dict[str, str]:
    """PROPDEX_* variables pointing the LLM steps (and, if asked, embeddings) at the server."""
    env = {
        "PROPDEX_LLM": "openai",
        "PROPDEX_LLM_BASE_URL": url + "/v1",
        "PROPDEX_LLM_API_KEY": "sk-bench",
        "PROPDEX_LLM_MODEL": DEFAULT_MODEL,
        "PROPDEX_EMBEDDER": "minilm",
    }
    if embedder == "scripted":
        env.update(PROPDEX_EMBEDDER="openai", PROPDEX_EMBED_MODEL="scripted-embed")
    return env


def run_flow(pdf: Path, db: str) -> float:
    from flows.ingest import ingest

    started = time.perf_counter()
    summary = ingest(sources=[str(pdf)], db=db)
    seconds = time.perf_counter() - started
    failed = [d for d in summary["documents"] if d["status"] != "indexed"]
    if failed:
        raise SystemExit(f"ingest failed: {failed}")
    return seconds


def run_plain(pdf: Path, db: str) -> float:
    """The flow's task functions, same order, same arguments, without Prefect."""
    from flows.parameters import IngestOptions
    from tasks.documents import embed, extract, propose, split, write_context
    from tasks.index import commit_document, optimize, plan_run, sweep

    started = time.perf_counter()
    settings = IngestOptions().settings(db)
    plan = plan_run.fn([str(pdf)], settings, False, True)
    sweep.fn(settings)
    fp = plan.fingerprint
    for item in plan.to_process:
        doc = extract.fn(item, settings, fp)
        context = write_context.fn(doc, settings, fp)
        chunks = split.fn(doc, context, settings, fp)
        props = propose.fn(doc, chunks, context, settings, fp)
        vectors = embed.fn(doc, chunks, props, settings, fp)
        commit_document.fn(item, doc, context, chunks, props, vectors, settings, fp, "plain")
    optimize.fn(settings)
    return time.perf_counter() - started


def page_count(pdf: Path) -> int:
    import pymupdf

    with pymupdf.open(pdf) as doc:
        return doc.page_count


def compare(pdf: Path, latencies: list[float], rounds: int, embedder: str) -> None:
    from bench_llm import ServerProcess

    pages = page_count(pdf)
    print(f"### (a, b) {pdf.name} ({pages} pages): whole ingest, {rounds} alternating rounds "
          f"after one warm-up; embeddings: {embedder}\n")
    print("| LLM latency | flow s (median) | pages/min | plain task functions s | "
          "Prefect bookkeeping share | flow / plain |")
    print("|---:|---:|---:|---:|---:|---:|")
    workdir = Path(tempfile.mkdtemp(prefix="propdex-bench-e2e-"))
    for latency in latencies:
        server = ServerProcess(latency)
        os.environ.update(llm_environment(server.url, embedder))
        try:
            flow_s, plain_s = [], []
            for round_ in range(rounds + 1):
                flow = run_flow(pdf, str(workdir / f"flow-{latency}-{round_}"))
                plain = run_plain(pdf, str(workdir / f"plain-{latency}-{round_}"))
                if round_:  # round 0 is the warm-up
                    flow_s.append(flow)
                    plain_s.append(plain)
        finally:
            server.stop()
        f, p = statistics.median(flow_s), statistics.median(plain_s)
        print(f"| {latency:g} ms | {f:.2f} | {pages / f * 60:.0f} | {p:.2f} | "
              f"{(f - p) / f:.1%} | {f / p:.2f} |", flush=True)


# ---------------------------------------------------------------- peak memory
def make_long_pdf(path: Path, pages: int) -> Path:
    """``pages`` pages of corpus sentences, each page its own random draw."""
    import re

    from tests.pdf_factory import make_pdf

    text = SENTENCE_SOURCE.read_text(encoding="utf-8")
    pool = [s for s in re.split(r"(?<=[.!?])\s+", re.sub(r"\s+", " ", text)) if len(s) > 30]
    rng = np.random.default_rng(400)
    bodies = []
    for _ in range(pages):
        page, size = [], 0
        while True:  # fill up to CHARS_PER_PAGE: what make_pdf fits on one page
            sentence = pool[rng.integers(len(pool))]
            if page and size + len(sentence) > CHARS_PER_PAGE:
                break
            page.append(sentence[:CHARS_PER_PAGE])
            size += len(sentence) + 1
        bodies.append(" ".join(page))
    return make_pdf(path, bodies, title="Generated long report")


def child_ingest(pdf: str, db: str) -> None:
    """Run in a child process: one ingest, then its own wall time and peak RSS as JSON."""
    seconds = run_flow(Path(pdf), db)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    print(json.dumps({"seconds": seconds, "peak_mib": peak_kib / 1024}))


def peak_memory(pages: int, embedder: str) -> None:
    from bench_llm import ServerProcess

    workdir = Path(tempfile.mkdtemp(prefix="propdex-bench-memory-"))
    pdf = make_long_pdf(workdir / "long.pdf", pages)
    server = ServerProcess(0)
    try:
        env = {**os.environ, **llm_environment(server.url, embedder)}
        done = subprocess.run(
            [sys.executable, __file__, "--child-ingest", str(pdf), str(workdir / "db")],
            env=env, capture_output=True, text=True, check=False,
        )
    finally:
        server.stop()
    if done.returncode:
        raise SystemExit(f"ingest of {pdf} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    size_mb = pdf.stat().st_size / 1e6
    print(f"\n### (c) peak memory, {pages}-page generated PDF ({size_mb:.1f} MB), "
          f"LLM at 0 ms, embeddings: {embedder}\n")
    print("| pages | flow s (incl. Prefect start-up) | pages/min "
          "| peak RSS of the ingest process (MiB) |")
    print("|---:|---:|---:|---:|")
    print(f"| {pages} | {result['seconds']:.1f} | {pages / result['seconds'] * 60:.0f} | "
          f"{result['peak_mib']:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pdf", type=Path, default=DEFAULT_PDF)
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 200.0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pages", type=int, default=400, help="0 skips the memory run")
    parser.add_argument("--embedder", choices=["minilm", "scripted"], default="minilm")
    parser.add_argument("--child-ingest", nargs=2, metavar=("PDF", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_ingest:
        child_ingest(*args.child_ingest)
        return
    if not args.pdf.is_file() or not SENTENCE_SOURCE.is_file():
        sys.exit(f"needs the reference corpus at {CORPUS}")
    if args.rounds:
        compare(args.pdf, args.latency_ms, args.rounds, args.embedder)
    if args.pages:
        peak_memory(args.pages, args.embedder)


if __name__ == "__main__":
    main()
