"""Metadata through the ingest flow: the run's pairs, front matter and sidecars on every row,
and a metadata-only change that updates rows without any LLM or embedding call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.parameters import IngestOptions
from propdex.cli import main
from propdex.ids import doc_id_for
from propdex.store import Index

pytestmark = pytest.mark.prefect

NOTE = ("---\nteam: birds\n---\n# Herons\n\nHerons nest in tall trees near water. Herons eat "
        "fish and frogs.\n")


def _ingest(sources: list[Path], db: Path, metadata: dict | None = None) -> dict:
    from flows.ingest import ingest

    return ingest(sources=[str(s) for s in sources], db=str(db),
                  options=IngestOptions(metadata=metadata))


def _meta_of_rows(db: Path, doc_id: str) -> dict[str, list]:
    index = Index.open(str(db), create=False)
    where = f"doc_id = '{doc_id}'"
    return {name: sorted({tuple(r["meta"] or ()) for r in index.read(name, ["meta"], where)})
            for name in ("documents", "chunks", "propositions")}


def test_run_pairs_front_matter_and_sidecar_reach_every_row(tmp_path, llm_env):
    note = tmp_path / "src" / "herons.md"
    note.parent.mkdir()
    note.write_text(NOTE, encoding="utf-8")
    (tmp_path / "src" / "herons.md.meta.json").write_text('{"year": 2024}', encoding="utf-8")

    _ingest([note], tmp_path / "db", {"team": "run", "project": "wetlands"})

    expected = [("project=wetlands", "team=birds", "year=2024")]
    assert {"documents": expected, "chunks": expected, "propositions": expected} == \
        _meta_of_rows(tmp_path / "db", doc_id_for(str(note)))


def test_a_metadata_only_change_updates_rows_without_llm_or_embedding_calls(tmp_path, llm_env):
    note = tmp_path / "herons.md"
    note.write_text(NOTE, encoding="utf-8")
    db = tmp_path / "db"
    _ingest([note], db)
    doc_id = doc_id_for(str(note))
    run_before = Index.open(str(db), create=False).document(doc_id)["run_id"]
    requests_before = len(llm_env.requests)
    (tmp_path / "herons.md.meta.json").write_text('{"team": "waders"}', encoding="utf-8")

    summary = _ingest([note], db)

    assert ([], [str(note)], 0, run_before, ["team=waders"]) == (
        summary["documents"], summary["metadata_updated"],
        len(llm_env.requests) - requests_before,
        Index.open(str(db), create=False).document(doc_id)["run_id"],
        _meta_of_rows(db, doc_id)["chunks"][0] and list(_meta_of_rows(db, doc_id)["chunks"][0]))


def test_an_unchanged_rerun_updates_nothing(tmp_path, llm_env):
    note = tmp_path / "herons.md"
    note.write_text(NOTE, encoding="utf-8")
    _ingest([note], tmp_path / "db", {"project": "wetlands"})
    summary = _ingest([note], tmp_path / "db", {"project": "wetlands"})
    assert ([], [str(note)]) == (summary["metadata_updated"], summary["unchanged"])


def test_invalid_front_matter_fails_the_file_with_its_reason(tmp_path, llm_env):
    bad = tmp_path / "bad.md"
    bad.write_text("---\nteam: [unclosed\n---\nText about herons.\n", encoding="utf-8")
    good = tmp_path / "good.md"
    good.write_text(NOTE, encoding="utf-8")

    summary = _ingest([bad, good], tmp_path / "db")

    reason = f"invalid metadata: {bad} (front matter): front matter is not valid YAML"
    outcome = {d["source"]: (d["status"], (d["error"] or "")[:len(reason)])
               for d in summary["documents"]}
    assert {str(bad): ("failed", reason), str(good): ("indexed", "")} == outcome


def test_the_cli_meta_flag_labels_the_run(tmp_path, llm_env, capsys):
    note = tmp_path / "herons.txt"
    note.write_text("Herons nest in tall trees near water.", encoding="utf-8")
    db = tmp_path / "db"
    assert 0 == main(["ingest", str(note), "--db", str(db), "--json", "--meta", "team=birds",
                      "--meta", "tag=a", "--meta", "tag=b"])
    capsys.readouterr()
    assert 0 == main(["search", "herons", "--db", str(db), "--json", "--where", "tag=b"])
    hits = json.loads(capsys.readouterr().out)
    assert [{"tag": ["a", "b"], "team": "birds"}] == [hits[0]["metadata"]]


def test_the_run_form_refuses_a_bad_key():
    with pytest.raises(ValueError, match="metadata: invalid key 'a=b'"):
        IngestOptions(metadata={"a=b": "x"})


def test_fixing_bad_metadata_indexes_the_file_again(tmp_path, llm_env):
    note = tmp_path / "herons.md"
    note.write_text(NOTE, encoding="utf-8")
    sidecar = tmp_path / "herons.md.meta.json"
    _ingest([note], tmp_path / "db")
    sidecar.write_text('{"a=b": "x"}', encoding="utf-8")
    broken = _ingest([note], tmp_path / "db")
    sidecar.write_text('{"team": "waders"}', encoding="utf-8")

    fixed = _ingest([note], tmp_path / "db")

    row = Index.open(str(tmp_path / "db"), create=False).document(doc_id_for(str(note)))
    assert (["failed"], ["retry"], "indexed", '{"team": "waders"}') == (
        [d["status"] for d in broken["documents"]], [d["reason"] for d in fixed["documents"]],
        row["status"], row["metadata"])
