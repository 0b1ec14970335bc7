"""An index written by an older propdex, read and re-ingested by this one.

The "old" index is written here through LanceDB and pyarrow directly, from the description in
OLD_RELEASE: the tables with the columns the first releases had (none of the columns added
since), rows as those releases wrote them. No old code runs at test time.
"""

from __future__ import annotations

import json

import lancedb
import numpy as np
import pyarrow as pa
import pytest

import propdex.settings as settings_module
from propdex.api import open_index
from propdex.errors import EmbedderMismatchError
from propdex.ids import doc_id_for, sha256_file
from propdex.pipeline.plan import plan_sources
from propdex.runtime import backend_for
from propdex.settings import Settings, fingerprint_of
from propdex.store.schema import CHUNKS, DOCUMENTS, PROPOSITIONS, schema_for

DIM = 8

# What an index of the 2026-11-24 release (7dd9ba8) holds: the columns each table lacked
# then, and the values its rows carried.
OLD_RELEASE = {
    "missing_columns": {
        DOCUMENTS: ["metadata", "meta", "object_etag", "object_size", "pdf_reader",
                    "layout_fallback_pages", "checks_rejected", "found_at", "pipeline_parts"],
        CHUNKS: ["meta", "boxes"],
        PROPOSITIONS: ["meta", "boxes", "reject_reason"],
    },
    "embed_model": "all-MiniLM-L6-v2",
    "llm_model": "offline-rules",
    "run_id": "old-run",
}
# An index of this release's columns.
THIS_RELEASE = {**OLD_RELEASE, "missing_columns": {DOCUMENTS: [], CHUNKS: [], PROPOSITIONS: []}}


def old_schema(name: str, release: dict = OLD_RELEASE) -> pa.Schema:
    missing = release["missing_columns"][name]
    schema = schema_for(name, DIM)
    return pa.schema([f for f in schema if f.name not in missing])


def unit_vector(seed: int) -> list[float]:
    vector = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return (vector / np.linalg.norm(vector)).tolist()


def old_rows(path, settings: Settings, *, embed_model: str, parts: dict | None = None,
             prompts: dict | None = None) -> dict[str, list[dict]]:
    """One indexed document of ``path`` as the old release stored it: one chunk, one
    proposition, under the fingerprint ``settings`` give it, with ``parts`` of it changed
    and ``prompts`` (step -> version) recorded instead of this release's."""
    source = str(path)
    doc_id = doc_id_for(source)
    versions = {**backend_for(settings).prompt_versions(), **(prompts or {})}
    pdf = source.endswith(".pdf")
    # A part given as None is one the old release's fingerprint did not have.
    fingerprint_parts = {k: v for k, v in {**settings.fingerprint_parts(versions, pymupdf=pdf),
                                           **(parts or {})}.items() if v is not None}
    text = path.read_bytes().decode("latin-1")
    run = OLD_RELEASE["run_id"]
    shared = {"doc_id": doc_id, "source": source, "content_sha256": sha256_file(source),
              "run_id": run, "embed_model": embed_model}
    document = {
        **shared, "kind": "pdf" if pdf else "text", "text": text, "title": path.stem,
        "summary": text[:40], "page_count": 1, "status": "indexed", "chunk_count": 1,
        "proposition_count": 1, "passed_count": 1, "chunk_failures": 0,
        "llm_model": OLD_RELEASE["llm_model"], "prompt_versions": json.dumps(versions),
        "pipeline_version": fingerprint_of(fingerprint_parts), "last_run_id": run,
        "pipeline_parts": json.dumps(fingerprint_parts),
    }
    chunk = {**shared, "chunk_id": f"{doc_id}:c0", "ordinal": 0, "text": text,
             "header": path.stem, "page_start": 1, "page_end": 1, "char_start": 0,
             "char_end": len(text), "vector": unit_vector(len(source))}
    proposition = {**shared, "prop_id": f"{doc_id}:p0", "chunk_id": chunk["chunk_id"],
                   "ordinal": 0, "text": text, "accuracy": 9, "clarity": 9, "completeness": 9,
                   "conciseness": 9, "passed": True, "page_start": 1, "page_end": 1,
                   "llm_model": OLD_RELEASE["llm_model"], "prompt_version": "p1",
                   "vector": unit_vector(len(source) + 1)}
    return {DOCUMENTS: [document], CHUNKS: [chunk], PROPOSITIONS: [proposition]}


