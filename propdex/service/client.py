"""The `propdex search` client of a running service (PROPDEX_SERVER_URL).

Standard library only: a one-shot search through the service must not pay for importing
LanceDB, NumPy or an embedder, which is the point of asking the service.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from propdex.errors import IndexNotFoundError, PropdexError, SearchRequestError, StorageError

TIMEOUT_S = 30.0
# The "error_kind" of the service's 503 for an index folder that does not exist (yet): the
# one 503 a client reports as the missing index it is, not as a storage fault.
NO_INDEX = "no_index"


class ServiceUnavailableError(PropdexError):
    """No service answers at PROPDEX_SERVER_URL (refused, unreachable, timed out)."""


class ServiceRequestError(PropdexError):
    """The service answered with an error (401 token, 422 bad field, 5xx)."""

    def __init__(self, status: int, message: str):
        super().__init__(f"the service answered {status}: {message}")
        self.status = status


class RejectedRequestError(ServiceRequestError, SearchRequestError):
    """The service refused the request itself (401 token, 413 size, 422 a field): what a
    local search raises as SearchRequestError."""


class ServiceIndexError(ServiceRequestError, StorageError):
    """The service cannot read its index now (503: missing, unreadable, its embedder down):
    what a local search raises as a StorageError."""


class ServiceIndexNotFoundError(ServiceRequestError, IndexNotFoundError):
    """The service has no index at its database path (503 with error_kind "no_index"): what
    a local search raises as IndexNotFoundError, so both exit 2 from `propdex search`."""


def service_error(status: int, message: str, kind: str | None = None) -> ServiceRequestError:
    """The error a search through the service raises for an answer with ``status`` and the
    body's ``error_kind``."""
    if status in (401, 403, 413, 422):
        return RejectedRequestError(status, message)
    if status == 503 and kind == NO_INDEX:
        return ServiceIndexNotFoundError(status, message)
    if status == 503:
        return ServiceIndexError(status, message)
    return ServiceRequestError(status, message)


def search_via_service(url: str, request: dict[str, Any], token: str | None = None,
                       timeout: float = TIMEOUT_S) -> list[dict]:
    """POST ``request`` (the fields of POST /search) to the service at ``url``."""
    body = json.dumps({k: v for k, v in request.items() if v is not None}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    http = urllib.request.Request(url.rstrip("/") + "/search", data=body, headers=headers,
                                  method="POST")
    try:
        with urllib.request.urlopen(http, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise service_error(exc.code, *_error_text_and_kind(exc)) from None
    except (urllib.error.URLError, ConnectionError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ServiceUnavailableError(f"no propdex service at {url}: {reason}") from None


def _error_text_and_kind(exc: urllib.error.HTTPError) -> tuple[str, str | None]:
    try:
        payload = json.loads(exc.read())
    except (ValueError, OSError):
        return exc.reason, None
    if not isinstance(payload, dict):
        return exc.reason, None
    return str(payload.get("error") or payload.get("detail") or exc.reason), payload.get("error_kind")
