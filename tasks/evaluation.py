"""Tasks of the evaluation flow: thin wrappers over propdex.evaluation.run's steps.

Their inputs are whole documents and vector matrices, so nothing is cached by input (hashing
them would cost more than the step); embeddings are cached by content underneath, which is
what makes a re-run cheap. Only answer writing talks to a server, so only it is retried.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from propdex.evaluation import run
from propdex.evaluation.report import render_markdown, write_report
from propdex.evaluation.searches import SearchRow
from propdex.evaluation.units import UnitSet
from propdex.settings import Settings
from tasks.policies import retry_transient

STEP = dict(cache_policy=NO_CACHE, persist_result=False)


@task(name="eval-load", retries=0, **STEP)
def load_corpus(questions: str, settings: Settings) -> run.Corpus:
    return run.open_corpus(questions, settings)


@task(name="eval-units", retries=0, task_run_name="eval-units-{kind}", **STEP)
def build_units(corpus: run.Corpus, kind: str, settings: Settings) -> UnitSet:
    return run.build_units(corpus, kind, settings)


@task(name="eval-queries", retries=0, **STEP)
def embed_questions(corpus: run.Corpus, settings: Settings) -> dict[str, np.ndarray]:
    return run.embed_questions(corpus, settings)


@task(name="eval-score", retries=0, task_run_name="eval-score-{units.kind}", **STEP)
def score_unit(corpus: run.Corpus, units: UnitSet, queries: dict[str, np.ndarray],
               ks: list[int], budgets: list[int], top_k: int) -> dict[str, run.UnitScore]:
    return run.score_unit(corpus, units, queries, ks, budgets, top_k)


@task(name="eval-search-queries", retries=0, **STEP)
def embed_search_queries(corpus: run.Corpus, settings: Settings) -> dict[str, np.ndarray]:
    return run.embed_search_queries(corpus, settings)


@task(name="eval-search", retries=0, task_run_name="eval-search-{row.level}-{row.mode}", **STEP)
def score_search(corpus: run.Corpus, row: SearchRow, queries: dict[str, np.ndarray],
                 ks: list[int], budgets: list[int], settings: Settings,
                 top_k: int) -> dict[str, run.UnitScore]:
    return run.score_search_row(corpus, row, queries, ks, budgets, settings, top_k)


@task(name="eval-answers", retries=1, retry_delay_seconds=10,
      retry_condition_fn=retry_transient, **STEP)
def grade_answers(corpus: run.Corpus, scores: run.Scores, settings: Settings,
                  ) -> tuple[run.Grades, dict[str, Any]]:
    return run.grade_answers(corpus, scores, settings)


@task(name="eval-report", retries=0, **STEP)
def publish_report(report: dict[str, Any], out: str) -> dict[str, str]:
    """Write report.md, report.json and recall.png, and show report.md as an artifact."""
    files = write_report(report, out)
    create_markdown_artifact(key="propdex-eval-report", markdown=render_markdown(report),
                             description="propdex retrieval evaluation")
    return files
