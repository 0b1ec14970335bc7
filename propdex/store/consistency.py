"""Checks of the three tables against each other and against the documents ledger.

Pure functions over plain rows, so ``Index.check`` only has to read the tables. A chunk or
proposition row is *live* when its (doc_id, run_id) is the documents row's committed
(doc_id, run_id). Every other row -- of a run that never committed its documents row, of a
version superseded but not yet deleted, of a document removed halfway -- is a leftover of an
interrupted run, not an inconsistency: every read ignores it and the sweep at the start of
the next ingest (``sweep_uncommitted``) removes it. Leftovers are reported apart, per run.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from propdex.store.schema import DOCUMENT_STATUSES

_EXAMPLES = 3


class _Findings:
    """Problems grouped by (message, document) so one bad document gives a few lines,
    each with a count and the first ids, not one line per row."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, str], list[str]] = defaultdict(list)
        self._order: list[tuple[str, str]] = []

    def add(self, message: str, doc_label: str, row_id: str = "") -> None:
        key = (message, doc_label)
        if key not in self._groups:
            self._order.append(key)
        self._groups[key].append(row_id)

    def render(self) -> list[str]:
        lines = []
        for message, doc_label in self._order:
            ids = [i for i in self._groups[(message, doc_label)] if i]
            if not ids:
                lines.append(f"{doc_label}: {message}")
                continue
            shown = ", ".join(ids[:_EXAMPLES]) + (", ..." if len(ids) > _EXAMPLES else "")
            lines.append(f"{doc_label}: {message} ({len(ids)} row(s): {shown})")
        return lines


def _label(doc_id: str, docs: dict[str, dict]) -> str:
    source = docs.get(doc_id, {}).get("source")
    return f"document {doc_id} ({source})" if source else f"document {doc_id}"


@dataclass
class Leftovers:
    """The chunk and proposition rows of one run that no documents row names as committed."""

    run_id: str
    chunks: int = 0
    propositions: int = 0
    documents: dict[str, str] = field(default_factory=dict)  # doc_id -> label, as first seen

    def describe(self) -> str:
        labels = list(self.documents.values())
        shown = "; ".join(labels[:_EXAMPLES]) + ("; ..." if len(labels) > _EXAMPLES else "")
        return (f"run {self.run_id} left {self.chunks} chunk and {self.propositions} proposition "
                f"row(s) uncommitted ({len(self.documents)} document(s): {shown}): an interrupted "
                "run's leftovers; search ignores them and the next ingest removes them")


@dataclass
class Verification:
    """What ``Index.check`` found: real problems, and leftovers of interrupted runs."""

    problems: list[str] = field(default_factory=list)  # empty: the index is consistent
    leftovers: list[Leftovers] = field(default_factory=list)


def verify_tables(
    documents: Iterable[dict], chunks: Iterable[dict], propositions: Iterable[dict]
) -> Verification:
    """The problems and the leftovers the rows show."""
    findings = _Findings()
    docs: dict[str, dict] = {}
    for doc in documents:
        if doc["doc_id"] in docs:
            findings.add("duplicate documents rows for one doc_id", _label(doc["doc_id"], docs))
        docs[doc["doc_id"]] = doc

    live_run: dict[str, str] = {}
    for doc_id, doc in docs.items():
        label = _label(doc_id, docs)
        if doc["status"] not in DOCUMENT_STATUSES:
            findings.add(f"unknown status {doc['status']!r}", label)
        if doc["run_id"] is not None:
            live_run[doc_id] = doc["run_id"]
        elif doc["status"] == "indexed":
            findings.add("status is indexed but no run is committed (run_id is null)", label)

    leftovers: dict[str, Leftovers] = {}
    live_chunks = _split_live(chunks, "chunk", "chunk_id", docs, live_run, findings, leftovers)
    live_props = _split_live(propositions, "proposition", "prop_id", docs, live_run, findings,
                             leftovers)
    _check_ledger_counts(docs, live_run, live_chunks, live_props, findings)
    chunk_by_id = _check_chunks(live_chunks, docs, findings)
    _check_propositions(live_props, chunk_by_id, docs, findings)
    return Verification(findings.render(), [leftovers[run] for run in sorted(leftovers)])


