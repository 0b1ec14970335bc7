"""Document metadata: its sources (--meta, front matter, sidecar), its rules, the filters of
every search surface (search(), the Python API, the CLI), and metadata-only updates."""

from __future__ import annotations

import json

import pytest

from propdex.api import IndexReader
from propdex.cli import main
from propdex.metadata import (
    MetadataError,
    entries,
    file_metadata,
    filter_entries,
    merged,
    parse_pairs,
    to_json,
)
from propdex.search import search
from propdex.settings import Settings
from propdex.store import Index
from tests.service_harness import embedding_environment, scripted_vector, version
from tests.store_rows import DIM

HOSTILE = ["x') OR true --", "' OR '1'='1", "a'b", "\\'", "]) OR true OR array_has_all(meta, ['",
           "ünï ✓", "%", "*"]


def tagged(doc_id: str, facts: list[list[str]], metadata: dict, run_id: str = "r1"):
    v = version(doc_id, run_id, facts, f"/corpus/{doc_id}.md", doc_id.title())
    meta = parse_pairs([f"{k}={x}" for k, values in metadata.items() for x in values], "test")
    v.document.update(metadata=to_json(meta), meta=entries(meta) or None)
    return v


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("metadata") / "db"
    index = Index.open(str(path), dim=DIM)
    index.replace_document(*tagged("owls", [["Owls hunt at night."], ["Owls nest in trees."]],
                                   {"team": ["birds"], "year": ["2024"]}).rows)
    index.replace_document(*tagged("kites", [["Kites hunt over fields."]],
                                   {"team": ["birds"], "year": ["2023"],
                                    "quote": ["it's a 'kite'"]}).rows)
    index.replace_document(*tagged("foxes", [["Foxes hunt at dusk."]],
                                   {"team": ["mammals"], "year": ["2024"]}).rows)
    index.replace_document(*version("plain", "r1", [["Herons hunt fish."]], "/corpus/plain.md",
                                    "Plain").rows)
    index.optimize()
    return path


def found(index: Index, where: dict | None, **options) -> list[str]:
    meta = filter_entries(where)
    return sorted({r.doc_id for r in search(index, "hunt", scripted_vector("hunt"), k=10,
                                              meta=meta, **options)})


# Rules ----------------------------------------------------------------------------------
def test_repeated_pairs_collect_their_values_sorted():
    assert {"tag": ["a", "b"], "year": ["2024"]} == parse_pairs(
        ["tag=b", "year=2024", "tag=a"], "--meta")


def test_a_value_may_hold_equals_signs():
    assert ["q=a=b"] == entries(parse_pairs(["q=a=b"], "--meta"))


@pytest.mark.parametrize("pair", ["novalue", "=v", "a\nb=v", "k" * 65 + "=v", "k=" + "v" * 257,
                                  "k=a\x00b"])
def test_a_bad_pair_is_refused_naming_the_flag(pair):
    with pytest.raises(MetadataError) as raised:
        parse_pairs([pair], "--meta")
    assert "--meta" == raised.value.field.split(".")[0]


def test_too_many_filter_entries_are_refused():
    with pytest.raises(MetadataError, match="at most 16"):
        filter_entries({f"k{i}": "v" for i in range(17)})


def test_a_nested_value_is_refused():
    with pytest.raises(MetadataError, match="not dict"):
        filter_entries({"k": [{"a": 1}]})


def test_scalars_become_text():
    assert ["n=3", "ok=true", "x=1.5"] == filter_entries({"n": 3, "ok": True, "x": 1.5})


def test_the_sidecar_wins_over_front_matter_and_front_matter_over_the_run(tmp_path):
    note = tmp_path / "note.md"
    note.write_text("---\nteam: birds\nyear: 2023\ntags: [a, b]\n---\n# Owls\n", encoding="utf-8")
    (tmp_path / "note.md.meta.json").write_text('{"year": "2024"}', encoding="utf-8")
    run = {"team": ["run"], "project": ["x"]}
    assert {"project": ["x"], "tags": ["a", "b"], "team": ["birds"], "year": ["2024"]} == merged(
        run, file_metadata(str(note)))


def test_front_matter_dates_are_iso_text(tmp_path):
    note = tmp_path / "note.md"
    note.write_text("---\ndate: 2024-05-01\n---\nText.\n", encoding="utf-8")
    assert {"date": ["2024-05-01"]} == file_metadata(str(note))


