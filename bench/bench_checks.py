"""CPU cost of the proposition checks per 1,000 propositions, and the false-rejection rate
of the checks on the Dense X gold propositions.

The propositions are the offline backend's over real chunks (the recursive chunker over the
given texts, default: the corpus PDFs' extracted text, else examples/), each checked against
its chunk, a header and the title, as the pipeline does. CPU time is ``time.process_time``
over ``--rounds`` passes; the first pass (cold word caches) is reported apart, since a run's
first documents pay it; later passes reuse the word caches (a run's vocabulary repeats) but
not the header's stems.

Run from the repository root:  python bench/bench_checks.py [--rounds 5] [FILE ...]
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
GOLD = CORPUS / "dense-x" / "propositionizer_examples.json"
DEFAULT_FILES = ("levels_of_agi.pdf", "attention_is_all_you_need.pdf")


def chunked_propositions(paths: list[Path]) -> list[tuple[list[str], str, tuple[str, str]]]:
    """(propositions, chunk text, (header, title)) per chunk of ``paths``."""
    from propdex.chunking import chunk_and_count
    from propdex.extract import extract_document
    from propdex.llm.offline import OfflineBackend
    from propdex.settings import Settings

    settings = Settings(llm="offline")
    backend = OfflineBackend(settings)
    units = []
    for path in paths:
        doc = extract_document(path, settings)
        title = backend.title(doc.text[:8000], truncated=True, hint=doc.title_hint).value
        summary = backend.summary(doc.text[:8000], title=title, truncated=True).value
        header = f"Document: {title}\nSummary: {summary}"
        for chunk in chunk_and_count(doc, settings).chunks:
            texts = backend.propositions(chunk.text, title=title, section=chunk.section).value
            units.append((texts, chunk.text, (header, title)))
    return units


def gold_rejections() -> tuple[int, int, list[tuple[str, str]]]:
    from propdex.checks.propositions import proposition_problems

    examples = json.loads(GOLD.read_text())["examples"]
    results = [(p, proposition_problems([p], e["content"], (e["section"], e["title"]))[0])
               for e in examples for p in e["propositions"]]
    rejected = [(p, why) for p, why in results if why is not None]
    return len(results), len(rejected), rejected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    files = args.files or [CORPUS / name for name in DEFAULT_FILES if (CORPUS / name).exists()]
    files = files or sorted((REPO / "examples").glob("*"))

    from propdex.checks.propositions import proposition_problems
    from propdex.checks.words import content_stem, context_stems, stem

    units = chunked_propositions(files)
    count = sum(len(texts) for texts, _, _ in units)

    def check_all() -> tuple[float, int]:
        """Milliseconds of CPU per 1,000 propositions, and how many the checks rejected."""
        context_stems.cache_clear()  # a header's stems are reused within its document only
        started = time.process_time()
        problems = [proposition_problems(texts, chunk, context) for texts, chunk, context in units]
        spent = (time.process_time() - started) * 1000 / count * 1000
        return spent, sum(p is not None for found in problems for p in found)

    gc.collect()  # not to charge the first pass with collecting what writing the propositions left
    stem.cache_clear()  # the offline backend filled them while writing the propositions
    content_stem.cache_clear()
    cold, rejected = check_all()
    per_thousand = [check_all()[0] for _ in range(args.rounds)]
    print(f"files: {', '.join(f.name for f in files)}")
    print(f"chunks {len(units)}, propositions {count}, rejected by the checks {rejected}")
    print(f"checks CPU per 1,000 propositions: cold {cold:.1f} ms, then median "
          f"{statistics.median(per_thousand):.1f} ms (min {min(per_thousand):.1f}, "
          f"max {max(per_thousand):.1f}, {args.rounds} rounds)")
    if GOLD.exists():
        total, false_rejections, which = gold_rejections()
        print(f"gold Dense X propositions: {total - false_rejections} of {total} pass "
              f"(false-rejection rate {false_rejections / total:.3f})")
        for text, why in which:
            print(f"  rejected ({why}): {text}")


if __name__ == "__main__":
    main()
