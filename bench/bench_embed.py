"""Local embedding throughput: propdex's ONNX MiniLM against raw sentence-transformers.

The texts are what the offline pipeline embeds for a document (its chunks with their contextual
headers, and its propositions), built here without Prefect. Every side embeds the same texts in
the same process, rounds alternating, after one warm-up each; the table gives medians and the
ratio of each side to raw sentence-transformers fp32 ``encode(texts, batch_size=64)``.
sentence-transformers cuts texts longer than 256 word pieces; propdex reads them whole in
windows (more work), and the table says how many texts that concerns.

Also measured: the agreement of the vectors with sentence-transformers' (cosine, on the texts
that fit the window), documents embedding at once from threads (as the flow's document
concurrency does), and the cold query path of a fresh process (imports, model load, one query).

Run from the repository root:  python bench/bench_embed.py [--rounds 5] [--write] [FILE ...]
``--write`` also replaces this benchmark's section of bench/RESULTS.md. The reference side
needs the 'torch' extra (sentence-transformers): pip install -e '.[local,torch]'.
``--baseline-int8 FILE`` adds an int8 ONNX file converted elsewhere (another checkout's
~/.cache/propdex/onnx) as one more side, run by this checkout's embedder code.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ["PROPDEX_LLM"] = "offline"

CORPUS = REPO.parent / "shared" / "corpus"
DEFAULT_FILES = ("levels_of_agi.pdf",)
SECTION_TITLE = "## Local embeddings: ONNX MiniLM against raw sentence-transformers"
RESULTS = REPO / "bench" / "RESULTS.md"
QUERY_SCRIPT = """
import time
started = time.perf_counter()
from propdex.runtime import embedder_for
from propdex.settings import Settings
embedder_for(Settings()).embed_query("How are propositions graded?")
print(time.perf_counter() - started)
"""


def pipeline_texts(path: Path, work: Path) -> list[str]:
    """The chunk (header + text) and proposition texts the offline pipeline embeds for ``path``."""
    from concurrent.futures import ThreadPoolExecutor as Pool

    from propdex.cache import ResultCache
    from propdex.chunking import chunk_and_count
    from propdex.extract import extract_document
    from propdex.llm.offline import OfflineBackend
    from propdex.pipeline.context import document_context
    from propdex.pipeline.headers import attach_headers
    from propdex.pipeline.propositions import propositions_for_document
    from propdex.settings import Settings

    settings = Settings(db=str(work / "db"))
    backend, cache = OfflineBackend(settings), ResultCache(work / "cache")
    doc = extract_document(path, settings)
    context = document_context(doc, backend, cache, settings)
    chunks = chunk_and_count(doc, settings).chunks
    attach_headers(chunks, context)
    with Pool(2) as pool:
        outcomes = propositions_for_document(chunks, context, backend, cache, settings, pool)
    return [c.embed_text for c in chunks] + [p.text for o in outcomes for p in o.propositions]


def timed(embed, texts: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds of this process (all its threads) for one call. On a
    machine shared with other work the CPU seconds are the steadier measure of the work."""
    started, cpu = time.perf_counter(), time.process_time()
    embed(texts)
    return time.perf_counter() - started, time.process_time() - cpu


def concurrent(embed, texts: list[str], documents: int) -> float:
    """Seconds for ``documents`` threads each embedding an equal share of ``texts`` at once."""
    shares = [texts[i::documents] for i in range(documents)]
    started = time.perf_counter()
    with ThreadPoolExecutor(documents) as pool:
        list(pool.map(embed, shares))
    return time.perf_counter() - started


