"""Search latency and recall on 10k / 100k / 1M propositions (384-d), side by side.

    python bench/bench_search.py [--sizes 10000 100000 1000000] [--queries 100]

Vectors: MiniLM embeddings of the reference corpus's sentences (../shared/corpus). The corpus
holds a few thousand sentences, fewer than the smallest size, so each size is made of
clusters centred on those real embeddings: a member is its centre plus noise, at a cosine of
0.64-0.93 to it (what paraphrases and near-duplicate propositions give with MiniLM), never
uniform random vectors. Queries are embeddings of held-out real sentences. Without the
corpus, the centres are clustered synthetic vectors (said in the output).

For each size, on the same vectors and queries, one after the other:
- NumPy: one matrix-vector product and a top-10 partial sort (the exact-search limit);
- LanceDB flat: exact search without an index (what propdex does below 50k rows);
- LanceDB vector indexes (IVF_HNSW_SQ as propdex builds it, IVF_PQ, IVF_FLAT, IVF_RQ; each
  with a few query settings): build time, p50/p95 latency, recall@10 against exact;
- at 10k, the source notebook's SimpleVectorStore (a Python loop of cosines).

Embeddings are cached under the system temp folder (never in the repository); LanceDB
tables are written to a temp folder removed at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CORPUS = REPO.parent / "shared" / "corpus"
CACHE = Path(tempfile.gettempdir()) / "propdex-bench"
DIM = 384
K = 10
HELD_OUT_QUERIES = 200
# A member's distance from its centre: noise of norm s gives cosine 1 / sqrt(1 + s^2).
NOISE_NORMS = (0.4, 1.2)
SEED = 20241123
# propdex's earlier index settings (IVF_HNSW_SQ, nprobes 20, refine 2, then IVF_FLAT with
# sqrt(rows) partitions and nprobes 40), kept for comparison; propdex/store/maintenance.py now
# builds IVF_FLAT with 2,048-row partitions (vector_index_partitions / vector_index_probes).
HNSW_NPROBES, HNSW_REFINE = 20, 2


# ---------------------------------------------------------------- vectors
def corpus_sentences() -> list[str]:
    """Sentences of the corpus's text and PDFs, 40-400 characters, deduplicated."""
    from propdex.extract import extract_document
    from propdex.settings import Settings

    texts = [(CORPUS / "nike_2023_annual_report.txt").read_text(encoding="utf-8")]
    for pdf in sorted(CORPUS.glob("*.pdf")):
        texts.append(extract_document(pdf, Settings()).text)
    found: dict[str, None] = {}
    for text in texts:
        for sentence in re.split(r"(?<=[.!?])\s+", re.sub(r"\s+", " ", text)):
            if 40 <= len(sentence) <= 400:
                found[sentence] = None
    return list(found)


def real_embeddings() -> tuple[np.ndarray, str] | None:
    """MiniLM vectors of the corpus sentences (cached), or None without the corpus."""
    if not CORPUS.is_dir():
        return None
    sentences = corpus_sentences()
    key = hashlib.sha256("\n".join(sentences).encode()).hexdigest()[:16]
    path = CACHE / f"minilm-{key}.npy"
    if not path.is_file():
        from propdex.embed.minilm import MiniLMEmbedder

        CACHE.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        vectors = MiniLMEmbedder(batch_size=128).embed(sentences)
        np.save(path, vectors)
        print(f"embedded {len(sentences)} corpus sentences with MiniLM in "
              f"{time.perf_counter() - started:.0f} s (cached at {path})", file=sys.stderr)
    return np.load(path), f"MiniLM embeddings of {len(sentences)} corpus sentences"


