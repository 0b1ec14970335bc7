"""Chunking: character spans from a Chunker, turned into Chunk records of a document."""

from __future__ import annotations

from itertools import pairwise

from propdex import ids
from propdex.chunking.base import Chunker
from propdex.chunking.recursive import RecursiveChunker
from propdex.chunking.tables import TablePiece, find_tables, table_pieces
from propdex.models import Chunk, DocumentChunks, ExtractedDocument, Usage
from propdex.settings import Settings

__all__ = ["Chunker", "RecursiveChunker", "chunk_and_count", "chunk_document", "document_pieces",
           "document_spans", "make_chunker"]


# Prose shorter than 1/SLIVER_SHARE of the chunk size next to a table joins the table's chunk.
SLIVER_SHARE = 8


def make_chunker(settings: Settings) -> Chunker:
    """The chunker the settings choose."""
    # Imported per method: semantic loads the embedder, llm the openai client.
    if settings.chunker == "recursive":
        return RecursiveChunker(chunk_size=settings.chunk_size, overlap=settings.chunk_overlap)
    if settings.chunker == "fixed":
        from propdex.chunking.fixed import FixedChunker

        return FixedChunker(chunk_size=settings.chunk_size, overlap=settings.chunk_overlap)
    if settings.chunker == "passages":
        from propdex.chunking.passages import PassageChunker

        return PassageChunker(max_chars=settings.chunk_size)
    if settings.chunker == "semantic":
        from propdex.chunking.semantic import SemanticChunker
        from propdex.embed import make_embedder

        return SemanticChunker(make_embedder(settings), settings.semantic_threshold,
                               settings.chunk_size)
    if settings.chunker == "llm":
        from propdex.chunking.llm import LLMChunker

        return LLMChunker(settings)
    raise ValueError(f"unknown chunker: {settings.chunker!r}")


def section_bounds(doc: ExtractedDocument) -> list[tuple[int, int]]:
    """(start, end) of each stretch of ``doc.text`` between consecutive section starts."""
    cuts = sorted({s.char_start for s in doc.sections if 0 < s.char_start < len(doc.text)})
    edges = [0, *cuts, len(doc.text)]
    return list(pairwise(edges))


def section_pieces(text: str, chunker: Chunker) -> list[TablePiece]:
    """Chunk spans of one section's text: its tables (with their captions) cut by
    ``table_pieces``, the prose between them by ``chunker``. A sliver of prose next to a
    table (the section's heading right above it) joins the table's piece when it fits."""
    if chunker.table_chars is None:
        return [TablePiece(s, e, "") for s, e in chunker.split(text)]
    limit = chunker.table_chars
    sliver = max(1, limit // SLIVER_SHARE)
    pieces: list[TablePiece] = []
    after_table = False
    cursor = 0
    for table in [*find_tables(text), None]:
        block_start, block_end = table.block if table else (len(text), len(text))
        prose = [TablePiece(cursor + s, cursor + e, "") for s, e in chunker.split(text[cursor:block_start])]
        parts = table_pieces(text, table, limit) if table else []
        if (after_table and prose and prose[0].end - prose[0].start < sliver
                and prose[0].end - pieces[-1].start <= limit):
            pieces[-1] = TablePiece(pieces[-1].start, prose.pop(0).end, pieces[-1].head)
        if (parts and prose and prose[-1].end - prose[-1].start < sliver
                and parts[0].end - prose[-1].start <= limit):
            parts[0] = TablePiece(prose.pop().start, parts[0].end, parts[0].head)
        pieces.extend(prose)
        pieces.extend(parts)
        after_table = bool(parts)
        cursor = block_end
    return pieces


def document_pieces(doc: ExtractedDocument, chunker: Chunker) -> list[TablePiece]:
    """Chunk spans of ``doc.text`` with the table head each lacks, split section by section so
    no chunk straddles a heading and each chunk's ``section`` describes all of its text."""
    pieces = []
    for start, end in section_bounds(doc):
        pieces.extend(TablePiece(start + p.start, start + p.end, p.head)
                      for p in section_pieces(doc.text[start:end], chunker))
    return pieces


def document_spans(doc: ExtractedDocument, chunker: Chunker) -> list[tuple[int, int]]:
    """``document_pieces``' spans."""
    return [(p.start, p.end) for p in document_pieces(doc, chunker)]


def chunk_document(doc: ExtractedDocument, settings: Settings) -> list[Chunk]:
    """Chunks of ``doc.text`` in order, with pages, section and a stable id; headers empty."""
    return chunk_and_count(doc, settings).chunks


def chunk_and_count(doc: ExtractedDocument, settings: Settings) -> DocumentChunks:
    """``chunk_document``'s chunks and the LLM usage of sectioning and chunking, which the
    document's llm_calls and token counts include."""
    usage = Usage()
    if settings.sectioning:
        from propdex.sectioning import section_document

        doc, usage = section_document(doc, settings)
    chunks = []
    chunker = make_chunker(settings)
    for ordinal, piece in enumerate(document_pieces(doc, chunker)):
        start, end = piece.start, piece.end
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
                table_head=piece.head,
            )
        )
    return DocumentChunks(chunks, usage + chunker.usage)
