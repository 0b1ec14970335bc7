"""Pydantic models of what each LLM step must answer, and the JSON schemas sent for them.

Bounds that depend on the call (how many propositions were graded, the settings' limits on
propositions) come in through pydantic's validation context, so one model serves every call:
``Model.model_validate(data, context={...})``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from propdex.checks.context import REPAIR_HINTS, summary_problem, title_problem, wording_problem

# A grade's range (1..10) is asked of the server in the schema's bounds but not enforced
# here: a grade out of range is the grader's mistake, counted and rejected by
# propdex.pipeline.grading, not a malformed answer to repair.
Score = int
SCORE_RANGE = (1, 10)
CHECK_FAILED = "check_failed"  # the pydantic error type of an answer the checks rejected

_WHITESPACE = re.compile(r"\s+")


def _one_line(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def check_failed(reason: str) -> PydanticCustomError:
    """The validation error of an answer the checks rejected (``reason`` in its context)."""
    return PydanticCustomError(
        CHECK_FAILED, "rejected by the checks: {reason} ({hint})",
        {"reason": reason, "hint": REPAIR_HINTS[reason]},
    )


def checked(value: str, info: ValidationInfo, problem_of: Callable[..., str | None],
            keys: tuple[str, ...]) -> str:
    """``value`` when ``problem_of`` (a check of propdex.checks.context, given the context's
    ``keys``) finds nothing; without a ``document`` in the context, only the checks that need
    none (letters, placeholders)."""
    context = info.context or {}
    if "document" in context:
        problem = problem_of(value, **{key: context[key] for key in keys if key in context})
    else:
        problem = wording_problem(value)
    if problem:
        raise check_failed(problem)
    return value


class TitleAnswer(BaseModel):
    """Context keys (both optional; without ``document`` nothing is checked): ``document``,
    the text the title was asked for, and ``instructions``, the prompt's own words."""

    model_config = ConfigDict(extra="forbid")
    # No min_length: an empty title is the checks' to reject ("no letters"), with the reason.
    title: Annotated[str, Field(max_length=300)]

    @field_validator("title", mode="before")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        return _one_line(value).strip("\"'") if isinstance(value, str) else value

    @field_validator("title")
    @classmethod
    def _checked(cls, value: str, info: ValidationInfo) -> str:
        return checked(value, info, title_problem, ("document", "instructions"))


class SummaryAnswer(BaseModel):
    """Context keys (all optional; without ``document`` nothing is checked): ``document``,
    ``title`` and ``instructions``, as for ``TitleAnswer``."""

    model_config = ConfigDict(extra="forbid")
    summary: Annotated[str, Field(max_length=1200)]

    @field_validator("summary", mode="before")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        return _one_line(value) if isinstance(value, str) else value

    @field_validator("summary")
    @classmethod
    def _checked(cls, value: str, info: ValidationInfo) -> str:
        return checked(value, info, summary_problem, ("document", "title", "instructions"))


class PropositionsAnswer(BaseModel):
    """Context keys: ``max_propositions`` and ``max_chars`` (both optional).

    The bounds are enforced after parsing and never make an answer invalid: items are
    stripped, empty ones and ones longer than ``max_chars`` are dropped (a cut proposition
    would no longer state its fact), and the list is cut to ``max_propositions``.
    """

    model_config = ConfigDict(extra="forbid")
    propositions: list[str]

    @field_validator("propositions")
    @classmethod
    def _bound(cls, items: list[str], info: ValidationInfo) -> list[str]:
        limits = info.context or {}
        max_chars = limits.get("max_chars")
        max_count = limits.get("max_propositions")
        kept = []
        for item in items:
            text = _one_line(item)
            if not text or (max_chars is not None and len(text) > max_chars):
                continue
            if text not in kept:
                kept.append(text)
        return kept[:max_count] if max_count is not None else kept

    @classmethod
    def schema_bounds(cls, context: dict[str, Any]) -> dict[str, Any]:
        bounds: dict[str, Any] = {}
        if context.get("max_propositions") is not None:
            bounds["maxItems"] = context["max_propositions"]
        if context.get("max_chars") is not None:
            bounds["items"] = {"maxLength": context["max_chars"]}
        return {"propositions": bounds}


class Grade(BaseModel):
    model_config = ConfigDict(extra="forbid")
    index: int  # range checked by GradesAnswer against the number of propositions
    accuracy: Score
    clarity: Score
    completeness: Score
    conciseness: Score


class GradesAnswer(BaseModel):
    """Context key ``count``: how many propositions were sent; each index 0..count-1 must be
    graded exactly once, otherwise the answer is invalid (and gets one repair attempt)."""

    model_config = ConfigDict(extra="forbid")
    grades: list[Grade]

    @model_validator(mode="after")
    def _every_index_once(self, info: ValidationInfo) -> GradesAnswer:
        count = (info.context or {}).get("count")
        if count is None:
            return self
        seen = [grade.index for grade in self.grades]
        duplicates = sorted({i for i in seen if seen.count(i) > 1})
        missing = sorted(set(range(count)) - set(seen))
        unknown = sorted(set(seen) - set(range(count)))
        problems = []
        if missing:
            problems.append(f"missing indices {missing}")
        if duplicates:
            problems.append(f"indices graded more than once {duplicates}")
        if unknown:
            problems.append(f"indices out of range {unknown} (valid: 0..{count - 1})")
        if problems:
            raise ValueError("grade every proposition exactly once: " + "; ".join(problems))
        return self

    def in_order(self) -> list[Grade]:
        return sorted(self.grades, key=lambda grade: grade.index)

    @classmethod
    def schema_bounds(cls, context: dict[str, Any]) -> dict[str, Any]:
        count = context.get("count")
        if count is None:
            return {}
        index = {"minimum": 0, "maximum": max(0, count - 1)}
        low, high = SCORE_RANGE
        scores = {name: {"minimum": low, "maximum": high}
                  for name in ("accuracy", "clarity", "completeness", "conciseness")}
        return {"grades": {"minItems": count, "maxItems": count,
                           "items": {"properties": {"index": index, **scores}}}}


