"""A chunk holding a table may give one proposition per filled cell: its prompt, answer
schema, output cap and the parsing of its answer all allow it (up to max_table_propositions),
so a table part of more rows than max_propositions keeps every row's statements."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from propdex.cache import ResultCache
from propdex.llm.offline import OfflineBackend
from propdex.llm.output_caps import derived_json_cap
from propdex.llm.proposition_counts import table_facts
from propdex.llm.schemas import PropositionsAnswer
from propdex.models import Chunk, DocumentContext
from propdex.pipeline.propositions import propositions_for_document
from propdex.settings import Settings
from tests.scripted_server import ScriptedServer, reply

CAPTION = "Table 1: Hardness and density of minerals"
HEADER = "|Mineral|Hardness|Density|\n|---|---|---|"


def table_part(rows: int) -> str:
    """A caption and a table of ``rows`` rows, two filled cells each beside the row label."""
    body = [f"|Mineral sample {n}|{1 + n % 9}|{2 + n / 20:.2f}|" for n in range(rows)]
    return "\n".join([CAPTION, "", HEADER, *body])


def row_statements(rows: int) -> list[str]:
    return [f"In Table 1, Mineral sample {n} has a hardness of {1 + n % 9}." for n in range(rows)]


@pytest.fixture
def backend(make_openai_backend):
    return make_openai_backend


def system_message(server: ScriptedServer) -> str:
    [request] = [r for r in server.requests if r.step == "propositions"]
    return request.body["messages"][0]["content"]


def test_a_table_counts_its_filled_cells_beside_the_row_labels():
    text = f"{CAPTION}\n\n{HEADER}\n|Talc|1|2.7|\n|Gypsum|2||\n\nTalc is soft."
    assert 3 == table_facts(text)


def test_every_row_statement_of_a_table_part_longer_than_max_propositions_is_kept(
        backend, scripted_server):
    scripted_server.script(reply(json.dumps({"propositions": row_statements(30)})), step="propositions")
    kept = backend().propositions(table_part(30), title="Minerals", section=None).value
    assert row_statements(30) == kept


def test_a_table_part_is_asked_for_one_proposition_per_filled_cell(backend, scripted_server):
    backend().propositions(table_part(20), title="Minerals", section=None)
    assert "Write 1 to 40 propositions" in system_message(scripted_server)


def test_a_table_part_is_asked_for_at_most_max_table_propositions(backend, scripted_server):
    backend(max_table_propositions=30).propositions(table_part(20), title="Minerals", section=None)
    assert "Write 1 to 30 propositions" in system_message(scripted_server)


def test_the_output_cap_of_a_table_part_fits_one_proposition_per_filled_cell(backend, scripted_server):
    backend().propositions(table_part(20), title="Minerals", section=None)
    [request] = [r for r in scripted_server.requests if r.step == "propositions"]
    expected = derived_json_cap(PropositionsAnswer, {"max_propositions": 40, "max_chars": 600})
    assert expected == request.body["max_tokens"]


def test_the_offline_backend_states_every_row_of_a_table_part_longer_than_max_propositions():
    statements = OfflineBackend(Settings()).propositions(table_part(30), title="M", section=None).value
    assert "for Mineral sample 29," in statements[-1] and 30 == len(statements)


def test_the_table_bound_enters_the_fingerprint():
    versions = {"propositions": "v"}
    assert Settings().fingerprint(versions) != Settings(max_table_propositions=80).fingerprint(versions)


def extract_once(backend, cache: ResultCache, chunk: Chunk) -> None:
    with ThreadPoolExecutor(1) as pool:
        propositions_for_document([chunk], DocumentContext(title="T", summary="S."), backend, cache,
                                  backend.settings, pool)


def test_a_prose_chunk_keeps_its_cached_propositions_when_the_table_bound_changes(
        backend, scripted_server, tmp_path):
    text = "The tower is 330 metres tall. It was built between 1887 and 1889."
    chunk = Chunk(chunk_id="c", doc_id="d", ordinal=0, text=text, char_start=0, char_end=len(text),
                  page_start=1, page_end=1)
    cache = ResultCache(tmp_path / "cache")
    extract_once(backend(), cache, chunk)
    extract_once(backend(max_table_propositions=80), cache, chunk)
    assert 1 == scripted_server.calls("propositions")
