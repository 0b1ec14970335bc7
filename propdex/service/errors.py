"""The body of a 422: one sentence naming the fields, and the validation errors themselves."""

from __future__ import annotations

import json
from typing import Any

from propdex.service.bounds import error_sentence


def validation_body(errors: list[dict[str, Any]]) -> dict[str, Any]:
    """{"error": "k: Input should be less than or equal to 100; ...", "detail": errors}, from
    FastAPI's or pydantic's errors (locations starting with "body" or "path")."""
    # Errors hold what failed as it came: an exception object under ctx["error"] for custom
    # validators, the raw bytes of a form body as "input". Both are said as text.
    detail = json.loads(json.dumps(errors, default=str))
    return {"error": error_sentence(errors), "detail": detail}
