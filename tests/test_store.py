"""The LanceDB store: atomic replacement, failures, pruning, sweeping, verify, predicates."""

from __future__ import annotations

import os
import threading
from collections import Counter
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from propdex.errors import StorageError
from propdex.search import search
from propdex.store import CHUNKS, DOCUMENTS, PROPOSITIONS, Index
from propdex.store.predicates import all_of, eq, in_list, sql_string
from tests.store_rows import DIM, axis, make_version

PARAGRAPHS_V1 = ["Old alpha paragraph about owls.", "Old beta paragraph about foxes."]
PARAGRAPHS_V2 = ["New alpha paragraph about owls.", "New beta paragraph about foxes.",
                 "New gamma paragraph about bees."]

NASTY_NAMES = [
    "it's \"odd\"; DROP.txt",
    "naïve – ü.pdf",
    "line\nbreak.txt",
    "back\\slash\\'quote\\.md",
    "' OR '1'='1.txt",
    "%_wild*?[card].txt",
    "x" * 251 + ".txt",  # 255 bytes
    "é" * 125 + ".pdf",  # 254 bytes of UTF-8
]


@pytest.fixture
def index(tmp_path) -> Index:
    return Index.open(str(tmp_path / "db"), dim=DIM)


def table_rows(index: Index, name: str, columns=("doc_id", "run_id")) -> list[dict]:
    return index.read(name, list(columns))


def live_texts(index: Index, doc_id: str) -> list[str]:
    return sorted(r["text"] for r in index.live_rows(CHUNKS, ["text"], doc_id))


def searchable_chunk_texts(index: Index, doc_id: str) -> list[str]:
    results = search(index, "", axis(0), level="chunks", k=50, doc_ids=[doc_id])
    return sorted(r.text for r in results)


# Opening --------------------------------------------------------------------------------
@pytest.mark.parametrize("create", [True, False])
def test_reads_on_a_missing_database_are_empty_and_create_nothing(tmp_path, create):
    path = tmp_path / "missing-db"
    index = Index.open(str(path), create=create)
    outcome = (index.documents(), index.document("doc"), index.verify(),
               index.sweep_uncommitted(), index.live_runs())
    index.delete_documents(["doc"])
    index.optimize()
    assert (([], None, [], 0, {}), False) == (outcome, path.exists())


def test_batches_hold_every_row_with_absent_columns_as_nulls(index):
    index.replace_document(*make_version("d", "r1", PARAGRAPHS_V2).rows)
    rows = [row for batch in index.read_batches(CHUNKS, ["chunk_id", "no_such_column"])
            for row in batch.to_pylist()]
    assert ([{"chunk_id": f"d:c{i}", "no_such_column": None} for i in range(3)], 3, 1) == (
        sorted(rows, key=lambda r: r["chunk_id"]), index.count(CHUNKS),
        index.count(CHUNKS, eq("chunk_id", "d:c1")))


def test_a_missing_table_has_no_batches_and_no_rows(tmp_path):
    index = Index.open(str(tmp_path / "missing-db"), create=False)
    assert ([], 0, 0) == (list(index.read_batches(CHUNKS, ["chunk_id"])), index.count(CHUNKS),
                          index.read_arrow(CHUNKS, ["chunk_id"]).num_rows)


def test_relative_paths_are_opened_as_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert str(tmp_path / "db") == Index.open("db").uri


def test_tables_declare_their_primary_keys(index):
    index.replace_document(*make_version("d", "r1", PARAGRAPHS_V1).rows)
    keys = {
        name: [f.name for f in index.table(name).schema
               if (f.metadata or {}).get(b"lance-schema:unenforced-primary-key") == b"true"]
        for name in (DOCUMENTS, CHUNKS, PROPOSITIONS)
    }
    assert {DOCUMENTS: ["doc_id"], CHUNKS: ["chunk_id"], PROPOSITIONS: ["prop_id"]} == keys


def test_create_false_refuses_to_create_a_database(tmp_path):
    index = Index.open(str(tmp_path / "db"), dim=DIM, create=False)
    with pytest.raises(StorageError, match="no index at"):
        index.replace_document(*make_version("d", "r1", PARAGRAPHS_V1).rows)
    assert not (tmp_path / "db").exists()


