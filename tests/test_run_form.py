"""The Prefect run form: fixed choices render as drop-downs, labels read as words."""

from __future__ import annotations

import re

import pytest
from prefect.utilities.callables import parameter_schema

from flows.evaluate import evaluate
from flows.ingest import ingest
from flows.parameters import EvaluateOptions, IngestOptions
from flows.reingest import reingest_document
from propdex.sources import SUPPORTED_SUFFIXES


def options_schema(flow, name: str) -> dict:
    return parameter_schema(flow.fn).model_dump()["definitions"][name]["properties"]


@pytest.mark.parametrize(("field", "choices"), [
    ("llm", ["default", "offline", "openai"]),
    ("chunker", ["default", "fixed", "recursive", "passages", "semantic", "llm"]),
    ("embedder", ["default", "minilm", "openai"]),
    ("pdf_reader", ["default", "layout", "fast"]),
])
@pytest.mark.parametrize("flow", [ingest, reingest_document])
def test_fixed_choices_are_a_plain_enum_the_ui_shows_as_a_drop_down(flow, field, choices):
    prop = options_schema(flow, "IngestOptions")[field]
    assert (choices, "string", "default", None) == (prop["enum"], prop["type"], prop["default"], prop.get("anyOf"))


@pytest.mark.parametrize(("field", "title"), [
    ("llm", "LLM backend"), ("llm_model", "LLM model"), ("chunk_size", "Chunk size (characters)"),
    ("threshold", "Pass threshold (1-10)"), ("llm_rpm", "LLM requests per minute"),
    ("document_concurrency", "Documents at once"), ("pdf_reader", "PDF reader"),
])
def test_ingest_option_labels_read_as_words(field, title):
    assert title == options_schema(ingest, "IngestOptions")[field]["title"]


@pytest.mark.parametrize("model", [IngestOptions, EvaluateOptions])
def test_every_option_has_a_label_written_for_it(model):
    assert [] == [name for name, info in model.model_fields.items() if not info.title]


@pytest.mark.parametrize(("flow", "model"), [(ingest, "IngestOptions"), (evaluate, "EvaluateOptions")])
def test_no_label_spells_llm_as_a_word(flow, model):
    assert [] == [p["title"] for p in options_schema(flow, model).values() if "Llm" in p["title"]]


@pytest.mark.parametrize("left_out", [None, "default"])
def test_the_default_choice_leaves_the_setting_to_the_environment(monkeypatch, left_out):
    monkeypatch.setenv("PROPDEX_CHUNKER", "passages")
    settings = IngestOptions(chunker=left_out, llm=left_out, embedder=left_out).settings("db")
    assert ("passages", "offline", "minilm") == (settings.chunker, settings.llm_backend, settings.embedder)


def test_a_chosen_value_overrides_the_environment(monkeypatch):
    monkeypatch.setenv("PROPDEX_CHUNKER", "passages")
    assert "fixed" == IngestOptions(chunker="fixed").settings("db").chunker


def test_pdf_reader_default_leaves_it_to_the_environment(monkeypatch):
    monkeypatch.setenv("PROPDEX_PDF_READER", "fast")
    assert ("fast", "layout") == (IngestOptions().settings("db").pdf_reader,
                                  IngestOptions(pdf_reader="layout").settings("db").pdf_reader)


def test_the_pdf_reader_flag_reaches_the_run_form():
    from propdex.cli import build_parser, ingest_options

    args = build_parser().parse_args(["ingest", "docs", "--pdf-reader", "fast"])
    assert "fast" == ingest_options(args).settings("db").pdf_reader


@pytest.mark.parametrize("suffix", SUPPORTED_SUFFIXES)
def test_the_sources_field_names_every_suffix_a_folder_is_walked_for(suffix):
    description = parameter_schema(ingest.fn).model_dump()["properties"]["sources"]["description"]
    assert suffix in re.findall(r"\.\w+", description)


@pytest.mark.parametrize("suffix", SUPPORTED_SUFFIXES)
def test_the_ingest_paths_help_names_every_suffix_a_folder_is_walked_for(suffix):
    from propdex.cli import build_parser

    ingest_parser = build_parser()._subparsers._group_actions[0].choices["ingest"]
    [paths] = [a for a in ingest_parser._actions if a.dest == "paths"]
    assert suffix in re.findall(r"\.\w+", paths.help)


@pytest.mark.parametrize("flow", [ingest, reingest_document, evaluate])
def test_every_flow_parameter_has_a_label_written_for_it(flow):
    properties = parameter_schema(flow.fn).model_dump()["properties"]
    assert [] == [name for name, prop in properties.items() if prop["title"] == name]


def _optional_numbers(model) -> list[str]:
    return [name for name, info in model.model_fields.items() if info.annotation == int | None]


def test_the_optional_numbers_are_the_ones_the_form_must_show_as_number_boxes():
    expected = ["chunk_size", "chunk_overlap", "threshold", "llm_concurrency", "llm_rpm",
                "document_concurrency"]
    assert expected == _optional_numbers(IngestOptions)


@pytest.mark.parametrize("field", _optional_numbers(IngestOptions))
def test_an_optional_number_is_a_plain_number_box_without_a_type_switch(field):
    # anyOf [integer, null] renders as an int/None switch; a default would fill the box.
    prop = options_schema(ingest, "IngestOptions")[field]
    assert ("integer", False, False) == (prop["type"], "anyOf" in prop, "default" in prop)


def test_an_optional_number_keeps_its_bounds_in_the_form():
    prop = options_schema(ingest, "IngestOptions")["threshold"]
    assert (1, 10) == (prop["minimum"], prop["maximum"])


def test_a_number_box_left_empty_leaves_the_setting_to_the_environment(monkeypatch):
    # The form leaves an empty number box out of the run's parameters.
    monkeypatch.setenv("PROPDEX_CHUNK_SIZE", "500")
    assert 500 == IngestOptions.model_validate({}).settings("db").chunk_size


@pytest.mark.parametrize(("flow", "model"), [(ingest, "IngestOptions"), (evaluate, "EvaluateOptions")])
def test_the_llm_model_is_a_plain_text_box_without_a_type_switch(flow, model):
    # anyOf [string, null] renders as a string/None switch; a default would fill the box.
    prop = options_schema(flow, model)["llm_model"]
    assert ("string", False, False) == (prop["type"], "anyOf" in prop, "default" in prop)


@pytest.mark.parametrize("typed", ["", "   "])
def test_an_llm_model_box_left_empty_leaves_the_model_to_the_environment(monkeypatch, typed):
    monkeypatch.setenv("PROPDEX_LLM_MODEL", "qwen3")
    options = {"llm_model": typed}
    assert ("qwen3", "qwen3") == (IngestOptions.model_validate(options).settings("db").llm_model,
                                  EvaluateOptions.model_validate(options).settings("db").llm_model)


def test_sectioning_is_a_three_way_choice_the_ui_shows_as_a_drop_down():
    prop = options_schema(ingest, "IngestOptions")["sectioning"]
    assert (["default", "on", "off"], "string", "default", None) == (
        prop["enum"], prop["type"], prop["default"], prop.get("anyOf"))


def test_the_default_sectioning_choice_leaves_it_to_the_environment(monkeypatch):
    monkeypatch.setenv("PROPDEX_SECTIONING", "true")
    assert IngestOptions(sectioning="default").settings("db").sectioning
