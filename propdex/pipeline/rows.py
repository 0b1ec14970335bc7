"""Rows for the LanceDB tables, with the lineage every row carries."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np

from propdex.checks.propositions import REASONS as CHECK_REASONS
from propdex.extract import PYMUPDF_SUFFIXES
from propdex.models import (
    Chunk,
    ChunkPropositions,
    DocumentContext,
    ExtractedDocument,
    GraderWatch,
    Usage,
)
from propdex.pipeline.grading import GRADE_OUT_OF_RANGE
from propdex.regions import boxes_as_rows, boxes_for_span
from propdex.settings import Settings, fingerprint_of


def utc_now() -> datetime:
    return datetime.now(UTC)


def chunk_rows(
    doc: ExtractedDocument, chunks: list[Chunk], outcomes: list[ChunkPropositions],
    vectors: np.ndarray, settings: Settings, run_id: str,
) -> list[dict]:
    errors = {o.chunk_id: o.error for o in outcomes}
    return [
        {
            "chunk_id": c.chunk_id, "doc_id": c.doc_id, "ordinal": c.ordinal, "text": c.text,
            "header": c.header, "section": c.section, "page_start": c.page_start,
            "page_end": c.page_end, "char_start": c.char_start, "char_end": c.char_end,
            "source": doc.source, "content_sha256": doc.content_sha256,
            "embed_model": settings.embed_model_name, "prop_error": errors.get(c.chunk_id),
            "run_id": run_id, "vector": vectors[i], "boxes": chunk_boxes(doc, c),
        }
        for i, c in enumerate(chunks)
    ]


def chunk_boxes(doc: ExtractedDocument, chunk: Chunk) -> list[dict] | None:
    """The page rectangles of a chunk's text, as stored (None: the document has none)."""
    return boxes_as_rows(boxes_for_span(doc.regions, chunk.char_start, chunk.char_end))


def proposition_rows(
    doc: ExtractedDocument, chunks: list[Chunk], outcomes: list[ChunkPropositions],
    vectors: np.ndarray, settings: Settings, prompt_version: str, run_id: str,
) -> list[dict]:
    by_id = {c.chunk_id: c for c in chunks}
    rows = []
    for outcome in outcomes:
        parent = by_id[outcome.chunk_id]
        boxes = chunk_boxes(doc, parent)
        for p in outcome.propositions:
            rows.append({
                "prop_id": p.prop_id, "chunk_id": p.chunk_id, "doc_id": p.doc_id,
                "ordinal": p.ordinal, "text": p.text,
                # No scores (null) when the chunk's grading failed: ungraded, not passed.
                **({"accuracy": p.scores.accuracy, "clarity": p.scores.clarity,
                    "completeness": p.scores.completeness, "conciseness": p.scores.conciseness}
                   if p.scores is not None else
                   dict.fromkeys(("accuracy", "clarity", "completeness", "conciseness"))),
                "passed": p.passed, "reject_reason": p.reject_reason, "page_start": parent.page_start, "page_end": parent.page_end,
                "source": doc.source, "content_sha256": doc.content_sha256,
                "llm_model": settings.model_for("propositions"), "prompt_version": prompt_version,
                "embed_model": settings.embed_model_name, "run_id": run_id,
                "vector": vectors[len(rows)],
                # A statement of one table row points at that row's rectangles.
                "boxes": boxes_as_rows(boxes_for_span(doc.regions, *p.row_span)) if p.row_span
                else boxes,
            })
    return rows


def checks_rejected(context: DocumentContext, outcomes: list[ChunkPropositions]) -> dict[str, int]:
    """How many answers the deterministic checks rejected, per "step: reason" (titles and
    summaries that fell back, propositions, propositions with a grade out of range)."""
    counts = dict(context.checks_rejected)
    for p in (p for o in outcomes for p in o.propositions):
        step = {GRADE_OUT_OF_RANGE: "grading"}.get(p.reject_reason or "", "propositions")
        if p.reject_reason in CHECK_REASONS or p.reject_reason == GRADE_OUT_OF_RANGE:
            key = f"{step}: {p.reject_reason}"
            counts[key] = counts.get(key, 0) + 1
    return counts


