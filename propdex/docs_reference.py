"""The docs site's reference pages, written from the code at build time.

The CLI page comes from the argparse parser, the configuration page from the Settings
fields, the tables page from the store schema and its column descriptions, and the HTTP page
from the service's OpenAPI description. docs/hooks.py calls these while `mkdocs build` runs,
so the pages cannot drift from the code; a flag, setting or column without a description
raises UndocumentedError, which fails the build (and tests/test_docs_reference.py).
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import types
from collections.abc import Iterator
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from propdex.settings import Settings
from propdex.store.column_descriptions import COLUMN_DESCRIPTIONS
from propdex.store.schema import PRIMARY_KEYS, TABLES, VECTOR, schema_for

# Any dimension builds the schemas; the page names the vector's length in words.
_SCHEMA_DIM = 384


class UndocumentedError(ValueError):
    """Flags, settings or columns have no description; the message lists each one."""

    def __init__(self, missing: list[str]) -> None:
        super().__init__("without a description:\n  " + "\n  ".join(missing))
        self.missing = missing


def _cell(text: object) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _code(text: object) -> str:
    return f"`{text}`" if "`" not in str(text) else f"`` {text} ``"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# CLI -----------------------------------------------------------------------------------------

def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str | None, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name), sub


def _arguments(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            yield action


def _argument_name(action: argparse.Action) -> str:
    if action.option_strings:
        metavar = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
        return ", ".join(action.option_strings) + metavar
    return str(action.metavar or action.dest)


def _argument_values(action: argparse.Action) -> str:
    if action.choices is not None and not isinstance(action.choices, range):
        return ", ".join(_code(c) for c in action.choices)
    if action.default not in (None, False, argparse.SUPPRESS) and action.nargs != 0:
        default = " ".join(map(str, action.default)) if isinstance(action.default, list) else action.default
        return f"default {_code(default)}"
    return ""


def undocumented_flags(parser: argparse.ArgumentParser) -> list[str]:
    return [f"propdex {name} {_argument_name(action)}"
            for name, _, sub in _subcommands(parser)
            for action in _arguments(sub) if not action.help]


def cli_markdown(parser: argparse.ArgumentParser) -> str:
    missing = undocumented_flags(parser)
    if missing:
        raise UndocumentedError(missing)
    parts = ["# CLI reference", "",
             "Generated from propdex's argparse parser when the site is built. "
             "`propdex COMMAND --help` prints the same.", ""]
    if parser.description:
        parts += [parser.description, ""]
    if parser.epilog:  # `propdex --help`'s examples and exit codes, as it prints them
        parts += ["```text", parser.epilog.rstrip(), "```", ""]
    for name, help_text, sub in _subcommands(parser):
        usage = " ".join(sub.format_usage().split())  # one line, without argparse's wrapping
        parts += [f"## propdex {name}", "", f"{help_text[:1].upper()}{help_text[1:]}.", ""]
        if sub.description:  # what --help prints above the arguments
            parts += [sub.description, ""]
        parts += ["```", usage.removeprefix("usage: "), "```", ""]
        rows = [[_code(_argument_name(a)), a.help % vars(a) if "%(" in a.help else a.help,
                 _argument_values(a)] for a in _arguments(sub)]
        parts += [_table(["argument", "meaning", "values"], rows), ""]
    return "\n".join(parts)


# Settings ------------------------------------------------------------------------------------

def _type_name(annotation: Any) -> str:
    origin = get_origin(annotation)
    if origin is Literal:
        return " | ".join(_code(v) for v in get_args(annotation))
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(a) for a in get_args(annotation) if a is not type(None))
    if annotation is SecretStr:
        return "secret"
    if origin in (list, dict):
        return f"JSON {origin.__name__}" if origin is dict else "list (JSON or comma-separated)"
    return getattr(annotation, "__name__", str(annotation))


_BOUNDS = {annotated_types.Ge: (">=", "ge"), annotated_types.Gt: (">", "gt"),
           annotated_types.Le: ("<=", "le"), annotated_types.Lt: ("<", "lt")}


def _bounds(field: FieldInfo) -> str:
    found = []
    for item in field.metadata:
        for kind, (sign, attribute) in _BOUNDS.items():
            if isinstance(item, kind):
                found.append(f"{sign} {getattr(item, attribute)}")
    return ", ".join(found)


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return _code(str(value).lower())
    if isinstance(value, list | dict):
        return _code(json.dumps(value))
    return _code(value)


_FIELD_LINE = re.compile(r"^    (\w+): ")
_HEADING_LINE = re.compile(r"^    # (.+)$")


def settings_groups() -> dict[str, str]:
    """Each field's group: the one-line comment above its block in the Settings class
    (a comment after a blank line, not followed by another comment line)."""
    lines = inspect.getsource(Settings).splitlines()
    groups, current = {}, "General"
    for number, line in enumerate(lines):
        heading = _HEADING_LINE.match(line)
        following = lines[number + 1] if number + 1 < len(lines) else ""
        if heading and not lines[number - 1].strip() and not _HEADING_LINE.match(following):
            current = heading.group(1).split(":")[0].strip()
        field = _FIELD_LINE.match(line)
        if field and field.group(1) in Settings.model_fields:
            groups[field.group(1)] = current
    return groups


def undocumented_settings(settings: type[Settings] = Settings) -> list[str]:
    prefix = settings.model_config.get("env_prefix", "")
    return [f"{prefix}{name.upper()}" for name, field in settings.model_fields.items()
            if not field.description]


def settings_markdown() -> str:
    missing = undocumented_settings()
    if missing:
        raise UndocumentedError(missing)
    prefix = Settings.model_config.get("env_prefix", "")
    parts = ["# Configuration reference", "",
             "Generated from `propdex.settings.Settings` when the site is built. Every setting "
             f"reads from an environment variable `{prefix}NAME`; list and dict values are "
             "JSON (lists also comma-separated), booleans `true`/`false`. "
             "Command-line flags and flow parameters override them for one run.", ""]
    by_group: dict[str, list[list[str]]] = {}
    groups = settings_groups()
    for name, field in Settings.model_fields.items():
        kind = _type_name(field.annotation)
        bounds = _bounds(field)
        by_group.setdefault(groups.get(name, "General"), []).append([
            _code(f"{prefix}{name.upper()}"), kind + (f" ({bounds})" if bounds else ""),
            _default(field), field.description])
    for group, rows in by_group.items():
        parts += [f"## {group}", "", _table(["variable", "type", "default", "meaning"], rows), ""]
    return "\n".join(parts)


# Tables --------------------------------------------------------------------------------------

def undocumented_columns(
        descriptions: dict[str, dict[str, str]] = COLUMN_DESCRIPTIONS) -> list[str]:
    missing = []
    for table in TABLES:
        names = schema_for(table, _SCHEMA_DIM).names
        described = descriptions.get(table, {})
        missing += [f"{table}.{n}" for n in names if not described.get(n)]
        missing += [f"{table}.{n} (described, but not in the schema)"
                    for n in described if n not in names]
    return missing


def _arrow_type(field) -> str:
    if field.name == VECTOR:
        return "float32 x the embedder's dimension"
    return str(field.type).replace("[us, tz=UTC]", " (UTC, us)")


def tables_markdown() -> str:
    missing = undocumented_columns()
    if missing:
        raise UndocumentedError(missing)
    parts = ["# Tables and columns", "",
             "Generated from the store schema (`propdex.store.schema`) and its column "
             "descriptions (`propdex.store.column_descriptions`) when the site is built. Table "
             "and column names are part of propdex's interface; see "
             "[Lineage and the tables](../concepts/lineage.md) for how rows relate.", ""]
    for table in TABLES:
        rows = []
        for field in schema_for(table, _SCHEMA_DIM):
            notes = ["primary key"] if PRIMARY_KEYS[table] == field.name else []
            if not field.nullable and not notes:
                notes.append("not null")
            rows.append([_code(field.name), _arrow_type(field), ", ".join(notes),
                         COLUMN_DESCRIPTIONS[table][field.name]])
        parts += [f"## {table}", "", _table(["column", "type", "", "meaning"], rows), ""]
    return "\n".join(parts)


# HTTP API ------------------------------------------------------------------------------------

def _request_fields(openapi: dict[str, Any], operation: dict[str, Any]) -> list[list[str]]:
    schema = (operation.get("requestBody", {}).get("content", {})
              .get("application/json", {}).get("schema", {}))
    reference = schema.get("$ref", "")
    if not reference:
        return []
    body = openapi["components"]["schemas"][reference.rsplit("/", 1)[-1]]
    required = set(body.get("required", []))
    return [[_code(name), "required" if name in required
             else "-" if spec.get("default") is None else _code(json.dumps(spec["default"])),
             spec.get("description", "")] for name, spec in body.get("properties", {}).items()]


def http_markdown(openapi: dict[str, Any]) -> str:
    """The service's endpoints and request fields from its OpenAPI description (what /docs
    renders)."""
    rows, bodies = [], []
    for path, operations in openapi.get("paths", {}).items():
        for method, operation in operations.items():
            endpoint = f"{method.upper()} {path}"
            rows.append([_code(endpoint), operation.get("summary", "")])
            fields = _request_fields(openapi, operation)
            if fields:
                bodies += [f"## {endpoint}", "", "The JSON body's fields:", "",
                           _table(["field", "default", "meaning"], fields), ""]
    return "\n".join([
        "# HTTP API", "",
        "Generated from the service's OpenAPI description when the site is built. A running "
        "`propdex serve` publishes the full description, with every field and an interactive "
        "form, at [`/docs`](http://127.0.0.1:8765/docs) and as JSON at "
        "[`/openapi.json`](http://127.0.0.1:8765/openapi.json) (with `PROPDEX_API_TOKEN` set, "
        "they need the bearer token too). How to run and secure the service: "
        "[Serving](../how-to/serving.md).", "",
        _table(["endpoint", "what it does"], rows), "", *bodies,
    ])


def undocumented() -> list[str]:
    """Every flag, setting and column without a description (empty when the docs can build)."""
    from propdex.cli import build_parser

    return undocumented_flags(build_parser()) + undocumented_settings() + undocumented_columns()
