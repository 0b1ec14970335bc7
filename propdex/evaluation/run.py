"""The evaluation's steps, as plain functions: the Prefect flow (flows/evaluate.py) runs
each as a task, and ``run_evaluation`` runs them in order without Prefect."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from propdex.evaluation.answers import (
    AnswerGrader,
    AnswerJob,
    GradedAnswer,
    eval_prompt_versions,
    require_llm,
)
from propdex.evaluation.errors import EvaluationError
from propdex.evaluation.questions import Question, load_questions
from propdex.evaluation.report import build_report, plot_budgets, require_matplotlib, write_report
from propdex.evaluation.scoring import Targets, UnitScore, question_targets, score_units
from propdex.evaluation.searches import (
    SEARCH_ROWS,
    SearchRow,
    score_search,
    search_query_vectors,
)
from propdex.evaluation.units import (
    UNIT_KINDS,
    EvalDocument,
    UnitSet,
    build_unit_set,
    load_documents,
    normalise_rows,
)
from propdex.pipeline.embedding import embed_with_cache
from propdex.runtime import cache_for, embedder_for
from propdex.settings import Settings
from propdex.store import Index

DEFAULT_KS = (1, 5, 20)
DEFAULT_BUDGETS = (100, 200, 500)
TOP_K = 5  # units whose words are counted, and the answer-quality context

Scores = dict[str, dict[str, UnitScore]]  # unit kind -> question id -> score
Grades = dict[str, dict[str, GradedAnswer]]  # unit kind -> question id -> graded answer


@dataclass
class Corpus:
    """The documents under evaluation and each question's target in them."""

    questions_file: str
    documents: list[EvalDocument]
    targets: Targets
    total_questions: int


def check_cutoffs(values: Sequence[int], what: str) -> list[int]:
    cutoffs = sorted(set(values))
    if not cutoffs or any(not isinstance(v, int) or v < 1 for v in cutoffs):
        raise EvaluationError(f"{what} must be positive whole numbers, got {list(values)}")
    return cutoffs


def prepare(db: str, ks: Sequence[int], budgets: Sequence[int], *, answer_quality: bool,
            settings: Settings | None = None) -> tuple[Settings, list[int], list[int]]:
    """Check what a run needs before any work starts (cut-offs, matplotlib, an LLM for
    answer quality); returns the settings for reading ``db`` and the sorted cut-offs."""
    ks, budgets = check_cutoffs(ks, "k values"), check_cutoffs(budgets, "word budgets")
    require_matplotlib()
    settings = settings.model_copy(update={"db": db}) if settings else Settings(db=db)
    if answer_quality:
        require_llm(settings)
    return settings, ks, budgets


def open_corpus(questions_path: str | Path, settings: Settings) -> Corpus:
    """Read the questions, load the indexed documents they are about and place their answers."""
    questions: list[Question] = load_questions(questions_path)
    index = Index.open(settings.db_uri, create=False, storage_options=settings.storage_options)
    embed_model = embedder_for(settings).name
    # Documents no question is asked of are not loaded (a question without a source
    # searches every document).
    names = (None if any(q.source_name is None for q in questions)
             else {q.source_name for q in questions})
    documents = load_documents(index, names, embed_model)
    targets = question_targets(questions, documents)
    if not targets.targets:
        reasons = "; ".join(f"{s['id']}: {s['reason']}" for s in targets.skipped[:5])
        raise EvaluationError(f"none of the {len(questions)} questions in {questions_path} can "
                              f"be asked of the index at {settings.db_uri} ({reasons})")
    return Corpus(str(questions_path), documents, targets, len(questions))


def build_units(corpus: Corpus, kind: str, settings: Settings) -> UnitSet:
    return build_unit_set(corpus.documents, kind, embedder_for(settings), cache_for(settings))


def embed_questions(corpus: Corpus, settings: Settings) -> dict[str, np.ndarray]:
    questions = [t.question for t in corpus.targets.targets]
    vectors, _ = embed_with_cache([q.question for q in questions], embedder_for(settings),
                                  cache_for(settings))
    return {q.id: vector for q, vector in zip(questions, normalise_rows(vectors), strict=True)}


