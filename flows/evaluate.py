"""The evaluation flow: the four retrieval units and the product's searches (every level x
mode of propdex.search, the default one labelled) built and scored as parallel tasks."""

from __future__ import annotations

from typing import Annotated

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from flows.parameters import EvaluateOptions, form_label
from propdex.evaluation import run
from propdex.evaluation.searches import SEARCH_ROWS
from propdex.evaluation.units import UNIT_KINDS
from tasks.evaluation import (
    build_units,
    embed_questions,
    embed_search_queries,
    grade_answers,
    load_corpus,
    publish_report,
    score_search,
    score_unit,
)
from tasks.policies import with_scaled_retry_delays


@flow(name="propdex-evaluate", log_prints=True, task_runner=ThreadPoolTaskRunner(max_workers=4))
def evaluate(
    questions: Annotated[str, form_label("Question set (JSONL)")],
    db: Annotated[str, form_label("Index folder (db)")] = "propdex-db",
    out: Annotated[str, form_label("Report folder")] = "propdex-eval",
    options: Annotated[EvaluateOptions, form_label("Options")] = EvaluateOptions(),
) -> dict:
    """Compare chunks (without and with their contextual header), sentences and propositions
    as retrieval units, and every search ``propdex search`` offers (level x mode; the
    default one labelled), on the questions in ``questions`` (JSONL) over the index at
    ``db``; write report.md, report.json and recall.png into ``out``.

    Args:
        questions: Path of a JSONL file: one object per line with question, answer and, when
            known, evidence (text or pages) and source.
        db: LanceDB folder (or URI) holding the index to evaluate.
        out: Folder for report.md, report.json and recall.png (created if missing).
        options: Cut-offs k, word budgets, units ranked per question, and the optional
            LLM answer-quality column.
    """
    settings, ks, budgets = run.prepare(db, options.ks, options.budgets,
                                        answer_quality=options.answer_quality,
                                        settings=options.settings(db))
    corpus = load_corpus(questions, settings)
    queries = embed_questions.submit(corpus, settings)
    units = {kind: build_units.submit(corpus, kind, settings) for kind in UNIT_KINDS}
    scored = {kind: score_unit.submit(corpus, units[kind], queries, ks, budgets, options.top_k)
              for kind in UNIT_KINDS}
    search_queries = embed_search_queries.submit(corpus, settings)
    scored |= {row.kind: score_search.submit(corpus, row, search_queries, ks, budgets, settings,
                                             options.top_k)
               for row in SEARCH_ROWS}
    scores = {kind: future.result() for kind, future in scored.items()}
    grades, info = (with_scaled_retry_delays(grade_answers, settings)(corpus, scores, settings)
                    if options.answer_quality
                    else (None, None))
    unit_sets = {kind: future.result() for kind, future in units.items()}
    report = run.assemble_report(corpus, settings, unit_sets, scores, ks, budgets,
                                 options.top_k, grades, info)
    files = publish_report(report, out)
    print(f"evaluated {report['evaluated']} of {report['questions']} questions; "
          f"report in {files['report.md']}")
    return {**report, "files": files}
