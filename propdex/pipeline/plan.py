"""Which documents a run must process, which are unchanged, and which left their folders.

Change detection is content-based: a document is re-processed when the SHA-256 of its
bytes or the pipeline fingerprint (every setting that changes outputs) differs from the
ledger in the documents table. Its doc_id is stable for its path.
"""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import dataclass, field, replace

from propdex.extract import PYMUPDF_SUFFIXES
from propdex.ids import doc_id_for, sha256_file
from propdex.metadata import Metadata, MetadataError, file_metadata, from_json, merged
from propdex.pipeline.outcome import RunSummary
from propdex.remote import ObjectStoreError, RemoteObject, discover_remote, fetch, is_remote
from propdex.settings import Settings, fingerprint_of
from propdex.sources import Discovery, discover, is_under, matches_any
from propdex.store import Index


@dataclass
class WorkItem:
    source: str
    doc_id: str
    content_sha256: str
    reason: str  # new | changed | settings changed | retry | forced
    metadata: Metadata = field(default_factory=dict)  # the run's merged with the file's own
    # Object-store sources (propdex.remote): the downloaded copy to extract, ETag and size.
    local_path: str | None = None
    etag: str | None = None
    size: int | None = None
    found_at: list[str] | None = None  # the documents row's found_at after this run
    changed: str | None = None  # "settings changed": what, in words (what_changed)
    # The stages (task names) whose results Prefect's task cache must not give back: those a
    # retry redoes (redo_stages), every stage when forced.
    redo: tuple[str, ...] = ()


@dataclass
class Plan:
    fingerprint: str  # of the documents PyMuPDF reads
    # Of text and Markdown files: without the PDF reader, so switching it leaves them be.
    text_fingerprint: str | None = None
    # What the two fingerprints hash (Settings.fingerprint_parts), to name what changed.
    parts: dict[str, object] | None = None
    text_parts: dict[str, object] | None = None
    to_process: list[WorkItem] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[tuple[str, str]] = field(default_factory=list)  # (doc_id, source)
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    # Files whose metadata (front matter, sidecar) breaks the rules: failed with error_kind
    # "metadata", so the run after it is fixed processes them again although their bytes
    # did not change (an "input" failure of unchanged bytes is never retried).
    invalid_metadata: list[tuple[str, str]] = field(default_factory=list)  # (source, reason)
    missing: list[str] = field(default_factory=list)  # arguments that matched nothing
    refused: list[tuple[str, str]] = field(default_factory=list)  # (path, reason): outside the roots
    # Unchanged documents whose metadata changed: their rows get it, nothing is re-run.
    relabel: list[WorkItem] = field(default_factory=list)
    # doc_id -> found_at, where this run changes it (documents found through a link, and
    # those kept while a place they were found at is gone).
    found_at: dict[str, list[str]] = field(default_factory=dict)
    # Object-store sources: doc_id -> (ETag, size) of unchanged objects whose ETag or size
    # differs from the ledger's (re-uploaded with the same bytes): recorded, so that the next
    # run does not download them again.
    object_versions: dict[str, tuple[str, int]] = field(default_factory=dict)
    # The local copies of objects this plan fetched, removed once the run is done with them.
    copies: list[str] = field(default_factory=list)

    def fingerprint_for(self, source: str) -> str:
        """The fingerprint ``source`` is compared with and stored under."""
        if self.text_fingerprint is None or source.lower().endswith(PYMUPDF_SUFFIXES):
            return self.fingerprint
        return self.text_fingerprint

    def parts_for(self, source: str) -> dict[str, object] | None:
        """What ``fingerprint_for(source)`` hashes, when known."""
        if self.text_parts is None or source.lower().endswith(PYMUPDF_SUFFIXES):
            return self.parts
        return self.text_parts

    @property
    def changes_nothing(self) -> bool:
        """Nothing to process, record or remove: a run would write nothing. Arguments that
        matched nothing are only reported, so they do not count."""
        return not (self.to_process or self.removed or self.unreadable or self.refused
                    or self.relabel or self.invalid_metadata or self.found_at
                    or self.object_versions)


def open_ledger(settings: Settings) -> Index:
    """The run's index, opened without creating anything."""
    return Index.open(settings.db_uri, create=False, storage_options=settings.storage_options)