# Replacement ----------------------------------------------------------------------------
def test_replace_document_stores_the_ledger_and_live_rows(index):
    version = make_version("d", "r1", PARAGRAPHS_V1)
    index.replace_document(*version.rows)
    row = index.document("d")
    assert (
        ("indexed", "r1", 2, 4, 4, "\n\n".join(PARAGRAPHS_V1), sorted(PARAGRAPHS_V1), [])
        == (row["status"], row["run_id"], row["chunk_count"], row["proposition_count"],
            row["passed_count"], row["text"], live_texts(index, "d"), index.verify())
    )


def test_documents_listing_leaves_out_the_text_unless_asked(index):
    index.replace_document(*make_version("d", "r1", PARAGRAPHS_V1).rows)
    listed, with_text = index.documents()[0], index.documents(with_text=True)[0]
    assert (False, True) == ("text" in listed, "text" in with_text)


def test_re_replacing_leaves_exactly_the_new_rows(index):
    index.replace_document(*make_version("d", "r1", PARAGRAPHS_V1).rows)
    index.replace_document(*make_version("d", "r2", PARAGRAPHS_V2).rows)
    chunk_runs = Counter(r["run_id"] for r in table_rows(index, CHUNKS))
    prop_runs = Counter(r["run_id"] for r in table_rows(index, PROPOSITIONS))
    assert ({"r2": 3}, {"r2": 6}, 1, []) == (
        dict(chunk_runs), dict(prop_runs), len(index.documents()), index.verify())


def test_crash_after_appending_keeps_the_old_version_searchable(index):
    index.replace_document(*make_version("d", "r1", PARAGRAPHS_V1).rows)
    index._append_rows(index.prepare_replacement(*make_version("d", "r2", PARAGRAPHS_V2).rows))
    assert (sorted(PARAGRAPHS_V1), sorted(PARAGRAPHS_V1), "r1") == (
        searchable_chunk_texts(index, "d"), live_texts(index, "d"), index.document("d")["run_id"])


def test_crash_after_the_commit_shows_only_the_new_version(index):
    index.replace_document(*make_version("d", "r1", PARAGRAPHS_V1).rows)
    replacement = index.prepare_replacement(*make_version("d", "r2", PARAGRAPHS_V2).rows)
    index._append_rows(replacement)
    index._commit_document(replacement)
    assert (sorted(PARAGRAPHS_V2), sorted(PARAGRAPHS_V2)) == (
        searchable_chunk_texts(index, "d"), live_texts(index, "d"))


@pytest.mark.parametrize("committed", [False, True])
def test_sweep_removes_what_a_crashed_replacement_left(index, committed):
    index.replace_document(*make_version("d", "r1", PARAGRAPHS_V1).rows)
    replacement = index.prepare_replacement(*make_version("d", "r2", PARAGRAPHS_V2).rows)
    index._append_rows(replacement)
    if committed:
        index._commit_document(replacement)
    left_behind = 2 + 4 if committed else 3 + 6  # the superseded version or the new one
    removed = index.sweep_uncommitted()
    survivors = {r["run_id"] for r in table_rows(index, CHUNKS)}
    assert (left_behind, {"r2" if committed else "r1"}, []) == (removed, survivors, index.verify())


def test_check_reports_a_crashed_replacement_as_leftovers_not_problems(index):
    index.replace_document(*make_version("d", "r1", PARAGRAPHS_V1).rows)
    index._append_rows(index.prepare_replacement(*make_version("d", "r2", PARAGRAPHS_V2).rows))
    found = index.check()
    assert ([], [("r2", 3, 6, ["d"])]) == (found.problems, [
        (left.run_id, left.chunks, left.propositions, list(left.documents))
        for left in found.leftovers])


def test_rows_of_a_document_never_committed_are_leftovers_naming_their_run_and_source(index):
    index.replace_document(*make_version("d", "r1", PARAGRAPHS_V1).rows)
    index._append_rows(index.prepare_replacement(*make_version("n", "r2", PARAGRAPHS_V2).rows))
    [leftovers] = index.check().leftovers
    source = make_version("n", "r2", PARAGRAPHS_V2).rows[0]["source"]
    assert (f"run r2 left 3 chunk and 6 proposition row(s) uncommitted (1 document(s): "
            f"document n ({source})): an interrupted run's leftovers; search ignores them and "
            "the next ingest removes them") == leftovers.describe()


def test_a_new_document_is_invisible_until_committed(index):
    index._append_rows(index.prepare_replacement(*make_version("d", "r1", PARAGRAPHS_V1).rows))
    assert ([], [], [], 6) == (
        index.documents(), searchable_chunk_texts(index, "d"),
        search(index, "", axis(0), k=5), index.sweep_uncommitted())


