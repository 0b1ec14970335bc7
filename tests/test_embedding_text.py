"""What the embedder reads of a chunk or sentence: its text without the Markdown marks the
layout reader writes (heading "#" runs, block-quote "> "); tables stay whole."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from propdex.cache import ResultCache
from propdex.chunking import chunk_document
from propdex.evaluation.units import ChunkSpan, EvalDocument, build_unit_set
from propdex.extract import extract_document
from propdex.models import DocumentContext
from propdex.pipeline.headers import attach_headers
from propdex.runtime import embedder_for
from propdex.settings import Settings
from tests.pdf_factory import make_pdf

SECTION = "Positional Encoding"
BODY = "Since our model contains no recurrence, we add positional encodings to the embeddings."
FOOTNOTE = "4 To illustrate why the dot products get large, assume the components are random."
TABLE = "| Model | BLEU |\n|---|---:|\n| Transformer (big) | 28.4 |"
CONTEXT = DocumentContext(title="Attention", summary="The Transformer.")


def markdown_chunks(tmp_path: Path) -> list:
    path = tmp_path / "paper.md"
    path.write_text(f"### {SECTION}\n\n{BODY}\n\n> {FOOTNOTE}\n\n{TABLE}\n", encoding="utf-8")
    doc = extract_document(path, Settings())
    return attach_headers(chunk_document(doc, Settings()), CONTEXT)


def test_a_chunk_is_embedded_without_heading_and_quote_marks(tmp_path: Path) -> None:
    lines = [line for c in markdown_chunks(tmp_path) for line in c.embed_text.split("\n")]
    assert [] == [line for line in lines if line.startswith(("#", ">"))]


def test_a_chunk_is_embedded_with_its_table_whole(tmp_path: Path) -> None:
    embedded = "\n".join(c.embed_text for c in markdown_chunks(tmp_path))
    assert True == (TABLE in embedded)


def test_a_chunks_stored_text_keeps_its_markdown(tmp_path: Path) -> None:
    text = "\n\n".join(c.text for c in markdown_chunks(tmp_path))
    assert f"### {SECTION}\n\n{BODY}\n\n> {FOOTNOTE}\n\n{TABLE}" == text


def test_a_fast_read_chunk_is_embedded_as_header_and_text(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "plain.pdf", [f"{SECTION}\n\n{BODY}"])
    settings = Settings(pdf_reader="fast")
    chunks = attach_headers(chunk_document(extract_document(path, settings), settings), CONTEXT)
    assert [f"{c.header}\n\n{c.text}" for c in chunks] == [c.embed_text for c in chunks]


def eval_document(text: str) -> EvalDocument:
    return EvalDocument(doc_id="d", source="/corpus/paper.md", title="Attention", text=text,
                        chunks=[ChunkSpan("c0", text, 0, len(text), 1, 1)],
                        chunk_vectors=np.zeros((0, 384), dtype=np.float32), propositions=[],
                        proposition_vectors=np.zeros((0, 384), dtype=np.float32))


def unit_vectors(kind: str, text: str, tmp_path: Path) -> list[list[float]]:
    embedder, cache = embedder_for(Settings()), ResultCache(tmp_path / "cache")
    return build_unit_set([eval_document(text)], kind, embedder, cache).vectors.tolist()


def test_an_eval_chunk_is_embedded_without_markdown_marks(tmp_path: Path) -> None:
    marked = unit_vectors("chunk", f"### {SECTION}\n\n{BODY}\n\n> {FOOTNOTE}", tmp_path)
    assert unit_vectors("chunk", f"{SECTION}\n\n{BODY}\n\n{FOOTNOTE}", tmp_path) == marked


def test_an_eval_sentence_wrapped_in_a_block_quote_is_embedded_without_its_marks(
        tmp_path: Path) -> None:
    # A sentence starts at its first word, so only the marks of its later lines are in it.
    quoted = "The dot products get large,\n> as the components are random."
    marked = unit_vectors("sentence", f"{BODY}\n\n> {quoted}", tmp_path)
    assert unit_vectors("sentence", f"{BODY}\n\n{quoted.replace('> ', '')}", tmp_path) == marked
