"""Chunking: character spans from a Chunker, turned into Chunk records of a document."""

from __future__ import annotations

from itertools import pairwise

from propdex import ids
from propdex.chunking.base import Chunker
from propdex.chunking.recursive import RecursiveChunker
from propdex.models import Chunk, ExtractedDocument
from propdex.settings import Settings

__all__ = ["Chunker", "RecursiveChunker", "chunk_document", "document_spans", "make_chunker"]


def make_chunker(settings: Settings) -> Chunker:
    if settings.chunker == "recursive":
        return RecursiveChunker(chunk_size=settings.chunk_size, overlap=settings.chunk_overlap)
    raise ValueError(f"unknown chunker: {settings.chunker!r}")


def section_bounds(doc: ExtractedDocument) -> list[tuple[int, int]]:
    """(start, end) of each stretch of ``doc.text`` between consecutive section starts."""
    cuts = sorted({s.char_start for s in doc.sections if 0 < s.char_start < len(doc.text)})
    edges = [0, *cuts, len(doc.text)]
    return list(pairwise(edges))


def document_spans(doc: ExtractedDocument, chunker: Chunker) -> list[tuple[int, int]]:
    """Chunk spans of ``doc.text``, split section by section so no chunk straddles a heading
    and each chunk's ``section`` describes all of its text."""
    spans = []
    for start, end in section_bounds(doc):
        spans.extend((start + s, start + e) for s, e in chunker.split(doc.text[start:end]))
    return spans


def chunk_document(doc: ExtractedDocument, settings: Settings) -> list[Chunk]:
    """Chunks of ``doc.text`` in order, with pages, section and a stable id; headers empty."""
    chunks = []
    spans = document_spans(doc, make_chunker(settings))
    for ordinal, (start, end) in enumerate(spans):
        page_start, page_end = doc.pages_for(start, end)
        chunks.append(
            Chunk(
                chunk_id=ids.chunk_id_for(doc.doc_id, ordinal, start, end),
                doc_id=doc.doc_id,
                ordinal=ordinal,
                text=doc.text[start:end],
                char_start=start,
                char_end=end,
                page_start=page_start,
                page_end=page_end,
                section=doc.section_at(start),
            )
        )
    return chunks