def plan_sources(sources: list[str], settings: Settings, *, force: bool, prune: bool,
                 metadata: Metadata | None = None) -> Plan:
    """Discover the sources and compare them with the ledger (content hash + fingerprint).
    ``metadata``: the run's own, for every document (a file's own wins key by key).

    Reads files and the documents table only: it imports no Prefect, so the CLI can learn
    that nothing changed before starting a flow run."""
    from propdex.runtime import backend_for  # the backend's prompt versions enter the fingerprint

    versions = backend_for(settings).prompt_versions()
    fingerprint = settings.fingerprint(versions)
    ledger = open_ledger(settings).documents()
    remote = [s for s in sources if is_remote(s)]
    discovery = discover([s for s in sources if not is_remote(s)], settings.allowed_roots)
    objects = discover_remote(remote, settings, discovery) if remote else []
    plan = make_plan(discovery, ledger, fingerprint, force=force, prune=prune,
                     metadata=metadata, objects=objects,
                     text_fingerprint=settings.fingerprint(versions, pymupdf=False),
                     parts=settings.fingerprint_parts(versions),
                     text_parts=settings.fingerprint_parts(versions, pymupdf=False))
    if objects:
        fetch_changed(plan, objects, ledger, settings, force=force, metadata=metadata)
    return plan


def needs_run(plan: Plan, settings: Settings) -> bool:
    """Whether a flow run has anything to do: a document to process, record as failed or
    remove, a refused path to report as a failed run, or rows of a crashed run to sweep."""
    return not plan.changes_nothing or bool(open_ledger(settings).uncommitted_documents())


def unchanged_run_summary(plan: Plan, settings: Settings, seconds: float) -> RunSummary:
    """The report of a run that had nothing to do, as the flow would give it. No flow run
    exists, so the run id is the flow's own id for runs outside one: ``local-<epoch>``."""
    return RunSummary(run_id=f"local-{int(time.time())}", db=settings.db_uri,
                      llm=settings.llm_backend, unchanged=plan.unchanged, missing=plan.missing,
                      refused=plan.refused, seconds=seconds)


def degraded(row: dict) -> bool:
    """An indexed document with work left: chunks without propositions, a title or summary
    from the offline fallback, or ungraded propositions. The next run retries it; answers
    that succeeded come from the content cache, so only the failed calls are paid again."""
    return bool(row.get("chunk_failures") or row.get("context_fallback") or row.get("ungraded_count"))


# The document stages, by task name, in the order they run.
STAGES = ("extract", "document-context", "chunk", "propositions", "embed")


def redo_stages(reason: str, row: dict | None) -> tuple[str, ...]:
    """The stages whose stored results a run must not reuse: every one when forced; of a
    retry, those that may hold what failed. Extraction never does (its output depends only
    on the bytes and the settings, which a retry leaves as they were), nor chunking (it runs
    again when the headers it attaches change); the title and summary do when one fell back,
    the propositions when a chunk failed or went ungraded. Of a document that failed, both:
    a stage that finished before the failure may hold a fallback. The stages after a redone one run again only when what they read
    of it changed (tasks.policies), so a title asked again and refused again costs the
    title's request alone."""
    if reason == "forced":
        return STAGES
    if reason != "retry" or row is None:
        return ()
    if row["status"] != "indexed":
        return ("document-context", "propositions")
    return (("document-context",) if row.get("context_fallback") else ()) + (
        ("propositions",) if row.get("chunk_failures") or row.get("ungraded_count") else ())


def _reason(item: WorkItem, row: dict | None, fingerprint: str, force: bool) -> str:
    """Why ``item`` (its content hash known) is processed, or "unchanged", or "metadata
    changed" (unchanged but for its metadata)."""
    if force:
        return "forced"
    if row is None:
        return "new"
    if row["content_sha256"] != item.content_sha256:
        return "changed"
    if row["pipeline_version"] != fingerprint:
        return "settings changed"
    if (row["status"] == "indexed" and not degraded(row)) or (
        row["status"] != "indexed" and row.get("error_kind") == "input"
    ):
        # A failure that depends only on the file's bytes cannot succeed on the same bytes.
        if row["run_id"] is not None and from_json(row.get("metadata")) != item.metadata:
            return "metadata changed"
        return "unchanged"
    return "retry"


# Parts of the fingerprint that only a new propdex changes: a difference there is the upgrade.
PROPDEX_PARTS = ("pipeline", "pdf_reader_version", "checks", "proposition_checks", "prompts")


