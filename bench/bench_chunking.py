"""Chunking methods compared: boundaries against a gold segmentation, retrieval of evidence
characters, and throughput.

    python bench/bench_chunking.py [--skip-retrieval] [--skip-throughput]

1. Boundary precision / recall / F1 on ../shared/corpus/llama-chunk/example_input.txt
   against example_output.txt (the same text with {BIG_SPLIT_TOKEN} before each section and
   {SMALL_SPLIT_TOKEN} before each sentence: a gold segmentation). A boundary is the offset
   where a chunk (other than the first) starts; it matches a gold one when equal. Scored
   against all markers and against the section markers alone. The llm method runs through
   the scripted OpenAI-compatible server (tests/scripted_server.py) answering with the gold
   copy; the corrupted copy (one character changed) must be caught and fall back to
   recursive splitting; the logprob variant reads marker log-probabilities that the server
   places where the gold markers are. These rows check the pipeline, not a model.
2. Character-level precision and recall of retrieved chunks against evidence spans
   (LegalBench-RAG: overlap / retrieved characters, overlap / evidence characters, per
   question, averaged) on eval/dev_questions.jsonl at k = 1 and 5: each offline method
   chunks the documents the questions name, MiniLM embeds the chunk texts (no contextual
   header: the methods are compared, not the pipeline) and the questions, and the top k
   chunks over all those documents are retrieved. Evidence quotes are located in the
   extracted text ignoring whitespace; a question with none found is left out. Embeddings
   are cached by text under the temp dir (EMBED_CACHE), so each distinct text is embedded
   once, in batches, and a second run only chunks and ranks. The llm method needs a real
   model and is not run here.
3. Throughput (MB/s of extracted text) per offline method, methods alternating, median of
   ROUNDS runs; semantic includes embedding every sentence (no cache), runs once, on
   SEMANTIC_SAMPLE only.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

# Run as a script from a checkout: make the repository importable without install.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from propdex.cache import ResultCache  # noqa: E402
from propdex.chunking import document_spans, make_chunker  # noqa: E402
from propdex.chunking.llm import MARKER, LLMChunker  # noqa: E402
from propdex.chunking.semantic import SemanticChunker  # noqa: E402
from propdex.embed import make_embedder  # noqa: E402
from propdex.embed.base import Embedder  # noqa: E402
from propdex.extract import extract_document  # noqa: E402
from propdex.models import ExtractedDocument  # noqa: E402
from propdex.pipeline.embedding import embed_with_cache  # noqa: E402
from propdex.settings import Settings  # noqa: E402
from tests.scripted_fixtures import scripted_settings  # noqa: E402
from tests.scripted_server import ScriptedServer, reply  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus"
QUESTIONS = ROOT / "eval" / "dev_questions.jsonl"
OFFLINE = ("fixed", "recursive", "passages", "semantic")
# The notebook's fixed windows are 800 / 100; every other method runs on propdex's defaults.
OVERLAP = {"fixed": 100}
ROUNDS = 3
KS = (1, 5)
# Vectors of chunk texts, sentences and questions, kept between runs (keyed by model + text).
EMBED_CACHE = Path(tempfile.gettempdir()) / "propdex-bench-chunking-embeddings"
EMBED_BATCH = 256
# The semantic chunker's throughput is measured on this document alone: it embeds every
# sentence (uncached), minutes for the whole set on a small machine.
SEMANTIC_SAMPLE = "attention_is_all_you_need.pdf"


# --------------------------------------------------------------------------- boundaries


def gold_boundaries(marked: str) -> tuple[str, set[int], set[int]]:
    """The plain text, every gold boundary and the section boundaries (BIG markers)."""
    pieces = re.split(r"(\{BIG_SPLIT_TOKEN\}|\{SMALL_SPLIT_TOKEN\})", marked)
    text, every, sections = "", set(), set()
    for piece in pieces:
        if piece in ("{BIG_SPLIT_TOKEN}", "{SMALL_SPLIT_TOKEN}"):
            where = len(text)
            every.add(where)
            if piece == "{BIG_SPLIT_TOKEN}":
                sections.add(where)
        else:
            text += piece
    # A marker sits before the whitespace it precedes: boundaries are word starts.
    def start(offset: int) -> int:
        while offset < len(text) and text[offset].isspace():
            offset += 1
        return offset

    every = {start(o) for o in every} - {0}
    sections = {start(o) for o in sections} - {0}
    return text, every, sections


def prf(found: set[int], gold: set[int]) -> tuple[float, float, float]:
    hits = len(found & gold)
    precision = hits / len(found) if found else 0.0
    recall = hits / len(gold) if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def llm_spans(text: str, server: ScriptedServer, **overrides) -> list[tuple[int, int]]:
    settings = scripted_settings(server, chunker="llm", db=tempfile.mkdtemp(prefix="propdex-bench-"),
                                 **overrides)
    return LLMChunker(settings).split(text)


def boundary_rows() -> list[tuple[str, int, tuple, tuple]]:
    marked = (CORPUS / "llama-chunk" / "example_output.txt").read_text()
    text, every, sections = gold_boundaries(marked)
    assert text == (CORPUS / "llama-chunk" / "example_input.txt").read_text()
    copy = marked.replace("{BIG_SPLIT_TOKEN}", MARKER).replace("{SMALL_SPLIT_TOKEN}", MARKER)
    corrupted = copy.replace("risk of loss", "risk of lost", 1)
    spans: dict[str, list[tuple[int, int]]] = {}
    for name in OFFLINE:
        spans[name] = make_chunker(Settings(chunker=name, chunk_overlap=OVERLAP.get(name, 0))).split(text)
    with ScriptedServer() as server:
        server.script(reply(copy), step="llm_chunk")
        spans["llm (gold copy)"] = llm_spans(text, server)
        server.script(reply(corrupted), step="llm_chunk")
        spans["llm (corrupted copy)"] = llm_spans(text, server)
        copy_start = lambda prompt: len(prompt) - len(text)  # noqa: E731

        def scorer(prompt: str, offset: int) -> dict[str, float]:
            word = offset + len(prompt[offset:]) - len(prompt[offset:].lstrip()) - copy_start(prompt)
            return {MARKER: -0.1} if offset >= copy_start(prompt) and word in every else {}

        server.prompt_scorer = scorer
        spans["llm logprobs (gold scores)"] = llm_spans(text, server, llm_chunk_logprobs=True)
    rows = []
    for name, found in spans.items():
        starts = {s for s, _ in found} - {0}
        rows.append((name, len(found), prf(starts, every), prf(starts, sections)))
    return rows


# --------------------------------------------------------------------------- retrieval


class CachedEmbedder(Embedder):
    """``inner`` behind a content cache in the temp dir: each distinct text (chunk, sentence or
    question) is embedded once, in batches, and kept across runs of this bench."""

    def __init__(self, inner: Embedder, cache: ResultCache):
        self.inner, self.cache = inner, cache
        self.name, self.dim = inner.name, inner.dim
        self.computed = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        vectors, computed = embed_with_cache(texts, self.inner, self.cache, EMBED_BATCH)
        self.computed += computed
        return vectors


def bench_chunker(name: str, embedder: Embedder):
    """The method on propdex's settings (fixed: the notebook's 800 / 100), embedding with
    ``embedder`` where it embeds (semantic)."""
    settings = Settings(chunker=name, chunk_overlap=OVERLAP.get(name, 0))
    if name == "semantic":
        return SemanticChunker(embedder, settings.semantic_threshold, settings.chunk_size)
    return make_chunker(settings)


def normalised(text: str) -> tuple[str, list[int]]:
    """``text`` with whitespace runs as one space, and each character's original offset."""
    out, where = [], []
    for match in re.finditer(r"\s+|\S", text):
        out.append(" " if match.group(0).isspace() else match.group(0))
        where.append(match.start())
    return "".join(out), where


