"""One line per column of the three tables, for the docs' table reference.

Kept beside the schema (propdex/store/schema.py) rather than in Arrow field metadata, which
LanceDB stores in every table: a description can change without touching existing indexes.
The docs build (propdex.docs_reference) fails when a column has no entry here, and when an
entry names a column the schema no longer has.
"""

from __future__ import annotations

from propdex.store.schema import CHUNKS, DOCUMENTS, PROPOSITIONS

_LINEAGE = {
    "source": "The source path or URI, as given (normalised to an absolute path).",
    "content_sha256": "SHA-256 of the source file's bytes.",
    "embed_model": "Embedding model that wrote the vector, with its precision "
                   "(`all-MiniLM-L6-v2-int8`).",
    "run_id": "The ingest run that wrote the row; the row is live only when it equals its "
              "document's `documents.run_id`.",
    "vector": "The embedding (MiniLM: 384 float32, L2-normalised).",
}

# Chunks and propositions: the column vector searches filter on while an index is re-embedded.
_ROW_EMBED_MODEL = (_LINEAGE["embed_model"] + " While documents of several models are live, a "
                    "vector search compares only rows of its own model's (Bitmap index).")

_META = ("The document's metadata as sorted `key=value` entries: the column `--where` filters "
         "prefilter on (LabelList index).")

_PAGES = {
    "char_start": "Offset of the first character in `documents.text`.",
    "char_end": "Offset after the last character: `text == documents.text[char_start:char_end]`.",
}

