"""The docs' generated reference pages: complete, and refused when a description is missing."""

from __future__ import annotations

import argparse

import pytest
from pydantic import Field

from propdex.cli import build_parser
from propdex.docs_reference import (
    UndocumentedError,
    cli_markdown,
    settings_markdown,
    tables_markdown,
    undocumented,
    undocumented_columns,
    undocumented_settings,
)
from propdex.extract import PYMUPDF_SUFFIXES, extract_document
from propdex.settings import Settings
from propdex.store.column_descriptions import COLUMN_DESCRIPTIONS
from propdex.store.schema import CHUNKS, DOCUMENTS, TABLES, schema_for
from tests.book_factory import BUILDERS, make_xps
from tests.pdf_factory import pdf_bytes


def test_every_flag_setting_and_column_has_a_description():
    assert [] == undocumented()


def test_a_flag_without_help_fails_the_cli_page():
    parser = argparse.ArgumentParser(prog="propdex")
    command = parser.add_subparsers(dest="command").add_parser("demo", help="a command")
    command.add_argument("--documented", help="has a description")
    command.add_argument("--bare")
    with pytest.raises(UndocumentedError) as refused:
        cli_markdown(parser)
    assert ["propdex demo --bare BARE"] == refused.value.missing


def test_a_setting_without_description_is_reported():
    class WithBareField(Settings):
        bare_field: int = Field(1)

    assert ["PROPDEX_BARE_FIELD"] == undocumented_settings(WithBareField)


def test_a_column_without_description_is_reported():
    descriptions = {table: dict(columns) for table, columns in COLUMN_DESCRIPTIONS.items()}
    del descriptions[CHUNKS]["header"]
    assert ["chunks.header"] == undocumented_columns(descriptions)


def test_a_description_of_a_column_the_schema_lacks_is_reported():
    descriptions = {table: dict(columns) for table, columns in COLUMN_DESCRIPTIONS.items()}
    descriptions[CHUNKS]["gone"] = "a column that was removed"
    assert ["chunks.gone (described, but not in the schema)"] == undocumented_columns(descriptions)


def test_the_configuration_page_lists_every_variable():
    page = settings_markdown()
    missing = [name for name in Settings.model_fields if f"`PROPDEX_{name.upper()}`" not in page]
    assert [] == missing


def test_the_cli_page_lists_every_command_and_flag():
    page = cli_markdown(build_parser())
    expected = ["## propdex ingest", "`--chunker CHUNKER`", "## propdex search", "`-k K`",
                "## propdex eval", "`QUESTIONS.jsonl`", "## propdex watch", "`--debounce-ms DEBOUNCE_MS`"]
    assert [] == [text for text in expected if text not in page]


def test_the_tables_page_lists_every_column():
    page = tables_markdown()
    missing = [f"{table}.{name}" for table in TABLES for name in schema_for(table, 8).names
               if f"| `{name}` |" not in page]
    assert [] == missing


@pytest.mark.parametrize("suffix", [*PYMUPDF_SUFFIXES, ".txt", ".md"])
def test_the_kind_column_names_every_kind_a_source_is_read_as(tmp_path, suffix):
    path = tmp_path / f"tides{suffix}"
    if suffix in BUILDERS:
        BUILDERS[suffix](path)
    elif suffix in (".pdf", ".oxps"):
        path.write_bytes(pdf_bytes(["The tide rises twice a day along the Atlantic coast."])
                         if suffix == ".pdf" else make_xps(tmp_path / "t.xps").read_bytes())
    else:
        path.write_text("The tide rises twice a day along the Atlantic coast.\n", encoding="utf-8")
    kind = extract_document(path, Settings(pdf_reader="fast")).kind
    assert f"`{kind}`" in COLUMN_DESCRIPTIONS[DOCUMENTS]["kind"]
