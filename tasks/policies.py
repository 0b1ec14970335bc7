"""Cache keys and retry conditions shared by the tasks' decorators.

Cache keys are content-based: a task's key is the document's content hash, its path,
the database it feeds, the pipeline fingerprint and a hash of each earlier stage's result it
reads, so a re-run after a crash or on an unchanged document reuses persisted results, and
any change that alters outputs misses: a retry that gets a new title re-runs the stages that
read it, not the extraction before it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any, TypeVar

from prefect import Task

from propdex.errors import (
    DatabaseNotAllowedError,
    DocumentTimeoutError,
    ExtractionError,
    LLMConfigurationError,
    LLMOutputError,
    RunStoppedError,
    StorageError,
)
from propdex.models import DocumentChunks, DocumentContext
from propdex.settings import Settings

CACHE_DAYS = 30
T = TypeVar("T", bound=Task)


def _key(*parts: Any) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).hexdigest()


def _digest(texts: Iterable[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8", "surrogatepass") + b"\x1f")
    return digest.hexdigest()


def stage_inputs_digest(parameters: dict[str, Any]) -> str:
    """A hash of what a stage reads of the earlier stages' results: of the document context,
    its title and summary (the chunk headers and the propositions prompt); of the chunks,
    every field; of the propositions, their texts (what is embedded). The extracted document
    needs none: it is determined by the rest of the key."""
    texts: list[str] = []
    context: DocumentContext | None = parameters.get("context")
    if context is not None:
        texts += ["context", context.title, context.summary]
    chunks: DocumentChunks | None = parameters.get("chunks")
    if chunks is not None:
        texts += ["chunks", repr(chunks.chunks)]  # plain dataclasses of str and int
    propositions = parameters.get("propositions")
    if propositions is not None:
        texts += ["propositions"] + [p.text for o in propositions.outcomes for p in o.propositions]
    return _digest(texts) if texts else ""


def document_cache_key(context, parameters: dict[str, Any]) -> str:
    """Key for document-sized tasks: task name + document identity + settings fingerprint +
    what the task reads of the earlier stages' results."""
    settings: Settings = parameters["settings"]
    document = parameters.get("doc") or parameters.get("item")
    # ``salt`` is empty on a normal run. A retry salts the stages whose results it must not
    # reuse (WorkItem.redo: the title and summary, the propositions), --force every stage;
    # the stages after a salted one miss only when what they read of it changed.
    # Extract and document-context read no earlier result: their keys stay as they were.
    inputs = stage_inputs_digest(parameters)
    return _key(
        context.task.name, document.doc_id, document.content_sha256, settings.db_uri,
        parameters["fingerprint"], parameters.get("salt", ""), *([inputs] if inputs else []),
    )


def _exception_of(state) -> BaseException | None:
    try:
        result = state.result(raise_on_failure=False)
    except BaseException as exc:  # the state's own data could not be loaded
        return exc
    return result if isinstance(result, BaseException) else None


def retry_transient(task, task_run, state) -> bool:
    """Retry faults that may pass (network, a busy server, a locked file); never retry a
    bad input, a bad key or model, or an answer that stayed invalid after its repair."""
    exc = _exception_of(state)
    permanent = (DatabaseNotAllowedError, ExtractionError, LLMConfigurationError, LLMOutputError,
                 StorageError, ValueError,
                 DocumentTimeoutError,  # the deadline has passed: a retry would fail at once
                 RunStoppedError)  # the run is being cancelled: a retry would only delay its end
    return exc is not None and not isinstance(exc, permanent)


def with_scaled_retry_delays(task: T, settings: Settings) -> T:
    """``task`` with the retry delays of its decorator times ``settings.retry_delay_scale``
    (Prefect has no setting over a decorator's delays: its default applies only where none
    is declared). The decorator's values stay the policy; the scale shortens it in tests."""
    delays, scale = task.retry_delay_seconds, settings.retry_delay_scale
    if not delays or scale == 1:
        return task
    scaled = [d * scale for d in delays] if isinstance(delays, list) else delays * scale
    return task.with_options(retry_delay_seconds=scaled)
