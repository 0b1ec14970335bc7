"""What counts as a hit for each question, and each unit's ranking scored against it.

A parent chunk is relevant to a question when its text contains the answer (normalised),
when an evidence span's place in the document overlaps the chunk's character range, or
when the chunk's pages meet the question's ``pages``. The relevant set depends only on the
chunks, which every unit shares, so all units are scored against the same targets.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from propdex.evaluation.matching import TokenIndex, contains_normalised, normalise, overlaps
from propdex.evaluation.metrics import (
    budget_hits,
    parent_ranking,
    rank_units,
    recall_at_k,
    reciprocal_rank,
    word_count,
)
from propdex.evaluation.questions import Question
from propdex.evaluation.units import EvalDocument, UnitSet


@dataclass(frozen=True)
class Target:
    question: Question
    doc_ids: tuple[str, ...]  # the documents searched: the source's, or all
    relevant: frozenset[str]  # parent chunk ids that hold the answer
    evidence_spans: tuple[tuple[str, int, int], ...]  # (doc_id, start, end) of each match


@dataclass
class Targets:
    targets: list[Target]
    skipped: list[dict[str, str]] = field(default_factory=list)  # {id, reason}
    warnings: list[str] = field(default_factory=list)


def question_targets(questions: list[Question], documents: list[EvalDocument]) -> Targets:
    by_name: dict[str, list[EvalDocument]] = defaultdict(list)
    for doc in documents:
        by_name[doc.name].append(doc)
    indexes: dict[str, TokenIndex] = {}
    normalised: dict[str, list[str]] = {}
    result = Targets([])
    for question in questions:
        docs = by_name.get(question.source_name, []) if question.source_name else documents
        if not docs:
            result.skipped.append({"id": question.id,
                                   "reason": f"source {question.source!r} is not in the index"})
            continue
        relevant: set[str] = set()
        spans: list[tuple[str, int, int]] = []
        answer = normalise(question.answer)
        for doc in docs:
            if doc.doc_id not in indexes:
                indexes[doc.doc_id] = TokenIndex.of(doc.text)
                normalised[doc.doc_id] = [normalise(c.text) for c in doc.chunks]
            doc_spans = [(doc.doc_id, start, end) for evidence in question.evidence
                         for start, end in indexes[doc.doc_id].find(evidence)]
            spans += doc_spans
            for chunk, text in zip(doc.chunks, normalised[doc.doc_id], strict=True):
                if (contains_normalised(text, answer)
                        or any(overlaps((s, e), chunk.char_start, chunk.char_end)
                               for _, s, e in doc_spans)
                        or any(chunk.page_start <= page <= chunk.page_end
                               for page in question.pages)):
                    relevant.add(chunk.chunk_id)
        for evidence in question.evidence:
            if not any(indexes[d.doc_id].find(evidence) for d in docs):
                result.warnings.append(
                    f"{question.id}: evidence not found in the document text: {evidence[:80]!r}")
        if not relevant:
            result.warnings.append(
                f"{question.id}: no chunk holds the answer or evidence; every unit scores a miss")
        result.targets.append(Target(question, tuple(d.doc_id for d in docs),
                                     frozenset(relevant), tuple(spans)))
    return result


@dataclass
class UnitScore:
    recall: dict[int, bool]  # k -> a relevant chunk among the first k parents
    reciprocal_rank: float
    budget: dict[int, bool]  # l -> answer within the first l words of unit text
    top_words: int  # words in the top ``top_k`` units
    top_texts: list[str]  # the top ``top_k`` units' text (the answer-quality context)
    top_parents: list[str]  # the first parent chunks, for the per-question record


def score_question(target: Target, units: UnitSet, query: np.ndarray, ks: list[int],
                   budgets: list[int], top_k: int) -> UnitScore:
    rows = units.rows_of(list(target.doc_ids))
    order = rows[rank_units(units.vectors[rows], query)]
    parents = parent_ranking(order, units.parents)
    # Only as many units as the largest word budget (or top_k) can use are read.
    wanted = max(budgets, default=0)
    texts: list[str] = []
    words = 0
    for i in order:
        if words >= wanted and len(texts) >= top_k:
            break
        texts.append(units.texts[i])
        words += word_count(units.texts[i])
    question = target.question
    return UnitScore(
        recall={k: recall_at_k(parents, target.relevant, k) for k in ks},
        reciprocal_rank=reciprocal_rank(parents, target.relevant),
        budget=budget_hits(texts, budgets, question.answer, question.evidence),
        top_words=sum(word_count(t) for t in texts[:top_k]),
        top_texts=texts[:top_k],
        top_parents=parents[: max(ks, default=top_k)],
    )


def score_units(targets: list[Target], units: UnitSet, queries: dict[str, np.ndarray],
                ks: list[int], budgets: list[int], top_k: int) -> dict[str, UnitScore]:
    """Each question's score for one unit kind, by question id."""
    return {t.question.id: score_question(t, units, queries[t.question.id], ks, budgets, top_k)
            for t in targets}
