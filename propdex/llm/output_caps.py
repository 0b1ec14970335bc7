"""Output caps: the most tokens each LLM request may answer with, sent as ``max_tokens``.

Without a cap a server generates until its own limit: a local llama.cpp server until its
context is full (minutes per request at a few tokens per second), a paid API up to the
model's output limit, billed. The cap is derived from what the step can legitimately
return: the longest JSON its bounded answer schema allows (propositions: max_propositions
items of max_proposition_chars, more for a table; grading: one grade per proposition sent;
title and summary: their length limits), in tokens, with room for every property and item
to be pretty-printed. ``llm_max_tokens`` overrides it per step (0 = no cap);
``llm_output_caps`` off sends none. An answer that reaches the cap comes back with
finish_reason=length and is reported as cut off.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from pydantic import BaseModel

from propdex.llm.schemas import strict_json_schema
from propdex.settings import Settings

# BPE tokenisers average about 4 characters per token on English prose; JSON punctuation,
# digits and other languages run denser, so caps assume 3: a legitimate answer never hits it.
CHARS_PER_TOKEN_FLOOR = 3
# Whitespace and the line breaks a model may put around and inside its JSON.
SLACK_TOKENS = 32
# Tokens a property or list item of an answer may take beyond its characters at the floor
# above: the line break and indentation before it and the space after its colon when the
# model pretty-prints (many local models do), and tokenisers splitting quotes, colons,
# commas and each digit. Structure-heavy answers need them: 25 grades pretty-printed take
# 1,352 Gemma tokens where their compact characters at 3 a token make 763.
ELEMENT_TOKENS = 5
# An integer without a stated maximum (a line number) is assumed to have at most this many digits.
INTEGER_DIGITS = 6


class UnboundedAnswerError(ValueError):
    """An answer schema has a string or list without a maximum, so no cap can be derived."""


def tokens_for_chars(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN_FLOOR) + SLACK_TOKENS


def longest_json(schema: dict[str, Any]) -> int:
    """The most characters a JSON value valid under ``schema`` (a bounded strict schema
    from ``strict_json_schema(..., bounds=True)``) takes when written compactly."""
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        # {"name": value, ...}: quotes, colon, space and comma around every property.
        return 2 + sum(len(name) + 6 + longest_json(value) for name, value in properties.items())
    if kind == "array":
        if "maxItems" not in schema:
            raise UnboundedAnswerError("a list without maxItems")
        return 2 + schema["maxItems"] * (longest_json(schema.get("items", {})) + 2)
    if kind == "string":
        if "maxLength" not in schema:
            raise UnboundedAnswerError("a string without maxLength")
        return schema["maxLength"] + 2
    if kind == "integer":
        if "maximum" in schema:
            return max(len(str(schema["maximum"])), len(str(schema.get("minimum", 0))))
        return INTEGER_DIGITS
    if kind == "number":
        return 24
    if kind == "boolean":
        return 5
    if "anyOf" in schema:
        return max(longest_json(option) for option in schema["anyOf"])
    raise UnboundedAnswerError(f"an unsupported schema node {schema!r}")


def most_elements(schema: dict[str, Any]) -> int:
    """The most properties and list items, at every depth, of a JSON value valid under
    ``schema`` (bounded as for ``longest_json``)."""
    kind = schema.get("type")
    if kind == "object":
        return sum(1 + most_elements(value) for value in schema.get("properties", {}).values())
    if kind == "array":
        return schema.get("maxItems", 0) * (1 + most_elements(schema.get("items", {})))
    if "anyOf" in schema:
        return max(most_elements(option) for option in schema["anyOf"])
    return 0


@cache
def _derived_json_cap(schema_model: type[BaseModel], context: tuple[tuple[str, Any], ...]) -> int:
    schema = strict_json_schema(schema_model, dict(context), bounds=True)
    return tokens_for_chars(longest_json(schema)) + ELEMENT_TOKENS * most_elements(schema)


def derived_json_cap(schema_model: type[BaseModel], context: dict[str, Any] | None) -> int:
    """Tokens of the longest answer ``schema_model`` allows for this call (cached: building
    the schema on every request would cost a little CPU each time)."""
    return _derived_json_cap(schema_model, tuple(sorted((context or {}).items())))


def copy_cap(chars: int) -> int:
    """Tokens of a verbatim copy of ``chars`` characters plus the inserted split markers (the
    llm chunker): a marker at most every 50 characters, each a token or two."""
    return tokens_for_chars(chars) + 2 * math.ceil(chars / 50)


def output_cap(step: str, settings: Settings, derived: int) -> int | None:
    """The cap to send for ``step``: the override, else ``derived``; None sends no cap."""
    if step in settings.llm_max_tokens:
        return settings.llm_max_tokens[step] or None
    return derived if settings.llm_output_caps else None