def embed_search_queries(corpus: Corpus, settings: Settings) -> dict[str, np.ndarray]:
    return search_query_vectors(corpus.targets.targets, embedder_for(settings))


def score_search_row(corpus: Corpus, row: SearchRow, queries: dict[str, np.ndarray],
                     ks: Sequence[int], budgets: Sequence[int], settings: Settings,
                     top_k: int = TOP_K) -> dict[str, UnitScore]:
    index = Index.open(settings.db_uri, create=False, storage_options=settings.storage_options)
    return score_search(index, row, corpus.targets.targets, queries, list(ks),
                        plot_budgets(budgets), top_k)


def score_unit(corpus: Corpus, units: UnitSet, queries: dict[str, np.ndarray],
               ks: Sequence[int], budgets: Sequence[int], top_k: int = TOP_K,
               ) -> dict[str, UnitScore]:
    return score_units(corpus.targets.targets, units, queries, list(ks), plot_budgets(budgets),
                       top_k)


def grade_answers(corpus: Corpus, scores: Scores, settings: Settings,
                  ) -> tuple[Grades, dict[str, Any]]:
    """Answers written from each unit's top units and graded 0-10 (needs an LLM)."""
    grader = AnswerGrader(settings, cache_for(settings))
    jobs = [
        AnswerJob(kind, t.question.id, t.question.question, t.question.answer, t.question.rubric,
                  tuple(scores[kind][t.question.id].top_texts))
        for kind in scores for t in corpus.targets.targets
    ]
    grades: Grades = {kind: {} for kind in scores}
    for (kind, question_id), graded in grader.grade_all(jobs).items():
        grades[kind][question_id] = graded
    usage = grader.usage
    info = {
        "answer_model": grader.answer_model,
        "grade_model": grader.grade_model,
        "prompt_versions": eval_prompt_versions(),
        "llm_calls": usage.calls,
        "cached_calls": usage.cached_calls,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
    }
    return grades, info


def assemble_report(corpus: Corpus, settings: Settings, unit_sets: dict[str, UnitSet],
                    scores: Scores, ks: Sequence[int], budgets: Sequence[int],
                    top_k: int = TOP_K, grades: Grades | None = None,
                    answer_info: dict[str, Any] | None = None,
                    searches: Sequence[SearchRow] = SEARCH_ROWS) -> dict[str, Any]:
    return build_report(
        questions_file=corpus.questions_file, db=settings.db_uri,
        embed_model=embedder_for(settings).name, total_questions=corpus.total_questions,
        documents=corpus.documents, targets=corpus.targets, unit_sets=unit_sets, scores=scores,
        ks=ks, budgets=budgets, top_k=top_k, grades=grades, answer_quality=answer_info,
        searches=searches)


def run_evaluation(questions_path: str | Path, db: str, out: str | Path, *,
                   answer_quality: bool = False, ks: Sequence[int] = DEFAULT_KS,
                   budgets: Sequence[int] = DEFAULT_BUDGETS, top_k: int = TOP_K,
                   settings: Settings | None = None) -> dict[str, Any]:
    """Compare the four retrieval units and the product's searches on the questions without
    Prefect; write report.md, report.json and recall.png into ``out`` and return the report
    (with ``files``)."""
    settings, ks, budgets = prepare(db, ks, budgets, answer_quality=answer_quality,
                                    settings=settings)
    corpus = open_corpus(questions_path, settings)
    unit_sets = {kind: build_units(corpus, kind, settings) for kind in UNIT_KINDS}
    queries = embed_questions(corpus, settings)
    scores = {kind: score_unit(corpus, units, queries, ks, budgets, top_k)
              for kind, units in unit_sets.items()}
    search_queries = embed_search_queries(corpus, settings)
    for row in SEARCH_ROWS:
        scores[row.kind] = score_search_row(corpus, row, search_queries, ks, budgets, settings,
                                            top_k)
    grades, info = grade_answers(corpus, scores, settings) if answer_quality else (None, None)
    report = assemble_report(corpus, settings, unit_sets, scores, ks, budgets, top_k,
                             grades, info)
    return {**report, "files": write_report(report, out)}
