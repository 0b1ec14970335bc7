"""Table PDFs through a real LLM: Gemma 3 270M on llama-cpp-python's server (the ``llamacpp``
extra). A 270M base model writes poor propositions; this measures the plumbing around table
chunks: the calls made, prompt and completion tokens against the context window and the
output caps, answers cut off, chunks whose propositions failed, what the checks rejected, and
whether each proposition of a table chunk carries its row's box.

Inputs, built here with PyMuPDF: a ruled table of 6 rows; a table of 28 rows, longer than a
chunk (split between rows, header repeated); pages 8-9 of the corpus's
attention_is_all_you_need.pdf (Tables 2 and 3), when the corpus is there.

``--grade N`` then grades N statements of the long table's first part in one call, one per
cell as a model following the prompt writes them, and reports the cap, the tokens and
whether the answer fit.

Each input is ingested in this process (the propdex on PYTHONPATH: run it once with main's
checkout and once with this one for before/after) into its own database and LLM cache.

Run from the repository root:
    PYTHONPATH=$PWD python bench/bench_tables_gemma.py [--url http://127.0.0.1:PORT/v1]
        [--n-ctx 4096] [--only NAME] [--grade COUNT] [ENV=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_checks_gemma import MODEL, start_server  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CORPUS_PDF = REPO.parent.parent / "shared" / "corpus" / "attention_is_all_you_need.pdf"
SIX_ROWS = [["Mineral", "Hardness", "Density"], ["Talc", "1", "2.7"], ["Gypsum", "2", "2.3"],
            ["Calcite", "3", "2.71"], ["Fluorite", "4", "3.18"], ["Apatite", "5", "3.19"],
            ["Quartz", "7", "2.65"]]
LONG_ROWS = [["Mineral", "Hardness", "Density"],
             *([f"Mineral sample {n}", str(1 + n % 9), f"{2 + n / 20:.2f}"] for n in range(28))]


def make_inputs(folder: Path) -> dict[str, Path]:
    import pymupdf

    sys.path.append(str(REPO))  # after PYTHONPATH: propdex stays the checkout measured
    from tests.pdf_factory import make_table_pdf

    inputs = {"six_rows": make_table_pdf(folder / "six_rows.pdf", SIX_ROWS),
              "long_table": make_table_pdf(folder / "long_table.pdf", LONG_ROWS)}
    corpus = Path(os.environ.get("PROPDEX_CORPUS_PDF", CORPUS_PDF))
    if corpus.exists():
        with pymupdf.open(corpus) as source, pymupdf.open() as pages:
            pages.insert_pdf(source, from_page=7, to_page=8)
            pages.save(folder / "attention_p8_9.pdf")
        inputs["attention_p8_9"] = folder / "attention_p8_9.pdf"
    return inputs


def recording_calls() -> list:
    """Every CallRecord of every LLMClient made from now on."""
    from propdex.llm.client import LLMClient

    records: list = []
    original = LLMClient.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.on_call = records.append

    LLMClient.__init__ = init
    return records


def is_table_chunk(text: str) -> bool:
    return "\n|---" in text or text.startswith("|")


def inside(box: dict, page: tuple[float, float]) -> bool:
    return 0 <= box["x0"] <= box["x1"] <= page[0] + 0.5 and 0 <= box["y0"] <= box["y1"] <= page[1] + 0.5


def tally(db: Path, pdf: Path, calls: list, seconds: float, n_ctx: int) -> dict:
    import lancedb
    import pymupdf

    from propdex.checks.propositions import proposition_problems

    with pymupdf.open(pdf) as doc:
        pages = {n + 1: (page.rect.width, page.rect.height) for n, page in enumerate(doc)}
    connection = lancedb.connect(str(db))
    [document] = connection.open_table("documents").to_arrow().to_pylist()
    chunks = {c["chunk_id"]: c for c in connection.open_table("chunks").to_arrow().to_pylist()
              if c["run_id"] == document["run_id"]}
    # No propositions table: no chunk of the run gave any (every extraction failed).
    stored = (connection.open_table("propositions").to_arrow().to_pylist()
              if "propositions" in connection.list_tables().tables else [])
    propositions = [p for p in stored if p["run_id"] == document["run_id"]]
    table_ids = {i for i, c in chunks.items() if is_table_chunk(c["text"])}
    in_tables = [p for p in propositions if p["chunk_id"] in table_ids]
    row_boxed = [p for p in in_tables if p["boxes"] and p["boxes"] != chunks[p["chunk_id"]]["boxes"]]
    outside = [p for p in in_tables
               if not p["boxes"] or not all(inside(b, pages[b["page"]]) for b in p["boxes"])]
    searchable_failing = [
        p["text"] for p in propositions if p["passed"] and proposition_problems(
            [p["text"]], chunks[p["chunk_id"]]["text"],
            (chunks[p["chunk_id"]]["header"], document["title"]))[0] is not None]
    steps = Counter(r.step for r in calls)
    return {
        "seconds": round(seconds, 1), "status": document["status"], "error": document["error"],
        "chunks": len(chunks), "table chunks": len(table_ids),
        "llm calls": len(calls), "calls by step": dict(steps),
        "prompt tokens": sum(r.prompt_tokens for r in calls),
        "completion tokens": sum(r.completion_tokens for r in calls),
        "largest prompt + cap (tokens)": max((r.prompt_tokens + (r.cap or 0) for r in calls), default=0),
        "context window": n_ctx,
        "calls whose prompt + cap exceed the window": sum(
            r.prompt_tokens + (r.cap or 0) > n_ctx for r in calls),
        "answers cut off (finish_reason=length)": Counter(
            r.step for r in calls if r.finish_reason == "length"),
        "propositions calls (prompt, cap, completion, finish)": [
            (r.prompt_tokens, r.cap, r.completion_tokens, r.finish_reason)
            for r in calls if r.step == "propositions"],
        "chunks failed": [c["prop_error"] for c in chunks.values() if c["prop_error"]],
        "context fallback": document["context_fallback"],
        "propositions": len(propositions), "passed": sum(p["passed"] for p in propositions),
        "rejected": dict(Counter(p["reject_reason"] for p in propositions if not p["passed"])),
        "table propositions": len(in_tables),
        "table propositions with their row's box": len(row_boxed),
        "table propositions with no box or one outside its page": len(outside),
        "searchable propositions failing the checks": searchable_failing,
        "table propositions (text, passed, row box)": [
            (p["text"], p["passed"], p in row_boxed) for p in in_tables][:12],
    }


def grade_table_part(pdf: Path, count: int, calls: list) -> dict:
    """One grading call for ``count`` statements of the long table's first part, as a model
    stating one cell per proposition writes them: its cap, tokens and outcome."""
    from propdex.chunking import chunk_document
    from propdex.errors import LLMError
    from propdex.extract import extract_document
    from propdex.llm.openai_backend import OpenAIBackend
    from propdex.settings import Settings

    settings = Settings()
    chunk = next(c for c in chunk_document(extract_document(pdf, settings), settings)
                 if is_table_chunk(c.text))
    rows = [line.split("|")[1:4] for line in chunk.prompt_text.splitlines()
            if line.startswith("|Mineral sample")]
    statements = [f"In Table 1 (Hardness and density of minerals), {row[0]} has a {column} of {value}."
                  for row in rows for column, value in (("hardness", row[1]), ("density", row[2]))]
    calls.clear()
    backend = OpenAIBackend(settings)
    try:
        outcome = f"{len(backend.grade(chunk.prompt_text, statements[:count], title='Minerals', section=None).value)} grades"
    except LLMError as error:
        outcome = str(error)
    finally:
        backend.close()
    return {"statements": count, "outcome": outcome,
            "calls (cap, prompt, completion, finish)": [
                (r.cap, r.prompt_tokens, r.completion_tokens, r.finish_reason) for r in calls]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("environment", nargs="*", help="PROPDEX_X=value settings for every ingest")
    parser.add_argument("--url", help="a running server's /v1 URL (else one is started here)")
    parser.add_argument("--n-ctx", type=int, default=4096, help="the server's context window")
    parser.add_argument("--only", action="append", help="ingest only this input (repeatable)")
    parser.add_argument("--grade", type=int, action="append", default=[],
                        help="then grade this many statements of the long table in one call (repeatable)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="propdex-tables-gemma-"))
    inputs = make_inputs(work)
    server = None
    url = args.url
    if url is None:
        server, url = start_server(work, args.n_ctx)
    os.environ.update({
        "PROPDEX_LLM": "openai", "PROPDEX_LLM_BASE_URL": url, "PROPDEX_LLM_MODEL": MODEL,
        "PROPDEX_LLM_TIMEOUT": "900", "PROPDEX_LLM_CONCURRENCY": "1",
        "PREFECT_LOGGING_LEVEL": "WARNING", "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    })
    os.environ.update(dict(pair.split("=", 1) for pair in args.environment))
    import propdex
    from flows.ingest import ingest

    print(f"propdex: {Path(propdex.__file__).parent}", flush=True)
    calls = recording_calls()
    try:
        for name, pdf in inputs.items():
            if args.only and name not in args.only:
                continue
            os.environ["PROPDEX_CACHE_DIR"] = str(work / name / "cache")
            calls.clear()
            started = time.perf_counter()
            ingest(sources=[str(pdf)], db=str(work / name / "db"))
            result = tally(work / name / "db", pdf, list(calls), time.perf_counter() - started,
                           args.n_ctx)
            print(json.dumps({name: result}, ensure_ascii=False), flush=True)
        for count in args.grade:
            result = grade_table_part(inputs["long_table"], count, calls)
            print(json.dumps({"grading": result}, ensure_ascii=False), flush=True)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    print(f"work folder: {work}")


if __name__ == "__main__":
    main()
