"""Re-ingest one document: what a `propdex.source.changed` event (or a user in the UI) asks for."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

from prefect import flow
from prefect.runtime import flow_run

from flows.ingest import ingest
from flows.parameters import IngestOptions, form_label
from propdex.pipeline.outcome import RunSummary
from propdex.watch import watched_source
from tasks.index import deployment_allowed_roots, plan_run, prune, publish_report, record_found_at


@flow(name="propdex-reingest-document", log_prints=True)
def reingest_document(
    source: Annotated[str, form_label("File")],
    db: Annotated[str, form_label("Index folder (db)")] = "propdex-db",
    options: Annotated[IngestOptions, form_label("Options")] = IngestOptions(),
    force: Annotated[bool, form_label("Re-process an unchanged file")] = True,
) -> dict:
    """Re-process one file into the index; a file that no longer exists leaves the index.

    Args:
        source: Path of one file (.pdf, .epub, .xps, .oxps, .mobi, .fb2, .txt, .md, .markdown). When the file no longer exists (it was
            deleted or moved away, or a link to its folder was removed), its document and all its rows are removed from the index,
            unless the document is still found at another path (documents.found_at).
        db: LanceDB folder (or URI) holding the index. A relative path resolves against the
            run's working directory (the repository, for prefect.yaml deployments).
        options: Settings for this run; empty fields fall back to PROPDEX_* variables.
        force: Re-process even when the file's bytes and the settings are unchanged.
    """
    # As found, links not resolved: the run records where the file was found (found_at),
    # and a path gone because a link to its folder was removed still names the document.
    path = watched_source(source)
    if Path(path).exists():
        # Prune stays off: this run names one file, not a folder whose removals it could see.
        return ingest(sources=[path], db=db, options=options, prune_removed=False, force=force)

    started = time.perf_counter()
    # A deployment run may remove documents only from an allowed database (as ingest checks).
    settings = deployment_allowed_roots(options.settings(db))
    # Pruning a path that leads nowhere touches only the documents found there: one found
    # at another path too stays and forgets this one.
    plan = plan_run([path], settings, False, True)
    if plan.found_at:
        record_found_at(plan.found_at, settings)
    summary = RunSummary(
        run_id=flow_run.get_id() or f"local-{int(time.time())}",
        db=settings.db_uri, llm=settings.llm_backend,
        removed=prune(plan.removed, settings),
        # Neither on disk nor in the index.
        missing=[] if plan.removed or plan.found_at else [path],
        refused=plan.refused,
    )
    summary.seconds = time.perf_counter() - started
    publish_report(summary)
    return summary.to_dict()
