"""The indexed documents under evaluation and the four retrieval units built over them.

All four units cover the same documents and map to the same parent chunks, so they are
compared on equal terms (Dense X Retrieval's passage-level setting):

- ``chunk``: chunk text alone, embedded here (no contextual header);
- ``chunk_header``: the stored chunk vectors (header + "\\n\\n" + text, as ingested);
- ``sentence``: the document's sentences, embedded here; a sentence's parent is the chunk
  whose span contains its first character;
- ``proposition``: the stored vectors of the passed propositions; parent = ``chunk_id``.

Chunks and sentences are embedded without their Markdown marks (``embedding_text``), as the
pipeline embeds chunks; ``UnitSet.texts`` keep them, as stored.

Vectors computed here go through the embedding cache, so a re-run embeds nothing new.
Only live rows are read (``Index.live_rows``: the documents row's committed run).
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass, field
from pathlib import PurePath

import numpy as np

from propdex.cache import ResultCache
from propdex.embed.base import Embedder
from propdex.embed.plain_text import embedding_text
from propdex.evaluation.errors import EvaluationError
from propdex.evaluation.sentences import sentence_spans
from propdex.pipeline.embedding import embed_with_cache
from propdex.store import CHUNKS, PROPOSITIONS, Index

UNIT_KINDS = ("chunk", "chunk_header", "sentence", "proposition")
UNIT_LABELS = {
    "chunk": "chunks (no header)",
    "chunk_header": "chunks + header",
    "sentence": "sentences",
    "proposition": "propositions",
}

_CHUNK_COLUMNS = ["chunk_id", "text", "char_start", "char_end", "page_start", "page_end", "vector"]
_PROPOSITION_COLUMNS = ["prop_id", "chunk_id", "text", "passed", "vector"]


@dataclass(frozen=True)
class ChunkSpan:
    chunk_id: str
    text: str
    char_start: int
    char_end: int
    page_start: int
    page_end: int


@dataclass
class EvalDocument:
    doc_id: str
    source: str
    title: str | None
    text: str
    chunks: list[ChunkSpan]  # by char_start
    chunk_vectors: np.ndarray  # stored: embedding of header + text
    propositions: list[tuple[str, str]]  # (text, parent chunk_id) of the passed ones
    proposition_vectors: np.ndarray

    @property
    def name(self) -> str:
        return PurePath(self.source).name

    @functools.cached_property
    def sentences(self) -> list[tuple[int, int]]:
        """(start, end) spans of the text's sentences: segmenting is the costly part of the
        sentence unit, whose texts and embedded texts both read them."""
        return sentence_spans(self.text)

    def chunk_at(self, offset: int) -> str:
        """The chunk holding ``offset``; in a gap between chunks, the one before it."""
        starts = [c.char_start for c in self.chunks]
        position = max(0, bisect.bisect_right(starts, offset) - 1)
        return self.chunks[position].chunk_id


@dataclass
class UnitSet:
    """Retrieval units of one kind over every document, row-aligned."""

    kind: str
    texts: list[str]
    parents: list[str]  # parent chunk_id per unit
    doc_ids: list[str]
    vectors: np.ndarray  # (units, dim), L2-normalised
    computed: int = 0  # vectors embedded in this run (the rest: stored or cached)
    _rows: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.texts)

    def rows_of(self, doc_ids: list[str]) -> np.ndarray:
        """Indices of the units belonging to these documents."""
        key = tuple(sorted(doc_ids))
        if key not in self._rows:
            wanted = set(key)
            self._rows[key] = np.array(
                [i for i, d in enumerate(self.doc_ids) if d in wanted], dtype=np.int64)
        return self._rows[key]


def load_documents(index: Index, names: set[str] | None, embed_model: str) -> list[EvalDocument]:
    """The live documents whose source base name is in ``names`` (every one when None)."""
    rows = [row for row in index.documents(with_text=True) if row["run_id"] is not None]
    if not rows:
        raise EvaluationError(f"the index at {index.uri} has no searchable documents")
    if names is not None:
        rows = [row for row in rows if PurePath(row["source"]).name in names]
    documents = []
    for row in rows:
        if row["embed_model"] != embed_model:
            raise EvaluationError(
                f"{row['source']} was embedded with {row['embed_model']!r} but the configured "
                f"embedder is {embed_model!r}; their vectors cannot be compared "
                "(set PROPDEX_EMBEDDER / PROPDEX_EMBED_MODEL as at ingest time)")
        documents.append(_document(index, row))
    return [doc for doc in documents if doc.chunks]


def _document(index: Index, row: dict) -> EvalDocument:
    chunk_rows = sorted(index.live_rows(CHUNKS, _CHUNK_COLUMNS, row["doc_id"]),
                        key=lambda r: r["char_start"])
    chunk_ids = {r["chunk_id"] for r in chunk_rows}
    prop_rows = [r for r in index.live_rows(PROPOSITIONS, _PROPOSITION_COLUMNS, row["doc_id"])
                 if r["passed"] and r["chunk_id"] in chunk_ids]
    prop_rows.sort(key=lambda r: r["prop_id"])  # a stable order: ties rank the same each run
    return EvalDocument(
        doc_id=row["doc_id"], source=row["source"], title=row["title"], text=row["text"] or "",
        chunks=[ChunkSpan(r["chunk_id"], r["text"], r["char_start"], r["char_end"],
                          r["page_start"], r["page_end"]) for r in chunk_rows],
        chunk_vectors=_matrix([r["vector"] for r in chunk_rows]),
        propositions=[(r["text"], r["chunk_id"]) for r in prop_rows],
        proposition_vectors=_matrix([r["vector"] for r in prop_rows]),
    )


def _matrix(vectors: list) -> np.ndarray:
    if not vectors:
        return np.zeros((0, 0), dtype=np.float32)
    return np.asarray(vectors, dtype=np.float32)


def unit_texts(documents: list[EvalDocument], kind: str) -> tuple[list[str], list[str], list[str]]:
    """(texts, parent chunk ids, doc ids) of one unit kind over the documents."""
    texts: list[str] = []
    parents: list[str] = []
    doc_ids: list[str] = []
    for doc in documents:
        if kind in ("chunk", "chunk_header"):
            pairs = [(c.text, c.chunk_id) for c in doc.chunks]
        elif kind == "sentence":
            pairs = [(" ".join(doc.text[start:end].split()), doc.chunk_at(start))
                     for start, end in doc.sentences]
        elif kind == "proposition":
            pairs = doc.propositions
        else:
            raise ValueError(f"unknown unit kind {kind!r}; expected one of {UNIT_KINDS}")
        texts += [text for text, _ in pairs]
        parents += [parent for _, parent in pairs]
        doc_ids += [doc.doc_id] * len(pairs)
    return texts, parents, doc_ids


def build_unit_set(documents: list[EvalDocument], kind: str, embedder: Embedder,
                   cache: ResultCache) -> UnitSet:
    texts, parents, doc_ids = unit_texts(documents, kind)
    computed = 0
    if kind == "chunk_header":
        vectors = _stack([doc.chunk_vectors for doc in documents], embedder.dim)
    elif kind == "proposition":
        vectors = _stack([doc.proposition_vectors for doc in documents], embedder.dim)
    else:
        vectors, computed = embed_with_cache(_embedded_texts(documents, kind), embedder, cache)
    return UnitSet(kind, texts, parents, doc_ids, normalise_rows(vectors), computed)


def _embedded_texts(documents: list[EvalDocument], kind: str) -> list[str]:
    """What the embedder reads of each ``chunk`` or ``sentence`` unit, in ``unit_texts`` order:
    its text without Markdown marks, as the pipeline embeds chunks. A sentence's marks are
    taken out before its lines are joined, while a quote's ">" still starts a line."""
    if kind == "chunk":
        return [embedding_text(c.text) for doc in documents for c in doc.chunks]
    return [" ".join(embedding_text(doc.text[start:end]).split())
            for doc in documents for start, end in doc.sentences]


def _stack(parts: list[np.ndarray], dim: int) -> np.ndarray:
    parts = [p for p in parts if len(p)]
    return np.vstack(parts) if parts else np.zeros((0, dim), dtype=np.float32)


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, so a dot product is the cosine similarity (the
    OpenAI-compatible embedders do not all return normalised vectors)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        norm = float(np.linalg.norm(vectors))
        return vectors / norm if norm else vectors
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)
