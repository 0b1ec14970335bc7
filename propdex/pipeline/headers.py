"""Contextual chunk headers (dsRAG): what document, what it is about, and which section a
chunk comes from, prepended to the chunk before it is embedded."""

from __future__ import annotations

from propdex.models import Chunk, DocumentContext


def chunk_header(context: DocumentContext, section: str | None) -> str:
    """The context prepended to a chunk before embedding: what document, what it is about,
    and which section the excerpt comes from."""
    lines = [f"Document: {context.title}", f"Summary: {context.summary}"]
    if section:
        lines.append(f"Section: {section}")
    return "\n".join(lines)


def attach_headers(chunks: list[Chunk], context: DocumentContext) -> list[Chunk]:
    """Set each chunk's header from ``context`` and the chunk's section (in place)."""
    for chunk in chunks:
        chunk.header = chunk_header(context, chunk.section)
    return chunks
