"""A resident index's refresh reads: new fragments through pylance, the whole table for the
runs they lack (propdex.resident.fragments)."""

from __future__ import annotations

import pytest

from propdex.resident import ResidentIndex
from propdex.resident.fragments import NewRuns, TableDataset, documents_rows
from propdex.search import PROP_COLUMNS
from propdex.store import Index
from propdex.store.live import LIVE_COLUMNS
from propdex.store.schema import CHUNKS, DOCUMENTS, PROPOSITIONS, VECTOR
from tests.store_rows import DIM, make_version

COLUMNS = [*PROP_COLUMNS, VECTOR]


@pytest.fixture
def index(tmp_path) -> Index:
    index = Index.open(str(tmp_path / "db"), dim=DIM)
    for number in range(3):
        index.replace_document(*make_version(f"doc{number}", "r1", [f"Part {number}."] * 2,
                                             seed=number).rows)
    return index


def version_of(index: Index, name: str) -> int:
    return index.table(name).version


def prop_ids(rows) -> list[str]:
    return sorted(rows.column("prop_id").to_pylist())


def live_prop_ids(index: Index, doc_id: str) -> list[str]:
    return sorted(r["prop_id"] for r in index.live_rows(PROPOSITIONS, ["prop_id"], doc_id))


def read_new(reads: NewRuns, index: Index, runs: dict[str, str]):
    snapshot = index.live_documents()
    return reads.read(runs, snapshot.documents, version_of(index, PROPOSITIONS), COLUMNS)


def test_a_commit_is_read_from_the_fragments_it_appended(index):
    reads = NewRuns(index, PROPOSITIONS)
    reads.saw(version_of(index, PROPOSITIONS))
    index.replace_document(*make_version("late", "r1", ["Walruses bask."] * 3).rows)
    rows = read_new(reads, index, {"late": "r1"})
    assert (live_prop_ids(index, "late"), 0) == (prop_ids(rows), reads.whole_table_reads)


def test_rows_appended_before_an_earlier_read_are_found_in_the_whole_table(index):
    reads = NewRuns(index, PROPOSITIONS)
    reads.saw(version_of(index, PROPOSITIONS))
    pending = index.prepare_replacement(*make_version("doc1", "r2", ["New text."] * 2).rows)
    index._append_rows(pending)  # an ingest between its appends and its commit...
    index.replace_document(*make_version("other", "r1", ["Penguins."]).rows)
    read_new(reads, index, {"other": "r1"})  # ...when a refresh reads another commit
    index._commit_document(pending)
    rows = read_new(reads, index, {"doc1": "r2"})
    assert (live_prop_ids(index, "doc1"), 1, 4) == (
        prop_ids(rows), reads.whole_table_reads, rows.num_rows)


def test_rows_a_compaction_moved_are_not_read_again(index):
    reads = NewRuns(index, PROPOSITIONS)
    reads.saw(version_of(index, PROPOSITIONS))
    index.optimize()  # rewrites the fragments holding every live row
    index.replace_document(*make_version("late", "r1", ["Walruses bask."]).rows)
    rows = read_new(reads, index, {"late": "r1"})
    assert (live_prop_ids(index, "late"), 0) == (prop_ids(rows), reads.whole_table_reads)


def test_a_run_without_a_stated_count_is_read_from_the_whole_table(index):
    reads = NewRuns(index, PROPOSITIONS)
    reads.saw(version_of(index, PROPOSITIONS))
    index.replace_document(*make_version("late", "r1", ["Walruses bask."]).rows)
    rows = reads.read({"late": "r1"}, {}, version_of(index, PROPOSITIONS), COLUMNS)
    assert (live_prop_ids(index, "late"), 1) == (prop_ids(rows), reads.whole_table_reads)


def test_a_run_without_rows_reads_as_no_rows_of_the_stored_types(index):
    reads = NewRuns(index, PROPOSITIONS)
    reads.saw(version_of(index, PROPOSITIONS))
    index.replace_document(*make_version("empty", "r1", ["Nothing to say."], props={0: []}).rows)
    rows = read_new(reads, index, {"empty": "r1"})
    stored = index.table(PROPOSITIONS).schema
    assert (0, [stored.field(c).type for c in COLUMNS], 0) == (
        rows.num_rows, [rows.schema.field(c).type for c in COLUMNS], reads.whole_table_reads)


def test_a_column_the_index_lacks_reads_as_null(index):
    rows = TableDataset(index, PROPOSITIONS).read(version_of(index, PROPOSITIONS),
                                                  ["prop_id", "no_such_column"])
    assert (12, 12) == (rows.num_rows, rows.column("no_such_column").null_count)


def test_only_the_tables_with_counts_are_read_by_run(index):
    with pytest.raises(ValueError, match="documents"):
        NewRuns(index, DOCUMENTS)


def test_documents_rows_through_pylance_equal_lancedb_rows(index):
    index.record_failure({**make_version("failed", "r1", ["x"]).document, "status": "failed",
                          "error": "bad PDF"})
    expected = sorted(index.read(DOCUMENTS, LIVE_COLUMNS), key=lambda r: r["doc_id"])
    actual = documents_rows(TableDataset(index, DOCUMENTS), version_of(index, DOCUMENTS))
    assert expected == sorted(actual, key=lambda r: r["doc_id"])


def test_each_refresh_of_a_resident_index_reads_only_new_fragments(index):
    resident = ResidentIndex(index)
    resident.view()
    for number in range(3):
        index.replace_document(*make_version(f"late{number}", "r1", ["Walruses."]).rows)
        resident.view()
    assert {CHUNKS: 0, PROPOSITIONS: 0} == resident.whole_table_reads()
