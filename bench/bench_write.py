"""LanceDB write throughput: propdex's atomic per-document replacement against bare appends.

    python bench/bench_write.py [--documents 40] [--chunks 25] [--props 8] [--rounds 3]

Each document has ``--chunks`` chunks of 800 characters and ``--props`` propositions of about
120 characters per chunk, all with 384-d vectors (the shape of a real ingest). Three writers
of the same rows, alternately, ROUNDS times each, each into a fresh database:
- propdex: ``Index.replace_document`` per document (append chunks and propositions under the
  run id, commit the documents row with merge_insert, delete superseded rows, writer locks);
- bare per document: LanceDB ``table.add`` of the same three Arrow tables per document
  (what any per-document writer must at least do);
- bare bulk: one ``table.add`` per table for the whole batch (LanceDB's ceiling here).
Rows/s counts chunk and proposition rows; medians and ratios to propdex.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from propdex.store import Index  # noqa: E402
from propdex.store.schema import CHUNKS, DOCUMENTS, PROPOSITIONS  # noqa: E402

DIM = 384
WORDS = ("revenue growth brand footwear apparel digital channel inventory margin region "
         "consumer wholesale direct quarter fiscal currency demand supply cost").split()


def words(rng: np.random.Generator, chars: int) -> str:
    out, size = [], 0
    while size < chars:
        word = WORDS[rng.integers(len(WORDS))]
        out.append(word)
        size += len(word) + 1
    return " ".join(out)


def unit_rows(rng: np.random.Generator, count: int) -> np.ndarray:
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def document(i: int, chunks: int, props: int, rng: np.random.Generator) -> tuple:
    doc_id, run_id, source = f"doc{i:05d}", "run-bench", f"/bench/doc{i:05d}.pdf"
    chunk_vectors, prop_vectors = unit_rows(rng, chunks), unit_rows(rng, chunks * props)
    chunk_rows, prop_rows, texts = [], [], []
    for c in range(chunks):
        text = words(rng, 800)
        start = sum(len(t) + 2 for t in texts)
        texts.append(text)
        chunk_rows.append({
            "chunk_id": f"{doc_id}:c{c}", "ordinal": c, "text": text, "header": "Title / part",
            "section": "Section", "page_start": c // 3 + 1, "page_end": c // 3 + 1,
            "char_start": start, "char_end": start + len(text), "prop_error": None,
            "vector": chunk_vectors[c],
        })
        for p in range(props):
            prop_rows.append({
                "prop_id": f"{doc_id}:c{c}:p{p}", "chunk_id": f"{doc_id}:c{c}", "ordinal": p,
                "text": words(rng, 120), "accuracy": 9, "clarity": 8, "completeness": 8,
                "conciseness": 9, "passed": True, "prompt_version": "v1",
                "vector": prop_vectors[c * props + p],
            })
    row = {
        "doc_id": doc_id, "source": source, "content_sha256": f"sha-{i}", "kind": "pdf",
        "text": "\n\n".join(texts), "title": "Title", "summary": "Summary.",
        "page_count": chunks // 3 + 1, "status": "indexed", "llm_model": "bench-llm",
        "embed_model": "bench-embed", "prompt_versions": "{}", "pipeline_version": "fp",
        "run_id": run_id,
    }
    return row, chunk_rows, prop_rows


def propdex_writer(db: Path, docs: list[tuple]) -> None:
    index = Index.open(str(db), dim=DIM)
    for row, chunk_rows, prop_rows in docs:
        index.replace_document(row, chunk_rows, prop_rows)


def arrow_batches(docs: list[tuple]) -> list[tuple[pa.Table, pa.Table, pa.Table]]:
    """The Arrow tables propdex appends for each document (validated, lineage filled in)."""
    index, out = Index.open(tempfile.gettempdir(), dim=DIM), []  # no I/O: validation only
    for row, chunk_rows, prop_rows in docs:
        prepared = index.prepare_replacement(row, chunk_rows, prop_rows)
        out.append((prepared.document, prepared.chunks, prepared.propositions))
    return out


def bare_per_document(db: Path, batches: list[tuple]) -> None:
    import lancedb

    conn = lancedb.connect(str(db))
    first_doc, first_chunks, first_props = batches[0]
    tables = {name: conn.create_table(name, schema=t.schema) for name, t in
              ((DOCUMENTS, first_doc), (CHUNKS, first_chunks), (PROPOSITIONS, first_props))}
    for doc, chunks, props in batches:
        tables[CHUNKS].add(chunks)
        tables[PROPOSITIONS].add(props)
        tables[DOCUMENTS].add(doc)


def bare_bulk(db: Path, batches: list[tuple]) -> None:
    import lancedb

    conn = lancedb.connect(str(db))
    for position, name in enumerate((DOCUMENTS, CHUNKS, PROPOSITIONS)):
        conn.create_table(name, pa.concat_tables([b[position] for b in batches]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--chunks", type=int, default=25)
    parser.add_argument("--props", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    rng = np.random.default_rng(7)
    docs = [document(i, args.chunks, args.props, rng) for i in range(args.documents)]
    batches = arrow_batches(docs)
    rows = args.documents * args.chunks * (1 + args.props)
    writers = {
        "propdex replace_document, per document": lambda db: propdex_writer(db, docs),
        "bare LanceDB add, per document": lambda db: bare_per_document(db, batches),
        "bare LanceDB add, one bulk write": lambda db: bare_bulk(db, batches),
    }
    times: dict[str, list[float]] = {name: [] for name in writers}
    workdir = Path(tempfile.mkdtemp(prefix="propdex-bench-write-"))
    try:
        for round_ in range(args.rounds + 1):
            for name, write in writers.items():
                db = workdir / f"{len(times[name])}-{round_}-{abs(hash(name))}"
                started = time.perf_counter()
                write(db)
                if round_:  # round 0 is the warm-up
                    times[name].append(time.perf_counter() - started)
                shutil.rmtree(db, ignore_errors=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"{args.documents} documents x {args.chunks} chunks x {args.props} propositions = "
          f"{rows} chunk + proposition rows (384-d), {args.rounds} alternating rounds after a "
          "warm-up, fresh database each time\n")
    print("| writer | median s | rows/s | propdex rows/s as a share of this |")
    print("|---|---:|---:|---:|")
    ours = statistics.median(times["propdex replace_document, per document"])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.2f} | {rows / median:,.0f} | {median / ours:.2f} |")


if __name__ == "__main__":
    main()