def what_changed(row: dict, parts: dict[str, object] | None) -> str | None:
    """What differs between the fingerprint ``row`` was indexed under and this run's
    ``parts``, in words: "propdex upgraded: pipeline 10 -> 11" for propdex's own versions,
    prompts and embedding recipe, "settings: chunker, models" for the rest. Of a row written
    before documents kept their fingerprint's parts, only an earlier pipeline version (all
    else equal) or changed prompt versions can be told."""
    if parts is None:
        return None
    stored = _json_object(row.get("pipeline_parts"))
    if stored is None:
        earlier = _earlier_release(row.get("pipeline_version"), parts)
        if earlier:
            return f"propdex upgraded: {earlier}"
        prompts = _prompt_changes(_json_object(row.get("prompt_versions")), parts.get("prompts"))
        upgraded = f"propdex upgraded: {prompts}" if prompts else "propdex upgraded or a setting changed"
        return f"{upgraded} (indexed by a propdex that did not record what its fingerprint covers)"
    keys = sorted(stored.keys() | parts.keys())
    own = [_own_change(k, stored.get(k), parts.get(k)) for k in PROPDEX_PARTS
           if stored.get(k) != parts.get(k)]
    settings = [k for k in keys if k not in PROPDEX_PARTS and stored.get(k) != parts.get(k)]
    old_embed, new_embed = stored.get("embed"), parts.get("embed")
    if "embed" in settings and isinstance(old_embed, list) and isinstance(new_embed, list) and (
            old_embed[:2] == new_embed[:2]):
        # The same embedder and model: what changed is how propdex runs it (packaged
        # weights, the int8 recipe, reading long texts), an upgrade too.
        settings.remove("embed")
        own.append(f"embedding {'+'.join(map(str, old_embed[2:])) or 'none'} -> "
                   f"{'+'.join(map(str, new_embed[2:])) or 'none'}")
    said = ([f"propdex upgraded: {', '.join(own)}"] if own else []) + (
        [f"settings: {', '.join(settings)}"] if settings else [])
    return "; ".join(said) or None


def _earlier_release(fingerprint: object, parts: dict[str, object]) -> str | None:
    """What an earlier propdex had, all else as in ``parts``, to give ``fingerprint``: an
    earlier pipeline version, no or an earlier PDF reader version, or both ("pipeline 10 ->
    11, pdf reader version none -> 1"); the common upgrade, named for a row without its parts."""
    current = str(parts.get("pipeline", ""))
    if not current.isdigit():
        return None
    reader = parts.get("pdf_reader_version")
    readers = [reader] + ([*range(int(reader) - 1, 0, -1), None] if isinstance(reader, int) else [])
    for earlier in map(str, range(int(current), 0, -1)):
        for old_reader in readers:
            if (earlier, old_reader) == (current, reader):
                continue
            candidate = {**parts, "pipeline": earlier, "pdf_reader_version": old_reader}
            if old_reader is None:
                del candidate["pdf_reader_version"]
            if fingerprint_of(candidate) == fingerprint:
                changes = [("pipeline", earlier, current), ("pdf_reader_version", old_reader, reader)]
                return ", ".join(_own_change(k, old, new) for k, old, new in changes if old != new)
    return None


def _json_object(value: object) -> dict | None:
    try:
        loaded = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return loaded if isinstance(loaded, dict) else None


def _own_change(key: str, old: object, new: object) -> str:
    if key == "prompts":
        return _prompt_changes(old if isinstance(old, dict) else None, new) or "prompts"
    return f"{key.replace('_', ' ')} {old if old is not None else 'none'} -> {new if new is not None else 'none'}"


def _prompt_changes(old: dict | None, new: object) -> str:
    """"prompt propositions-v2+1a2b3c4d -> propositions-v3+5e6f7a8b" for each step whose
    prompt differs; empty when unknown or equal."""
    if old is None or not isinstance(new, dict):
        return ""
    return ", ".join(f"prompt {old.get(step) or 'none'} -> {new.get(step) or 'none'}"
                     for step in sorted(old.keys() | new.keys()) if old.get(step) != new.get(step))


def _decide(plan: Plan, item: WorkItem, row: dict | None, force: bool) -> None:
    reason = _reason(item, row, plan.fingerprint_for(item.source), force)
    if reason == "unchanged":
        plan.unchanged.append(item.source)
    elif reason == "metadata changed":
        plan.relabel.append(replace(item, reason=reason))
    elif reason == "settings changed" and row is not None:
        changed = what_changed(row, plan.parts_for(item.source))
        plan.to_process.append(replace(item, reason=reason, changed=changed))
    else:
        plan.to_process.append(replace(item, reason=reason, redo=redo_stages(reason, row)))