def _split_live(
    rows: Iterable[dict], kind: str, key: str, docs: dict[str, dict],
    live_run: dict[str, str], findings: _Findings, leftovers: dict[str, Leftovers],
) -> list[dict]:
    live = []
    for row in rows:
        doc_id, run_id = row["doc_id"], row["run_id"]
        if live_run.get(doc_id) == run_id:
            live.append(row)
            continue
        left = leftovers.setdefault(run_id, Leftovers(run_id))
        if kind == "chunk":
            left.chunks += 1
        else:
            left.propositions += 1
        if doc_id not in left.documents:
            # A document that never committed has no documents row: the rows name its source.
            left.documents[doc_id] = (_label(doc_id, docs) if doc_id in docs
                                      else f"document {doc_id} ({row['source']})")
    duplicates = Counter(row[key] for row in live)
    for row_id, count in duplicates.items():
        if count > 1:
            doc_id = next(r["doc_id"] for r in live if r[key] == row_id)
            findings.add(f"duplicate live {kind} {key}", _label(doc_id, docs), row_id)
    return live


def _check_ledger_counts(
    docs: dict[str, dict], live_run: dict[str, str], live_chunks: list[dict],
    live_props: list[dict], findings: _Findings,
) -> None:
    chunk_counts = Counter(c["doc_id"] for c in live_chunks)
    prop_counts = Counter(p["doc_id"] for p in live_props)
    passed_counts = Counter(p["doc_id"] for p in live_props if p["passed"])
    for doc_id in live_run:
        doc, label = docs[doc_id], _label(doc_id, docs)
        for column, actual in (
            ("chunk_count", chunk_counts[doc_id]),
            ("proposition_count", prop_counts[doc_id]),
            ("passed_count", passed_counts[doc_id]),
        ):
            expected = doc[column] or 0
            if expected != actual:
                findings.add(f"{column} is {expected} but {actual} live row(s) exist", label)


def _check_lineage(row: dict, doc: dict, kind: str, label: str, row_id: str,
                   findings: _Findings) -> None:
    # After a failed attempt the documents row holds the hash that attempt saw, while the
    # live rows keep the hash of the committed version.
    columns = ("source", "content_sha256") if doc["status"] == "indexed" else ("source",)
    for column in columns:
        if row[column] != doc[column]:
            findings.add(f"{kind} {column} differs from the documents row", label, row_id)


def _check_chunks(live_chunks: list[dict], docs: dict[str, dict],
                  findings: _Findings) -> dict[str, dict]:
    ordinals: Counter[tuple[str, int]] = Counter()
    for chunk in live_chunks:
        doc, chunk_id = docs[chunk["doc_id"]], chunk["chunk_id"]
        label = _label(chunk["doc_id"], docs)
        ordinals[(chunk["doc_id"], chunk["ordinal"])] += 1
        _check_lineage(chunk, doc, "chunk", label, chunk_id, findings)
        text = doc["text"] or ""
        start, end = chunk["char_start"], chunk["char_end"]
        if not 0 <= start <= end <= len(text):
            findings.add(f"chunk offsets outside the document text (length {len(text)})",
                         label, chunk_id)
        elif text[start:end] != chunk["text"]:
            findings.add("chunk text differs from document text[char_start:char_end]",
                         label, chunk_id)
        _check_pages(chunk, doc, "chunk", label, chunk_id, findings)
    for (doc_id, ordinal), count in ordinals.items():
        if count > 1:
            findings.add(f"{count} live chunks share ordinal {ordinal}", _label(doc_id, docs))
    return {c["chunk_id"]: c for c in live_chunks}


def _check_pages(row: dict, doc: dict, kind: str, label: str, row_id: str,
                 findings: _Findings) -> None:
    first, last = row["page_start"], row["page_end"]
    if first < 1 or first > last:
        findings.add(f"{kind} page_start/page_end out of order or below 1", label, row_id)
    elif doc["page_count"] and last > doc["page_count"]:
        findings.add(f"{kind} page_end beyond page_count {doc['page_count']}", label, row_id)


def _check_propositions(live_props: list[dict], chunk_by_id: dict[str, dict],
                        docs: dict[str, dict], findings: _Findings) -> None:
    for prop in live_props:
        doc, label, prop_id = docs[prop["doc_id"]], _label(prop["doc_id"], docs), prop["prop_id"]
        _check_lineage(prop, doc, "proposition", label, prop_id, findings)
        _check_pages(prop, doc, "proposition", label, prop_id, findings)
        parent = chunk_by_id.get(prop["chunk_id"])
        if parent is None:
            findings.add("proposition's chunk is not a live chunk", label, prop_id)
        elif parent["doc_id"] != prop["doc_id"]:
            findings.add("proposition's chunk belongs to another document", label, prop_id)
        elif (parent["page_start"], parent["page_end"]) != (prop["page_start"], prop["page_end"]):
            findings.add("proposition pages differ from its chunk's pages", label, prop_id)
