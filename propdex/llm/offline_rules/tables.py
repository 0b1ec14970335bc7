"""Offline proposition rules for Markdown tables (part of ``offline-propositions-v4``).

Each body row of a pipe table (``propdex.chunking.tables``) becomes statements naming the
table, the row and the columns: "In Table 2 (The Transformer achieves better BLEU scores than
previous state-of-the-art models), for Transformer (big), BLEU EN-DE is 28.4, BLEU EN-FR is
41.8." The table is named by its caption's "Table N" and the caption's first words (its
subject), or as a table of the document when it has no caption; the row by its first cell
("row N" when that is empty); each column by its header cells, the header rows joined
("BLEU" over "EN-DE"). A header cell or row label that starts in bold is named by its bold
lines only ("**Narrow**<br>_clearly scoped task_" -> "Narrow"). A row whose statement would be longer than ``ROW_STATEMENT_CHARS``
is stated in several propositions, each naming table and row again. Markdown emphasis, line
breaks (<br>), tags and numeric citations ("[18]") are removed from cells; <sup>n</sup>
becomes ^n.
"""

from __future__ import annotations

import re

from propdex.chunking.tables import Table, find_tables, plain_cell, split_cells
from propdex.llm.offline_rules.text import FUNCTION_WORDS

# A row's cells are stated in propositions of about this many characters at most.
ROW_STATEMENT_CHARS = 250
SUBJECT_WORDS = 12  # words of the caption's first sentence that name the table's subject

_CAPTION_LABEL = re.compile(r"[*_#>\s]*(Table\s+[A-Z]?\d+[a-z]?)\s*[:.|—–-]?\s*")
_LEADING_BOLD = re.compile(r"\s*(?:\*\*[^*]+\*\*(?:\s|<br>)*)+")
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)])\.\s")


def cell_name(cell: str) -> str:
    """The name a header cell or row label gives its column or row: the bold lines it starts
    with when it has any ("**Level 1: Emerging**<br>_equal to ..._" -> "Level 1: Emerging"),
    else its whole text."""
    bold = _LEADING_BOLD.match(cell)
    return plain_cell(bold.group()) if bold else plain_cell(cell)


def table_name(text: str, table: Table, title: str) -> str:
    """"Table 2 (its subject)" from the caption (of the table it continues, on a later page);
    else "a table of <title>"."""
    caption_span = table.caption or table.continues
    if caption_span is None:
        return f"a table of {title}" if title else "a table"
    caption = plain_cell(text[slice(*caption_span)].replace("\n", " "))
    label = _CAPTION_LABEL.match(caption)
    if label is None:
        return f"a table of {title}" if title else "a table"
    return f"{label.group(1)} ({subject})" if (subject := caption_subject(caption[label.end():])) \
        else label.group(1)


def caption_subject(caption: str) -> str:
    """The first words of the caption's first sentence, ended before a bracket it would leave
    open and without trailing function words ("... operations for")."""
    first = _SENTENCE_END.split(caption, maxsplit=1)[0].rstrip(" .")
    kept = first.split()[:SUBJECT_WORDS]
    text = " ".join(kept)
    if text.count("(") > text.count(")"):
        kept = text[: text.rfind("(")].split()
    while kept and (kept[-1].lower() in FUNCTION_WORDS or not kept[-1].strip(",;:")):
        kept.pop()
    return " ".join(kept).rstrip(",;:")


def column_names(text: str, table: Table) -> list[str]:
    """Each column's header cells, from every header row, joined."""
    header_lines = [line for line in text[table.start : table.head_end].split("\n")
                    if line.strip() and not set(line.strip()) <= set("|-: ")]
    rows = [[cell_name(c) for c in split_cells(line)] for line in header_lines]
    width = max(len(r) for r in rows)
    return [" ".join(r[j] for r in rows if j < len(r) and r[j]) for j in range(width)]


def row_statements(name: str, label: str, cells: list[tuple[str, str]]) -> list[str]:
    """"In <name>, for <label>, <column> is <value>, ...", cut into several statements when
    one would exceed ``ROW_STATEMENT_CHARS``."""
    # A ";" inside a cell separates list items; in a statement it would read as a clause joint.
    lead = f"In {name}, for {label.replace(';', ',')}, "
    facts = [(f"{column} is {value}" if column else value).replace(";", ",") for column, value in cells]
    groups: list[list[str]] = []
    for fact in facts:
        if groups and len(lead) + len(", ".join([*groups[-1], fact])) <= ROW_STATEMENT_CHARS:
            groups[-1].append(fact)
        else:
            groups.append([fact])
    return [lead + ", ".join(group) + "." for group in groups]


def table_row_propositions(text: str, title: str) -> list[str]:
    """Statements of every body row of every table in ``text``, in order."""
    statements: list[str] = []
    for table in find_tables(text):
        name = table_name(text, table, title)
        columns = column_names(text, table)
        for number, (start, end) in enumerate(table.rows, start=1):
            raw = split_cells(text[start:end])
            cells = [plain_cell(c) for c in raw]
            label = cell_name(raw[0]) or f"row {number}"
            named = [(columns[j] if j < len(columns) else "", value)
                     for j, value in enumerate(cells[1:], start=1) if value]
            if named:
                statements.extend(row_statements(name, label, named))
    return statements


def without_tables(text: str) -> str:
    """``text`` with its tables' rows (not their captions) replaced by a paragraph break."""
    pieces, cursor = [], 0
    for table in find_tables(text):
        pieces.append(text[cursor : table.start])
        pieces.append("\n\n")
        cursor = table.end
    pieces.append(text[cursor:])
    return "".join(pieces)
