"""Document title and summary, and the contextual chunk headers built from them (dsRAG)."""

from __future__ import annotations

from propdex.cache import ResultCache, cache_key
from propdex.llm.base import LLMBackend, bounded_prefix
from propdex.models import Chunk, DocumentContext, ExtractedDocument, Usage
from propdex.settings import Settings


def document_context(
    doc: ExtractedDocument, backend: LLMBackend, cache: ResultCache, settings: Settings
) -> DocumentContext:
    versions = backend.prompt_versions()
    usage = Usage()

    title_text, title_cut = bounded_prefix(doc.text, settings.title_prefix_tokens)
    key = cache_key(
        step="title", model=settings.model_for("context"), prompt=versions["title"],
        hint=doc.title_hint, truncated=title_cut, text=title_text,
    )
    title = cache.get_llm(key)
    if title is None:
        result = backend.title(title_text, truncated=title_cut, hint=doc.title_hint)
        title, usage = result.value, usage + result.usage
        cache.put_llm(key, "title", title)
    else:
        usage += Usage(cached_calls=1)

    summary_text, summary_cut = bounded_prefix(doc.text, settings.summary_prefix_tokens)
    key = cache_key(
        step="summary", model=settings.model_for("context"), prompt=versions["summary"],
        title=title, truncated=summary_cut, text=summary_text,
    )
    summary = cache.get_llm(key)
    if summary is None:
        result = backend.summary(summary_text, title=title, truncated=summary_cut)
        summary, usage = result.value, usage + result.usage
        cache.put_llm(key, "summary", summary)
    else:
        usage += Usage(cached_calls=1)

    return DocumentContext(
        title=title,
        summary=summary,
        title_truncated=title_cut,
        summary_truncated=summary_cut,
        model=settings.model_for("context"),
        usage=usage,
    )


def chunk_header(context: DocumentContext, section: str | None) -> str:
    """The context prepended to a chunk before embedding: what document, what it is about,
    and which section the excerpt comes from."""
    lines = [f"Document: {context.title}", f"Summary: {context.summary}"]
    if section:
        lines.append(f"Section: {section}")
    return "\n".join(lines)


def attach_headers(chunks: list[Chunk], context: DocumentContext) -> list[Chunk]:
    for chunk in chunks:
        chunk.header = chunk_header(context, chunk.section)
    return chunks