def normalise(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def synthetic_centres(rng: np.random.Generator, count: int = 4000) -> np.ndarray:
    """Fallback centres: themselves clustered (64 topics), so the space is not uniform."""
    topics = normalise(rng.standard_normal((64, DIM)))
    return normalise(topics[rng.integers(0, 64, count)]
                     + 0.8 * normalise(rng.standard_normal((count, DIM))))


def clustered(centres: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n unit vectors, each its centre (taken in turn) plus noise of a random norm."""
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 100_000):
        stop = min(n, start + 100_000)
        owners = centres[np.arange(start, stop) % len(centres)]
        noise = normalise(rng.standard_normal((stop - start, DIM)).astype(np.float32))
        norms = rng.uniform(*NOISE_NORMS, (stop - start, 1)).astype(np.float32)
        out[start:stop] = normalise(owners + norms * noise)
    return out


@dataclass
class Data:
    centres: np.ndarray
    queries: np.ndarray
    origin: str


def load_data() -> Data:
    rng = np.random.default_rng(SEED)
    real = real_embeddings()
    if real is None:
        centres = synthetic_centres(rng)
        queries = normalise(centres[rng.integers(0, len(centres), HELD_OUT_QUERIES)]
                            + 0.6 * normalise(rng.standard_normal((HELD_OUT_QUERIES, DIM))))
        return Data(centres, queries.astype(np.float32),
                    "synthetic clustered vectors (no corpus at ../shared/corpus)")
    vectors, origin = real
    order = rng.permutation(len(vectors))
    held, kept = order[:HELD_OUT_QUERIES], order[HELD_OUT_QUERIES:]
    return Data(vectors[kept], vectors[held], origin)


# ---------------------------------------------------------------- measuring
@dataclass
class Row:
    n: int
    method: str
    build_s: float | None
    p50_ms: float
    p95_ms: float
    recall: float | None
    queries: int


def latencies(search: Callable[[np.ndarray], np.ndarray], queries: np.ndarray,
              truth: np.ndarray | None) -> tuple[float, float, float | None]:
    """p50 and p95 in ms, and mean recall@10 against ``truth``, after one warm-up query."""
    search(queries[0])
    times, hits = [], 0
    for i, query in enumerate(queries):
        started = time.perf_counter()
        ids = search(query)
        times.append((time.perf_counter() - started) * 1000)
        if truth is not None:
            hits += len(set(ids[:K].tolist()) & set(truth[i].tolist()))
    p95 = statistics.quantiles(times, n=20)[-1] if len(times) >= 2 else times[0]
    recall = hits / (K * len(queries)) if truth is not None else None
    return statistics.median(times), p95, recall


def numpy_top(matrix: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    def search(query: np.ndarray) -> np.ndarray:
        scores = matrix @ query  # unit vectors: the dot product is the cosine
        top = np.argpartition(-scores, K)[:K]
        return top[np.argsort(-scores[top])]
    return search


class SimpleVectorStore:
    """The source notebook's store, as written there (a Python loop of cosines)."""

    def __init__(self):
        self.vectors = []
        self.texts = []
        self.metadata = []

    def add_item(self, text, embedding, metadata=None):
        self.vectors.append(np.array(embedding))
        self.texts.append(text)
        self.metadata.append(metadata or {})

    def similarity_search(self, query_embedding, k=5):
        if not self.vectors:
            return []
        query_vector = np.array(query_embedding)
        similarities = []
        for i, vector in enumerate(self.vectors):
            similarity = np.dot(query_vector, vector) / (
                np.linalg.norm(query_vector) * np.linalg.norm(vector))
            similarities.append((i, similarity))
        similarities.sort(key=lambda x: x[1], reverse=True)
        results = []
        for i in range(min(k, len(similarities))):
            idx, score = similarities[i]
            results.append({"text": self.texts[idx], "metadata": self.metadata[idx],
                            "similarity": float(score)})
        return results


def notebook_search(matrix: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    store = SimpleVectorStore()
    for i, vector in enumerate(matrix):
        store.add_item(str(i), vector)
    return lambda q: np.array([int(r["text"]) for r in store.similarity_search(q, k=K)])


def lance_table(folder: Path, matrix: np.ndarray):
    import lancedb

    db = lancedb.connect(str(folder))
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), DIM)
    schema = pa.schema([("id", pa.int64()), ("vector", pa.list_(pa.float32(), DIM))])
    table = db.create_table("propositions", schema=schema)
    for start in range(0, len(matrix), 100_000):
        stop = min(len(matrix), start + 100_000)
        table.add(pa.table({"id": pa.array(np.arange(start, stop)),
                            "vector": vectors.slice(start, stop - start)}, schema=schema))
    return table


def lance_search(table, nprobes: int | None = None, refine: int | None = None,
                 flat: bool = False) -> Callable[[np.ndarray], np.ndarray]:
    def search(query: np.ndarray) -> np.ndarray:
        q = table.search(query, vector_column_name="vector").distance_type("cosine")
        if flat:
            q = q.bypass_vector_index()
        if nprobes:
            q = q.nprobes(nprobes)
        if refine:
            q = q.refine_factor(refine)
        return q.select(["id", "_distance"]).limit(K).to_arrow().column("id").to_numpy()
    return search


# Index types whose build is far slower (IVF_HNSW_SQ builds a graph per partition, IVF_PQ
# trains codebooks): measured by default only up to this many rows (see --slow-up-to).
SLOW_BUILDS = ("IVF_HNSW_SQ", "IVF_PQ")


def index_configs(n: int) -> list[tuple[str, object, list[tuple[int, int | None]]]]:
    """(name, LanceDB index config, [(nprobes, refine_factor), ...]) per candidate."""
    from lancedb.index import HnswSq, IvfFlat, IvfPq, IvfRq

    from propdex.store.maintenance import vector_index_partitions, vector_index_probes

    partitions = max(16, int(np.sqrt(n)))
    ours = vector_index_partitions(n)
    probes = vector_index_probes(n, ours)
    return [
        (f"IVF_FLAT (propdex: {ours} partitions, nprobes {probes})",
         IvfFlat(distance_type="cosine", num_partitions=ours),
         sorted({(max(1, probes // 2), None), (probes, None), (min(ours, 2 * probes), None)})),
        ("IVF_HNSW_SQ", HnswSq(distance_type="cosine"),
         [(HNSW_NPROBES, HNSW_REFINE), (HNSW_NPROBES, None), (40, 2)]),
        ("IVF_PQ", IvfPq(distance_type="cosine", num_partitions=partitions, num_sub_vectors=48),
         [(20, 5), (20, 10), (40, 10)]),
        ("IVF_FLAT (sqrt(rows) partitions: propdex before 2026-11-25)", IvfFlat(distance_type="cosine", num_partitions=partitions),
         [(10, None), (20, None), (40, None), (80, None)]),
        ("IVF_RQ", IvfRq(distance_type="cosine", num_partitions=partitions),
         [(20, 5), (20, 10), (40, 10), (80, 10)]),
    ]


def bench_size(n: int, data: Data, queries: int, flat_queries: int, workdir: Path,
               indexes: set[str] | None, slow_up_to: int) -> list[Row]:
    rng = np.random.default_rng(SEED + n)
    matrix = clustered(data.centres, n, rng)
    qs = data.queries[:queries]
    exact = numpy_top(matrix)
    truth = np.stack([exact(q) for q in qs])
    rows = [Row(n, "NumPy matrix-vector product (exact)", None,
                *latencies(exact, qs, truth), len(qs))]
    if n <= 10_000:
        rows.append(Row(n, "notebook SimpleVectorStore (Python loop)", None,
                        *latencies(notebook_search(matrix), qs[:flat_queries], truth),
                        min(len(qs), flat_queries)))
    table = lance_table(workdir / f"n{n}", matrix)
    del matrix
    rows.append(Row(n, "LanceDB flat (exact, no index)", None,
                    *latencies(lance_search(table, flat=True), qs[:flat_queries], truth),
                    min(len(qs), flat_queries)))
    for name, config, settings in index_configs(n):
        if indexes is not None and not any(name.startswith(i) for i in indexes):
            continue
        if n > slow_up_to and name.startswith(SLOW_BUILDS):
            print(f"  {n}: {name} skipped (slow build; --slow-up-to {slow_up_to})",
                  file=sys.stderr)
            continue
        started = time.perf_counter()
        table.create_index("vector", config=config, replace=True)
        build = time.perf_counter() - started
        for nprobes, refine in settings:
            label = f"{name}, nprobes {nprobes}" + (f", refine {refine}" if refine else "")
            rows.append(Row(n, label, build, *latencies(
                lance_search(table, nprobes, refine), qs, truth), len(qs)))
        print(f"  {n}: {name} built in {build:.1f} s", file=sys.stderr, flush=True)
    return rows


def report(rows: list[Row], origin: str) -> None:
    print(f"Vectors: {origin}; 384-d unit vectors, cosine, k={K}. Latency per query "
          "(one at a time, warm), p50/p95 in ms; recall@10 against NumPy's exact top 10; "
          "'x NumPy' = p50 / NumPy's p50 at the same size.\n")
    print("| rows | method | build (s) | p50 ms | p95 ms | x NumPy | recall@10 | queries |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    numpy_p50 = {r.n: r.p50_ms for r in rows if r.method.startswith("NumPy")}
    for r in rows:
        build = f"{r.build_s:.1f}" if r.build_s is not None else ""
        recall = f"{r.recall:.3f}" if r.recall is not None else ""
        print(f"| {r.n:,} | {r.method} | {build} | {r.p50_ms:.2f} | {r.p95_ms:.2f} | "
              f"{r.p50_ms / numpy_p50[r.n]:.1f} | {recall} | {r.queries} |")
    indexed = [r for r in rows if r.build_s is not None and r.recall is not None
               and r.recall >= 0.95]
    for n in sorted({r.n for r in rows}):
        best = min((r for r in indexed if r.n == n), key=lambda r: r.p50_ms, default=None)
        if best:
            print(f"\nfastest index setting with recall@10 >= 0.95 at {n:,} rows: "
                  f"{best.method}: p50 {best.p50_ms:.2f} ms, recall {best.recall:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--flat-queries", type=int, default=20,
                        help="queries for the slow exact scans (LanceDB flat, notebook)")
    parser.add_argument("--slow-up-to", type=int, default=100_000,
                        help=f"largest size at which {' and '.join(SLOW_BUILDS)} are built")
    parser.add_argument("--indexes", nargs="*",
                        help="index names to try (prefixes, e.g. IVF_PQ IVF_HNSW); default all")
    args = parser.parse_args()
    data = load_data()
    workdir = Path(tempfile.mkdtemp(prefix="propdex-bench-search-"))
    rows: list[Row] = []
    try:
        for n in args.sizes:
            rows += bench_size(n, data, args.queries, args.flat_queries, workdir,
                               set(args.indexes) if args.indexes else None, args.slow_up_to)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    report(rows, data.origin)
    if any(n > args.slow_up_to for n in args.sizes):
        print(f"\n{' and '.join(SLOW_BUILDS)} were not built above {args.slow_up_to:,} rows "
              "(--slow-up-to): compare their build times above with IVF_FLAT's.")


if __name__ == "__main__":
    main()
