"""The evaluation report: report.json (everything), report.md (the tables) and recall.png
(answer recall against the word budget, one line per unit, like Dense X's Figure 4)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from propdex.evaluation.answers import GradedAnswer
from propdex.evaluation.errors import EvaluationError
from propdex.evaluation.metrics import mean
from propdex.evaluation.scoring import Target, Targets, UnitScore
from propdex.evaluation.searches import SearchRow
from propdex.evaluation.units import UNIT_LABELS, EvalDocument, UnitSet

PLOT_BUDGETS = (50, 100, 200, 300, 500)
REPORT_MD, REPORT_JSON, RECALL_PNG = "report.md", "report.json", "recall.png"


def plot_budgets(budgets: Sequence[int]) -> list[int]:
    """The word budgets measured: the reported ones plus the plot's fixed points."""
    return sorted(set(PLOT_BUDGETS) | set(budgets))


def recall_key(k: int) -> str:
    return f"recall@{k}"


def budget_key(budget: int) -> str:
    return f"answer_recall@{budget}"


def require_matplotlib() -> None:
    """Fail before any work when the plot cannot be drawn."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise EvaluationError(
            "the recall plot needs matplotlib: pip install 'propdex[eval]'") from None


def unit_summary(units: UnitSet, scores: dict[str, UnitScore], ks: Sequence[int],
                 budgets: Sequence[int], top_k: int,
                 grades: dict[str, GradedAnswer] | None) -> dict[str, Any]:
    row = {"kind": units.kind, "label": UNIT_LABELS[units.kind], "units": len(units),
           "embedded": units.computed}
    return _summary(row, scores, ks, budgets, top_k, grades)


def search_summary(search: SearchRow, scores: dict[str, UnitScore], ks: Sequence[int],
                   budgets: Sequence[int], top_k: int,
                   grades: dict[str, GradedAnswer] | None) -> dict[str, Any]:
    row = {"kind": search.kind, "label": search.label, "level": search.level,
           "mode": search.mode, "default": search.default, "units": None, "embedded": 0}
    return _summary(row, scores, ks, budgets, top_k, grades)


def _summary(row: dict[str, Any], scores: dict[str, UnitScore], ks: Sequence[int],
             budgets: Sequence[int], top_k: int,
             grades: dict[str, GradedAnswer] | None) -> dict[str, Any]:
    values = list(scores.values())
    summary = dict(row)
    for k in ks:
        summary[recall_key(k)] = mean(float(s.recall[k]) for s in values)
    summary["mrr"] = mean(s.reciprocal_rank for s in values)
    for budget in budgets:
        summary[budget_key(budget)] = mean(float(s.budget[budget]) for s in values)
    summary[f"words_top{top_k}"] = mean(s.top_words for s in values)
    if grades is not None:
        graded = [g.score for g in grades.values() if g.score is not None]
        summary["answer_quality"] = mean(graded) if graded else None
        summary["graded"] = len(graded)
        summary["grading_failures"] = len(grades) - len(graded)
    return summary


def build_report(*, questions_file: str, db: str, embed_model: str, total_questions: int,
                 documents: list[EvalDocument], targets: Targets, unit_sets: dict[str, UnitSet],
                 scores: dict[str, dict[str, UnitScore]], ks: Sequence[int],
                 budgets: Sequence[int], top_k: int,
                 grades: dict[str, dict[str, GradedAnswer]] | None = None,
                 answer_quality: dict[str, Any] | None = None,
                 searches: Sequence[SearchRow] = ()) -> dict[str, Any]:
    """Everything the run measured, as JSON-ready data (report.json holds exactly this).
    ``scores`` holds the units' and the searches' scores (by ``kind``)."""
    measured = plot_budgets(budgets)

    def graded(kind: str) -> dict[str, GradedAnswer] | None:
        return grades.get(kind) if grades is not None else None

    units = [unit_summary(unit_sets[kind], scores[kind], ks, measured, top_k, graded(kind))
             for kind in unit_sets]
    units += [search_summary(row, scores[row.kind], ks, measured, top_k, graded(row.kind))
              for row in searches]
    return {
        "questions_file": questions_file,
        "db": db,
        "embed_model": embed_model,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "ks": list(ks),
        "budgets": list(budgets),
        "plot_budgets": measured,
        "top_k": top_k,
        "questions": total_questions,
        "evaluated": len(targets.targets),
        "skipped": targets.skipped,
        "warnings": targets.warnings,
        "documents": [_document_entry(doc, unit_sets) for doc in documents],
        "units": units,
        "by_source": _by_source(targets.targets, scores, ks),
        "answer_quality": answer_quality,
        "per_question": [_question_entry(t, scores, grades) for t in targets.targets],
    }


def _document_entry(doc: EvalDocument, unit_sets: dict[str, UnitSet]) -> dict[str, Any]:
    counts = {kind: sum(1 for d in units.doc_ids if d == doc.doc_id)
              for kind, units in unit_sets.items()}
    return {"doc_id": doc.doc_id, "source": doc.source, "title": doc.title, "units": counts}


def _by_source(targets: list[Target], scores: dict[str, dict[str, UnitScore]],
               ks: Sequence[int]) -> list[dict[str, Any]]:
    k = 5 if 5 in ks else max(ks)
    groups: dict[str, list[str]] = {}
    for target in targets:
        groups.setdefault(target.question.source_name or "(all documents)", []).append(
            target.question.id)
    rows = []
    for source, ids in sorted(groups.items()):
        row: dict[str, Any] = {"source": source, "questions": len(ids), "k": k, "units": {}}
        for kind, by_question in scores.items():
            row["units"][kind] = {
                recall_key(k): mean(float(by_question[q].recall[k]) for q in ids),
                "mrr": mean(by_question[q].reciprocal_rank for q in ids),
            }
        rows.append(row)
    return rows


def _question_entry(target: Target, scores: dict[str, dict[str, UnitScore]],
                    grades: dict[str, dict[str, GradedAnswer]] | None) -> dict[str, Any]:
    question = target.question
    units = {}
    for kind, by_question in scores.items():
        score = by_question[question.id]
        entry: dict[str, Any] = {
            "recall": {str(k): hit for k, hit in score.recall.items()},
            "reciprocal_rank": score.reciprocal_rank,
            "answer_recall": {str(b): hit for b, hit in score.budget.items()},
            "top_words": score.top_words,
            "top_parents": score.top_parents,
        }
        graded = (grades or {}).get(kind, {}).get(question.id)
        if graded is not None:
            entry.update(generated_answer=graded.answer, answer_score=graded.score,
                         grade_reason=graded.reason, grade_error=graded.error)
        units[kind] = entry
    return {"id": question.id, "question": question.question, "answer": question.answer,
            "source": question.source, "relevant_chunks": sorted(target.relevant),
            "units": units}


# --------------------------------------------------------------------------- markdown


def _percent(value: float) -> str:
    return f"{100 * value:.1f}"


def render_markdown(report: dict[str, Any]) -> str:
    ks, budgets, top_k = report["ks"], report["budgets"], report["top_k"]
    quality = any(u.get("answer_quality") is not None or "graded" in u for u in report["units"])
    header = (["unit", "units"] + [f"R@{k}" for k in ks] + ["MRR"]
              + [f"A@{b}" for b in budgets] + [f"words (top {top_k})"]
              + (["answer quality (0-10)"] if quality else []))
    lines = [
        "# propdex retrieval evaluation",
        "",
        f"Questions: `{report['questions_file']}` ({report['evaluated']} evaluated of "
        f"{report['questions']}) · index: `{report['db']}` · embedder: `{report['embed_model']}`",
        "",
        _row(header),
        _row(["---"] * len(header)),
    ]
    for unit in report["units"]:
        cells = [unit["label"], "-" if unit["units"] is None else str(unit["units"])]
        cells += [_percent(unit[recall_key(k)]) for k in ks]
        cells.append(f"{unit['mrr']:.3f}")
        cells += [_percent(unit[budget_key(b)]) for b in budgets]
        cells.append(f"{unit[f'words_top{top_k}']:.0f}")
        if quality:
            score = unit.get("answer_quality")
            cells.append("-" if score is None else
                         f"{score:.2f} ({unit['graded']} graded, {unit['grading_failures']} failed)")
        lines.append(_row(cells))
    lines += [
        "",
        f"R@k (%): questions with a relevant chunk among the first k chunks; a unit counts for "
        f"its parent chunk, which ranks by its best unit (Dense X §4.3). A relevant chunk "
        f"contains the answer or overlaps an evidence span. MRR: over parent chunks. A@l (%): "
        f"questions whose answer or an evidence span occurs in the first l words of the "
        f"retrieved units' own text (Dense X §6.2). words: mean words in the top {top_k} units.",
    ]
    if any(u["units"] is None for u in report["units"]):
        lines += [
            "",
            f"search rows: `propdex.search.search` (what `propdex search` and the service run) "
            f"with each level and mode, k = {max(ks)} per question over the question's "
            f"documents; R@k and MRR over its results, A@l over the results' own text (the "
            f"proposition of a proposition hit, the chunk of a chunk hit), within those "
            f"{max(ks)} results. The row marked default is what runs when no level or mode "
            f"is given.",
        ]
    if report["by_source"]:
        k = report["by_source"][0]["k"]
        # The units and the default search (every search's figures are in report.json).
        kinds = [u["kind"] for u in report["units"] if u["units"] is not None or u.get("default")]
        labels = {u["kind"]: u["label"] for u in report["units"]}
        lines += ["", f"## By document: R@{k} (%) / MRR", "",
                  _row(["source", "questions"] + [labels[kind] for kind in kinds]),
                  _row(["---"] * (2 + len(kinds)))]
        for row in report["by_source"]:
            lines.append(_row([row["source"], str(row["questions"])] + [
                f"{_percent(row['units'][kind][recall_key(k)])} / {row['units'][kind]['mrr']:.3f}"
                for kind in kinds]))
    unit_rows = [u for u in report["units"] if u["units"] is not None]
    lines += ["", "## Documents", "", _row(["source", "title"] + [u["label"] for u in unit_rows]),
              _row(["---"] * (2 + len(unit_rows)))]
    for doc in report["documents"]:
        lines.append(_row([Path(doc["source"]).name, doc["title"] or ""]
                          + [str(doc["units"][u["kind"]]) for u in unit_rows]))
    if report["answer_quality"]:
        info = report["answer_quality"]
        lines += ["", "## Answer quality", "",
                  f"Answers written from each unit's top {top_k} units by `{info['answer_model']}` "
                  f"and graded 0-10 against the reference answer and rubric by "
                  f"`{info['grade_model']}` (prompts {', '.join(info['prompt_versions'].values())}); "
                  f"{info['llm_calls']} LLM calls, {info['cached_calls']} from the cache, "
                  f"{info['prompt_tokens']} prompt and {info['completion_tokens']} completion tokens."]
    if report["skipped"]:
        lines += ["", "## Skipped questions", ""]
        lines += [f"- `{item['id']}`: {item['reason']}" for item in report["skipped"]]
    if report["warnings"]:
        lines += ["", "## Warnings", ""]
        lines += [f"- {warning}" for warning in report["warnings"]]
    return "\n".join(lines) + "\n"


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


# --------------------------------------------------------------------------- plot and files


def plot_recall(report: dict[str, Any], path: Path) -> None:
    """Answer recall (%) against the word budget, one line per unit."""
    require_matplotlib()
    # The object API with an Agg canvas: no pyplot global state, safe in worker threads.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    budgets = report["plot_budgets"]
    figure = Figure(figsize=(9.6, 4.8), dpi=150)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    markers = "osD^v<>ph*Xd8P"
    for number, unit in enumerate(report["units"]):
        # Units solid, searches dashed; the default search stands out.
        style = "-" if unit["units"] is not None else "--"
        axes.plot(budgets, [100 * unit[budget_key(b)] for b in budgets],
                  marker=markers[number % len(markers)], linestyle=style,
                  linewidth=2.5 if unit.get("default") else 1.2, label=unit["label"],
                  **({"color": "black"} if unit.get("default") else {}))
    axes.set_xlabel("number of retrieved words (l)")
    axes.set_ylabel("answer recall within l words (%)")
    axes.set_title(f"Answer recall vs. word budget ({report['evaluated']} questions)")
    axes.set_xticks(budgets)
    axes.set_ylim(0, 100)
    axes.grid(True, alpha=0.3)
    # Beside the axes: with the search rows there are too many lines to cover the plot.
    axes.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small")
    figure.tight_layout()
    figure.savefig(path)


def write_report(report: dict[str, Any], out: str | Path) -> dict[str, str]:
    """Write report.md, report.json and recall.png into ``out``; returns their paths."""
    folder = Path(out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        paths = {name: folder / name for name in (REPORT_MD, REPORT_JSON, RECALL_PNG)}
        paths[REPORT_MD].write_text(render_markdown(report), encoding="utf-8")
        paths[REPORT_JSON].write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n",
                                      encoding="utf-8")
        plot_recall(report, paths[RECALL_PNG])
    except OSError as error:
        raise EvaluationError(f"cannot write the report into {folder}: {error}") from None
    return {name: str(path) for name, path in paths.items()}
