"""Propositions per chunk and their grades, fanned out over the shared LLM pool.

Two LLM calls per chunk at most: one to extract every proposition, one to grade them all
against the chunk text. Both answers are cached by content, so an unchanged chunk inside an
edited document costs nothing on a re-run.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait, FIRST_EXCEPTION

from propdex.cache import ResultCache, cache_key
from propdex.errors import LLMConfigurationError, LLMOutputError
from propdex.ids import prop_id_for
from propdex.llm.base import LLMBackend
from propdex.models import Chunk, ChunkPropositions, DocumentContext, Proposition, Scores, Usage
from propdex.settings import Settings


def _extract(
    chunk: Chunk, title: str, backend: LLMBackend, cache: ResultCache, settings: Settings
) -> tuple[list[str], Usage]:
    key = cache_key(
        step="propositions", model=settings.model_for("propositions"),
        prompt=backend.prompt_versions()["propositions"], title=title, section=chunk.section,
        limits=[settings.min_propositions, settings.max_propositions, settings.max_proposition_chars],
        text=chunk.text,
    )
    cached = cache.get_llm(key)
    if cached is not None:
        return cached, Usage(cached_calls=1)
    result = backend.propositions(chunk.text, title=title, section=chunk.section)
    cache.put_llm(key, "propositions", result.value)
    return result.value, result.usage


def _grade(
    chunk: Chunk, texts: list[str], title: str, backend: LLMBackend, cache: ResultCache,
    settings: Settings,
) -> tuple[list[Scores], Usage]:
    if not texts:
        return [], Usage()
    key = cache_key(
        step="grading", model=settings.model_for("grading"),
        prompt=backend.prompt_versions()["grading"], title=title, section=chunk.section,
        text=chunk.text, propositions=texts,
    )
    cached = cache.get_llm(key)
    if cached is not None:
        return [Scores(**s) for s in cached], Usage(cached_calls=1)
    result = backend.grade(chunk.text, texts, title=title, section=chunk.section)
    if len(result.value) != len(texts):
        raise LLMOutputError(f"grading returned {len(result.value)} grades for {len(texts)} propositions")
    cache.put_llm(key, "grading", [vars(s) for s in result.value])
    return result.value, result.usage


def propositions_for_chunk(
    chunk: Chunk, context: DocumentContext, backend: LLMBackend, cache: ResultCache,
    settings: Settings,
) -> ChunkPropositions:
    try:
        texts, usage = _extract(chunk, context.title, backend, cache, settings)
        scores, grade_usage = _grade(chunk, texts, context.title, backend, cache, settings)
    except LLMOutputError as exc:
        # The chunk keeps its place in the index (chunk-level search still finds it);
        # the reason is stored on the chunk row instead of inventing scores.
        return ChunkPropositions(chunk.chunk_id, [], error=str(exc))
    thresholds = settings.thresholds()
    propositions = [
        Proposition(
            prop_id=prop_id_for(chunk.chunk_id, ordinal),
            chunk_id=chunk.chunk_id,
            doc_id=chunk.doc_id,
            ordinal=ordinal,
            text=text,
            scores=score,
            passed=score.passes(thresholds),
        )
        for ordinal, (text, score) in enumerate(zip(texts, scores, strict=True))
    ]
    return ChunkPropositions(chunk.chunk_id, propositions, usage=usage + grade_usage)


def propositions_for_document(
    chunks: list[Chunk], context: DocumentContext, backend: LLMBackend, cache: ResultCache,
    settings: Settings, pool: ThreadPoolExecutor, progress=None,
) -> list[ChunkPropositions]:
    """Every chunk's propositions, in chunk order. A configuration error (bad key, unknown
    model) cancels the document's remaining chunks and propagates: retrying cannot help.
    Any other call failure after retries also propagates, failing the document as a whole
    so no partial document is ever written."""
    cancelled = threading.Event()

    def run(chunk: Chunk) -> ChunkPropositions:
        if cancelled.is_set():
            raise LLMConfigurationError("cancelled after an earlier configuration error")
        outcome = propositions_for_chunk(chunk, context, backend, cache, settings)
        if progress is not None:
            progress(1)
        return outcome

    futures: list[Future] = [pool.submit(run, chunk) for chunk in chunks]
    done, pending = wait(futures, return_when=FIRST_EXCEPTION)
    if pending:
        cancelled.set()
        for future in pending:
            future.cancel()
        wait(pending)
    for future in futures:
        if future.done() and not future.cancelled() and future.exception() is not None:
            raise future.exception()
    return [future.result() for future in futures]