# JSON-schema keywords that bound values rather than shape them.
_VALUE_BOUNDS = (
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "pattern", "format", "minItems", "maxItems",
)


def inline_references(node: Any, definitions: dict[str, Any]) -> Any:
    """A copy of ``node`` with every ``{"$ref": "#/$defs/Name"}`` replaced by its definition."""
    if isinstance(node, dict):
        reference = node.get("$ref")
        if isinstance(reference, str) and reference.startswith("#/$defs/"):
            return inline_references(definitions[reference.removeprefix("#/$defs/")], definitions)
        return {key: inline_references(value, definitions) for key, value in node.items()}
    if isinstance(node, list):
        return [inline_references(value, definitions) for value in node]
    return node


def merge_bounds(schema: dict[str, Any], bounds: dict[str, Any]) -> None:
    """Add ``bounds`` (a partial schema: keywords, ``items``, ``properties``) into ``schema``."""
    for key, value in bounds.items():
        if isinstance(value, dict) and isinstance(schema.get(key), dict):
            merge_bounds(schema[key], value)
        else:
            schema[key] = value


def call_bounds(model: type[BaseModel], context: dict[str, Any] | None) -> dict[str, Any]:
    """Bounds that depend on the call (the validation context), per top-level property."""
    hook = getattr(model, "schema_bounds", None)
    return hook(context or {}) if hook is not None else {}


def strict_json_schema(
    model: type[BaseModel], context: dict[str, Any] | None = None, *, bounds: bool = False
) -> dict[str, Any]:
    """The model's JSON schema in the shape OpenAI's strict structured output accepts.

    Strict mode wants every object closed (``additionalProperties: false``) with every
    property required. Without ``bounds`` the schema carries structure only: value bounds
    (score 1..10, string lengths, list lengths) are left out because several
    OpenAI-compatible servers reject those keywords, and pydantic checks them on every
    answer anyway. With ``bounds`` they stay, with the call's own (``context``: at most
    max_propositions items of max_chars characters, exactly ``count`` grades): servers whose
    grammar honours them (llama.cpp) then cannot ramble past them. Titles and descriptions
    (the docstrings above, written for developers) are dropped: the prompt says what each
    field means.
    """
    schema = model.model_json_schema()
    # Nested models are written out in place of their $ref: shorter for a single use, and
    # some grammar engines handle references poorly. (No answer model is recursive.)
    definitions = schema.pop("$defs", {})
    schema = inline_references(schema, definitions)

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            # A "title" holding a string is a label; one holding a dict is a property named
            # title (TitleAnswer) and must stay.
            for label in ("title", "description"):
                if isinstance(node.get(label), str):
                    node.pop(label)
            for keyword in () if bounds else _VALUE_BOUNDS:
                if not isinstance(node.get(keyword), dict):  # not a property of that name
                    node.pop(keyword, None)
            if node.get("type") == "object" and "properties" in node:
                node["additionalProperties"] = False
                node["required"] = list(node["properties"])
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(schema)
    if bounds:
        for name, extra in call_bounds(model, context).items():
            merge_bounds(schema["properties"][name], extra)
    return schema


class SectionSpan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str
    start_line: int
    end_line: int

    @field_validator("title", mode="before")
    @classmethod
    def _clean(cls, value: Any) -> Any:
        return _one_line(value).strip("\"'") if isinstance(value, str) else value


# Longest section title the schema asks for (bounds the output cap; not validated).
MAX_SECTION_TITLE_CHARS = 200


class SectionsAnswer(BaseModel):
    """Semantic sections by line number. Only the shape is checked here: order, overlaps,
    gaps and tiny sections are repaired by ``propdex.sectioning.guards`` (a model that
    returns imperfect sections still says something useful about the document).

    Context keys (schema bounds and output cap only): ``first_line``, ``last_line`` and
    ``max_sections``."""

    model_config = ConfigDict(extra="forbid")
    sections: Annotated[list[SectionSpan], Field(min_length=1)]

    @classmethod
    def schema_bounds(cls, context: dict[str, Any]) -> dict[str, Any]:
        line = {"minimum": context.get("first_line", 0)}
        if context.get("last_line") is not None:
            line["maximum"] = context["last_line"]
        span = {"title": {"maxLength": MAX_SECTION_TITLE_CHARS}, "start_line": line, "end_line": dict(line)}
        bounds: dict[str, Any] = {"items": {"properties": span}}
        if context.get("max_sections") is not None:
            bounds["maxItems"] = context["max_sections"]
        return {"sections": bounds}