def fetch_changed(plan: Plan, objects: list[RemoteObject], ledger: list[dict],
                  settings: Settings, *, force: bool, metadata: Metadata | None) -> None:
    """Plan the objects: one whose ETag and size equal the ledger's is compared without
    downloading it; any other is downloaded and compared by its content hash, and keeps the
    ETag and size it was read at (newer than the listing's if it was overwritten since)."""
    by_id = {row["doc_id"]: row for row in ledger}
    wanted = metadata or {}
    for obj in objects:
        doc_id = doc_id_for(obj.url)
        row = by_id.get(doc_id)
        item = WorkItem(obj.url, doc_id, "", "", wanted, etag=obj.etag, size=obj.size)
        if (not force and row is not None and obj.etag and row.get("object_etag") == obj.etag
                and row.get("object_size") == obj.size):
            same = replace(item, content_sha256=row["content_sha256"])
            if _reason(same, row, plan.fingerprint_for(obj.url), force) in (
                    "unchanged", "metadata changed"):
                _decide(plan, same, row, force)
                continue
            # To be processed all the same (settings changed, a retry): it is read now.
        try:
            copy = fetch(obj, settings)
        except ObjectStoreError as failed:
            plan.unreadable.append((obj.url, failed.reason))
            continue
        plan.copies.append(copy.path)
        fetched = replace(item, content_sha256=copy.sha256, local_path=copy.path,
                          etag=copy.etag, size=copy.size)
        kept = _reason(fetched, row, plan.fingerprint_for(obj.url), force) in (
            "unchanged", "metadata changed")
        if row is not None and kept and (
                (row.get("object_etag"), row.get("object_size")) != (copy.etag, copy.size)):
            plan.object_versions[doc_id] = (copy.etag, copy.size)
        _decide(plan, fetched, row, force)


def _covers(discovery: Discovery, path: str) -> bool:
    """Whether an argument of this run would yield ``path`` if it still led to a file: a
    folder it lies in, a glob it matches, or the path itself named."""
    return (path in discovery.named or path in discovery.missing_files
            or is_under(path, discovery.roots) or matches_any(path, discovery.patterns))


def _stored_found_at(row: dict | None, source: str) -> list[str]:
    """A documents row's found_at; null (or no row) means found at ``source`` alone."""
    return (row or {}).get("found_at") or [source]


def found_at_after(row: dict | None, source: str, discovery: Discovery) -> list[str]:
    """Where ``source`` is found once this run is counted: the places earlier runs found it
    that no argument of this run covers, and the places this run found it. A document
    found through a link leaves when this is empty, i.e. when no argument yields it any
    more. A row without found_at (an index made before it) was found at ``source``, except
    when this run finds it: then only this run's places are known."""
    found = discovery.found_at.get(source, [])
    earlier = (row or {}).get("found_at") or ([] if found else [source])
    return sorted({p for p in earlier if not _covers(discovery, p)} | set(found))


def make_plan(
    discovery: Discovery, ledger: list[dict], fingerprint: str, *, force: bool, prune: bool,
    metadata: Metadata | None = None, objects: list[RemoteObject] | None = None,
    text_fingerprint: str | None = None, parts: dict[str, object] | None = None,
    text_parts: dict[str, object] | None = None,
) -> Plan:
    plan = Plan(fingerprint=fingerprint, text_fingerprint=text_fingerprint,
                parts=parts, text_parts=text_parts,
                missing=list(discovery.missing), refused=list(discovery.refused))
    by_id = {row["doc_id"]: row for row in ledger}
    plan.unreadable.extend(discovery.unusable)
    for source in discovery.files:
        doc_id = doc_id_for(source)
        row = by_id.get(doc_id)
        found_at = found_at_after(row, source, discovery)
        if found_at != _stored_found_at(row, source):
            plan.found_at[doc_id] = found_at
        try:
            if not stat.S_ISREG(os.stat(source).st_mode):
                # A FIFO or device named *.pdf would block the hash (and the run) forever.
                plan.unreadable.append((source, "not a regular file"))
                continue
            digest = sha256_file(source)
            wanted = merged(metadata or {}, file_metadata(source))
        except OSError as exc:
            plan.unreadable.append((source, f"cannot read file: {exc.strerror or exc}"))
            continue
        except MetadataError as exc:
            plan.invalid_metadata.append((source, f"invalid metadata: {exc}"))
            continue
        _decide(plan, WorkItem(source, doc_id, digest, "", wanted, found_at=found_at), row, force)
    if prune:
        # A source leaves the index when no argument yields it any more: not the folder it
        # was in or linked from, the glob it matched, nor its own path named explicitly.
        present = (set(discovery.files) | {o.url for o in objects or ()}
                   | {source for source, _ in discovery.unusable})
        for row in ledger:
            source = row["source"]
            if source in present:
                continue
            found_at = found_at_after(row, source, discovery)
            if not found_at:
                plan.removed.append((row["doc_id"], source))
            elif found_at != _stored_found_at(row, source):
                plan.found_at[row["doc_id"]] = found_at
    return plan
