"""Tasks that read or change the index as a whole: plan, commit, failures, prune, optimize."""

from __future__ import annotations

import json
import os

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.client.orchestration import get_client
from prefect.runtime import deployment

from propdex.metadata import Metadata, entries, to_json
from propdex.models import ChunkPropositions, DocumentChunks, Usage
from propdex.pipeline.outcome import DocumentOutcome, RunSummary
from propdex.pipeline.plan import Plan, WorkItem, plan_sources
from propdex.pipeline.report import render_markdown
from propdex.pipeline.rows import (
    chunk_rows,
    document_row,
    failure_row,
    grader_watch,
    proposition_rows,
)
from propdex.pipeline.timing import pop_stage_seconds
from propdex.remote import discard_copies
from propdex.runtime import backend_for
from propdex.security import check_db_allowed, roots_of_sources
from propdex.settings import Settings
from propdex.store import Index
from tasks.documents import Embeddings, Propositions
from tasks.policies import retry_transient


def open_index(settings: Settings, **options) -> Index:
    """The run's index, with the object-store options the settings give (if any)."""
    return Index.open(settings.db_uri, storage_options=settings.storage_options, **options)


@task(name="allowed-roots", retries=2, retry_condition_fn=retry_transient)
def deployment_allowed_roots(settings: Settings) -> Settings:
    """The run's settings, checked and narrowed in a deployment's runs (a run form or an
    event payload chose the parameters):

    - the ``db`` must lie under PROPDEX_ALLOWED_DB_ROOTS, by default the deployment's own
      default ``db``, so a run cannot write an index into any folder the worker can write
      (DatabaseNotAllowedError, before anything is read or written);
    - the allowed roots of sources default to the folders of the deployment's own default
      ``sources``: a run may name files there but nowhere else unless
      PROPDEX_ALLOWED_ROOTS says so.

    CLI runs (no deployment) are left as they are."""
    deployment_id = deployment.get_id()
    if deployment_id is None:
        return settings
    defaults: dict = {}
    if not (settings.allowed_roots and settings.allowed_db_roots):
        with get_client(sync_client=True) as client:
            defaults = client.read_deployment(deployment_id).parameters
    own_db = defaults.get("db") or Settings.model_fields["db"].default
    db_roots = settings.allowed_db_roots or [own_db]
    check_db_allowed(settings.db, db_roots, os.getcwd())
    if settings.allowed_roots:
        return settings
    roots = roots_of_sources(list(defaults.get("sources") or []), os.getcwd())
    return settings.model_copy(update={"allowed_roots": roots}) if roots else settings


@task(name="plan", retries=0)
def plan_run(sources: list[str], settings: Settings, force: bool, prune: bool,
             metadata: Metadata | None = None) -> Plan:
    """Discover the sources and compare them with the ledger (content hash + fingerprint)."""
    return plan_sources(sources, settings, force=force, prune=prune, metadata=metadata)


@task(name="sweep-uncommitted", retries=2, retry_condition_fn=retry_transient)
def sweep(settings: Settings) -> int:
    """Remove rows a crashed run appended but never committed (reads already ignore them)."""
    return open_index(settings, create=False).sweep_uncommitted()


@task(name="commit", retries=2, retry_delay_seconds=[1, 5], retry_condition_fn=retry_transient)
def commit_document(
    item: WorkItem, doc, context, chunked: DocumentChunks, propositions: Propositions,
    embeddings: Embeddings, settings: Settings, fingerprint: str, run_id: str,
) -> DocumentOutcome:
    """Replace the document's rows atomically; the documents row is committed last."""
    versions = backend_for(settings).prompt_versions()
    outcomes: list[ChunkPropositions] = propositions.outcomes
    chunks = chunked.chunks
    usage: Usage = context.usage + chunked.usage + propositions.usage
    row = document_row(doc, context, chunks, outcomes, settings, versions, fingerprint, run_id,
                       usage, embed_truncated=embeddings.truncated)
    row.update(metadata=to_json(item.metadata), meta=entries(item.metadata) or None,
               object_etag=item.etag, object_size=item.size, found_at=item.found_at)
    dim = int(embeddings.chunk_vectors.shape[1])
    open_index(settings, dim=dim).replace_document(
        row,
        chunk_rows(doc, chunks, outcomes, embeddings.chunk_vectors, settings, run_id),
        proposition_rows(doc, chunks, outcomes, embeddings.prop_vectors, settings,
                         versions["propositions"], run_id),
    )
    kept, ungraded = row["passed_count"], row["ungraded_count"]
    return DocumentOutcome(
        source=doc.source, doc_id=doc.doc_id, status="indexed", reason=item.reason,
        changed=item.changed,
        error=row["error"], chunks=len(chunks), propositions_kept=kept,
        propositions_rejected=row["proposition_count"] - kept - ungraded,
        propositions_ungraded=ungraded, context_fallback=row["context_fallback"],
        structured_output=structured_output_notes(settings),
        chunk_failures=row["chunk_failures"], llm_calls=usage.calls,
        cached_llm_calls=usage.cached_calls, prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens, embeddings_computed=embeddings.computed,
        encoding=doc.encoding, furniture_removed=doc.furniture_removed,
        layout_fallback_pages=list(doc.layout_fallback_pages),
        embed_truncated=embeddings.truncated,
        stage_seconds=pop_stage_seconds(doc.doc_id),
        checks_rejected=json.loads(row["checks_rejected"]), grader=grader_watch(outcomes),
    )


