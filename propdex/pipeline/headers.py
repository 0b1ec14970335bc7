"""Contextual chunk headers (dsRAG): what document, what it is about, and which section a
chunk comes from, prepended to the chunk before it is embedded."""

from __future__ import annotations

from propdex.models import Chunk, DocumentContext


def chunk_header(context: DocumentContext, section: str | None, table_head: str = "") -> str:
    """The context prepended to a chunk before embedding: what document, what it is about,
    which section the excerpt comes from and, for a part of a split table, the caption and
    header rows it lacks (its text must stay an exact slice of the document)."""
    lines = [f"Document: {context.title}", f"Summary: {context.summary}"]
    if section:
        lines.append(f"Section: {section}")
    if table_head:
        lines.append(table_head)
    return "\n".join(lines)


def attach_headers(chunks: list[Chunk], context: DocumentContext) -> list[Chunk]:
    """Set each chunk's header from ``context``, its section and its table head (in place)."""
    for chunk in chunks:
        chunk.header = chunk_header(context, chunk.section, chunk.table_head)
    return chunks
