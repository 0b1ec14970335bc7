"""The ingest flow with the llm chunker and LLM sectioning: their calls and tokens are in the
documents row and the run summary, as the scripted server counted them."""

from __future__ import annotations

from pathlib import Path

import lancedb
import pytest

from flows.parameters import IngestOptions
from tests.scripted_server import prompt_tokens_of

pytestmark = pytest.mark.prefect

NOTES = "\n\n".join(f"Note {i} records one fact about item {i}. It stops here." for i in range(20))


def test_chunking_and_sectioning_calls_are_counted_per_document(llm_env, tmp_path: Path) -> None:
    from flows.ingest import ingest

    path = tmp_path / "notes.txt"
    path.write_text(NOTES)
    db = tmp_path / "db"
    summary = ingest(sources=[str(path)], db=str(db), options=IngestOptions(chunker="llm", sectioning=True))
    document = lancedb.connect(str(db)).open_table("documents").to_arrow().to_pylist()[0]
    chat = [r for r in llm_env.requests if r.path.endswith("/chat/completions")]
    sent = (len(chat), sum(prompt_tokens_of(r.body) for r in chat))

    assert (1, 1) == (llm_env.calls("sectioning"), llm_env.calls("llm_chunk"))
    assert sent == (document["llm_calls"], document["prompt_tokens"])
    assert sent == (summary["totals"]["llm_calls"], summary["totals"]["prompt_tokens"])