def structured_output_notes(settings: Settings) -> list[str]:
    """The structured-output form this process settled on per model of the run's server
    (nothing for the offline backend, or before any request was made)."""
    if settings.llm_backend != "openai":
        return []
    from propdex.llm.client import OPENAI_BASE_URL
    from propdex.llm.structured import negotiated_notes

    return negotiated_notes(settings.llm_base_url or OPENAI_BASE_URL)


@task(name="record-failures", retries=2, retry_condition_fn=retry_transient)
def record_failures(failures: list[DocumentOutcome], settings: Settings, plan: Plan,
                    run_id: str, hashes: dict[str, str]) -> None:
    """Store each failure's status and reason, under the fingerprint ``plan`` gives its
    source; a previously indexed version stays searchable."""
    index = open_index(settings)  # the documents table needs no vector dimension
    for outcome in failures:
        index.record_failure(failure_row(
            outcome.source, outcome.doc_id, hashes.get(outcome.doc_id, ""), outcome.status,
            outcome.error or "failed", outcome.error_kind or "internal",
            plan.fingerprint_for(outcome.source), run_id,
        ))


@task(name="prune", retries=2, retry_condition_fn=retry_transient)
def prune(removed: list[tuple[str, str]], settings: Settings) -> list[str]:
    """Sources that left the folders a run was given leave the index."""
    if removed:
        open_index(settings, create=False).delete_documents([d for d, _ in removed])
    return [source for _, source in removed]


@task(name="record-found-at", retries=2, retry_condition_fn=retry_transient)
def record_found_at(found_at: dict[str, list[str]], settings: Settings) -> None:
    """Record where the run found each document it keeps (doc_id -> paths), so that a later
    run prunes a document found through a link once no argument yields it any more."""
    open_index(settings, create=False).update_found_at(found_at)


@task(name="record-object-versions", retries=2, retry_condition_fn=retry_transient)
def record_object_versions(versions: dict[str, tuple[str, int]], settings: Settings) -> None:
    """Give unchanged objects that were re-uploaded (a new ETag, the same bytes) their new
    ETag and size, so that the next run does not download them again."""
    open_index(settings, create=False).update_object_versions(versions)


@task(name="discard-object-copies")
def discard_object_copies(copies: list[str]) -> None:
    """Remove the local copies of objects the run read (the cache folder holds only those
    in flight)."""
    discard_copies(copies)


@task(name="update-metadata", retries=2, retry_condition_fn=retry_transient)
def relabel(items: list[WorkItem], settings: Settings) -> list[str]:
    """Give unchanged documents their new metadata: their rows are updated in place, with no
    extraction, LLM call or embedding."""
    index = open_index(settings, create=False)
    for item in items:
        index.update_metadata(item.doc_id, to_json(item.metadata), entries(item.metadata))
    return [item.source for item in items]


@task(name="optimize-index", retries=1, retry_condition_fn=retry_transient)
def optimize(settings: Settings) -> None:
    """Refresh full-text indexes over new rows; build a vector index once tables are large."""
    open_index(settings, create=False).optimize()


@task(name="publish-report")
def publish_report(summary: RunSummary) -> str:
    markdown = render_markdown(summary)
    create_markdown_artifact(
        key="propdex-ingest-report", markdown=markdown, description="propdex ingest run report"
    )
    return markdown