def test_a_retried_replacement_discards_its_own_uncommitted_rows(index):
    version = make_version("d", "r1", PARAGRAPHS_V1)
    index._append_rows(index.prepare_replacement(*version.rows))
    index.replace_document(*version.rows)
    ids = Counter(r["chunk_id"] for r in table_rows(index, CHUNKS, ("chunk_id",)))
    assert ({"d:c0": 1, "d:c1": 1}, []) == (dict(ids), index.verify())


def test_a_retried_replacement_after_its_commit_finishes_the_clean_up(index):
    index.replace_document(*make_version("d", "r1", PARAGRAPHS_V1).rows)
    version = make_version("d", "r2", PARAGRAPHS_V2)
    replacement = index.prepare_replacement(*version.rows)
    index._append_rows(replacement)
    index._commit_document(replacement)
    index.replace_document(*version.rows)  # the task's retry, same run
    assert ({"r2": 3}, []) == (
        dict(Counter(r["run_id"] for r in table_rows(index, CHUNKS))), index.verify())


def test_a_version_without_chunks_replaces_one_with_chunks(index):
    index.replace_document(*make_version("d", "r1", PARAGRAPHS_V1).rows)
    empty = make_version("d", "r2", [])
    index.replace_document(*empty.rows)
    assert ([], 0, []) == (table_rows(index, CHUNKS), index.document("d")["chunk_count"],
                           index.verify())


def test_one_run_cannot_commit_two_different_versions(index):
    index.replace_document(*make_version("d", "r1", PARAGRAPHS_V1).rows)
    with pytest.raises(ValueError, match="already committed another version"):
        index.replace_document(*make_version("d", "r1", PARAGRAPHS_V2).rows)


def test_concurrent_replacements_of_different_documents_leave_no_duplicates(index):
    def worker(w: int) -> None:
        for run in range(3):
            paragraphs = PARAGRAPHS_V1 if run % 2 else PARAGRAPHS_V2
            index.replace_document(*make_version(f"doc{w}", f"run{run}", paragraphs, seed=w).rows)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    doc_ids = Counter(r["doc_id"] for r in index.documents())
    chunk_ids = Counter(r["chunk_id"] for r in table_rows(index, CHUNKS, ("chunk_id",)))
    prop_ids = Counter(r["prop_id"] for r in table_rows(index, PROPOSITIONS, ("prop_id",)))
    assert ({1}, {1}, {1}, 4 * 3, []) == (
        set(doc_ids.values()), set(chunk_ids.values()), set(prop_ids.values()),
        len(chunk_ids), index.verify())


def test_concurrent_replacements_of_one_document_leave_one_version(tmp_path):
    path = str(tmp_path / "db")

    def worker(w: int) -> None:
        # Separate Index objects, as separate Prefect tasks would open them.
        Index.open(path, dim=DIM).replace_document(
            *make_version("same", f"run{w}", PARAGRAPHS_V2, seed=w).rows)

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    index = Index.open(path)
    runs = {r["run_id"] for r in table_rows(index, CHUNKS)}
    assert (1, 1, 3, []) == (len(index.documents()), len(runs), len(table_rows(index, CHUNKS)),
                             index.verify())


def test_writers_racing_optimize_on_a_new_database_all_succeed(tmp_path):
    """Separate Index objects create the tables, write and compact at the same time."""
    path = str(tmp_path / "db")
    errors: list[BaseException] = []
    writing = threading.Event()

    def writer(w: int) -> None:
        try:
            for run in range(3):
                paragraphs = PARAGRAPHS_V1 if run % 2 else PARAGRAPHS_V2
                Index.open(path, dim=DIM).replace_document(
                    *make_version(f"doc{w}", f"run{run}", paragraphs, seed=w).rows)
        except BaseException as exc:  # collected: a thread's exception is otherwise lost
            errors.append(exc)

    def optimizer() -> None:
        try:
            while True:  # at least once, then until the writers are done
                Index.open(path).optimize(vector_index_threshold=8)
                if not writing.is_set():
                    return
        except BaseException as exc:
            errors.append(exc)

    writing.set()
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    compactor = threading.Thread(target=optimizer)
    for t in [*threads, compactor]:
        t.start()
    for t in threads:
        t.join()
    writing.clear()
    compactor.join()
    index = Index.open(path)
    chunk_ids = Counter(r["chunk_id"] for r in table_rows(index, CHUNKS, ("chunk_id",)))
    assert ([], {1}, []) == (errors, set(chunk_ids.values()), index.verify())


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"chunk_count": 5}, "chunk_count is 5 but 2 rows were given"),
        ({"status": "failed"}, "use record_failure"),
        ({"run_id": None}, "needs the document row's run_id"),
        ({"colour": "red"}, "unknown column"),
        ({"source": None}, "source is required"),
    ],
)
def test_replace_document_rejects_a_bad_document_row(index, change, message):
    version = make_version("d", "r1", PARAGRAPHS_V1)
    version.document.update(change)
    with pytest.raises(ValueError, match=message):
        index.replace_document(*version.rows)


