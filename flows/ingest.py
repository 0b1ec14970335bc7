"""The ingest flow: it composes the tasks, one chain of stages per document."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Annotated, Any

from prefect import flow, get_run_logger
from prefect.futures import as_completed
from prefect.runtime import flow_run
from prefect.states import Failed

from flows.parameters import IngestOptions, form_label
from flows.runners import allow_dask_work, stop_dask_work, task_runner_for
from propdex.cli import progress
from propdex.deadlines import forget_run
from propdex.errors import (
    UNREADABLE,
    DocumentTimeoutError,
    ExtractionError,
    LLMConfigurationError,
    NoTextLayerError,
    StorageError,
    error_kind,
)
from propdex.extract.isolated import for_documents, pymupdf_sources
from propdex.ids import doc_id_for
from propdex.llm.unreachable import forget_unreachable_servers
from propdex.models import Usage
from propdex.pipeline.outcome import DocumentOutcome, RunSummary
from propdex.pipeline.report import render_log_lines
from propdex.settings import Settings
from propdex.stopping import allow_run_work, stop_run_work
from tasks.documents import Embeddings, embed, extract, propose, split, write_context
from tasks.index import (
    commit_document,
    deployment_allowed_roots,
    discard_object_copies,
    optimize,
    plan_run,
    prune,
    publish_report,
    record_failures,
    record_found_at,
    record_object_versions,
    relabel,
    sweep,
)
from tasks.policies import with_scaled_retry_delays


def _submit_chain(stages: list, plan, settings: Settings, run_id: str, item) -> list:
    """Submit a document's six tasks, each taking the futures of those before it: the futures
    of its chain, extract's first and commit_document's last."""
    extract_stage, context_stage, split_stage, propose_stage, embed_stage, commit_stage = stages

    def salt(stage) -> str:
        # Salted, a stage misses Prefect's task cache and runs again (LLM answers and
        # embeddings still come from the content cache): on --force every stage, on a retry
        # those that may hold what failed (WorkItem.redo). A later stage misses only when
        # what it reads of a redone one changed (tasks.policies.document_cache_key).
        return run_id if stage.name in item.redo else ""

    fp = plan.fingerprint_for(item.source)
    doc = extract_stage.submit(item, settings, fp, salt(extract_stage))
    context = context_stage.submit(doc, settings, fp, salt(context_stage))
    chunks = split_stage.submit(doc, context, settings, fp, salt(split_stage))
    props = propose_stage.submit(doc, chunks, context, settings, fp, salt(propose_stage))
    vectors = embed_stage.submit(doc, chunks, props, settings, fp, salt(embed_stage))
    done = commit_stage.submit(item, doc, context, chunks, props, vectors, settings, fp, run_id)
    return [doc, context, chunks, props, vectors, done]


def _first_failure(futures) -> BaseException | None:
    """The exception that broke a document's chain (downstream tasks never ran)."""
    for future in futures:
        if future.state.is_failed() or future.state.is_crashed():
            try:
                future.result(raise_on_failure=True)
            except BaseException as exc:  # the stored exception of that task run
                return exc
    return None


def _run_documents(items: list, submit_chain: Callable[[Any], list],
                   limit: int) -> list[tuple[Any, list]]:
    """Each item with the futures of its chain of tasks, at most ``limit`` documents in
    flight: the first ``limit`` chains are submitted at once, and the next document's once a
    whole chain has finished (document_concurrency). A document counts as done (on the CLI's
    progress display) once its whole chain has finished, in whatever order chains finish."""
    waiting = deque(items)
    chains: list[tuple[Any, list]] = []
    left: dict[int, int] = {}  # chain in flight -> its unfinished tasks
    chain_of: dict = {}  # future -> its chain
    try:
        while waiting or left:
            # A cancel or Ctrl-C raises in this thread, here or while waiting below: no
            # document is submitted after it.
            while waiting and len(left) < limit:
                item = waiting.popleft()
                futures = submit_chain(item)
                left[len(chains)] = len(futures)
                chain_of.update(dict.fromkeys(futures, len(chains)))
                chains.append((item, futures))
            for future in as_completed(list(chain_of)):
                n = chain_of.pop(future)
                left[n] -= 1
                if left[n] == 0:
                    del left[n]
                    progress.document_finished()
                    if waiting:
                        break  # a place in the window: submit the next document
    except BaseException:
        # Cancelled from the Prefect UI (SIGTERM, raised here as TerminationSignal) or Ctrl-C:
        # the process ends only once the task threads return, so stop what they wait for,
        # here and in the Dask workers running this run's tasks.
        stop_run_work()
        if len(waiting) < len(items):  # tasks were submitted: on Dask, they run in its workers
            stop_dask_work()
        raise
    return chains


def _reused_work(futures) -> tuple[Usage, int]:
    """LLM usage and embeddings of the stage results Prefect's task cache supplied (an earlier
    run with the same document and fingerprint computed them; the state is named Cached)."""
    usage, embeddings = Usage(), 0
    for future in futures:
        if future.state.name != "Cached":
            continue
        result = future.result()
        usage += getattr(result, "usage", None) or Usage()
        embeddings += result.computed if isinstance(result, Embeddings) else 0
    return usage, embeddings


def _failure_outcome(item, exc: BaseException) -> DocumentOutcome:
    status = "skipped" if isinstance(exc, NoTextLayerError) else "failed"
    if isinstance(exc, (ExtractionError, DocumentTimeoutError)):
        reason = exc.reason
    else:
        reason = f"{type(exc).__name__}: {exc}"
    return DocumentOutcome(source=item.source, doc_id=item.doc_id, status=status,
                           reason=item.reason, error=reason, error_kind=error_kind(exc))


