"""Structured-output negotiation: which JSON form a server accepts, found once per run.

Servers differ. OpenAI takes ``json_schema`` (strict); llama-cpp-python's server answers it
with HTTP 500 and wants ``{"type": "json_object", "schema": ...}`` instead, which its
grammar follows, value bounds (maxItems, maxLength) included; others know only
``json_object`` or nothing. The first request to a server and model tries the forms from
the most to the least constrained, one attempt each, and the first one accepted is used for
the rest of the run (the process); the fallback is logged once and named in the run report.
Forms with bounds come first: a grammar that honours them cannot ramble past them.

The same first request settles the field of the output cap: a server refusing ``max_tokens``
for ``max_completion_tokens`` (OpenAI's newer models) or the reverse is asked again with the
other one.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel

from propdex.llm.context_window import is_context_overflow
from propdex.llm.schemas import strict_json_schema

log = logging.getLogger("propdex.llm")

T = TypeVar("T")

# From the most to the least constrained.
JSON_SCHEMA_BOUNDED = "json_schema+bounds"
JSON_SCHEMA = "json_schema"
JSON_OBJECT_SCHEMA = "json_object+schema"
JSON_OBJECT = "json_object"
PROMPTED = "prompted"
MODES = (JSON_SCHEMA_BOUNDED, JSON_SCHEMA, JSON_OBJECT_SCHEMA, JSON_OBJECT, PROMPTED)
# Forms where the schema does not reach the model: the prompt must describe the answer.
DESCRIBED_MODES = (JSON_OBJECT_SCHEMA, JSON_OBJECT, PROMPTED)
# What a server answers a request form it does not accept with: 400/422 from a validating
# server, 500 from llama-cpp-python (its request model raises). It counts as a refusal of
# the form only when the message names the field: a bare 500 is a server fault (retried)
# and a bare 400 a bad request (the run stops), as for any other request.
REFUSAL_STATUSES = frozenset({400, 422, 500})
CAP_FIELDS = ("max_tokens", "max_completion_tokens")
_FORM_FIELDS = re.compile(r"response_format|json_schema|json_object|schema|grammar|max_(completion_)?tokens",
                          re.IGNORECASE)
# Longest maxLength sent. llama.cpp compiles a string bound into a grammar repetition and
# refuses long ones ("repetition exceeds sane defaults"): measured with llama-cpp-python
# 0.3.36, 600 compiles and 1200 does not, and its server then crashes on the request. A
# longer bound (the summary's 1200) is left to the output cap and pydantic instead.
GRAMMAR_MAX_LENGTH = 600


def is_refusal(status: int, message: str, statuses: frozenset[int]) -> bool:
    # vLLM's context-length refusal names max_tokens ("'max_tokens' or 'max_completion_tokens'
    # is too large"): that request is too long, not of a form the server refuses.
    return (status in statuses and _FORM_FIELDS.search(message) is not None
            and not is_context_overflow(status, message))


class Refused(Exception):
    """The server refused a request form during negotiation (status and its message)."""

    def __init__(self, status: int, message: str, error: BaseException):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.error = error

    def names(self, cap_field: str) -> bool:
        """Whether the refusal is about the cap's field rather than the answer form."""
        text = self.message.lower()
        return cap_field in text and ("unsupported" in text or "not supported" in text
                                      or other_cap_field(cap_field) in text)


def other_cap_field(name: str) -> str:
    return CAP_FIELDS[1 - CAP_FIELDS.index(name)]


def default_cap_field(setting: str, base_url: str) -> str:
    """``max_completion_tokens`` for OpenAI's own API (its newer models refuse max_tokens),
    ``max_tokens`` elsewhere (llama-cpp-python ignores the other one silently)."""
    if setting != "auto":
        return setting
    host = urlsplit(base_url).hostname or ""
    return "max_completion_tokens" if host.endswith("api.openai.com") else "max_tokens"


def without_long_lengths(node: Any) -> Any:
    """``node`` without maxLength bounds over GRAMMAR_MAX_LENGTH (modified in place)."""
    if isinstance(node, dict):
        if isinstance(node.get("maxLength"), int) and node["maxLength"] > GRAMMAR_MAX_LENGTH:
            del node["maxLength"]
        for value in node.values():
            without_long_lengths(value)
    elif isinstance(node, list):
        for value in node:
            without_long_lengths(value)
    return node


def sent_schema(schema_model: type[BaseModel], context: dict[str, Any], *, bounds: bool) -> dict[str, Any]:
    schema = strict_json_schema(schema_model, context, bounds=bounds)
    return without_long_lengths(schema) if bounds else schema


@cache
def _response_format(mode: str, step: str, schema_model: type[BaseModel],
                     context: tuple[tuple[str, Any], ...]) -> dict[str, Any] | None:
    bounded = mode in (JSON_SCHEMA_BOUNDED, JSON_OBJECT_SCHEMA)
    if mode in (JSON_SCHEMA_BOUNDED, JSON_SCHEMA):
        schema = sent_schema(schema_model, dict(context), bounds=bounded)
        return {"type": "json_schema", "json_schema": {"name": step, "schema": schema, "strict": True}}
    if mode == JSON_OBJECT_SCHEMA:
        return {"type": "json_object", "schema": sent_schema(schema_model, dict(context), bounds=True)}
    if mode == JSON_OBJECT:
        return {"type": "json_object"}
    return None


