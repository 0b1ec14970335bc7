"""Filtered search: CPU against the unfiltered search, and recall against exact filtered search.

    python bench/bench_filters.py [--sizes 100000] [--queries 100] [--rounds 3]
                                  [--corpus ../shared/corpus]

Indexes: bench/serve_indexes.py (N propositions in N/100 documents; every document has
"group=g<d % 10>" and "year=...", so the filter ``{"group": "g0"}`` matches 10% of them).
Queries: held-out corpus sentences with their MiniLM vectors, handed to propdex.search.search
so that only the search is measured (no embedding).

1. CPU: process CPU per search (k=10), for the default search (both levels, hybrid) and for a
   vector search of propositions, unfiltered and filtered, alternated query by query over
   --rounds rounds; the ratio filtered / unfiltered.
2. Recall@10: the filtered search as served (IVF_FLAT indexes, its probes) against the same
   filtered search comparing every vector (LanceReader(exact=True)): shared chunk ids / exact
   chunk ids, over the queries. Every returned chunk is checked to hold the filter.
3. Reference: the same filter as a doc_id IN (...) list of the matching documents (the
   document-scope prefilter propdex already had), for the CPU.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from serve_indexes import (  # noqa: E402  (bench/ is not a package)
    GROUPS,
    add_corpus_argument,
    build,
    doc_metadata,
    load_sentences,
    use_corpus,
)

from propdex.metadata import filter_entries  # noqa: E402
from propdex.search import search  # noqa: E402
from propdex.search.rankings import LanceReader  # noqa: E402

WHERE = {"group": "g0"}
SEARCHES = {"default (both, hybrid)": ("both", "hybrid"),
            "propositions, vector": ("propositions", "vector")}


def cpu_of(call) -> tuple[float, list]:
    started = time.process_time()
    results = call()
    return time.process_time() - started, results


def measure(db: Path, queries: list[str], vectors: np.ndarray, rounds: int) -> list[dict]:
    reader = LanceReader(str(db))
    exact = LanceReader(str(db), exact=True)
    meta = filter_entries(WHERE)
    n_docs = len(reader.live_documents().runs)
    matching = [f"doc-{d:05d}" for d in range(n_docs) if f"group={WHERE['group']}" in doc_metadata(d)]
    rows = []
    for name, (level, mode) in SEARCHES.items():
        def run(i: int, source=reader, level=level, mode=mode, **scope):
            return search(source, queries[i], vectors[i], level=level, mode=mode, k=10, **scope)

        for i in range(min(5, len(queries))):  # warm the caches of both readers
            run(i), run(i, meta=meta), run(i, source=exact, meta=meta)
        cpu: dict[str, list[float]] = {"unfiltered": [], "filtered": [], "doc_id IN": []}
        for _ in range(rounds):
            for i in range(len(queries)):
                cpu["unfiltered"].append(cpu_of(lambda i=i: run(i))[0])
                cpu["filtered"].append(cpu_of(lambda i=i: run(i, meta=meta))[0])
                cpu["doc_id IN"].append(cpu_of(lambda i=i: run(i, doc_ids=matching))[0])
        recalls, outside = [], 0
        for i in range(len(queries)):
            served = run(i, meta=meta)
            truth = run(i, source=exact, meta=meta)
            wanted = {r.chunk_id for r in truth}
            recalls.append(len(wanted & {r.chunk_id for r in served}) / max(1, len(wanted)))
            outside += sum(r.metadata.get("group") != WHERE["group"] for r in served)
        mean = {k: statistics.fmean(v) * 1000 for k, v in cpu.items()}
        rows.append({"search": name, **{f"{k} CPU ms": round(v, 2) for k, v in mean.items()},
                     "ratio": round(mean["filtered"] / mean["unfiltered"], 2),
                     "IN ratio": round(mean["doc_id IN"] / mean["unfiltered"], 2),
                     "recall@10": round(statistics.fmean(recalls), 3),
                     "results outside the filter": outside})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    add_corpus_argument(parser)
    args = parser.parse_args()
    use_corpus(args.corpus)
    data = load_sentences()
    if data.query_vectors is None:
        sys.exit("bench_filters needs the corpus's MiniLM query vectors (--corpus)")
    queries = data.queries[:args.queries]
    vectors = data.query_vectors[:args.queries]
    print(f"load average before: {os.getloadavg()[0]:.2f}; filter {WHERE} "
          f"(1 of {GROUPS} groups)")
    for n in args.sizes:
        db = build(n, data)
        for row in measure(db, queries, vectors, args.rounds):
            print(n, row)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