def write_old_index(db, files, settings: Settings, *, release: dict = OLD_RELEASE,
                    embed_model: str = OLD_RELEASE["embed_model"], **changes) -> None:
    """The old ``release``'s three tables holding ``files``, with its full-text indexes;
    ``changes``: ``parts`` and ``prompts`` of old_rows."""
    rows: dict[str, list[dict]] = {DOCUMENTS: [], CHUNKS: [], PROPOSITIONS: []}
    for path in files:
        for name, table_rows in old_rows(path, settings, embed_model=embed_model,
                                         **changes).items():
            rows[name].extend(table_rows)
    connection = lancedb.connect(str(db))
    for name, table_rows in rows.items():
        schema = old_schema(name, release)
        table = connection.create_table(name, pa.Table.from_pylist(
            [{k: v for k, v in row.items() if k in schema.names} for row in table_rows],
            schema=schema))
        if name != DOCUMENTS:
            table.create_index("text", config=lancedb.index.FTS())


@pytest.fixture
def sources(tmp_path):
    """A folder with a PDF (only its bytes matter to the planner) and a Markdown note."""
    folder = tmp_path / "sources"
    folder.mkdir()
    (folder / "paper.pdf").write_bytes(b"%PDF-1.4 a paper about the levels of AGI")
    (folder / "notes.md").write_text("# Notes\n\nThe index is rebuilt every Monday.\n")
    return folder


def planned(folder, settings: Settings) -> tuple[dict[str, str], list[str]]:
    """The planner's verdict on ``folder``: file name -> reason to process, unchanged names."""
    plan = plan_sources([str(folder)], settings, force=False, prune=True)
    name = lambda source: source.rsplit("/", 1)[-1]  # noqa: E731
    return ({name(i.source): i.reason for i in plan.to_process},
            sorted(name(s) for s in plan.unchanged))


def test_a_change_to_pdf_reading_reprocesses_pdfs_and_leaves_text_files(
        tmp_path, sources, monkeypatch):
    settings = Settings(db=str(tmp_path / "db"), llm="offline")
    write_old_index(tmp_path / "db", sorted(sources.iterdir()), settings)
    monkeypatch.setattr(settings_module, "PDF_READER_VERSION", settings_module.PDF_READER_VERSION + 1)
    assert ({"paper.pdf": "settings changed"}, ["notes.md"]) == planned(sources, settings)


def test_an_old_index_under_this_releases_settings_is_unchanged(tmp_path, sources):
    settings = Settings(db=str(tmp_path / "db"), llm="offline")
    write_old_index(tmp_path / "db", sorted(sources.iterdir()), settings)
    assert ({}, ["notes.md", "paper.pdf"]) == planned(sources, settings)


def test_a_vector_search_with_another_embedder_than_the_indexs_names_both(tmp_path, sources):
    # Built with PROPDEX_EMBEDDER=e5-small, searched without it: MiniLM's vectors have the
    # same 384 dimensions, so nothing else would tell the scores are meaningless.
    db = tmp_path / "db"
    write_old_index(db, sorted(sources.iterdir()), Settings(db=str(db), llm="offline"),
                    embed_model="multilingual-e5-small-q4")
    reader = open_index(str(db))
    with pytest.raises(EmbedderMismatchError) as raised:
        reader.search("When is the index rebuilt?", mode="vector")
    assert (f"the index at {db} holds documents embedded with another model than this "
            "search's 'all-MiniLM-L6-v2-int8' (2 with 'multilingual-e5-small-q4' of 2)"
            ) == str(raised.value).split(": their vectors")[0]


def test_an_fp32_minilm_index_is_searched_by_this_releases_int8_minilm(tmp_path, sources):
    # 7dd9ba8 embedded documents in fp32 ("all-MiniLM-L6-v2"); int8 documents are searched
    # with fp32 queries anyway, so the old vectors stay comparable.
    db = tmp_path / "db"
    files = sorted(sources.iterdir())
    write_old_index(db, files, Settings(db=str(db), llm="offline"))
    near_notes = np.array(unit_vector(len(str(files[0]))), dtype=np.float32)
    hits = open_index(str(db)).search("Monday", mode="vector", level="chunks", k=1,
                                      query_vector=lambda: near_notes)
    assert ["notes.md"] == [h.source.rsplit("/", 1)[-1] for h in hits]


