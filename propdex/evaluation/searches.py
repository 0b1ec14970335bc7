"""The product's searches as evaluation rows: every level x mode of ``propdex.search.search``
(the function ``propdex search`` and the service call), scored like the units.

Each question runs the search over the index with the question's documents as the
``doc_ids`` filter and ``k = max(ks)``; the results' chunks are the parent ranking (R@k, MRR
within those k) and the results' own text (a proposition for a proposition hit, the chunk
for a chunk hit) is what the word budgets read. Query vectors come from
``embed_query``, as in the CLI. The row of the default search is labelled ``default``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from propdex.embed.base import Embedder
from propdex.evaluation.metrics import budget_hits, recall_at_k, reciprocal_rank, word_count
from propdex.evaluation.scoring import Target, UnitScore
from propdex.search import DEFAULT_LEVEL, DEFAULT_MODE, Level, Mode, search
from propdex.store import Index

LEVELS: tuple[Level, ...] = ("propositions", "chunks", "both")
MODES: tuple[Mode, ...] = ("vector", "fts", "hybrid")


@dataclass(frozen=True)
class SearchRow:
    level: Level
    mode: Mode

    @property
    def kind(self) -> str:
        return f"search:{self.level}:{self.mode}"

    @property
    def default(self) -> bool:
        return (self.level, self.mode) == (DEFAULT_LEVEL, DEFAULT_MODE)

    @property
    def label(self) -> str:
        prefix = "default: " if self.default else ""
        return f"search ({prefix}{self.level}, {self.mode})"


SEARCH_ROWS = tuple(SearchRow(level, mode) for level in LEVELS for mode in MODES)


def search_query_vectors(targets: list[Target], embedder: Embedder) -> dict[str, np.ndarray]:
    """Each question's query vector as ``propdex search`` computes it."""
    return {t.question.id: embedder.embed_query(t.question.question) for t in targets}


def score_search(index: Index, row: SearchRow, targets: list[Target],
                 queries: dict[str, np.ndarray], ks: list[int], budgets: list[int],
                 top_k: int) -> dict[str, UnitScore]:
    """Each question's score for one search, by question id."""
    depth = max(max(ks), top_k)
    scores = {}
    for target in targets:
        question = target.question
        vector = None if row.mode == "fts" else queries[question.id]
        results = search(index, question.question, vector, level=row.level, mode=row.mode,
                         k=depth, doc_ids=list(target.doc_ids))
        parents = [r.chunk_id for r in results]
        texts = [r.text for r in results]
        scores[question.id] = UnitScore(
            recall={k: recall_at_k(parents, target.relevant, k) for k in ks},
            reciprocal_rank=reciprocal_rank(parents, target.relevant),
            budget=budget_hits(texts, budgets, question.answer, question.evidence),
            top_words=sum(word_count(t) for t in texts[:top_k]),
            top_texts=texts[:top_k],
            top_parents=parents,
        )
    return scores
