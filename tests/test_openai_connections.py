"""The process's openai clients are shared: the requests of one document after another go over
one kept-alive connection, not a new client (new connections, a TLS handshake each against
a real server) per document."""

from __future__ import annotations

import pytest

from propdex.llm.openai_clients import close_openai_clients, shared_openai_client
from propdex.runtime import embedder_for
from propdex.sectioning.llm import llm_sections
from tests.scripted_fixtures import scripted_settings

DOCUMENTS = 4


@pytest.fixture
def server(scripted_server):
    close_openai_clients()  # none left open by an earlier test for a server on this port
    yield scripted_server
    close_openai_clients()


def test_the_embed_stages_of_documents_share_one_connection(server, tmp_path):
    settings = scripted_settings(server, db=str(tmp_path / "db"))
    for i in range(DOCUMENTS):  # what each document's embed task does
        embedder_for(settings).embed([f"Note {i} says that herons nest in tall trees."])

    assert 1 == server.connections_opened


def test_the_llm_sectioning_of_documents_shares_one_connection(server, tmp_path):
    # A known context window: no GET of the server's models, which goes over its own connection.
    settings = scripted_settings(server, db=str(tmp_path / "db"), llm_context_window=8192)
    for i in range(DOCUMENTS):
        llm_sections(f"Note {i}\nHerons nest in tall trees.\nThey eat fish.", settings)

    assert 1 == server.connections_opened


def test_a_closed_shared_client_is_replaced_by_a_new_one(server):
    first = shared_openai_client(server.url + "/v1", "k", 5.0)
    close_openai_clients()

    assert first is not shared_openai_client(server.url + "/v1", "k", 5.0)
