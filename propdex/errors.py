"""One exception class per failure kind. Messages name the file and the reason."""

from __future__ import annotations


class PropdexError(Exception):
    """Base class for every error propdex raises on purpose."""


class DocumentError(PropdexError):
    """A failure of one document; ``reason`` is the short text stored as its status."""

    def __init__(self, source: str, reason: str):
        super().__init__(f"{source}: {reason}")
        self.source = source
        self.reason = reason

    def __reduce__(self):  # Prefect pickles task exceptions; rebuild from both fields
        return type(self), (self.source, self.reason)


class ExtractionError(DocumentError):
    """A document could not be read."""


class UnreadableFileError(ExtractionError):
    """The file could not be opened or read (permissions, not a regular file, an I/O error):
    a fault of its place on disk, not of its bytes, so the next run tries it again."""


class EncryptedDocumentError(ExtractionError):
    """The PDF is encrypted and no (correct) password was configured."""


class NoTextLayerError(ExtractionError):
    """The document has no extractable text (scanned without OCR, or blank)."""


class DocumentTooLargeError(ExtractionError):
    """The document exceeds max_file_mb or max_pages."""


class UnsupportedSourceError(ExtractionError):
    """The path is not a file of a supported type (PDF, EPUB, XPS, MOBI, FB2, text, Markdown)."""


class PathNotAllowedError(ExtractionError):
    """The path resolves outside the allowed roots (directly, through a symlink or ``..``)."""


class DatabaseNotAllowedError(PropdexError):
    """A deployment run named a database outside the allowed database roots."""

    def __init__(self, db: str, reason: str):
        super().__init__(f"db {db}: {reason}")
        self.db = db
        self.reason = reason

    def __reduce__(self):  # Prefect pickles task exceptions; rebuild from both fields
        return type(self), (self.db, self.reason)


class DocumentTimeoutError(DocumentError, TimeoutError):
    """A document was not done within document_timeout_s (stuck in extraction or the LLM)."""


class RunStoppedError(PropdexError):
    """Work of a run that is being cancelled or interrupted was not started, or was cut off."""


class SourceNotFoundError(PropdexError):
    """A path, folder or glob given to ingest matched nothing."""


class LLMError(PropdexError):
    """An LLM call failed after its retries."""


class LLMConfigurationError(LLMError):
    """The server refused the request itself (401, 403, 404 model, 400): retrying cannot help,
    so the run stops at the first one instead of failing every chunk."""


class LLMServerUnreachableError(LLMConfigurationError):
    """An LLM or embeddings server could not be connected to (refused, no such host, connect
    timeout) through one request's retries: the requests after it fail at once for a cooldown
    (propdex.llm.unreachable) and the run stops, as for a configuration error, the URL or the
    server's start being what to fix. Documents it failed are processed by the next run."""


class LLMOutputError(LLMError):
    """The LLM answered, but the answer stayed invalid after one repair attempt."""


class LLMAnswerCutOffError(LLMOutputError):
    """The answer stopped at its output cap (finish_reason=length), also after the repair:
    reported apart from other invalid answers, since a larger cap (or none) may be the fix."""


class LLMContextWindowError(LLMOutputError):
    """A request does not fit the model's context window: its prompt leaves too little room
    for an answer (found before sending), or the server refused it for its length. Fails
    the one unit (chunk, title, summary) like an invalid answer: a shorter input is the fix."""


class LLMContextLengthRefusedError(LLMContextWindowError):
    """The server refused a request for its length. A window the server stated may be stale
    (it was restarted with a smaller one): that window is read again, once per refusal."""


class LLMCheckError(LLMOutputError):
    """The answer was well-formed but the deterministic checks rejected it, also after the
    repair (a placeholder title, an off-topic summary); ``reason`` is the check's reason."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


class EmbedModelError(PropdexError):
    """The local embedding model could not be prepared (the one-time ONNX conversion failed)."""


class StorageError(PropdexError):
    """The database could not be read or written (read-only folder, disk full, ...)."""


class EmbedderMismatchError(PropdexError):
    """A vector search with another embedding model than the one the index's documents were
    embedded with: the vectors cannot be compared, so its scores would be meaningless."""


class IndexNotFoundError(PropdexError):
    """A search of an index whose folder does not exist: not created yet, or removed."""


class SearchRequestError(PropdexError, ValueError):
    """A search asked for something outside its bounds (an empty query, k beyond 1-100, an
    unknown level, ...); the message names the field, as the service's 422 does."""


class IndexInconsistentError(PropdexError):
    """``verify`` found the tables disagreeing with each other or with the documents ledger."""


class WatchUnavailableError(PropdexError):
    """`propdex watch` needs the optional `watchfiles` dependency (the `watch` extra)."""


class RemoteWatchError(PropdexError):
    """`propdex watch` was given an object-store prefix: a store sends no file system events
    to watch (its notifications need the store's own setup), so it is refused."""


class NoPrefectServerError(PropdexError):
    """No PREFECT_API_URL is configured, so events would reach no server."""


class PrefectStartError(PropdexError):
    """Prefect's ephemeral API, started for a CLI run, exited or did not answer in time."""


# The kind of a file the run could not read at all (UnreadableFileError, and the files the
# plan finds unreadable): retried by the next run, as its bytes were never judged.
UNREADABLE = "unreadable"


def error_kind(exc: BaseException) -> str:
    """The failure kind stored with a document: an ``input`` failure of unchanged bytes is
    not retried by the next run; every other kind is."""
    if isinstance(exc, UnreadableFileError):
        return UNREADABLE
    if isinstance(exc, ExtractionError):
        return "input"
    if isinstance(exc, LLMServerUnreachableError):
        return "unreachable"
    if isinstance(exc, LLMConfigurationError):
        return "configuration"
    if isinstance(exc, LLMError):
        return "llm"
    if isinstance(exc, StorageError):
        return "storage"
    if isinstance(exc, TimeoutError) or "timed out" in str(exc).lower():
        return "timeout"
    return "internal"