def test_replace_document_rejects_a_proposition_without_its_chunk(index):
    version = make_version("d", "r1", PARAGRAPHS_V1)
    version.propositions[0]["chunk_id"] = "elsewhere"
    with pytest.raises(ValueError, match="is not in chunk_rows"):
        index.replace_document(*version.rows)


def test_replace_document_rejects_vectors_of_another_dimension(index):
    version = make_version("d", "r1", PARAGRAPHS_V1)
    version.chunks[0]["vector"] = np.ones(DIM + 1, dtype=np.float32)
    with pytest.raises(ValueError, match="index expects 8"):
        index.replace_document(*version.rows)


def test_proposition_pages_default_to_their_chunk_pages(index):
    version = make_version("d", "r1", PARAGRAPHS_V1)
    for prop in version.propositions:
        del prop["page_start"], prop["page_end"]
    index.replace_document(*version.rows)
    pages = {(r["chunk_id"], r["page_start"]) for r in
             index.live_rows(PROPOSITIONS, ["chunk_id", "page_start"], "d")}
    assert {("d:c0", 1), ("d:c1", 2)} == pages


# Failures -------------------------------------------------------------------------------
def failure(doc_id: str, run_id: str, status: str = "failed") -> dict:
    return {"doc_id": doc_id, "source": f"/corpus/{doc_id}.txt", "content_sha256": "new-sha",
            "status": status, "error": "encrypted PDF", "pipeline_version": "fp2",
            "last_run_id": run_id, "last_attempt_at": datetime(2030, 1, 2, tzinfo=UTC)}


def test_record_failure_keeps_the_previous_version_searchable(index):
    index.replace_document(*make_version("d", "r1", PARAGRAPHS_V1).rows)
    before = index.document("d")
    index.record_failure(failure("d", "r2"))
    after = index.document("d")
    kept = ("run_id", "ingested_at", "chunk_count", "proposition_count", "title", "text")
    assert (
        {k: before[k] for k in kept}, ("failed", "encrypted PDF", "r2"),
        datetime(2030, 1, 2, tzinfo=UTC), sorted(PARAGRAPHS_V1), [],
    ) == (
        {k: after[k] for k in kept}, (after["status"], after["error"], after["last_run_id"]),
        after["last_attempt_at"], searchable_chunk_texts(index, "d"), index.verify(),
    )


def test_record_failure_records_the_hash_and_fingerprint_the_attempt_saw(index):
    index.replace_document(*make_version("d", "r1", PARAGRAPHS_V1).rows)
    index.record_failure(failure("d", "r2"))
    row = index.document("d")
    assert ("new-sha", "fp2") == (row["content_sha256"], row["pipeline_version"])


def test_record_failure_of_a_new_document_has_no_live_run(index):
    index.record_failure(failure("d", "r1", status="skipped"))
    row = index.document("d")
    assert ("skipped", None, None, "new-sha", []) == (
        row["status"], row["run_id"], row["ingested_at"], row["content_sha256"], index.verify())


def test_record_failure_twice_keeps_one_row_with_the_latest_attempt(index):
    index.record_failure(failure("d", "r1"))
    index.record_failure({**failure("d", "r2"), "content_sha256": "newer-sha"})
    assert [("r2", "newer-sha")] == [
        (r["last_run_id"], r["content_sha256"]) for r in index.documents()]


def test_record_failure_refuses_an_indexed_status(index):
    with pytest.raises(ValueError, match="status must be one of"):
        index.record_failure(failure("d", "r1", status="indexed"))


def test_a_later_success_replaces_a_failure(index):
    index.record_failure(failure("d", "r1"))
    index.replace_document(*make_version("d", "r2", PARAGRAPHS_V1).rows)
    row = index.document("d")
    assert ("indexed", None, "r2", []) == (
        row["status"], row["error"], row["run_id"], index.verify())