def evidence_spans(text: str, evidence: list[str]) -> list[tuple[int, int]]:
    """Where each evidence quote occurs in ``text`` (whitespace-insensitive); quotes not
    found are left out."""
    flat, where = normalised(text)
    spans = []
    for item in evidence:
        needle = " ".join(item.split())
        at = flat.find(needle)
        if at >= 0:
            spans.append((where[at], where[at + len(needle) - 1] + 1))
    return spans


def coverage(spans: list[tuple[int, int]], size: int) -> np.ndarray:
    mask = np.zeros(size, dtype=bool)
    for start, end in spans:
        mask[start:end] = True
    return mask


def char_precision_recall(
    retrieved: dict[str, list[tuple[int, int]]], evidence: list[tuple[int, int]], source: str,
    sizes: dict[str, int],
) -> tuple[float, float]:
    """LegalBench-RAG's character-level precision (overlap / retrieved characters) and recall
    (overlap / evidence characters). Retrieved characters are counted once per document
    even where overlapping chunks repeat them; characters from other documents count as
    retrieved, never as overlap."""
    masks = {doc: coverage(spans, sizes[doc]) for doc, spans in retrieved.items()}
    retrieved_chars = sum(int(mask.sum()) for mask in masks.values())
    gold = coverage(evidence, sizes[source])
    overlap = int((masks[source] & gold).sum()) if source in masks else 0
    return (overlap / retrieved_chars if retrieved_chars else 0.0), overlap / int(gold.sum())


def located_questions(docs: dict[str, ExtractedDocument]) -> tuple[list[tuple[dict, list]], int]:
    """Questions whose evidence was found in their document, with its spans; and the total."""
    questions = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    located = []
    for q in questions:
        spans = evidence_spans(docs[q["source"]].text, q["evidence"])
        if spans:
            located.append((q, spans))
    return located, len(questions)