COLUMN_DESCRIPTIONS: dict[str, dict[str, str]] = {
    DOCUMENTS: {
        "doc_id": "Stable id of the source, derived from its normalised absolute path or URI.",
        "source": _LINEAGE["source"],
        "content_sha256": "SHA-256 of the bytes last attempted: the live version's, unless a "
                          "later attempt failed.",
        "kind": "The format the source was read as: `pdf`, `epub`, `xps`, `mobi`, `fb2`, `text` or "
                "`markdown`.",
        "text": "The extracted text that every offset of the document's chunks indexes into.",
        "title": "Title written by the LLM (or taken from PDF metadata by the offline backend).",
        "summary": "One-sentence summary written by the LLM from a bounded prefix of the text.",
        "page_count": "Pages of a PDF; 1 for text and Markdown.",
        "status": "`indexed`, `failed` or `skipped`.",
        "error": "Why the last attempt failed or was skipped (`encrypted: password required`, "
                 "`timed out: ...`); null when it succeeded.",
        "error_kind": "`input`, `unreadable`, `metadata`, `llm`, `configuration`, `timeout`, "
                      "`storage` or `internal`: an `input` failure of unchanged bytes is not "
                      "retried; any other is (`unreadable`: permissions, not a regular file, a "
                      "name that is not UTF-8).",
        "chunk_count": "Live chunks of the document.",
        "proposition_count": "Live propositions of the document, passed or not.",
        "passed_count": "Propositions whose four grades reach the thresholds (searchable).",
        "chunk_failures": "Chunks whose proposition extraction failed (see `chunks.prop_error`).",
        "llm_model": "Model that wrote the propositions (`offline-rules` for the offline backend).",
        "embed_model": _LINEAGE["embed_model"],
        "prompt_versions": "JSON object: each LLM step and the prompt version it used.",
        "pipeline_version": "Fingerprint of every setting that changes outputs: a change "
                            "re-processes the document.",
        "run_id": "The run whose chunk and proposition rows are live; null when none are.",
        "last_run_id": "The run that last touched this row.",
        "ingested_at": "When the live version was committed (UTC).",
        "last_attempt_at": "When the document was last attempted (UTC).",
        "llm_calls": "LLM requests made for the live version (answers from the cache included).",
        "prompt_tokens": "Prompt tokens of those requests.",
        "completion_tokens": "Completion tokens of those requests.",
        "ocr": "True when pages without a text layer were OCRed with Tesseract.",
        "encoding": "Text files: the detected encoding (`utf-8`, `cp1252`, ...).",
        "furniture_removed": "PDF running headers, footers and page numbers left out of `text`.",
        "context_fallback": "Title or summary written by the offline fallback, and why; null "
                            "when the LLM wrote both.",
        "embed_truncated": "Texts the embedder could not read whole (0 with the ONNX runtime).",
        "ungraded_count": "Propositions whose grading failed: null grades, `passed = false`.",
        "metadata": "The document's metadata as a JSON object (key -> value or list of values): "
                    "`--meta`, front matter and `<file>.meta.json`.",
        "meta": _META,
        "object_etag": "Object-store sources: the ETag of the object's version indexed "
                       "(updated when the same bytes are uploaded again under a new ETag).",
        "object_size": "Object-store sources: the object's size in bytes when last indexed.",
        "pdf_reader": "PDFs (and EPUB, XPS, MOBI, FB2): `layout` (PyMuPDF's layout engine) or "
                      "`fast` (plain text lines); null for text and Markdown.",
        "layout_fallback_pages": "Pages the layout engine failed on (an error, no text from a "
                                 "page with a text layer), read in fast mode instead.",
        "checks_rejected": "JSON object: `step: reason` -> LLM answers the deterministic checks "
                           "rejected (`{}`: none).",
        "found_at": "Paths the source was found at (through a folder, glob or named path), "
                    "links below the argument not resolved; null: only at `source` itself.",
        "pipeline_parts": "JSON object: what `pipeline_version` hashes, part by part (propdex's "
                          "pipeline and checks versions, prompts, models, chunker, embedder...), "
                          "so that a run names what changed; null in rows written before it.",
    },
    CHUNKS: {
        "chunk_id": "Id derived from the document and the chunk's offsets (unique among live "
                    "rows).",
        "doc_id": "The document (`documents.doc_id`).",
        "ordinal": "Position of the chunk in the document, from 0.",
        "text": "The chunk's text (full-text indexed).",
        "header": "Contextual header prepended before embedding: title, summary, section.",
        "section": "Section title when sectioning is on or the document states sections.",
        "page_start": "First page the chunk lies on (1-based).",
        "page_end": "Last page the chunk lies on.",
        **_PAGES,
        "source": _LINEAGE["source"],
        "content_sha256": _LINEAGE["content_sha256"],
        "embed_model": _ROW_EMBED_MODEL,
        "prop_error": "Why proposition extraction or grading failed for this chunk; null when "
                      "it succeeded.",
        "run_id": _LINEAGE["run_id"],
        "vector": "Embedding of the header and the text. " + _LINEAGE["vector"],
        "meta": _META,
        "boxes": "Page rectangles the text came from: `{page, x0, y0, x1, y1}` in PDF points "
                 "(origin top left, the page's unrotated space); null for text and Markdown "
                 "sources and for documents read in fast mode.",
    },
    PROPOSITIONS: {
        "prop_id": "Id derived from the parent chunk and the ordinal (unique among live rows).",
        "chunk_id": "The parent chunk (`chunks.chunk_id`).",
        "doc_id": "The document (`documents.doc_id`).",
        "ordinal": "Position of the proposition in its chunk, from 0.",
        "text": "The atomic, self-contained statement (full-text indexed).",
        "accuracy": "Grade 1-10: faithful to the chunk; null when grading failed.",
        "clarity": "Grade 1-10: understandable without the chunk; null when grading failed.",
        "completeness": "Grade 1-10: carries its context; null when grading failed.",
        "conciseness": "Grade 1-10: one fact, no filler; null when grading failed.",
        "passed": "All four grades reach their thresholds: only passed propositions are searched.",
        "page_start": "First page of the parent chunk.",
        "page_end": "Last page of the parent chunk.",
        "source": _LINEAGE["source"],
        "content_sha256": _LINEAGE["content_sha256"],
        "llm_model": "Model that wrote the proposition (`offline-rules` for the offline backend).",
        "prompt_version": "Version of the propositions prompt used (`offline-propositions-v2` offline).",
        "embed_model": _ROW_EMBED_MODEL,
        "run_id": _LINEAGE["run_id"],
        "vector": "Embedding of the proposition's text. " + _LINEAGE["vector"],
        "meta": _META,
        "boxes": "Page rectangles of what it came from: the table row it states, else its "
                 "chunk's boxes.",
        "reject_reason": "Why it did not pass: `ungrounded`, `empty`, `too short`, `duplicate` "
                         "(the checks), `grade out of range`, `below threshold` or `ungraded`; "
                         "null when it passed.",
    },
}