def cold_query_seconds(rounds: int) -> list[float]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return [float(subprocess.run([sys.executable, "-c", QUERY_SCRIPT], cwd=REPO, env=env,
                                 capture_output=True, text=True, check=True).stdout)
            for _ in range(rounds)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--documents", type=int, default=4,
                        help="threads embedding at once in the concurrency measure")
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    parser.add_argument("--baseline-int8", type=Path, default=None,
                        help="an int8 MiniLM ONNX file (e.g. another checkout's conversion) "
                        "measured as one more side, with this checkout's embedder code")
    args = parser.parse_args()
    files = args.files or [CORPUS / name for name in DEFAULT_FILES]
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        raise SystemExit(f"not found: {', '.join(missing)} (the shared corpus sits beside the dev checkout)")

    import numpy as np

    from propdex.embed import make_embedder
    from propdex.embed.minilm import _load_model
    from propdex.embed.minilm_tokens import MAX_TOKENS, token_counts
    from propdex.settings import Settings

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="propdex-bench-embed-") as tmp:
        texts = [t for f in files for t in pipeline_texts(f, Path(tmp))]

    model = _load_model()

    def raw_st(batch: list[str]):
        return model.encode(batch, batch_size=64, normalize_embeddings=True,
                            convert_to_numpy=True, show_progress_bar=False)

    sides = {
        "raw sentence-transformers fp32, encode(batch_size=64)": raw_st,
        "propdex ONNX fp32": make_embedder(Settings(embed_precision="fp32")).embed,
        "propdex ONNX int8 (default for documents)": make_embedder(Settings()).embed,
    }
    baseline_dir = Path(tempfile.mkdtemp(prefix="propdex-bench-baseline-"))
    if args.baseline_int8:
        sides[f"baseline int8 {args.baseline_int8.name}"] = baseline_embedder(
            args.baseline_int8.resolve(), baseline_dir)
    for embed in sides.values():  # warm-up: converts the ONNX models once, loads, first batch
        embed(texts[:16])
    seconds: dict[str, list[float]] = {name: [] for name in sides}
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.rounds):
        for name, embed in sides.items():
            wall, used = timed(embed, texts)
            seconds[name].append(wall)
            cpu[name].append(used)
    together: dict[str, float] = {}
    for name, embed in sides.items():
        together[name] = concurrent(embed, texts, args.documents)

    counts = np.asarray(token_counts(texts))
    fits = counts <= MAX_TOKENS
    reference = raw_st(texts)
    agreement = {name: (reference[fits] * embed(texts)[fits]).sum(1)
                 for name, embed in list(sides.items())[1:]}
    cold = cold_query_seconds(max(3, args.rounds))
    shutil.rmtree(baseline_dir)
    load_after = os.getloadavg()[0]

    base = statistics.median(seconds[next(iter(sides))])
    base_cpu = statistics.median(cpu[next(iter(sides))])
    base_together = together[next(iter(sides))]
    names = ", ".join(f.name for f in files)
    lines = [
        f"`python bench/bench_embed.py --rounds {args.rounds}` on {names}: {len(texts)} texts "
        f"(chunks with headers + propositions), {int(counts.sum())} word pieces, "
        f"{int((~fits).sum())} longer than {MAX_TOKENS} (cut by sentence-transformers, read in "
        f"windows by propdex). {args.rounds} alternating rounds after a warm-up, medians; "
        f"load average {load_before:.1f} before, {load_after:.1f} after, on {os.cpu_count()} CPUs.",
        "",
        f"| side | seconds | texts/s | speed-up vs raw | CPU seconds | CPU speed-up "
        f"| {args.documents} documents at once: s | speed-up "
        "| min / mean cosine vs raw (texts that fit) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, values in seconds.items():
        median = statistics.median(values)
        cosine = agreement.get(name)
        cos_cell = f"{cosine.min():.4f} / {cosine.mean():.4f}" if cosine is not None else "-"
        used = statistics.median(cpu[name])
        lines.append(
            f"| {name} | {median:.2f} | {len(texts) / median:.0f} | {base / median:.2f}x "
            f"| {used:.2f} | {base_cpu / used:.2f}x "
            f"| {together[name]:.2f} | {base_together / together[name]:.2f}x | {cos_cell} |"
        )
    lines += [
        "",
        f"Cold query from a fresh process (imports, ONNX model load, one `embed_query`; "
        f"model already converted): median {statistics.median(cold):.2f} s over {len(cold)} runs "
        f"(min {min(cold):.2f} s).",
        "",
    ]
    body = "\n".join(lines)
    print(body)  # run_all.py puts its own title above
    if args.write:
        write_section(f"{SECTION_TITLE}\n\n{body}")


def baseline_embedder(model: Path, folder: Path):
    """``embed`` of this checkout's ONNX embedder running ``model`` as its int8 graph."""
    from propdex.embed.onnx_export import onnx_model_path
    from propdex.embed.onnx_minilm import OnnxMiniLMEmbedder

    onnx_model_path(folder, "int8").symlink_to(model)
    return OnnxMiniLMEmbedder(folder, "int8").embed


def write_section(section: str) -> None:
    """Replace this benchmark's section of bench/RESULTS.md (or append it)."""
    text = RESULTS.read_text(encoding="utf-8") if RESULTS.is_file() else ""
    start = text.find(SECTION_TITLE)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + len(SECTION_TITLE))
        text = text[:start] + section + ("\n" + text[end + 1 :] if end >= 0 else "")
    RESULTS.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
