"""Re-ingest one document: what a `propdex.source.changed` event (or a user in the UI) asks for."""

from __future__ import annotations

import time
from pathlib import Path

from prefect import flow, task
from prefect.runtime import flow_run

from flows.ingest import ingest
from flows.parameters import IngestOptions
from propdex.ids import doc_id_for, normalise_source
from propdex.pipeline.outcome import RunSummary
from propdex.settings import Settings
from tasks.index import deployment_allowed_roots, open_index, prune, publish_report


@task(name="find-indexed")
def indexed_documents(sources: list[str], settings: Settings) -> list[tuple[str, str]]:
    """(doc_id, source) of the given sources that the documents ledger holds."""
    wanted = {doc_id_for(source): source for source in sources}
    ledger = open_index(settings, create=False).documents()
    return [(row["doc_id"], wanted[row["doc_id"]]) for row in ledger if row["doc_id"] in wanted]


@flow(name="propdex-reingest-document", log_prints=True)
def reingest_document(
    source: str,
    db: str = "propdex-db",
    options: IngestOptions = IngestOptions(),
    force: bool = True,
) -> dict:
    """Re-process one file into the index; a file that no longer exists leaves the index.

    Args:
        source: Path of one file (.pdf, .epub, .xps, .oxps, .mobi, .fb2, .txt, .md, .markdown). When the file no longer exists (it was
            deleted or moved away), its document and all its rows are removed from the index.
        db: LanceDB folder (or URI) holding the index. A relative path resolves against the
            run's working directory (the repository, for prefect.yaml deployments).
        options: Settings for this run; empty fields fall back to PROPDEX_* variables.
        force: Re-process even when the file's bytes and the settings are unchanged.
    """
    path = normalise_source(source)
    if Path(path).exists():
        # Prune stays off: this run names one file, not a folder whose removals it could see.
        return ingest(sources=[path], db=db, options=options, prune_removed=False, force=force)

    started = time.perf_counter()
    # A deployment run may remove documents only from an allowed database (as ingest checks).
    settings = deployment_allowed_roots(options.settings(db))
    known = indexed_documents([path], settings)
    summary = RunSummary(
        run_id=flow_run.get_id() or f"local-{int(time.time())}",
        db=settings.db_uri, llm=settings.llm_backend,
        removed=prune(known, settings),
        missing=[] if known else [path],  # neither on disk nor in the index
    )
    summary.seconds = time.perf_counter() - started
    publish_report(summary)
    return summary.to_dict()