def retrieval_rows(docs: dict[str, ExtractedDocument], embedder: Embedder) -> tuple[list, int, int]:
    """Per offline method: chunk count, mean chunk length and mean (P, R) at each k, the top k
    chunks retrieved by cosine similarity over all the documents' chunk texts."""
    located, total = located_questions(docs)
    sizes = {source: len(doc.text) for source, doc in docs.items()}
    query_vectors = embedder.embed([q["question"] for q, _ in located])
    rows = []
    for name in OFFLINE:
        chunker = bench_chunker(name, embedder)
        units = [(source, s, e) for source, doc in docs.items() for s, e in document_spans(doc, chunker)]
        vectors = embedder.embed([docs[source].text[s:e] for source, s, e in units])
        ranked = np.argsort(-(query_vectors @ vectors.T), axis=1)
        result = {}
        for k in KS:
            scores = []
            for row, (q, spans) in enumerate(located):
                retrieved: dict[str, list[tuple[int, int]]] = {}
                for i in ranked[row, :k]:
                    source, s, e = units[i]
                    retrieved.setdefault(source, []).append((s, e))
                scores.append(char_precision_recall(retrieved, spans, q["source"], sizes))
            result[k] = tuple(statistics.mean(column) for column in zip(*scores, strict=True))
        rows.append((name, len(units), statistics.mean(e - s for _, s, e in units), result))
    return rows, len(located), total


# --------------------------------------------------------------------------- throughput


def throughput_rows(docs: dict[str, ExtractedDocument]) -> list[tuple[str, float, float, float]]:
    """(method, MB chunked, median seconds, MB/s); semantic on SEMANTIC_SAMPLE, once."""
    chunkers = {name: make_chunker(Settings(chunker=name, chunk_overlap=OVERLAP.get(name, 0)))
                for name in OFFLINE}
    measured = {name: [docs[SEMANTIC_SAMPLE]] if name == "semantic" else list(docs.values())
                for name in OFFLINE}
    seconds: dict[str, list[float]] = {name: [] for name in OFFLINE}
    for round_number in range(ROUNDS):
        for name, chunker in chunkers.items():
            if name == "semantic" and round_number:
                continue  # embedding every sentence is slow here: measured once
            started = time.perf_counter()
            for doc in measured[name]:
                document_spans(doc, chunker)
            seconds[name].append(time.perf_counter() - started)
    rows = []
    for name, runs in seconds.items():
        megabytes = sum(len(doc.text.encode("utf-8")) for doc in measured[name]) / 1e6
        rows.append((name, megabytes, statistics.median(runs), megabytes / statistics.median(runs)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-retrieval", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()
    if not CORPUS.is_dir():
        sys.exit(f"reference corpus not found at {CORPUS}")
    started = time.perf_counter()

    print("## Boundaries against the gold segmentation (example_input.txt)\n")
    print("| method | chunks | P (all) | R (all) | F1 (all) | P (sections) | R (sections) | F1 (sections) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, count, every, sections in boundary_rows():
        print(f"| {name} | {count} | " + " | ".join(f"{v:.2f}" for v in (*every, *sections)) + " |")

    sources = sorted({json.loads(line)["source"] for line in QUESTIONS.read_text().splitlines() if line.strip()})
    docs = {source: extract_document(str(CORPUS / source), Settings()) for source in sources}
    if not args.skip_retrieval:
        embedder = CachedEmbedder(make_embedder(Settings()), ResultCache(EMBED_CACHE))
        retrieval_started = time.perf_counter()
        rows, located, total = retrieval_rows(docs, embedder)
        print(f"\n## Character-level retrieval ({located} of {total} questions with evidence located; "
              f"{len(docs)} documents)\n")
        print("| method | chunks | mean chars | P@1 | R@1 | P@5 | R@5 |")
        print("|---|---|---|---|---|---|---|")
        for name, count, mean_chars, result in rows:
            cells = " | ".join(f"{result[k][0]:.3f} | {result[k][1]:.3f}" for k in KS)
            print(f"| {name} | {count} | {mean_chars:.0f} | {cells} |")
        print(f"\nretrieval: {time.perf_counter() - retrieval_started:.1f} s, {embedder.computed} texts "
              f"embedded (the rest from {EMBED_CACHE})")

    if not args.skip_throughput:
        print(f"\n## Throughput (extracted text, median of {ROUNDS}; semantic: {SEMANTIC_SAMPLE}, once)\n")
        print("| method | MB | seconds | MB/s |")
        print("|---|---|---|---|")
        for name, megabytes, seconds, rate in throughput_rows(docs):
            print(f"| {name} | {megabytes:.2f} | {seconds:.3g} | {rate:.3g} |")
    print(f"\nwall time: {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