def test_a_bad_sidecar_names_the_file(tmp_path):
    text = tmp_path / "a.txt"
    text.write_text("Text.", encoding="utf-8")
    (tmp_path / "a.txt.meta.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(MetadataError) as raised:
        file_metadata(str(text))
    assert str(tmp_path / "a.txt.meta.json") == raised.value.field


# Filters --------------------------------------------------------------------------------
@pytest.mark.parametrize("level", ["propositions", "chunks", "both"])
@pytest.mark.parametrize("mode", ["vector", "fts", "hybrid"])
def test_a_filter_keeps_only_matching_documents(db, level, mode):
    index = Index.open(str(db), create=False)
    assert ["kites", "owls"] == found(index, {"team": "birds"}, level=level, mode=mode)


def test_filters_combine_with_and(db):
    index = Index.open(str(db), create=False)
    assert (["owls"], ["foxes", "owls"]) == (
        found(index, {"team": "birds", "year": "2024"}), found(index, {"year": "2024"}))


def test_no_filter_finds_every_document(db):
    assert ["foxes", "kites", "owls", "plain"] == found(Index.open(str(db), create=False), None)


@pytest.mark.parametrize("where", [{"nokey": "birds"}, {"team": "fish"}, {"team": "birds=x"},
                                   {"team": ["birds", "mammals"]}])
def test_an_unknown_key_or_value_finds_nothing(db, where):
    assert [] == found(Index.open(str(db), create=False), where)


@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_value_only_filters(db, value):
    index = Index.open(str(db), create=False)
    assert ([], 4) == (found(index, {"team": value}), len(index.live_runs()))


@pytest.mark.parametrize("key", [k for k in HOSTILE if "=" not in k])
def test_a_hostile_key_only_filters(db, key):
    index = Index.open(str(db), create=False)
    assert ([], 4) == (found(index, {key: "birds"}), len(index.live_runs()))


def test_a_value_with_quotes_is_matched_exactly(db):
    assert ["kites"] == found(Index.open(str(db), create=False), {"quote": "it's a 'kite'"})


def test_results_carry_the_documents_metadata(db):
    index = Index.open(str(db), create=False)
    hit = search(index, "hunt", scripted_vector("Foxes hunt at dusk."), k=1,
                 meta=filter_entries({"team": "mammals"}))[0]
    assert {"team": "mammals", "year": "2024"} == hit.to_dict()["metadata"]


def test_the_python_api_takes_where(db, scripted, monkeypatch):
    for name, value in embedding_environment(scripted).items():
        monkeypatch.setenv(name, value)
    reader = IndexReader(Settings(db=str(db)))
    assert ["foxes"] == [r.doc_id for r in reader.search("hunt", where={"team": "mammals"})]


def test_the_cli_takes_repeated_where(db, scripted, monkeypatch, capsys):
    for name, value in embedding_environment(scripted).items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    assert 0 == main(["search", "hunt", "--db", str(db), "--json", "--where", "team=birds",
                      "--where", "year=2023"])
    assert ["kites"] == [r["doc_id"] for r in json.loads(capsys.readouterr().out)]


def test_the_cli_refuses_a_bad_where(db, capsys):
    assert 2 == main(["search", "hunt", "--db", str(db), "--where", "team"])
    assert "--where: 'team' is not KEY=VALUE" in capsys.readouterr().err


def test_an_index_without_metadata_columns_finds_nothing_for_a_filter(tmp_path):
    index = Index.open(str(tmp_path / "db"), dim=DIM)
    index.replace_document(*version("plain", "r1", [["Herons hunt fish."]], "/corpus/p.md",
                                    "P").rows)
    for name in ("chunks", "propositions"):
        index.table(name).drop_columns(["meta"])
    assert [] == found(Index.open(str(tmp_path / "db"), create=False), {"team": "birds"})


# Metadata-only updates ------------------------------------------------------------------
def test_update_metadata_relabels_every_row_of_the_document(tmp_path):
    index = Index.open(str(tmp_path / "db"), dim=DIM)
    index.replace_document(*tagged("owls", [["Owls hunt at night."], ["Owls nest."]],
                                   {"team": ["birds"]}).rows)
    new = parse_pairs(["team=raptors", "year=2025"], "test")
    updated = index.update_metadata("owls", to_json(new), entries(new))
    assert (4, ["owls"], [], '{"team": "raptors", "year": "2025"}') == (
        updated, found(index, {"team": "raptors"}), found(index, {"team": "birds"}),
        index.document("owls")["metadata"])


def test_a_file_with_the_longest_name_has_no_sidecar(tmp_path):
    longest = tmp_path / (("é" * 123) + "12345.txt")  # 255 bytes: no room for ".meta.json"
    longest.write_text("Text.", encoding="utf-8")
    assert {} == file_metadata(str(longest))
