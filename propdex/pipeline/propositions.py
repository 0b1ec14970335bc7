"""Propositions per chunk and their grades, fanned out over the shared LLM pool.

Two LLM calls per chunk at most: one to extract every proposition, one to grade them all
against the chunk text (``propdex.pipeline.grading``, which also gives each proposition its
verdict: the deterministic checks, then the grades). Both answers are cached by content, so
an unchanged chunk inside an edited document costs nothing on a re-run.
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from propdex.cache import ResultCache, cache_key
from propdex.deadlines import current_deadline, submit_with_deadline
from propdex.errors import LLMConfigurationError, LLMContextWindowError, LLMError, LLMOutputError
from propdex.llm.base import LLMBackend
from propdex.llm.proposition_counts import most_propositions
from propdex.models import Chunk, ChunkPropositions, DocumentContext, Usage
from propdex.pipeline.grading import grade_chunk, judged_propositions
from propdex.settings import Settings


def _extract(
    chunk: Chunk, title: str, backend: LLMBackend, cache: ResultCache, settings: Settings
) -> tuple[list[str], Usage]:
    key = cache_key(
        step="propositions", model=settings.model_for("propositions"),
        prompt=backend.prompt_versions()["propositions"], title=title, section=chunk.section,
        # The chunk's own bound: a prose chunk keeps its key (and its cached answer) whatever
        # max_table_propositions is.
        limits=[settings.min_propositions, most_propositions(chunk.prompt_text, settings),
                settings.max_proposition_chars],
        text=chunk.prompt_text,
    )
    cached = cache.get_llm(key)
    if cached is not None:
        return cached, Usage(cached_calls=1)
    result = backend.propositions(chunk.prompt_text, title=title, section=chunk.section)
    cache.put_llm(key, "propositions", result.value)
    return result.value, result.usage


def propositions_for_document(
    chunks: list[Chunk], context: DocumentContext, backend: LLMBackend, cache: ResultCache,
    settings: Settings, pool: ThreadPoolExecutor,
) -> list[ChunkPropositions]:
    """Every chunk's propositions, in chunk order.

    Extraction jobs for all chunks go to the shared pool at once; each chunk's grading job
    is submitted the moment its propositions arrive, so the pool never idles waiting for a
    chunk's two calls in sequence. An extraction answer that stays invalid fails only its
    chunk (the reason is stored on the chunk row). A grading call that fails (an invalid or
    cut-off answer, or a call failed after its retries) keeps the chunk's propositions
    ungraded: stored without scores, never passed (so not searchable by default), counted
    in the documents row, and retried on the next run; no scores are invented. A
    configuration error (bad key, unknown model) or an extraction call that failed after
    its retries cancels the rest and propagates, failing the document as a whole: no
    partial document is written.
    """
    title = context.title
    usage: dict[str, Usage] = {c.chunk_id: Usage() for c in chunks}
    texts: dict[str, list[str]] = {}
    results: dict[str, ChunkPropositions] = {}
    by_future: dict[Future, tuple[str, Chunk]] = {}
    for chunk in chunks:
        future = submit_with_deadline(pool, _extract, chunk, title, backend, cache, settings)
        by_future[future] = ("extract", chunk)
    pending = set(by_future)
    deadline = current_deadline()
    try:
        while pending:
            timeout = max(0.0, deadline.remaining()) if deadline is not None else None
            done, pending = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
            if not done and deadline is not None:  # calls still running are cut by their timeout
                raise deadline.expired("propositions")
            for future in done:
                stage, chunk = by_future.pop(future)
                try:
                    value, spent = future.result()
                except LLMConfigurationError:
                    raise
                except LLMError as exc:
                    if stage == "extract" and not isinstance(exc, LLMOutputError):
                        raise
                    # Imported here: openai (which the client imports) takes ~0.5 s to import
                    # and an offline run never needs it.
                    from propdex.llm.client import error_usage

                    usage[chunk.chunk_id] += error_usage(exc)
                    # Too long a prompt is this chunk's own fault: say which one.
                    where = f" of chunk {chunk.ordinal}" if isinstance(exc, LLMContextWindowError) else ""
                    if stage == "extract":
                        results[chunk.chunk_id] = ChunkPropositions(
                            chunk.chunk_id, [], error=f"{stage}{where}: {exc}", usage=usage[chunk.chunk_id])
                    else:
                        results[chunk.chunk_id] = judged_propositions(
                            chunk, texts[chunk.chunk_id], None, title, usage[chunk.chunk_id],
                            settings, error=f"{stage}{where}: {exc}")
                    continue
                usage[chunk.chunk_id] += spent
                if stage == "extract":
                    texts[chunk.chunk_id] = value
                    graded = submit_with_deadline(pool, grade_chunk, chunk, value, title,
                                                  backend, cache, settings)
                    by_future[graded] = ("grading", chunk)
                    pending.add(graded)
                else:
                    results[chunk.chunk_id] = judged_propositions(
                        chunk, texts[chunk.chunk_id], value, title, usage[chunk.chunk_id],
                        settings)
    except BaseException:
        for future in pending:
            future.cancel()
        raise
    return [results[c.chunk_id] for c in chunks]