def response_format(mode: str, step: str, schema_model: type[BaseModel],
                    context: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ``response_format`` request field of ``mode`` (None: send none). Cached, as
    building a schema costs a little CPU on every call: treat the result as read-only."""
    frozen = tuple(sorted((key, value) for key, value in (context or {}).items()
                          if isinstance(value, (int, str, float, bool, type(None)))))
    return _response_format(mode, step, schema_model, frozen)


def schema_description(schema_model: type[BaseModel]) -> str:
    """The answer's shape for a prompt, for callers that gave none of their own."""
    schema = json.dumps(strict_json_schema(schema_model), separators=(",", ":"))
    return f"Reply with JSON only, matching this JSON schema: {schema}"


def with_format(messages: list[dict[str, str]], description: str) -> list[dict[str, str]]:
    """``messages`` with ``description`` appended to the system message (one is added first
    when there is none)."""
    if not description:
        return messages
    out = [dict(m) for m in messages]
    for message in out:
        if message.get("role") == "system":
            message["content"] = f"{message['content']}\n{description}"
            return out
    return [{"role": "system", "content": description}, *out]


@dataclass
class Negotiation:
    """The structured-output form and cap field one server and model accept; thread-safe."""

    server: str  # for messages: the display URL
    model: str
    modes: tuple[str, ...]
    cap_field: str
    mode: str | None = None  # settled by the first accepted request
    refusals: list[str] = field(default_factory=list)  # "json_schema: HTTP 500: ..."
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def note(self) -> str | None:
        """What the run report says: the form used, and what was refused before it."""
        if self.mode is None:
            return None
        text = f"{self.model}: {self.mode}"
        if self.refusals:
            text += " (refused: " + "; ".join(self.refusals) + ")"
        return text

    def run(self, attempt: Callable[[str, str, frozenset[int]], T]) -> T:
        """``attempt(mode, cap_field, refusal_statuses)`` in the settled form, or the forms
        in turn until one is accepted. ``attempt`` raises ``Refused`` for a status in
        ``refusal_statuses``; the last form is given only 400/422 (a 500 there is retried as
        any other), and a refusal of it propagates to the caller."""
        settled_mode = self.mode
        if settled_mode is not None:
            try:
                return attempt(settled_mode, self.cap_field, self._refusable(settled_mode))
            except Refused as refusal:
                if settled_mode == self.modes[-1]:
                    raise  # nothing left to fall back to: the request itself is refused
                # The server behind the URL changed (restarted with other flags, or another
                # server took the port): what it accepted before is refused now.
                self._reopen(settled_mode, refusal)
                return self.run(attempt)
        with self._lock:  # the first request negotiates; the others wait for its outcome
            if self.mode is not None:
                settled = True
            else:
                settled = False
                result = self._negotiate(attempt)
        return attempt(self.mode, self.cap_field, frozenset()) if settled else result

    def _refusable(self, mode: str) -> frozenset[int]:
        """Statuses that count as a refusal of ``mode``: none of the last form's 500s."""
        return REFUSAL_STATUSES - {500} if mode == self.modes[-1] else REFUSAL_STATUSES

    def _reopen(self, mode: str, refusal: Refused) -> None:
        """Negotiate again from the form after ``mode``, which the server now refuses."""
        with self._lock:
            if self.mode != mode:
                return  # another thread re-opened it already
            log.warning("%s (model %s) now refuses %s; negotiating the request form again",
                        self.server, self.model, mode)
            self.refusals.append(f"{mode}: {' '.join(str(refusal).split())}"[:160])
            self.modes = self.modes[self.modes.index(mode) + 1:]
            self.mode = None

    def _negotiate(self, attempt: Callable[[str, str, frozenset[int]], T]) -> T:
        index, switched_field = 0, False
        while True:
            mode = self.modes[index]
            last = index == len(self.modes) - 1
            try:
                result = attempt(mode, self.cap_field, REFUSAL_STATUSES - {500} if last else REFUSAL_STATUSES)
            except Refused as refusal:
                if not switched_field and refusal.names(self.cap_field):
                    log.warning("%s refused %s; sending the output cap as %s", self.server,
                                self.cap_field, other_cap_field(self.cap_field))
                    self.cap_field, switched_field = other_cap_field(self.cap_field), True
                    continue
                if last:
                    raise
                # One line, short: it goes into the log and the run report.
                self.refusals.append(f"{mode}: {' '.join(str(refusal).split())}"[:160])
                index += 1
                continue
            self.mode = mode
            if self.refusals:
                log.warning("%s (model %s) refused %s; using %s structured output for the rest "
                            "of the run", self.server, self.model,
                            ", ".join(r.split(":")[0] for r in self.refusals), mode)
            return result


_registry: dict[tuple[str, str, str, str], Negotiation] = {}
_registry_lock = threading.Lock()


def negotiation_for(base_url: str, server: str, model: str, first_mode: str, cap_field: str) -> Negotiation:
    """The one negotiation of this process for a server, model and starting form."""
    key = (base_url.rstrip("/"), model, first_mode, cap_field)
    with _registry_lock:
        found = _registry.get(key)
        if found is None:
            found = _registry[key] = Negotiation(server, model, MODES[MODES.index(first_mode):], cap_field)
        return found


def forget_negotiations() -> None:
    """Forget every settled negotiation of this process (the next request negotiates anew)."""
    with _registry_lock:
        _registry.clear()


def negotiated_notes(base_url: str) -> list[str]:
    """What was settled for every model of a server in this process, for the run report."""
    with _registry_lock:
        found = [n for key, n in _registry.items() if key[0] == base_url.rstrip("/")]
    return sorted(note for n in found if (note := n.note()) is not None)
