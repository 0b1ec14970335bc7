"""Grading a chunk's propositions, and the verdict on each: the checks first, then the grades.

The grader is an LLM (often the same small model that wrote the propositions), so its grades
alone cannot keep junk out: every proposition goes through the deterministic checks of
``propdex.checks.propositions``, and one they reject is stored but never passed, whatever
its grades. The grader is watched: grades out of 1..10 and grades that would have passed a
proposition the checks rejected are counted per model (``GraderWatch``), and the run
report says how far the grader agreed with the checks.
"""

from __future__ import annotations

from propdex.cache import ResultCache, cache_key
from propdex.checks.propositions import proposition_problems
from propdex.chunking.tables import chunk_row_span
from propdex.errors import LLMOutputError
from propdex.ids import prop_id_for
from propdex.llm.base import LLMBackend
from propdex.llm.schemas import SCORE_RANGE
from propdex.models import Chunk, ChunkPropositions, GraderWatch, Proposition, Scores, Usage
from propdex.settings import Settings

GRADE_OUT_OF_RANGE = "grade out of range"
BELOW_THRESHOLD = "below threshold"
UNGRADED = "ungraded"

# Stored grades are int8; a wilder grade is kept at the nearest value that fits.
_INT8 = (-128, 127)


def grade_chunk(
    chunk: Chunk, texts: list[str], title: str, backend: LLMBackend, cache: ResultCache,
    settings: Settings,
) -> tuple[list[Scores], Usage]:
    """The grader's scores for ``texts`` (cached by content)."""
    if not texts:
        return [], Usage()
    key = cache_key(
        step="grading", model=settings.model_for("grading"),
        prompt=backend.prompt_versions()["grading"], title=title, section=chunk.section,
        text=chunk.prompt_text, propositions=texts,
    )
    cached = cache.get_llm(key)
    if cached is not None:
        return [Scores(**s) for s in cached], Usage(cached_calls=1)
    result = backend.grade(chunk.prompt_text, texts, title=title, section=chunk.section)
    if len(result.value) != len(texts):
        raise LLMOutputError(f"grading returned {len(result.value)} grades for {len(texts)} propositions")
    cache.put_llm(key, "grading", [vars(s) for s in result.value])
    return result.value, result.usage


def _in_range(scores: Scores) -> bool:
    low, high = SCORE_RANGE
    return all(low <= value <= high for value in vars(scores).values())


def _storable(scores: Scores) -> Scores:
    low, high = _INT8
    return Scores(**{name: max(low, min(high, value)) for name, value in vars(scores).items()})


def _verdict(problem: str | None, scores: Scores | None, thresholds: dict[str, int]) -> str | None:
    """Why the proposition does not pass (None: it passes)."""
    if problem is not None:
        return problem
    if scores is None:
        return UNGRADED
    if not _in_range(scores):
        return GRADE_OUT_OF_RANGE
    return None if scores.passes(thresholds) else BELOW_THRESHOLD


def judged_propositions(
    chunk: Chunk, texts: list[str], scores: list[Scores] | None, title: str, usage: Usage,
    settings: Settings, error: str | None = None,
) -> ChunkPropositions:
    """The chunk's propositions with their verdicts; ``scores`` None keeps them ungraded."""
    thresholds = settings.thresholds()
    problems = proposition_problems(texts, chunk.prompt_text, (chunk.header, title))
    graded = scores if scores is not None else [None] * len(texts)
    watch = GraderWatch(settings.model_for("grading"))
    propositions = []
    for ordinal, (text, problem, score) in enumerate(zip(texts, problems, graded, strict=True)):
        reason = _verdict(problem, score, thresholds)
        if score is not None:
            watch.graded += 1
            watch.out_of_range += not _in_range(score)
            if problem is not None:
                watch.rejected_by_checks += 1
                watch.passed_rejected += _in_range(score) and score.passes(thresholds)
        propositions.append(Proposition(
            prop_id=prop_id_for(chunk.chunk_id, ordinal), chunk_id=chunk.chunk_id,
            doc_id=chunk.doc_id, ordinal=ordinal, text=text,
            scores=_storable(score) if score is not None else None,
            passed=reason is None, reject_reason=reason,
            row_span=chunk_row_span(chunk, text),
        ))
    return ChunkPropositions(chunk.chunk_id, propositions, error=error, usage=usage,
                             grader=watch if scores is not None else None)
