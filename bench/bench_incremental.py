"""Incremental re-ingestion: what an unchanged re-run costs, and what editing one page re-calls.

(a) Unchanged corpus (100 generated documents plus the shared corpus, offline backend, MiniLM):
    the wall seconds of `propdex ingest` re-run, in a fresh process, on sources it has
    ingested (target: < 3 s; the CLI plans before importing Prefect and starts no flow run when
    nothing changed), next to the seconds to SHA-256 every file. With --baseline REV the same
    re-run of a copy of that git revision (on its own index) alternates with this checkout's,
    ROUNDS times each, so both are measured side by side on the same load.
(b) Editing one page of levels_of_agi.pdf (19 pages), with the LLM steps on the scripted
    OpenAI-compatible server: LLM calls of the re-run by step, against the number of chunks
    whose text changed (target: propositions and grading calls == changed chunks).

Run from the repository root:  python bench/bench_incremental.py [--rounds 5] [--baseline REV]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from propdex.ids import sha256_file  # noqa: E402
from propdex.store import Index  # noqa: E402
from tests.pdf_factory import make_pdf  # noqa: E402
from tests.scripted_server import ScriptedServer  # noqa: E402

sys.path.insert(0, str(REPO / "bench"))
from revisions import checkout  # noqa: E402

CORPUS = REPO.parent / "shared" / "corpus"
CORPUS_FILES = ("levels_of_agi.pdf", "attention_is_all_you_need.pdf",
                "mck_energy_first_5_pages.pdf", "nike_2023_annual_report.txt")
TOPICS = ("herons", "glaciers", "lighthouses", "tidal mills", "salt marshes", "beech forests",
          "river deltas", "moorland", "coral reefs", "dune systems")


def write_generated(folder: Path, count: int = 100) -> list[Path]:
    """Small documents of three kinds: Markdown, plain text and two-page PDFs."""
    folder.mkdir(parents=True)
    paths = []
    for n in range(count):
        topic = TOPICS[n % len(TOPICS)]
        body = (f"Survey {n} of {topic} was carried out in {1990 + n % 30}. The survey counted "
                f"{100 + 7 * n} sites. Each site was visited twice in spring.\n\n"
                f"The {topic} survey found that {n % 9 + 1} sites had changed since the last "
                f"count. Volunteers recorded weather, access and damage at every site.")
        if n % 5 == 0:
            paths.append(make_pdf(folder / f"survey{n:03}.pdf",
                                  [body, f"Appendix of survey {n}: methods for {topic}."],
                                  title=f"Survey {n}: {topic}"))
        else:
            path = folder / f"survey{n:03}.{'md' if n % 2 else 'txt'}"
            path.write_text(f"# Survey {n}: {topic}\n\n{body}\n", encoding="utf-8")
            paths.append(path)
    return paths


def run_cli(args: list[str], env: dict[str, str], code: Path = REPO) -> tuple[float, dict]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "propdex.cli", *args, "--json"],
                          env=dict(env, PYTHONPATH=str(code)), cwd=code, capture_output=True,
                          text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"propdex {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return seconds, json.loads(done.stdout)


def hash_seconds(paths: list[Path]) -> float:
    started = time.perf_counter()
    for path in paths:
        sha256_file(path)
    return time.perf_counter() - started


def unchanged_rerun(work: Path, rounds: int, baseline: str | None, corpus_dir: Path) -> None:
    sources = write_generated(work / "generated")
    corpus = [corpus_dir / name for name in CORPUS_FILES if (corpus_dir / name).is_file()]
    files = sources + corpus
    arguments = [str(work / "generated"), *map(str, corpus)]
    env = dict(os.environ, PREFECT_HOME=str(work / "prefect-home"), PROPDEX_LLM="offline",
               PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_LOGGING_LEVEL="WARNING",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="120", HF_HUB_OFFLINE="1")
    codes = {"this checkout": REPO}
    if baseline:
        codes[f"baseline {baseline}"] = checkout(baseline, work / "baseline")
    reruns: dict[str, list[float]] = {name: [] for name in codes}
    print(f"(a) {len(files)} files ({len(corpus)} from the shared corpus); load average "
          f"{os.getloadavg()[0]:.2f} before")
    for n, (name, code) in enumerate(codes.items()):
        first, summary = run_cli(["ingest", *arguments, "--db", str(work / f"db{n}")], env, code)
        indexed = sum(d["status"] == "indexed" for d in summary["documents"])
        print(f"    first ingest ({name}): {indexed} indexed, {first:.1f} s")
    hashes = []
    for _ in range(rounds):
        for n, (name, code) in enumerate(codes.items()):
            seconds, summary = run_cli(["ingest", *arguments, "--db", str(work / f"db{n}")], env, code)
            if summary["documents"] or len(summary["unchanged"]) != len(files):
                raise SystemExit(f"the re-run was not a no-op: {summary['documents'][:3]}")
            reruns[name].append(seconds)
        hashes.append(hash_seconds(files))
    print(f"    unchanged re-run, fresh process, median of {rounds} (load average "
          f"{os.getloadavg()[0]:.2f} after):")
    for name, seconds in reruns.items():
        print(f"      {name}: {statistics.median(seconds):.2f} s (target < 3 s)")
    if baseline:
        ours, theirs = (statistics.median(v) for v in reruns.values())
        print(f"      ratio baseline / this checkout: {theirs / ours:.1f}x")
    print(f"    hashing every file: {statistics.median(hashes):.3f} s")


def edit_one_page(pdf: Path, page_number: int) -> None:
    import pymupdf

    edited = pdf.with_suffix(".edited.pdf")
    with pymupdf.open(pdf) as doc:
        page = doc[page_number]
        page.insert_text((72, page.rect.height - 40),
                         "Editor's note: this page was revised in the second edition.",
                         fontsize=9)
        doc.save(edited)
    edited.replace(pdf)


def live_chunks(db: Path) -> list[dict]:
    index = Index.open(str(db), create=False)
    return [row for doc in index.documents()
            for row in index.live_rows("chunks", ["text"], doc["doc_id"])]


def one_page_edit(work: Path, corpus_dir: Path) -> None:
    source = corpus_dir / "levels_of_agi.pdf"
    if not source.is_file():
        print(f"(b) skipped: {source} not found (the shared corpus sits beside the dev checkout)")
        return
    pdf = work / "edit" / "levels_of_agi.pdf"
    pdf.parent.mkdir()
    shutil.copyfile(source, pdf)
    db = work / "edit-db"
    with ScriptedServer(latency_ms=0) as server:
        env = dict(os.environ, PREFECT_HOME=str(work / "prefect-home"), PROPDEX_LLM="openai",
                   PROPDEX_LLM_BASE_URL=server.url + "/v1", PROPDEX_LLM_API_KEY="bench-key",
                   PROPDEX_LLM_MODEL="scripted-model", PROPDEX_EMBEDDER="openai",
                   PROPDEX_EMBED_MODEL="scripted-embed", PREFECT_LOGGING_LEVEL="WARNING",
                   PREFECT_SERVER_ANALYTICS_ENABLED="false")
        run_cli(["ingest", str(pdf), "--db", str(db)], env)
        before = {c["text"] for c in live_chunks(db)}
        first_calls = {step: server.calls(step) for step in ("title", "summary", "propositions", "grading")}
        server.reset()

        edit_one_page(pdf, page_number=14)
        _, summary = run_cli(["ingest", str(pdf), "--db", str(db)], env)
        calls = {step: server.calls(step) for step in ("title", "summary", "propositions", "grading")}
    after = live_chunks(db)
    changed = [c for c in after if c["text"] not in before]
    print(f"(b) levels_of_agi.pdf: {len(before)} chunks; first run calls {first_calls}")
    print(f"    after editing page 15: reason {[d['reason'] for d in summary['documents']]}, "
          f"{len(changed)} chunks changed, re-run calls {calls}")
    verdict = calls["propositions"] == calls["grading"] == len(changed)
    print(f"    only the changed chunks re-called: {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", metavar="REV",
                        help="also time the unchanged re-run of this git revision, alternating")
    parser.add_argument("--corpus", type=Path, default=CORPUS,
                        help="folder of the shared corpus (default: shared/corpus beside the checkout)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="propdex-bench-incremental-") as tmp:
        work = Path(tmp)
        unchanged_rerun(work, args.rounds, args.baseline, args.corpus)
        one_page_edit(work, args.corpus)


if __name__ == "__main__":
    main()