# Deleting -------------------------------------------------------------------------------
def test_delete_documents_removes_every_row_of_those_documents(index):
    for doc_id in ("keep", "drop"):
        index.replace_document(*make_version(doc_id, "r1", PARAGRAPHS_V1).rows)
    index.delete_documents(["drop"])
    remaining = {name: {r["doc_id"] for r in table_rows(index, name)}
                 for name in (DOCUMENTS, CHUNKS, PROPOSITIONS)}
    assert ({DOCUMENTS: {"keep"}, CHUNKS: {"keep"}, PROPOSITIONS: {"keep"}}, []) == (
        remaining, index.verify())


# Filters built from names ---------------------------------------------------------------
@pytest.mark.parametrize("name", NASTY_NAMES)
def test_nasty_names_are_replaced_searched_failed_and_deleted_alone(index, name):
    neighbour = make_version("plain", "r1", PARAGRAPHS_V1, source="/corpus/plain.txt")
    index.replace_document(*neighbour.rows)
    index.replace_document(*make_version(name, "r1", PARAGRAPHS_V1, source=f"/corpus/{name}").rows)
    index.replace_document(*make_version(name, "r2", PARAGRAPHS_V2, source=f"/corpus/{name}").rows)
    index.record_failure({**failure(name, "r3"), "source": f"/corpus/{name}"})
    found = {r.doc_id for r in search(index, "", axis(0), level="chunks", k=20, doc_ids=[name])}
    problems = index.verify()
    index.delete_documents([name])
    assert ({name}, [], ["plain"], 2) == (
        found, problems, [r["doc_id"] for r in index.documents()],
        len(table_rows(index, CHUNKS)))


def test_sql_string_doubles_single_quotes_and_keeps_backslashes():
    assert "'it''s \\ ok'" == sql_string("it's \\ ok")


def test_sql_string_rejects_nul():
    with pytest.raises(ValueError, match="NUL"):
        sql_string("a\x00b")


def test_sql_string_rejects_undecodable_file_name_bytes():
    with pytest.raises(ValueError, match="valid Unicode"):
        sql_string(os.fsdecode(b"bad\xff.txt"))


@pytest.mark.parametrize(("values", "expected"), [
    ([], "false"),
    (["a", "a", "b'c"], "doc_id IN ('a', 'b''c')"),
])
def test_in_list(values, expected):
    assert expected == in_list("doc_id", values)


def test_column_names_must_be_identifiers():
    with pytest.raises(ValueError, match="not a column name"):
        eq("doc_id = 'x' OR 1=1 --", "x")


@pytest.fixture(scope="module")
def names_table(tmp_path_factory):
    import lancedb

    db = lancedb.connect(str(tmp_path_factory.mktemp("names")))
    return db.create_table("names", pa.table({"marker": ["base", "base"],
                                              "name": ["plain", "it's"]}))


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.text(alphabet=st.characters(blacklist_characters="\x00",
                                             blacklist_categories=("Cs",)), max_size=40))
def test_any_value_matches_exactly_its_own_rows(names_table, value):
    names_table.add(pa.table({"marker": ["example"], "name": [value]}))
    try:
        expected = names_table.to_arrow().column("name").to_pylist().count(value)
        matched = names_table.count_rows(all_of(eq("name", value), in_list("name", [value])))
        assert expected == matched
    finally:
        names_table.delete(eq("marker", "example"))


# Full-text and vector indexes -----------------------------------------------------------
def test_full_text_search_covers_rows_added_after_the_index_was_built(index):
    index.replace_document(*make_version("first", "r1", ["Owls hunt at night."]).rows)
    index.optimize()
    index.replace_document(*make_version("second", "r1", ["Zebras graze on the savanna."]).rows)
    before = [r.doc_id for r in search(index, "zebras", None, level="chunks", mode="fts")]
    index.optimize()
    stats = index.table(CHUNKS).index_stats("text_idx")
    after = [r.doc_id for r in search(index, "zebras", None, level="chunks", mode="fts")]
    assert (["second"], ["second"], 0) == (before, after, stats.num_unindexed_rows)


def test_full_text_search_forgets_deleted_documents(index):
    index.replace_document(*make_version("gone", "r1", ["Zebras graze on the savanna."]).rows)
    index.optimize()
    index.delete_documents(["gone"])
    rows = index.rankings().text_ranking(CHUNKS, "zebras", limit=10, columns=["chunk_id"],
                                         doc_ids=None)
    assert [] == rows


def test_optimize_builds_a_vector_index_only_above_the_threshold(index):
    index.replace_document(*make_version("d", "r1", PARAGRAPHS_V2).rows)  # 3 chunks, 6 props
    index.optimize(vector_index_threshold=5)
    assert (False, True) == (index.has_vector_index(CHUNKS), index.has_vector_index(PROPOSITIONS))


