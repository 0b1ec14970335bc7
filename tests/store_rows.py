"""Rows for store and search tests: one document version with small deterministic vectors."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

DIM = 8


def unit(values) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def axis(i: int, tilt: float = 0.0, towards: int | None = None) -> np.ndarray:
    """Unit vector along axis ``i``, tilted by ``tilt`` towards axis ``towards``."""
    vector = np.zeros(DIM, dtype=np.float32)
    vector[i] = 1.0
    if towards is not None:
        vector[towards] += tilt
    return unit(vector)


@dataclass
class Version:
    document: dict
    chunks: list[dict]
    propositions: list[dict] = field(default_factory=list)

    @property
    def rows(self) -> tuple[dict, list[dict], list[dict]]:
        return self.document, self.chunks, self.propositions


def make_version(
    doc_id: str,
    run_id: str,
    paragraphs: list[str],
    *,
    source: str | None = None,
    title: str = "A title",
    props: dict[int, list[str]] | None = None,
    chunk_vectors: dict[int, np.ndarray] | None = None,
    prop_vectors: dict[tuple[int, int], np.ndarray] | None = None,
    rejected: set[tuple[int, int]] = frozenset(),
    seed: int = 0,
    embed_model: str = "test-embedder",
) -> Version:
    """A document whose chunks are its paragraphs (chunk i on page i + 1). Propositions
    default to two per chunk; vectors default to seeded random unit vectors."""
    rng = np.random.default_rng(seed)
    text = "\n\n".join(paragraphs)
    source = source if source is not None else f"/corpus/{doc_id}.txt"
    chunks, propositions, start = [], [], 0
    for i, paragraph in enumerate(paragraphs):
        end = start + len(paragraph)
        chunk_id = f"{doc_id}:c{i}"
        chunks.append({
            "chunk_id": chunk_id, "doc_id": doc_id, "ordinal": i, "text": paragraph,
            "header": f"{title} / part {i}", "section": f"Section {i}", "page_start": i + 1,
            "page_end": i + 1, "char_start": start, "char_end": end, "source": source,
            "content_sha256": f"sha-{doc_id}-{run_id}", "embed_model": embed_model,
            "prop_error": None, "run_id": run_id, "boxes": None,  # a text source: no boxes
            "vector": (chunk_vectors or {}).get(i, unit(rng.normal(size=DIM))),
        })
        texts = (props or {}).get(i, [f"{paragraph} (fact {j})" for j in range(2)])
        for j, prop_text in enumerate(texts):
            passed = (i, j) not in rejected
            propositions.append({
                "prop_id": f"{chunk_id}:p{j}", "chunk_id": chunk_id, "doc_id": doc_id,
                "ordinal": j, "text": prop_text, "accuracy": 9, "clarity": 9 if passed else 3,
                "completeness": 9, "conciseness": 9, "passed": passed, "page_start": i + 1,
                "page_end": i + 1, "source": source, "content_sha256": f"sha-{doc_id}-{run_id}",
                "llm_model": "test-llm", "prompt_version": "p1", "embed_model": embed_model,
                "run_id": run_id, "boxes": None,
                "vector": (prop_vectors or {}).get((i, j), unit(rng.normal(size=DIM))),
            })
        start = end + 2
    document = {
        "doc_id": doc_id, "source": source, "content_sha256": f"sha-{doc_id}-{run_id}",
        "kind": "text", "text": text, "title": title, "summary": "A summary.",
        "page_count": len(paragraphs), "status": "indexed", "error": None, "error_kind": None,
        "chunk_count": len(chunks), "proposition_count": len(propositions),
        "passed_count": sum(p["passed"] for p in propositions), "chunk_failures": 0,
        "llm_model": "test-llm", "embed_model": embed_model,
        "prompt_versions": '{"propositions": "p1"}', "pipeline_version": "fp1",
        "run_id": run_id, "last_run_id": run_id, "llm_calls": 3, "prompt_tokens": 100,
        "completion_tokens": 50, "ocr": False,
    }
    return Version(document, chunks, propositions)
