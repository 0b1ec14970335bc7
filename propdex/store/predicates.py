"""The only place LanceDB filter predicates are built from values.

doc_ids, sources and run ids come from file names, which users and strangers choose, so a
value must never be able to end its string literal and change the predicate's meaning.
LanceDB's SQL parser treats backslashes literally and ends a literal only at a single
quote, so doubling single quotes is the complete escape; NUL is rejected outright.
Column names are code constants: they are checked against a plain identifier pattern.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")

# Matches nothing; used for an empty IN list, which the SQL parser rejects.
NOTHING = "false"


def sql_string(value: str) -> str:
    """``value`` as a single-quoted SQL string literal."""
    if not isinstance(value, str):
        raise TypeError(f"predicate values must be str, got {type(value).__name__}")
    if "\x00" in value:
        raise ValueError("a predicate value cannot contain a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates: undecodable bytes of a file name (os.fsdecode's surrogateescape).
        raise ValueError(f"a predicate value must be valid Unicode text: {value!r}") from None
    return "'" + value.replace("'", "''") + "'"


def column(name: str) -> str:
    if not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"not a column name: {name!r}")
    return name


def eq(name: str, value: str) -> str:
    return f"{column(name)} = {sql_string(value)}"


def not_eq(name: str, value: str) -> str:
    return f"{column(name)} != {sql_string(value)}"


def in_list(name: str, values: Iterable[str]) -> str:
    """``name IN (...)`` over distinct values; ``false`` when there are none."""
    literals = [sql_string(v) for v in dict.fromkeys(values)]
    if not literals:
        return NOTHING
    return f"{column(name)} IN ({', '.join(literals)})"


def all_of(*predicates: str) -> str:
    """Conjunction; each operand is parenthesised so an OR inside cannot widen it."""
    parts = [p for p in predicates if p]
    if not parts:
        raise ValueError("all_of needs at least one predicate")
    return " AND ".join(f"({p})" for p in parts)


def any_of(*predicates: str) -> str:
    parts = [p for p in predicates if p]
    if not parts:
        return NOTHING
    return " OR ".join(f"({p})" for p in parts)


def string_array(values: Iterable[str]) -> str:
    """A SQL array literal of string literals: ``['a', 'b']``."""
    return "[" + ", ".join(sql_string(v) for v in values) + "]"


def has_all(name: str, values: list[str]) -> str:
    """The list column ``name`` holds every one of ``values`` (a label-list index answers
    it); ``false`` for no values, so an empty requirement never widens to every row."""
    if not values:
        return NOTHING
    return f"array_has_all({column(name)}, {string_array(values)})"
