"""End to end through the Prefect flow on embedded defaults (offline backend, MiniLM).

One ingest of a small folder is shared by the lineage tests; each test checks one property.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import lancedb
import pytest

from propdex.cli import main
from propdex.extract import extract_document
from propdex.settings import Settings
from tests.pdf_factory import make_pdf

pytestmark = pytest.mark.prefect

LIGHTHOUSE = [
    "The Lighthouse of Alexandria was a lighthouse built by the Ptolemaic Kingdom of Egypt "
    "during the reign of Ptolemy II Philadelphus. It stood on the island of Pharos in the "
    "harbour of Alexandria. The tower was completed around 280 BC.\n\n"
    "Sostratus of Cnidus is traditionally named as the architect of the lighthouse. "
    "Ancient writers praised the structure as one of the Seven Wonders of the Ancient World.",
    "The lighthouse was damaged by several earthquakes between 956 and 1323. "
    "It became an abandoned ruin in the fourteenth century. In 1480 the Mamluk sultan "
    "Qaitbay built a fortress on its site using some of the fallen stone.\n\n"
    "French archaeologists found remains of the lighthouse on the floor of the Eastern "
    "Harbour in 1994.",
    "Modern estimates put the height of the lighthouse at more than 100 metres. "
    "For many centuries it was one of the tallest structures made by people. "
    "A fire burned at its top at night, and a mirror is said to have reflected sunlight "
    "during the day.",
]

QUOKKA = [
    "The quokka is a small marsupial about the size of a domestic cat. It is the only member "
    "of the genus Setonix. The quokka lives on Rottnest Island and Bald Island in Western "
    "Australia.\n\n"
    "Quokkas are mostly nocturnal animals. They feed on grasses, leaves and stems.",
    "The population of the quokka on the mainland declined after foxes and cats were "
    "introduced to Australia. The species is classified as vulnerable by the IUCN.\n\n"
    "Visitors to Rottnest Island often photograph quokkas because the animals appear to smile.",
]


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("sources")
    make_pdf(folder / "lighthouse.pdf", LIGHTHOUSE, title="The Lighthouse of Alexandria",
             toc=[[1, "Construction", 1], [1, "Destruction", 2], [1, "Height", 3]],
             header="Harbour Monuments Quarterly", footer="Page {page} of {pages}")
    make_pdf(folder / "quokka.pdf", QUOKKA, title="The Quokka")
    # Saved by a Windows editor: cp1252, as many real .txt and .md files are.
    (folder / "notes.md").write_text(
        "# Field notes on Rottnest Island\n\nRottnest Island lies 18 kilometres west of "
        "Fremantle. The island was named by the Dutch captain Willem de Vlamingh in 1696; "
        "French charts call it Île Rottnest.\n\n"
        "## Transport\n\nFerries run to the island from Perth and Fremantle every day.\n",
        encoding="cp1252",
    )
    (folder / "broken.pdf").write_bytes(b"%PDF-1.7\n" + b"\x00garbage" * 50)
    return folder


@pytest.fixture(scope="module")
def ingested(corpus_dir, tmp_path_factory) -> dict:
    from flows.ingest import ingest

    db = tmp_path_factory.mktemp("db") / "index"
    summary = ingest(sources=[str(corpus_dir)], db=str(db))
    return {"summary": summary, "db": db, "tables": _tables(db)}


def _tables(db: Path) -> dict[str, list[dict]]:
    conn = lancedb.connect(str(db))
    return {name: conn.open_table(name).to_arrow().to_pylist()
            for name in ("documents", "chunks", "propositions")}


def test_every_readable_document_is_indexed(ingested):
    statuses = {Path(r["source"]).name: r["status"] for r in ingested["tables"]["documents"]}

    assert {"lighthouse.pdf": "indexed", "quokka.pdf": "indexed", "notes.md": "indexed",
            "broken.pdf": "failed"} == statuses


def test_documents_record_encoding_and_page_furniture(ingested):
    rows = {Path(r["source"]).name: (r["encoding"], r["furniture_removed"])
            for r in ingested["tables"]["documents"] if r["status"] == "indexed"}

    # lighthouse.pdf: a running header and a "Page n of 3" footer on each of its 3 pages.
    assert {"lighthouse.pdf": (None, 6), "quokka.pdf": (None, 0), "notes.md": ("cp1252", None)} == rows


def test_page_furniture_is_not_in_any_chunk(ingested):
    texts = [c["text"] for c in ingested["tables"]["chunks"]]

    assert [] == [t for t in texts if "Harbour Monuments Quarterly" in t or "Page 2 of 3" in t]


def test_run_summary_names_the_legacy_encoding(ingested):
    encodings = {Path(d["source"]).name: d["encoding"] for d in ingested["summary"]["documents"]
                 if d["status"] == "indexed"}

    assert {"lighthouse.pdf": None, "quokka.pdf": None, "notes.md": "cp1252"} == encodings


def test_broken_file_records_its_reason(ingested):
    broken = next(r for r in ingested["tables"]["documents"] if r["source"].endswith("broken.pdf"))

    assert broken["error"]
    assert broken["run_id"] is None  # never indexed: nothing of it is searchable


def test_chunk_offsets_slice_the_document_text(ingested):
    docs = {r["doc_id"]: r for r in ingested["tables"]["documents"]}
    chunks = ingested["tables"]["chunks"]

    assert chunks
    for chunk in chunks:
        assert chunk["text"] == docs[chunk["doc_id"]]["text"][chunk["char_start"]:chunk["char_end"]]


def test_chunk_pages_agree_with_page_spans(ingested, corpus_dir):
    settings = Settings()
    spans = {}
    for path in corpus_dir.glob("*.pdf"):
        if path.name != "broken.pdf":
            doc = extract_document(path, settings)
            spans[doc.doc_id] = doc.pages
    for chunk in ingested["tables"]["chunks"]:
        if chunk["doc_id"] not in spans:
            continue
        pages = spans[chunk["doc_id"]]
        expected_first = max(s.page for s in pages if s.start <= chunk["char_start"])
        expected_last = max(s.page for s in pages if s.start < chunk["char_end"])
        assert (expected_first, expected_last) == (chunk["page_start"], chunk["page_end"])


def test_multi_page_documents_have_chunks_on_later_pages(ingested):
    pages = {page for c in ingested["tables"]["chunks"] if c["source"].endswith("lighthouse.pdf")
             for page in range(c["page_start"], c["page_end"] + 1)}

    assert {1, 2, 3} <= pages


def test_every_proposition_has_its_chunk_and_document(ingested):
    chunk_docs = {c["chunk_id"]: c["doc_id"] for c in ingested["tables"]["chunks"]}
    doc_ids = {d["doc_id"] for d in ingested["tables"]["documents"]}
    props = ingested["tables"]["propositions"]

    assert props
    assert all(chunk_docs[p["chunk_id"]] == p["doc_id"] for p in props)
    assert all(p["doc_id"] in doc_ids for p in props)


def test_document_counts_match_the_tables(ingested):
    tables = ingested["tables"]
    for doc in tables["documents"]:
        chunks = [c for c in tables["chunks"] if c["doc_id"] == doc["doc_id"]]
        props = [p for p in tables["propositions"] if p["doc_id"] == doc["doc_id"]]
        assert (doc["chunk_count"] or 0) == len(chunks)
        assert (doc["proposition_count"] or 0) == len(props)
        assert (doc["passed_count"] or 0) == sum(p["passed"] for p in props)


def test_chunks_carry_contextual_headers(ingested):
    chunk = next(c for c in ingested["tables"]["chunks"] if c["source"].endswith("lighthouse.pdf"))

    assert "Lighthouse of Alexandria" in chunk["header"]
    assert "Summary:" in chunk["header"]


def test_sections_come_from_the_outline(ingested):
    sections = {c["section"] for c in ingested["tables"]["chunks"] if c["source"].endswith("lighthouse.pdf")}

    assert {"Construction", "Destruction", "Height"} <= sections


def test_lineage_fields_are_filled(ingested):
    run_id = ingested["summary"]["run_id"]
    for prop in ingested["tables"]["propositions"]:
        assert (run_id, "all-MiniLM-L6-v2-int8", "offline-rules") == (
            prop["run_id"], prop["embed_model"], prop["llm_model"])
        assert prop["prompt_version"] and prop["content_sha256"] and prop["source"]


def test_run_summary_reports_failure_and_counts(ingested):
    summary = ingested["summary"]

    assert 3 == summary["indexed"]
    assert 1 == summary["failed"]
    assert len(ingested["tables"]["chunks"]) == summary["totals"]["chunks"]


def test_verify_finds_the_index_consistent(ingested, capsys):
    assert 0 == main(["verify", "--db", str(ingested["db"])])


def test_search_returns_propositions_with_parent_chunk(ingested, capsys):
    code = main(["search", "Who built a fortress on the site of the lighthouse?", "--db",
                 str(ingested["db"]), "--level", "propositions", "--json", "-k", "3"])
    results = json.loads(capsys.readouterr().out)

    assert 0 == code
    top = results[0]
    assert "lighthouse.pdf" in top["source"]
    assert top["prop_id"] and top["chunk_id"] and top["title"]
    parent = next(c for c in ingested["tables"]["chunks"] if c["chunk_id"] == top["chunk_id"])
    assert parent["text"] == top["chunk_text"]
    assert top["page_start"] <= top["page_end"]


def test_status_lists_every_document(ingested, capsys):
    main(["status", "--db", str(ingested["db"]), "--json"])
    rows = json.loads(capsys.readouterr().out)

    assert 4 == len(rows)
    assert {"source", "status", "error", "chunk_count", "proposition_count", "ingested_at"} <= set(rows[0])


def test_status_text_shows_hash_last_run_and_error(ingested, capsys):
    main(["status", "--db", str(ingested["db"])])
    lines = capsys.readouterr().out.splitlines()

    def line_for(doc: dict) -> list[str]:
        facts = (doc["source"], doc["content_sha256"][:12], str(doc["last_run_id"] or doc["run_id"]),
                 doc["status"], doc["error"] or "")
        return [line for line in lines if all(fact in line for fact in facts)]

    assert [1] * 4 == [len(line_for(doc)) for doc in ingested["tables"]["documents"]]


def test_unchanged_rerun_makes_no_calls_and_no_writes(ingested, corpus_dir):
    from flows.ingest import ingest

    db = ingested["db"]
    versions = {n: lancedb.connect(str(db)).open_table(n).version
                for n in ("documents", "chunks", "propositions")}
    summary = ingest(sources=[str(corpus_dir)], db=str(db))

    assert 4 == len(summary["unchanged"])  # the broken file too: same bytes, same failure
    assert 0 == summary["totals"]["llm_calls"] + summary["totals"]["embeddings_computed"]
    assert versions == {n: lancedb.connect(str(db)).open_table(n).version
                        for n in ("documents", "chunks", "propositions")}


def test_removed_and_changed_sources(tmp_path, corpus_dir):
    from flows.ingest import ingest

    folder = tmp_path / "src"
    shutil.copytree(corpus_dir, folder)
    (folder / "broken.pdf").unlink()
    db = tmp_path / "db"
    ingest(sources=[str(folder)], db=str(db))
    (folder / "quokka.pdf").unlink()
    (folder / "notes.md").write_text("# Field notes\n\nThe island has no cars.\n", encoding="utf-8")

    summary = ingest(sources=[str(folder)], db=str(db))
    sources = {Path(r["source"]).name for r in _tables(db)["documents"]}

    assert [str(folder / "quokka.pdf")] == summary["removed"]
    assert {"lighthouse.pdf", "notes.md"} == sources
    assert ["changed"] == [d["reason"] for d in summary["documents"]]