def test_a_full_text_search_of_an_index_of_another_embedder_answers(tmp_path, sources):
    db = tmp_path / "db"
    write_old_index(db, sorted(sources.iterdir()), Settings(db=str(db), llm="offline"),
                    embed_model="multilingual-e5-small-q4")
    hits = open_index(str(db)).search("rebuilt every Monday", mode="fts", level="chunks")
    assert ["notes.md"] == [h.source.rsplit("/", 1)[-1] for h in hits]


def reprocessed(folder, settings: Settings) -> list[tuple[str, str, str | None]]:
    """(file name, reason, what changed) of each indexed document the planner would process."""
    plan = plan_sources([str(folder)], settings, force=False, prune=True)
    return [(i.source.rsplit("/", 1)[-1], i.reason, i.changed) for i in plan.to_process
            if i.reason != "new"]


def test_a_pipeline_version_bump_is_named_as_the_upgrade(tmp_path, sources):
    settings = Settings(db=str(tmp_path / "db"), llm="offline")
    write_old_index(tmp_path / "db", [sources / "notes.md"], settings, release=THIS_RELEASE,
                    parts={"pipeline": "10"})
    assert [("notes.md", "settings changed", "propdex upgraded: pipeline 10 -> 11")
            ] == reprocessed(sources, settings)


def test_a_setting_changed_since_is_named_as_a_setting(tmp_path, sources):
    settings = Settings(db=str(tmp_path / "db"), llm="offline")
    write_old_index(tmp_path / "db", [sources / "notes.md"], settings, release=THIS_RELEASE)
    wider = Settings(db=str(tmp_path / "db"), llm="offline", chunk_size=1200)
    assert [("notes.md", "settings changed", "settings: chunker")] == reprocessed(sources, wider)


def test_a_document_of_a_release_before_the_parts_names_its_changed_prompt(tmp_path, sources):
    settings = Settings(db=str(tmp_path / "db"), llm="offline")
    write_old_index(tmp_path / "db", [sources / "notes.md"], settings,
                    prompts={"propositions": "propositions-v0"})
    now = backend_for(settings).prompt_versions()["propositions"]
    assert [("notes.md", "settings changed",
             f"propdex upgraded: prompt propositions-v0 -> {now} (indexed by a propdex that "
             "did not record what its fingerprint covers)")] == reprocessed(sources, settings)


def test_a_document_of_a_release_before_the_parts_names_its_pipeline_version(tmp_path, sources):
    settings = Settings(db=str(tmp_path / "db"), llm="offline")
    write_old_index(tmp_path / "db", [sources / "notes.md"], settings, parts={"pipeline": "10"})
    assert [("notes.md", "settings changed", "propdex upgraded: pipeline 10 -> 11")
            ] == reprocessed(sources, settings)


def test_a_pdf_of_a_release_before_the_parts_names_the_pdf_reader_version(tmp_path, sources):
    settings = Settings(db=str(tmp_path / "db"), llm="offline")
    write_old_index(tmp_path / "db", [sources / "paper.pdf"], settings,
                    parts={"pdf_reader_version": None})
    assert [("paper.pdf", "settings changed", "propdex upgraded: pdf reader version none -> 1")
            ] == reprocessed(sources, settings)


def test_a_pdf_of_a_release_before_the_parts_names_pipeline_and_pdf_reader_versions(
        tmp_path, sources):
    settings = Settings(db=str(tmp_path / "db"), llm="offline")
    write_old_index(tmp_path / "db", [sources / "paper.pdf"], settings,
                    parts={"pipeline": "10", "pdf_reader_version": None})
    assert [("paper.pdf", "settings changed",
             "propdex upgraded: pipeline 10 -> 11, pdf reader version none -> 1")
            ] == reprocessed(sources, settings)


def test_a_new_int8_recipe_is_named_as_the_upgrade_not_a_setting(tmp_path, sources):
    settings = Settings(db=str(tmp_path / "db"), llm="offline")
    embed = settings.fingerprint_parts({}, pymupdf=False)["embed"]  # embedder, model, recipe
    earlier = [*embed[:-1], "int8-runs-0"]
    write_old_index(tmp_path / "db", [sources / "notes.md"], settings, release=THIS_RELEASE,
                    parts={"embed": earlier})
    changed = f"propdex upgraded: embedding {'+'.join(earlier[2:])} -> {'+'.join(embed[2:])}"
    assert [("notes.md", "settings changed", changed)] == reprocessed(sources, settings)
