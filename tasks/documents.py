"""Per-document tasks: one task per stage per document; chunk-level LLM calls fan out inside.

Retry and cache policy sit on each decorator. Cache keys are content-based (see
tasks.policies): a re-run after a crash reuses every stage a document already finished.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
from prefect import task
from prefect.runtime import flow_run

from propdex.chunking import chunk_and_count
from propdex.deadlines import deadline_for, document_deadline
from propdex.extract.isolated import extract_isolated
from propdex.models import (
    ChunkPropositions,
    DocumentChunks,
    DocumentContext,
    ExtractedDocument,
    Usage,
)
from propdex.pipeline.context import document_context
from propdex.pipeline.embedding import embed_with_cache
from propdex.pipeline.headers import attach_headers
from propdex.pipeline.plan import WorkItem
from propdex.pipeline.propositions import propositions_for_document
from propdex.pipeline.timing import stage_timer
from propdex.runtime import backend_for, cache_for, embedder_for, llm_pool
from propdex.settings import Settings
from tasks.policies import CACHE_DAYS, document_cache_key, retry_transient

CACHED = dict(
    cache_key_fn=document_cache_key,
    cache_expiration=timedelta(days=CACHE_DAYS),
    persist_result=True,
)


@dataclass
class Propositions:
    outcomes: list[ChunkPropositions]
    usage: Usage  # LLM calls and tokens for the propositions and grading of this document


@dataclass
class Embeddings:
    chunk_vectors: np.ndarray
    prop_vectors: np.ndarray
    computed: int  # texts actually embedded; the rest came from the cache
    # Texts whose tails never reached their vector (None: the embedder cannot tell). A class
    # default, so Embeddings persisted by older versions still load.
    truncated: int | None = None


def _deadline(document: WorkItem | ExtractedDocument, settings: Settings):
    """The document's deadline in this flow run (started by its first stage)."""
    run_key = flow_run.get_id() or "local"
    return deadline_for(run_key, document.doc_id, document.source, settings.document_timeout_s)


@task(name="extract", retries=0, **CACHED)
def extract(item: WorkItem, settings: Settings, fingerprint: str, salt: str = "") -> ExtractedDocument:
    # Bad input is permanent: no retries. A worker process runs PyMuPDF, killed at the deadline.
    deadline = _deadline(item, settings)
    with stage_timer(item.doc_id, "extract"), document_deadline(deadline, "extraction"):
        if item.local_path is None:
            return extract_isolated(item.source, settings, deadline)
        # An object-store source: its URL was checked against the allowed roots when listed;
        # the bytes are propdex's own copy, and the URL stays the document's source.
        local = settings.model_copy(update={"allowed_roots": []})
        doc = extract_isolated(item.local_path, local, deadline)
        return dataclasses.replace(doc, source=item.source, doc_id=item.doc_id)


@task(name="document-context", retries=2, retry_delay_seconds=[2, 10],
      retry_condition_fn=retry_transient, **CACHED)
def write_context(doc: ExtractedDocument, settings: Settings, fingerprint: str, salt: str = "") -> DocumentContext:
    with stage_timer(doc.doc_id, "context"), document_deadline(_deadline(doc, settings), "title and summary"):
        return document_context(doc, backend_for(settings), cache_for(settings), settings)


@task(name="chunk", retries=0, **CACHED)
def split(doc: ExtractedDocument, context: DocumentContext, settings: Settings, fingerprint: str, salt: str = "") -> DocumentChunks:
    # The llm chunker and LLM sectioning call the server: they run against the deadline too.
    with stage_timer(doc.doc_id, "chunk"), document_deadline(_deadline(doc, settings), "chunking"):
        chunked = chunk_and_count(doc, settings)
    attach_headers(chunked.chunks, context)
    return chunked


@task(name="propositions", retries=1, retry_delay_seconds=5,
      retry_condition_fn=retry_transient, **CACHED)
def propose(doc: ExtractedDocument, chunks: DocumentChunks, context: DocumentContext,
            settings: Settings, fingerprint: str, salt: str = "") -> Propositions:
    with stage_timer(doc.doc_id, "propositions"), document_deadline(_deadline(doc, settings), "propositions"):
        outcomes = propositions_for_document(
            chunks.chunks, context, backend_for(settings), cache_for(settings), settings,
            llm_pool(settings),
        )
    return Propositions(outcomes, sum((o.usage for o in outcomes), Usage()))


@task(name="embed", retries=2, retry_delay_seconds=[2, 10],
      retry_condition_fn=retry_transient, **CACHED)
def embed(doc: ExtractedDocument, chunks: DocumentChunks, propositions: Propositions,
          settings: Settings, fingerprint: str, salt: str = "") -> Embeddings:
    embedder, cache = embedder_for(settings), cache_for(settings)
    chunk_texts = [c.embed_text for c in chunks.chunks]
    prop_texts = [p.text for o in propositions.outcomes for p in o.propositions]
    with stage_timer(doc.doc_id, "embed"), document_deadline(_deadline(doc, settings), "embedding"):
        # One call for both kinds: the local embedder sorts them all by length, so chunks
        # and propositions share batches with little padding.
        vectors, computed = embed_with_cache(chunk_texts + prop_texts, embedder, cache)
        truncated = embedder.truncated(chunk_texts + prop_texts)
    split_at = len(chunk_texts)
    return Embeddings(vectors[:split_at], vectors[split_at:], computed, truncated)
