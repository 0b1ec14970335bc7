"""How many propositions a chunk may give: ``max_propositions``, or one per table cell.

The propositions prompt asks for one proposition per fact of a table row or cell, so a
table part states as many facts as it has filled cells beside its row labels: a chunk of
800 characters holds 26 rows of a three-column table, 52 facts. Bounded by
``max_propositions`` (25 by default), its prompt, its answer schema, its output cap and
the parsing of its answer would all drop the rows past the 25th, from every model. So a
chunk holding a table may give one proposition per such cell, up to
``max_table_propositions``: that bound keeps the output cap (the longest valid answer,
see ``propdex.llm.output_caps``) within the output limits hosted models accept (60 items of
600 characters: 12,425 tokens, under the 16,384 of OpenAI's GPT-4o models).
"""

from __future__ import annotations

from propdex.chunking.tables import find_tables, split_cells
from propdex.settings import Settings


def table_facts(text: str) -> int:
    """The filled cells of the body rows of every table in ``text``, first column aside
    (it names the row; a proposition states the other cells of it)."""
    return sum(
        sum(1 for cell in split_cells(text[start:end])[1:] if cell)
        for table in find_tables(text)
        for start, end in table.rows
    )


def most_propositions(text: str, settings: Settings) -> int:
    """The most propositions accepted from a chunk whose prompt text is ``text``."""
    facts = min(table_facts(text), settings.max_table_propositions)
    return max(settings.max_propositions, facts)
