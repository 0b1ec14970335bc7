"""Cache keys and retry conditions shared by the tasks' decorators.

Cache keys are content-based: a task's key is the document's content hash, its path,
the database it feeds and the pipeline fingerprint, so a re-run after a crash or on an
unchanged document reuses persisted results, and any change that alters outputs misses.
"""

from __future__ import annotations

import hashlib
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
from propdex.settings import Settings

CACHE_DAYS = 30
T = TypeVar("T", bound=Task)


def _key(*parts: Any) -> str:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode("utf-8")).hexdigest()


def document_cache_key(context, parameters: dict[str, Any]) -> str:
    """Key for document-sized tasks: task name + document identity + settings fingerprint."""
    settings: Settings = parameters["settings"]
    document = parameters.get("doc") or parameters.get("item")
    # ``salt`` is empty on a normal run; a retry of a document whose earlier attempt left
    # failed chunks, and a forced run, salt the keys of its whole chain so it runs again.
    return _key(
        context.task.name, document.doc_id, document.content_sha256, settings.db_uri,
        parameters["fingerprint"], parameters.get("salt", ""),
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
