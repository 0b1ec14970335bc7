"""Retriever overhead: LangChain's and LlamaIndex's PropdexRetriever against the
IndexReader.search call they make.

    python bench/bench_retrievers.py [--size 100000] [--queries 20] [--rounds 10]
                                     [--corpus ../shared/corpus]

Index: bench/serve_indexes.py. The retrievers share one IndexReader (opened once), so the
query vectors come from its cache after the warm-up. Its ``search`` is wrapped in a timer:
a retriever call's overhead is its wall time minus the time of the IndexReader.search it
made, call by call (a difference of two separate runs' medians drowns in a busy host's
noise). For the default search and for a one-result full-text search.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from serve_indexes import add_corpus_argument, build, load_sentences, use_corpus  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=10)
    add_corpus_argument(parser)
    args = parser.parse_args()
    use_corpus(args.corpus)
    data = load_sentences()
    db = str(build(args.size, data))
    queries = data.queries[:args.queries]

    from propdex.integrations.langchain import PropdexRetriever as LangChainRetriever
    from propdex.integrations.llama_index import PropdexRetriever as LlamaIndexRetriever

    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for label, options in (("default search, k=10", {"k": 10}),
                           ("full-text chunks, k=1", {"k": 1, "level": "chunks",
                                                      "mode": "fts"})):
        langchain = LangChainRetriever(db=db, **options)
        reader = langchain._searcher.reader()
        llama = LlamaIndexRetriever(db=db, **options)
        llama._searcher._reader = reader  # the same reader: the same caches
        inner: list[float] = []
        search = reader.search

        def timed(*args, search=search, inner=inner, **kwargs):
            started = time.perf_counter()
            try:
                return search(*args, **kwargs)
            finally:
                inner.append(time.perf_counter() - started)

        reader.search = timed
        calls = {"LangChain invoke": langchain.invoke, "LlamaIndex retrieve": llama.retrieve}
        for query in queries:  # embeds every query once, into the reader's cache
            for call in calls.values():
                call(query)
        overhead: dict[str, list[float]] = {name: [] for name in calls}
        searches: list[float] = []
        for _ in range(args.rounds):
            for query in queries:
                for name, call in calls.items():
                    started = time.perf_counter()
                    call(query)
                    total = time.perf_counter() - started
                    overhead[name].append((total - inner[-1]) * 1000)
                    searches.append(inner[-1] * 1000)
        print(f"{label} | IndexReader.search | median {statistics.median(searches):.2f} ms")
        for name, values in overhead.items():
            ordered = sorted(values)
            print(f"{label} | {name} | overhead median {statistics.median(values):.3f} ms, "
                  f"p95 {ordered[int(0.95 * (len(values) - 1))]:.3f} ms | {len(values)} calls")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
