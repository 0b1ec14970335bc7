"""Document title and summary, and the contextual chunk headers built from them (dsRAG).

A title or summary only feeds the contextual headers, so losing one must not lose the
document: when the LLM's answer stays invalid (cut off at its output cap, say) or its call
fails after the retries, the offline backend's title or summary stands in. The fallback is
named in ``DocumentContext.fallback`` (the documents row and the run report show it), is
never cached, and the planner retries the document on the next run. A configuration error
(bad key, unknown model) still stops the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from propdex.cache import ResultCache, cache_key
from propdex.errors import LLMConfigurationError, LLMError
from propdex.llm.base import LLMBackend, LLMResult, bounded_prefix
from propdex.llm.offline import OfflineBackend
from propdex.models import Chunk, DocumentContext, ExtractedDocument, Usage
from propdex.settings import Settings

log = logging.getLogger("propdex.pipeline")


def _ask_or_fall_back(
    step: str, key: str, cache: ResultCache, ask: Callable[[], LLMResult[str]],
    fall_back: Callable[[], LLMResult[str]], source: str,
) -> tuple[str, Usage, str | None]:
    """The cached or asked answer, its usage, and the reason a fallback stands in (if one does)."""
    cached = cache.get_llm(key)
    if cached is not None:
        return cached, Usage(cached_calls=1), None
    try:
        result = ask()
    except LLMConfigurationError:
        raise
    except LLMError as error:
        # Imported here: openai (which the client imports) is slow to import and an offline
        # run never fails here.
        from propdex.llm.client import error_usage

        log.warning("%s: %s failed, using the offline backend's (%s)", source, step, error)
        return fall_back().value, error_usage(error), str(error)
    cache.put_llm(key, step, result.value)
    return result.value, result.usage, None


def document_context(
    doc: ExtractedDocument, backend: LLMBackend, cache: ResultCache, settings: Settings
) -> DocumentContext:
    versions = backend.prompt_versions()
    offline = OfflineBackend(settings)  # rules only: cheap to build, nothing to close
    fallbacks: list[str] = []

    title_text, title_cut = bounded_prefix(doc.text, settings.title_prefix_tokens)
    key = cache_key(
        step="title", model=settings.model_for("context"), prompt=versions["title"],
        hint=doc.title_hint, truncated=title_cut, text=title_text,
    )
    title, usage, failed = _ask_or_fall_back(
        "title", key, cache,
        lambda: backend.title(title_text, truncated=title_cut, hint=doc.title_hint),
        lambda: offline.title(title_text, truncated=title_cut, hint=doc.title_hint), doc.source,
    )
    if failed:
        fallbacks.append(f"title: offline fallback ({failed})")

    summary_text, summary_cut = bounded_prefix(doc.text, settings.summary_prefix_tokens)
    key = cache_key(
        step="summary", model=settings.model_for("context"), prompt=versions["summary"],
        title=title, truncated=summary_cut, text=summary_text,
    )
    summary, spent, failed = _ask_or_fall_back(
        "summary", key, cache,
        lambda: backend.summary(summary_text, title=title, truncated=summary_cut),
        lambda: offline.summary(summary_text, title=title, truncated=summary_cut), doc.source,
    )
    if failed:
        fallbacks.append(f"summary: offline fallback ({failed})")

    return DocumentContext(
        title=title,
        summary=summary,
        title_truncated=title_cut,
        summary_truncated=summary_cut,
        model=settings.model_for("context"),
        usage=usage + spent,
        fallback="; ".join(fallbacks) or None,
    )


def chunk_header(context: DocumentContext, section: str | None, table_head: str = "") -> str:
    """The context prepended to a chunk before embedding: what document, what it is about,
    which section the excerpt comes from and, for a part of a split table, the caption and
    header rows it lacks."""
    lines = [f"Document: {context.title}", f"Summary: {context.summary}"]
    if section:
        lines.append(f"Section: {section}")
    if table_head:
        lines.append(table_head)
    return "\n".join(lines)


def attach_headers(chunks: list[Chunk], context: DocumentContext) -> list[Chunk]:
    for chunk in chunks:
        chunk.header = chunk_header(context, chunk.section, chunk.table_head)
    return chunks
