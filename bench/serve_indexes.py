"""Synthetic propdex indexes for bench/bench_serve.py: N propositions in N/100 documents.

    python bench/serve_indexes.py --sizes 100000 1000000      # build (cached) and print paths

Vectors come from bench/bench_search.py's generators: clusters centred on MiniLM embeddings
of the reference corpus's sentences (synthetic clustered centres without the corpus). Each
proposition's text is its centre's sentence, so full-text search has real words; queries
are held-out sentences, embedded by the product's own embedder when the benchmark runs.

The rows are written straight into the three tables in large batches (one Arrow batch per
100k rows), not through Index.replace_document: a million single-document commits would take
hours on two cores and leave a million table versions. The layout is exactly the product's:
the schemas of propdex/store/schema.py, one committed run per document, and Index.optimize()
to build the full-text and IVF_FLAT indexes. Indexes are cached under the system temp folder.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import bench_search  # noqa: E402  (bench/ is not a package)
from bench_search import (  # noqa: E402
    DIM,
    HELD_OUT_QUERIES,
    SEED,
    clustered,
    corpus_sentences,
    normalise,
    real_embeddings,
    synthetic_centres,
)

CACHE = Path(tempfile.gettempdir()) / "propdex-bench" / "serve"
PROPS_PER_CHUNK = 10
CHUNKS_PER_DOC = 10
# Document metadata (propdex.metadata) for filtered searches: "group" has ten values, each
# held by every tenth document, so a filter on one group matches 10% of the documents.
GROUPS = 10


def doc_metadata(doc: int) -> list[str]:
    """The "key=value" entries of benchmark document ``doc``."""
    return [f"group=g{doc % GROUPS}", f"year={2015 + doc % 7}"]
RUN_ID = "bench-run-1"
BATCH = 100_000
FORMAT = "3"  # bump when the layout below or optimize()'s indexes change, so cached indexes are rebuilt


@dataclass
class Sentences:
    centres: np.ndarray  # (m, DIM) unit vectors
    texts: list[str]  # the sentence of each centre
    queries: list[str]  # held-out sentences
    query_vectors: np.ndarray | None  # their MiniLM vectors (None: synthetic data)
    origin: str


def load_sentences() -> Sentences:
    rng = np.random.default_rng(SEED)
    real = real_embeddings()
    if real is None:
        centres = synthetic_centres(rng)
        words = [f"topic{i % 64} term{i}" for i in range(len(centres))]
        queries = [f"topic{i % 64} question {i}" for i in range(HELD_OUT_QUERIES)]
        return Sentences(centres, words, queries, None,
                         "synthetic clustered vectors (no corpus at ../shared/corpus)")
    vectors, origin = real
    sentences = corpus_sentences()
    order = rng.permutation(len(vectors))
    held, kept = order[:HELD_OUT_QUERIES], order[HELD_OUT_QUERIES:]
    return Sentences(vectors[kept], [sentences[i] for i in kept], [sentences[i] for i in held],
                     vectors[held], origin)


def add_corpus_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", type=Path, default=bench_search.CORPUS,
                        help="reference corpus folder (default: ../shared/corpus beside the "
                             "checkout; a git worktree elsewhere names it here)")


def use_corpus(folder: Path) -> None:
    bench_search.CORPUS = folder  # read by corpus_sentences() and real_embeddings()
    if not folder.is_dir():
        print(f"no corpus at {folder}: synthetic clustered centres", file=sys.stderr)


def index_path(n_props: int, data: Sentences) -> Path:
    kind = "synthetic" if data.query_vectors is None else "corpus"
    return CACHE / f"props-{n_props}-{kind}-v{FORMAT}" / "db"


def _vectors(block: np.ndarray) -> pa.FixedSizeListArray:
    return pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)), DIM)


def _documents(n_docs: int) -> pa.Table:
    from propdex.store.schema import DOCUMENTS_SCHEMA

    now = pa.scalar(time.time_ns() // 1000, pa.timestamp("us", tz="UTC"))
    rows = n_docs
    ids = [f"doc-{d:05d}" for d in range(rows)]
    columns = {
        "doc_id": ids, "source": [f"/bench/corpus/{i}.pdf" for i in ids],
        "content_sha256": [f"sha-{i}" for i in ids], "kind": ["pdf"] * rows,
        "text": [None] * rows, "title": [f"Benchmark document {d}" for d in range(rows)],
        "summary": ["A synthetic document of the serving benchmark."] * rows,
        "page_count": [CHUNKS_PER_DOC] * rows, "status": ["indexed"] * rows,
        "chunk_count": [CHUNKS_PER_DOC] * rows,
        "proposition_count": [CHUNKS_PER_DOC * PROPS_PER_CHUNK] * rows,
        "passed_count": [CHUNKS_PER_DOC * PROPS_PER_CHUNK] * rows, "chunk_failures": [0] * rows,
        "llm_model": ["offline-rules"] * rows, "embed_model": ["all-MiniLM-L6-v2"] * rows,
        "pipeline_version": ["bench"] * rows, "run_id": [RUN_ID] * rows,
        "last_run_id": [RUN_ID] * rows, "ingested_at": [now] * rows,
        "last_attempt_at": [now] * rows,
        "metadata": [json.dumps(dict(e.split("=", 1) for e in doc_metadata(d)))
                     for d in range(rows)],
        "meta": [doc_metadata(d) for d in range(rows)],
    }
    arrays = [pa.array(columns.get(f.name, [None] * rows), type=f.type)
              for f in DOCUMENTS_SCHEMA]
    return pa.Table.from_arrays(arrays, schema=DOCUMENTS_SCHEMA)


def _rows(schema: pa.Schema, columns: dict[str, object], count: int) -> pa.Table:
    arrays = []
    for f in schema:
        value = columns.get(f.name)
        if isinstance(value, pa.Array):
            arrays.append(value)
        else:
            arrays.append(pa.array(value if value is not None else [None] * count, type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def build(n_props: int, data: Sentences, *, force: bool = False) -> Path:
    """The index of ``n_props`` propositions (cached); returns its folder."""
    from propdex.store import Index
    from propdex.store.schema import CHUNKS, DOCUMENTS, PROPOSITIONS, schema_for

    path = index_path(n_props, data)
    done = path.parent / "built.json"
    if done.is_file() and not force:
        # Indexes the current propdex adds in optimize() (a no-op when all are there).
        Index.open(str(path), create=False).optimize()
        return path
    shutil.rmtree(path.parent, ignore_errors=True)
    path.parent.mkdir(parents=True)
    started = time.perf_counter()
    n_chunks = n_props // PROPS_PER_CHUNK
    n_docs = n_chunks // CHUNKS_PER_DOC
    index = Index.open(str(path), dim=DIM)
    documents = index._writable_table(DOCUMENTS, None)
    documents.add(_documents(n_docs))
    chunks, props = index._writable_table(CHUNKS, DIM), index._writable_table(PROPOSITIONS, DIM)
    rng = np.random.default_rng(SEED + n_props)
    texts = np.array(data.texts, dtype=object)
    for start in range(0, n_props, BATCH):
        stop = min(n_props, start + BATCH)
        count = stop - start
        ordinal = np.arange(start, stop)
        centre = ordinal % len(data.centres)
        # clustered() takes centres in turn from its first row: hand it this batch's centres.
        vectors = clustered(data.centres[centre], count, rng)
        chunk = ordinal // PROPS_PER_CHUNK
        doc = chunk // CHUNKS_PER_DOC
        page = (chunk % CHUNKS_PER_DOC + 1).astype(np.int32)
        doc_ids = [f"doc-{d:05d}" for d in doc]
        chunk_ids = [f"{doc_ids[i]}:c{chunk[i] % CHUNKS_PER_DOC}" for i in range(count)]
        sources = [f"/bench/corpus/{d}.pdf" for d in doc_ids]
        meta = [doc_metadata(d) for d in doc]
        props.add(_rows(schema_for(PROPOSITIONS, DIM), {
            "prop_id": [f"{c}:p{o % PROPS_PER_CHUNK}" for c, o in zip(chunk_ids, ordinal, strict=True)],
            "chunk_id": chunk_ids, "doc_id": doc_ids,
            "ordinal": (ordinal % PROPS_PER_CHUNK).astype(np.int32), "text": texts[centre].tolist(),
            "accuracy": [9] * count, "clarity": [9] * count, "completeness": [9] * count,
            "conciseness": [9] * count, "passed": [True] * count, "page_start": page,
            "page_end": page, "source": sources, "content_sha256": [f"sha-{d}" for d in doc_ids],
            "llm_model": ["offline-rules"] * count, "prompt_version": ["v2"] * count,
            "embed_model": ["all-MiniLM-L6-v2"] * count, "run_id": [RUN_ID] * count,
            "vector": _vectors(vectors), "meta": meta,
        }, count))
        # One chunk per PROPS_PER_CHUNK propositions: its first proposition's row stands
        # for it; its text joins its propositions' sentences and its vector is their mean.
        firsts = np.arange(0, count, PROPS_PER_CHUNK)
        means = normalise(vectors.reshape(-1, PROPS_PER_CHUNK, DIM).mean(axis=1))
        chunk_texts = [" ".join(texts[centre[i:i + PROPS_PER_CHUNK]])[:800] for i in firsts]
        lengths = np.array([len(t) for t in chunk_texts], dtype=np.int64)
        offsets = (chunk[firsts] % CHUNKS_PER_DOC) * 820
        chunks.add(_rows(schema_for(CHUNKS, DIM), {
            "chunk_id": [chunk_ids[i] for i in firsts], "doc_id": [doc_ids[i] for i in firsts],
            "ordinal": (chunk[firsts] % CHUNKS_PER_DOC).astype(np.int32), "text": chunk_texts,
            "header": [f"Benchmark document {d}" for d in doc[firsts]],
            "section": [None] * len(firsts), "page_start": page[firsts],
            "page_end": page[firsts], "char_start": offsets, "char_end": offsets + lengths,
            "source": [sources[i] for i in firsts],
            "content_sha256": [f"sha-{doc_ids[i]}" for i in firsts],
            "embed_model": ["all-MiniLM-L6-v2"] * len(firsts), "prop_error": [None] * len(firsts),
            "run_id": [RUN_ID] * len(firsts), "vector": _vectors(means.astype(np.float32)),
            "meta": [meta[i] for i in firsts],
        }, len(firsts)))
        print(f"  {n_props}: {stop} propositions written", file=sys.stderr, flush=True)
    written = time.perf_counter() - started
    optimized = index.optimize()
    seconds = time.perf_counter() - started
    done.write_text(json.dumps({"propositions": n_props, "chunks": n_chunks, "documents": n_docs,
                                "write_s": round(written, 1), "total_s": round(seconds, 1),
                                "optimize": optimized, "origin": data.origin}, indent=1))
    print(f"  {n_props}: built in {seconds:.0f} s ({optimized})", file=sys.stderr, flush=True)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--force", action="store_true", help="rebuild cached indexes")
    add_corpus_argument(parser)
    args = parser.parse_args()
    use_corpus(args.corpus)
    data = load_sentences()
    for n in args.sizes:
        print(build(n, data, force=args.force))


if __name__ == "__main__":
    main()