def test_search_with_a_vector_index_still_finds_the_nearest_rows(index):
    paragraphs = [f"Paragraph number {i}." for i in range(40)]
    vectors = {i: axis(i % DIM, tilt=0.1 * (i // DIM), towards=(i + 1) % DIM) for i in range(40)}
    index.replace_document(*make_version("d", "r1", paragraphs, chunk_vectors=vectors).rows)
    index.optimize(vector_index_threshold=30)
    top = search(index, "", vectors[17], level="chunks", k=1)
    assert (True, ["Paragraph number 17."]) == (
        index.has_vector_index(CHUNKS), [r.text for r in top])


def _vector_index_names(index, table: str) -> list[str]:
    return [i.name for i in index.table(table).list_indices() if "vector" in i.columns]


@pytest.mark.parametrize(("table", "columns", "kinds"), [
    (CHUNKS, ["chunk_id", "doc_id", "meta", "embed_model"],
     ["BTree", "BTree", "LabelList", "Bitmap"]),
    (PROPOSITIONS, ["passed", "doc_id", "meta", "embed_model"],
     ["Bitmap", "BTree", "LabelList", "Bitmap"])])
def test_optimize_builds_the_scalar_indexes_of_search_filters_once(index, table, columns,
                                                                   kinds):
    index.replace_document(*make_version("a", "r1", ["One.", "Two."]).rows)
    first, second = index.optimize()[table], index.optimize()[table]
    built = ", ".join(f"built the {column} index" for column in columns)
    indexes = {tuple(i.columns): i.index_type for i in index.table(table).list_indices()}
    assert (f"optimized, {built}", "optimized", kinds) == (
        first, second, [indexes.get((column,)) for column in columns])


def test_vector_index_is_retrained_once_the_table_has_grown_fourfold(index):
    index.replace_document(*make_version("a", "r1", [f"First {i}." for i in range(20)]).rows)
    index.optimize(vector_index_threshold=20)
    index.replace_document(*make_version("b", "r1", [f"Second {i}." for i in range(40)]).rows)
    grown_threefold = index.optimize(vector_index_threshold=20)[CHUNKS]
    index.replace_document(*make_version("c", "r1", [f"Third {i}." for i in range(20)]).rows)
    grown_fourfold = index.optimize(vector_index_threshold=20)[CHUNKS]

    assert ("optimized", "re-trained IVF_FLAT vector index (2 partitions) over 80 rows",
            ["vector_ivf_flat_80_p2"]) == (
        grown_threefold, grown_fourfold.removeprefix("optimized, "), _vector_index_names(index, CHUNKS))


def test_a_vector_index_of_another_kind_is_replaced_by_ivf_flat(index):
    from lancedb.index import HnswSq

    index.replace_document(*make_version("a", "r1", [f"Row {i}." for i in range(30)]).rows)
    index.table(CHUNKS).create_index("vector", config=HnswSq(distance_type="cosine"))
    index.optimize(vector_index_threshold=1000)

    assert ["vector_ivf_flat_30_p2"] == _vector_index_names(index, CHUNKS)


def test_an_index_named_without_its_partitions_is_replaced(index):
    from lancedb.index import IvfFlat

    # What an older propdex trained: sqrt(rows) partitions, which optimize() re-partitions.
    index.replace_document(*make_version("a", "r1", [f"Row {i}." for i in range(30)]).rows)
    index.table(CHUNKS).create_index("vector", config=IvfFlat(distance_type="cosine",
                                                              num_partitions=5),
                                     name="vector_ivf_flat_30")
    index.optimize(vector_index_threshold=1000)

    assert ["vector_ivf_flat_30_p2"] == _vector_index_names(index, CHUNKS)


@pytest.mark.parametrize(("rows", "expected"), [
    (5_000, 2), (100_000, 48), (1_000_000, 488)])
def test_vector_index_partitions_hold_about_two_thousand_rows(rows, expected):
    from propdex.store.maintenance import vector_index_partitions

    assert expected == vector_index_partitions(rows)


@pytest.mark.parametrize(("rows", "partitions", "expected"), [
    (5_000, 2, 2),  # every partition: fewer rows than VECTOR_INDEX_SCAN_ROWS
    (100_000, 48, 10),  # 20,000 rows
    (1_000_000, 488, 49),  # a tenth of the rows
])
def test_vector_index_probes_scan_twenty_thousand_rows_or_a_tenth(rows, partitions, expected):
    from propdex.store.maintenance import vector_index_probes

    assert expected == vector_index_probes(rows, partitions)


def test_optimize_keeps_the_vector_index_partitions_after_a_replacement(index):
    """LanceDB's optimize() re-partitions an index of small partitions (316 of 316 rows at
    100k became one searched through every row); propdex's partitions must outlive it.
    Two clusters, one per partition: a one-probe search reads only the query's cluster."""
    def cluster(doc_id: str, run_id: str, towards: int) -> tuple:
        vectors = {i: axis(towards, tilt=0.02 * (i % 50), towards=(towards + 2 + i % 3) % DIM)
                   for i in range(2_100)}
        return make_version(doc_id, run_id, [f"{doc_id} row {i}." for i in range(2_100)],
                            chunk_vectors=vectors).rows

    index.replace_document(*cluster("east", "r1", 0))
    index.replace_document(*cluster("north", "r1", 1))
    index.optimize(vector_index_threshold=4_000)
    index.replace_document(*cluster("east", "r2", 0))  # deletes and appends 2,100 rows
    index.optimize(vector_index_threshold=4_000)

    table = index.table(CHUNKS)
    found = (table.search(axis(0), vector_column_name="vector").distance_type("cosine")
             .nprobes(1).select(["doc_id"]).limit(4_000).to_arrow()["doc_id"].to_pylist())
    assert (["vector_ivf_flat_4200_p2"], {"east"}) == (
        _vector_index_names(index, CHUNKS), set(found))


# Storage errors -------------------------------------------------------------------------
def test_a_database_path_that_cannot_be_created_raises_storage_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    index = Index.open(str(blocker / "db"), dim=DIM)
    with pytest.raises(StorageError, match=str(blocker / "db")):
        index.replace_document(*make_version("d", "r1", PARAGRAPHS_V1).rows)


def test_a_refused_write_leaves_the_existing_version_intact(tmp_path):
    path = str(tmp_path / "db")
    Index.open(path, dim=DIM).replace_document(*make_version("d", "r1", PARAGRAPHS_V1).rows)
    other_embedder = Index.open(path, dim=DIM * 2)
    version = make_version("d", "r2", PARAGRAPHS_V2)
    for row in (*version.chunks, *version.propositions):
        row["vector"] = np.ones(DIM * 2, dtype=np.float32)
    with pytest.raises(StorageError, match="8-dimensional vectors"):
        other_embedder.replace_document(*version.rows)
    index = Index.open(path, dim=DIM)
    assert (sorted(PARAGRAPHS_V1), "r1", []) == (
        searchable_chunk_texts(index, "d"), index.document("d")["run_id"], index.verify())


# verify ---------------------------------------------------------------------------------
def _set(table, where: str, values: dict) -> None:
    table.update(where=where, values=values)


def plant_count_mismatch(index):
    _set(index.table(DOCUMENTS), eq("doc_id", "d"), {"chunk_count": 7})


def plant_orphan_chunk(index):
    row = index.table(CHUNKS).search().where(eq("chunk_id", "d:c0")).to_arrow()
    index.table(CHUNKS).add(row.set_column(row.schema.get_field_index("doc_id"), "doc_id",
                                           pa.array(["ghost"])))


def plant_duplicate_chunk(index):
    index.table(CHUNKS).add(index.table(CHUNKS).search().where(eq("chunk_id", "d:c0")).to_arrow())


def plant_duplicate_document(index):
    index.table(DOCUMENTS).add(index.table(DOCUMENTS).search().where(eq("doc_id", "d")).to_arrow())


def plant_text_mismatch(index):
    _set(index.table(CHUNKS), eq("chunk_id", "d:c0"), {"text": "Something else entirely."})


def plant_offsets_outside(index):
    _set(index.table(CHUNKS), eq("chunk_id", "d:c1"), {"char_end": 10_000})


def plant_pages_reversed(index):
    _set(index.table(CHUNKS), eq("chunk_id", "d:c1"), {"page_start": 3, "page_end": 2})


def plant_missing_parent(index):
    index.table(CHUNKS).delete(eq("chunk_id", "d:c1"))


def plant_parent_in_other_document(index):
    _set(index.table(PROPOSITIONS), eq("prop_id", "d:c0:p0"), {"chunk_id": "e:c0"})


def plant_proposition_pages(index):
    _set(index.table(PROPOSITIONS), eq("prop_id", "d:c0:p0"), {"page_end": 2})


def plant_uncommitted(index):
    index._append_rows(index.prepare_replacement(*make_version("d", "r9", PARAGRAPHS_V2).rows))


def plant_indexed_without_run(index):
    _set(index.table(DOCUMENTS), eq("doc_id", "e"), {"run_id": None})


def plant_lineage_mismatch(index):
    _set(index.table(CHUNKS), eq("chunk_id", "d:c0"), {"source": "/elsewhere.txt"})


@pytest.mark.parametrize(("plant", "expected"), [
    (plant_count_mismatch, "chunk_count is 7 but 2 live row(s) exist"),
    (plant_duplicate_chunk, "duplicate live chunk chunk_id"),
    (plant_duplicate_document, "duplicate documents rows"),
    (plant_text_mismatch, "chunk text differs from document text"),
    (plant_offsets_outside, "chunk offsets outside the document text"),
    (plant_pages_reversed, "page_start/page_end out of order"),
    (plant_missing_parent, "proposition's chunk is not a live chunk"),
    (plant_parent_in_other_document, "proposition's chunk belongs to another document"),
    (plant_proposition_pages, "proposition pages differ from its chunk's pages"),
    (plant_indexed_without_run, "status is indexed but no run is committed"),
    (plant_lineage_mismatch, "chunk source differs from the documents row"),
])
def test_verify_finds_each_planted_problem(index, plant, expected):
    index.replace_document(*make_version("d", "r1", PARAGRAPHS_V1).rows)
    index.replace_document(*make_version("e", "r1", PARAGRAPHS_V1, seed=1).rows)
    clean = index.verify()
    plant(index)
    problems = index.verify()
    assert ([], True) == (clean, any(expected in p for p in problems)), problems


@pytest.mark.parametrize(("plant", "expected"), [
    (plant_orphan_chunk, [("r1", 1, 0, ["ghost"])]),
    (plant_uncommitted, [("r9", 3, 6, ["d"])]),
])
def test_rows_no_documents_row_names_are_leftovers_not_problems(index, plant, expected):
    index.replace_document(*make_version("d", "r1", PARAGRAPHS_V1).rows)
    index.replace_document(*make_version("e", "r1", PARAGRAPHS_V1, seed=1).rows)
    plant(index)
    found = index.check()
    assert ([], expected) == (found.problems, [
        (left.run_id, left.chunks, left.propositions, list(left.documents))
        for left in found.leftovers])


def test_an_index_from_an_older_schema_gains_new_columns_on_its_next_write(tmp_path):
    import lancedb

    from propdex.store.schema import DOCUMENTS_SCHEMA, schema_for

    uri = str(tmp_path / "db")
    old = pa.schema([f for f in DOCUMENTS_SCHEMA if f.name != "encoding"])
    db = lancedb.connect(uri)
    db.create_table(DOCUMENTS, schema=old)
    db.create_table(CHUNKS, schema=schema_for(CHUNKS, DIM))
    db.create_table(PROPOSITIONS, schema=schema_for(PROPOSITIONS, DIM))
    index = Index.open(uri, dim=DIM)
    index.replace_document(*make_version("d1", "r1", PARAGRAPHS_V1).rows)

    assert "encoding" in lancedb.connect(uri).open_table(DOCUMENTS).schema.names
    assert [("d1", None)] == [(r["doc_id"], r["encoding"]) for r in index.documents()]


def _documents_fragments(index: Index) -> int:
    return index.table(DOCUMENTS).stats()["fragment_stats"]["num_fragments"]


@pytest.mark.parametrize(("threshold", "expected"), [(4, True), (1_000, False)])
def test_commits_compact_the_documents_table_once_it_is_fragmented(index, monkeypatch,
                                                                   threshold, expected):
    monkeypatch.setattr("propdex.store.maintenance.DOCUMENTS_COMPACTION_FRAGMENTS", threshold)
    for number in range(10):  # a fragment per commit
        index.replace_document(*make_version(f"d{number}", "r1", [f"Text {number}."]).rows)
    assert (expected, 10) == (_documents_fragments(index) < 4, len(index.live_runs()))


def test_failure_records_compact_the_documents_table_once_it_is_fragmented(index, monkeypatch):
    monkeypatch.setattr("propdex.store.maintenance.DOCUMENTS_COMPACTION_FRAGMENTS", 4)
    for number in range(10):
        index.record_failure({"doc_id": f"f{number}", "source": f"/f{number}.pdf",
                              "status": "failed", "error": "unreadable",
                              "last_run_id": "r1"})
    assert (True, 10) == (_documents_fragments(index) < 4, len(index.documents()))
