"""A real `propdex serve` process on a free port, and an index whose vectors the scripted
server's embeddings reproduce (so a query equal to a proposition's text finds it first)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.prefect_server import free_port, start_process, stop_process, wait_for
from tests.scripted_server import ScriptedServer, hashed_vector
from tests.store_rows import DIM, make_version

REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 120  # a loaded 2-core machine imports FastAPI and LanceDB slowly
SEARCHED = "scripted-embed"  # the model embedding_environment searches with
E5 = "multilingual-e5-small-q4"


@pytest.fixture(scope="module")
def scripted() -> Iterator[ScriptedServer]:
    """The scripted server, embedding in DIM dimensions for the service and the CLI."""
    server = ScriptedServer(embed_dim=DIM).start()
    yield server
    server.stop()


def scripted_vector(text: str) -> np.ndarray:
    """The unit vector the scripted server's embeddings give ``text`` (dimension DIM)."""
    vector = hashed_vector(text, DIM)
    return vector / np.linalg.norm(vector)


def embedding_environment(scripted: ScriptedServer) -> dict[str, str]:
    """PROPDEX_* variables that make the service (and the CLI) embed through ``scripted``."""
    return {"PROPDEX_EMBEDDER": "openai", "PROPDEX_EMBED_MODEL": SEARCHED,
            "PROPDEX_EMBED_BASE_URL": scripted.url + "/v1", "PROPDEX_EMBED_API_KEY": "sk-test",
            "PROPDEX_LLM_TIMEOUT": "5"}


def version(doc_id: str, run_id: str, facts: list[list[str]], source: str, title: str):
    """A document version whose chunk i holds ``facts[i]``; every vector is the scripted
    embedding of its text."""
    paragraphs = [" ".join(chunk) for chunk in facts]
    return make_version(
        doc_id, run_id, paragraphs, source=source, title=title,
        props={i: chunk for i, chunk in enumerate(facts)},
        chunk_vectors={i: scripted_vector(p) for i, p in enumerate(paragraphs)},
        prop_vectors={(i, j): scripted_vector(fact) for i, chunk in enumerate(facts)
                      for j, fact in enumerate(chunk)},
        embed_model=SEARCHED,
    )


def half_reembedded_index(db: Path) -> None:
    """An index an ingest with a new embedder has half re-embedded: "alpha" embedded with
    the model embedding_environment searches with, "beta" still with e5-small. Both are
    committed through Index.replace_document, as an ingest commits them."""
    from propdex.store import Index

    index = Index.open(str(db), dim=DIM)
    index.replace_document(*version(
        "alpha", "r1", [["Owls hunt small mammals at night.", "Owls nest in old trees."]],
        "/corpus/reports/alpha.pdf", "Alpha Report").rows)
    beta = version("beta", "r1", [["Bees make honey from nectar.", "Honey keeps for years."]],
                   "/corpus/notes/beta.txt", "Beta Notes")
    for row in [beta.document, *beta.chunks, *beta.propositions]:
        row["embed_model"] = E5
    index.replace_document(*beta.rows)


@contextmanager
def running_service(db: Path, env: dict[str, str], *args: str) -> Iterator[str]:
    """`propdex serve --db DB` in a subprocess; yields its base URL once /health answers."""
    port = free_port()
    environment = {**os.environ, **env, "PYTHONPATH": str(REPO)}
    process = start_process(
        "propdex serve",
        [sys.executable, "-m", "propdex.cli", "serve", "--db", str(db), "--port", str(port), *args],
        environment, db.parent / f"serve-{port}.log")
    url = f"http://127.0.0.1:{port}"
    headers = {"Authorization": f"Bearer {env['PROPDEX_API_TOKEN']}"} \
        if "PROPDEX_API_TOKEN" in env else {}

    def healthy() -> bool:
        try:
            return httpx.get(url + "/health", headers=headers, timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_for(healthy, timeout=START_TIMEOUT_S, what="propdex serve to answer /health",
                 interval=0.2, alive=process.check_alive)
        yield url
    finally:
        stop_process(process)