def grader_watch(outcomes: list[ChunkPropositions]) -> dict[str, dict[str, int]]:
    """Per grading model, its grades against the checks (see ``GraderWatch``)."""
    totals: dict[str, GraderWatch] = {}
    for watch in (o.grader for o in outcomes if o.grader is not None):
        totals[watch.model] = totals[watch.model] + watch if watch.model in totals else watch
    return {model: {k: v for k, v in vars(w).items() if k != "model"} for model, w in totals.items()}


def document_row(
    doc: ExtractedDocument, context: DocumentContext, chunks: list[Chunk],
    outcomes: list[ChunkPropositions], settings: Settings, prompt_versions: dict[str, str],
    fingerprint: str, run_id: str, usage: Usage, embed_truncated: int | None = None,
) -> dict:
    propositions = [p for o in outcomes for p in o.propositions]
    failures = [o for o in outcomes if o.error and not o.propositions]  # extraction failed
    ungraded = [o for o in outcomes if o.ungraded]  # grading failed: propositions kept ungraded
    problems = []
    if failures:
        problems.append(f"{len(failures)} chunk(s) without propositions: {failures[0].error}")
    if ungraded:
        count = sum(o.ungraded for o in ungraded)
        problems.append(f"{count} proposition(s) of {len(ungraded)} chunk(s) ungraded: {ungraded[0].error}")
    now = utc_now()
    return {
        "doc_id": doc.doc_id, "source": doc.source, "content_sha256": doc.content_sha256,
        "kind": doc.kind, "text": doc.text, "title": context.title, "summary": context.summary,
        "page_count": doc.page_count, "status": "indexed",
        "error": "; ".join(problems) or None,
        "error_kind": "llm" if problems else None,
        "chunk_count": len(chunks), "proposition_count": len(propositions),
        "passed_count": sum(p.passed for p in propositions), "chunk_failures": len(failures),
        "llm_model": settings.model_for("propositions"), "embed_model": settings.embed_model_name,
        "prompt_versions": json.dumps(prompt_versions, sort_keys=True),
        "pipeline_version": fingerprint, "run_id": run_id, "last_run_id": run_id,
        "ingested_at": now, "last_attempt_at": now, "llm_calls": usage.calls,
        "prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
        "ocr": doc.ocr, "embed_truncated": embed_truncated,
        "encoding": doc.encoding, "furniture_removed": doc.furniture_removed,
        # Degradation, in lineage; either makes the planner retry the document next run.
        "context_fallback": context.fallback,
        "ungraded_count": sum(o.ungraded for o in outcomes),
        "pdf_reader": doc.pdf_reader, "layout_fallback_pages": doc.layout_fallback_pages or None,
        "checks_rejected": json.dumps(checks_rejected(context, outcomes), sort_keys=True),
        "pipeline_parts": pipeline_parts(doc.source, settings, prompt_versions, fingerprint),
    }


def pipeline_parts(source: str, settings: Settings, prompt_versions: dict[str, str],
                   fingerprint: str) -> str | None:
    """The parts of ``fingerprint`` as JSON, for the documents row (None if these settings
    do not give that fingerprint: nothing is recorded rather than parts of another one)."""
    parts = settings.fingerprint_parts(
        prompt_versions, pymupdf=source.lower().endswith(PYMUPDF_SUFFIXES))
    return json.dumps(parts, sort_keys=True) if fingerprint_of(parts) == fingerprint else None


def failure_row(
    source: str, doc_id: str, content_sha256: str, status: str, error: str, error_kind: str,
    fingerprint: str, run_id: str,
) -> dict:
    return {
        "doc_id": doc_id, "source": source, "content_sha256": content_sha256 or None,
        "status": status, "error": error, "error_kind": error_kind,
        "pipeline_version": fingerprint, "last_run_id": run_id, "last_attempt_at": utc_now(),
    }