@flow(name="propdex-ingest", log_prints=True,
      # PROPDEX_DASK_ADDRESS picks Dask when the flow is imported (deployments); the CLI
      # gives each run its own with ingest.with_options(task_runner=...), --dask or threads
      # sized for its documents at once. Made before a run's settings are known, the pool
      # here has as many threads as the run's window starts (flows.runners.threads_for).
      task_runner=task_runner_for(Settings(), sized=False))
def ingest(
    sources: Annotated[list[str], form_label("Sources (files, folders, globs)")],
    db: Annotated[str, form_label("Index folder (db)")] = "propdex-db",
    options: Annotated[IngestOptions, form_label("Options")] = IngestOptions(),
    prune_removed: Annotated[bool, form_label("Remove documents whose files are gone")] = True,
    force: Annotated[bool, form_label("Re-process unchanged documents")] = False,
) -> dict:
    """Ingest files, folders (PDFs, EPUB/XPS/MOBI/FB2 books, text, Markdown) and globs into
    the index at ``db``.

    Only new or changed documents are processed; sources removed from the given folders
    leave the index unless ``prune_removed`` is off; ``force`` re-processes everything.

    Args:
        sources: Files, folders (walked for .pdf, .epub, .xps, .oxps, .mobi, .fb2, .txt, .md, .markdown) and
            globs to ingest.
        db: LanceDB folder (or URI) holding the index. A relative path resolves against the
            run's working directory (the repository, for prefect.yaml deployments).
        options: Settings for this run; empty fields fall back to PROPDEX_* variables.
        prune_removed: Remove documents whose files left the given folders or globs.
        force: Re-process documents even when their bytes and the settings are unchanged.
    """
    started = time.perf_counter()
    allow_run_work()
    # A server marked unreachable by an earlier run in this process (a served deployment,
    # `propdex watch`) is tried afresh: it may have been started since.
    forget_unreachable_servers()
    settings = deployment_allowed_roots(options.settings(db))
    run_id = flow_run.get_id() or f"local-{int(time.time())}"

    plan = plan_run(sources, settings, force, prune_removed, options.document_metadata())
    # Fewer PDFs than extraction slots: their workers share all the cores among them.
    settings = for_documents(settings, pymupdf_sources(item.source for item in plan.to_process))
    progress.planned([(item.doc_id, item.source) for item in plan.to_process])
    if plan.to_process:
        allow_dask_work()
    swept = sweep(settings)
    # The stages whose retries wait, waiting their declared delays times retry_delay_scale.
    context_stage, propose_stage, embed_stage, commit_stage = (
        with_scaled_retry_delays(stage, settings)
        for stage in (write_context, propose, embed, commit_document))
    stages = [extract, context_stage, split, propose_stage, embed_stage, commit_stage]
    chains = _run_documents(
        plan.to_process, partial(_submit_chain, stages, plan, settings, run_id),
        settings.document_concurrency)
    forget_run(run_id)
    if plan.copies:
        discard_object_copies(plan.copies)
    progress.phase("finishing")

    summary = RunSummary(run_id=run_id, db=settings.db_uri, llm=settings.llm_backend,
                         unchanged=plan.unchanged, missing=plan.missing, swept_rows=swept,
                         refused=plan.refused)
    failures: list[DocumentOutcome] = []
    for item, futures in chains:
        exc = _first_failure(futures)
        if isinstance(exc, StorageError):
            # A read-only or full database fails every write that follows: stop with the
            # reason. Nothing was committed for this document, so its last version stands.
            raise exc
        if exc is None:
            outcome = futures[-1].result()
            outcome.count_as_reused(*_reused_work(futures[:-1]))
            summary.documents.append(outcome)
        else:
            failures.append(_failure_outcome(item, exc))
            if isinstance(exc, LLMConfigurationError) and summary.stopped is None:
                summary.stopped = str(exc)
    for entries, kind in ((plan.unreadable, UNREADABLE), (plan.invalid_metadata, "metadata")):
        for source, reason in entries:
            failures.append(DocumentOutcome(source=source, doc_id=doc_id_for(source),
                                            status="failed", reason="unreadable", error=reason,
                                            error_kind=kind))
    summary.documents.extend(failures)
    if failures:
        hashes = {item.doc_id: item.content_sha256 for item in plan.to_process}
        record_failures(failures, settings, plan, run_id, hashes)
    summary.removed = prune(plan.removed, settings)
    summary.metadata_updated = relabel(plan.relabel, settings) if plan.relabel else []
    if plan.found_at:
        # After the commits and failures: a new document's row exists only from then on.
        record_found_at(plan.found_at, settings)
    if plan.object_versions:
        record_object_versions(plan.object_versions, settings)
    if summary.wrote:
        optimize(settings)
    summary.seconds = time.perf_counter() - started
    publish_report(summary)
    logger = get_run_logger()
    for line in render_log_lines(summary):
        logger.info(line)
    if summary.stopped:
        # Retrying cannot help (bad key, unknown model, no server at the URL): the run ends
        # Failed, with its report.
        return Failed(message=f"run stopped: {summary.stopped}", data=summary.to_dict())
    if summary.refused:
        # Paths outside the allowed roots were asked for: the run shows Failed in the UI.
        refused = "; ".join(f"{path}: {reason}" for path, reason in summary.refused)
        return Failed(message=f"paths refused: {refused}", data=summary.to_dict())
    if summary.missing:
        # A scheduled run on a folder that was moved or unmounted must not look like a run
        # with nothing to do: it ends Failed, as the CLI exits 1.
        missing = "; ".join(summary.missing)
        return Failed(message=f"sources not found: {missing}", data=summary.to_dict())
    return summary.to_dict()
