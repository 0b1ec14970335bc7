"""The OpenAI-compatible embedder through the real openai client against the scripted server."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from propdex.embed.openai_embed import OpenAIEmbedder
from propdex.errors import LLMConfigurationError, LLMError
from tests.scripted_fixtures import SENTINEL_KEY, scripted_settings
from tests.scripted_server import ScriptedServer, hashed_vector, server_error, unauthorized

TEXTS = ["Pisa is in Italy.", "The tower leans.", "Its top is displaced.", "Five.", "Six."]


@pytest.fixture
def make_embedder(scripted_server: ScriptedServer):
    made: list[OpenAIEmbedder] = []

    def make(**overrides) -> OpenAIEmbedder:
        embedder = OpenAIEmbedder(scripted_settings(scripted_server, **overrides))
        made.append(embedder)
        return embedder

    yield make
    for embedder in made:
        embedder.close()


def normalised(vector: np.ndarray) -> np.ndarray:
    return vector / np.linalg.norm(vector)


def embedding_requests(server: ScriptedServer):
    return [r for r in server.requests if r.path == "/v1/embeddings"]


def test_vectors_are_the_servers_vectors_l2_normalised(make_embedder):
    vectors = make_embedder().embed(TEXTS[:2])
    expected = np.stack([normalised(hashed_vector(text, 384)) for text in TEXTS[:2]])
    assert np.allclose(expected, vectors, atol=1e-6)


def test_rows_have_unit_length(make_embedder):
    vectors = make_embedder().embed(TEXTS)
    assert np.allclose(np.ones(len(TEXTS)), np.linalg.norm(vectors, axis=1), atol=1e-6)


def test_vectors_are_float32_of_shape_texts_by_dim(make_embedder):
    vectors = make_embedder().embed(TEXTS)
    assert ((len(TEXTS), 384), np.float32) == (vectors.shape, vectors.dtype)


def test_texts_go_out_in_batches_of_embed_batch_size(make_embedder, scripted_server):
    make_embedder(embed_batch_size=2).embed(TEXTS)
    assert [2, 2, 1] == [len(r.body["input"]) for r in embedding_requests(scripted_server)]


def test_batching_keeps_the_order_of_texts(make_embedder):
    batched = make_embedder(embed_batch_size=2).embed(TEXTS)
    whole = make_embedder(embed_batch_size=64).embed(TEXTS)
    assert np.array_equal(whole, batched)


def test_requests_name_the_model_and_ask_for_floats(make_embedder, scripted_server):
    make_embedder(embed_model="my-embedder").embed(TEXTS[:1])
    body = embedding_requests(scripted_server)[0].body
    assert ("my-embedder", "float") == (body["model"], body["encoding_format"])


def test_name_is_the_model_name(make_embedder):
    assert "my-embedder" == make_embedder(embed_model="my-embedder").name


def test_dim_is_learned_from_the_first_response():
    with ScriptedServer(embed_dim=16) as server:
        embedder = OpenAIEmbedder(scripted_settings(server))
        dims = (embedder.dim, embedder.embed(TEXTS).shape[1])
        embedder.close()
        calls = server.calls(path="/v1/embeddings")
    assert ((16, 16), 2) == (dims, calls)


def test_dim_of_a_known_model_needs_no_request(make_embedder, scripted_server):
    embedder = make_embedder(embed_model="text-embedding-3-small")
    assert (1536, 0) == (embedder.dim, scripted_server.calls(path="/v1/embeddings"))


def test_a_server_answering_another_dim_than_known_is_an_error(make_embedder):
    with pytest.raises(LLMError):
        make_embedder(embed_model="text-embedding-3-small").embed(TEXTS[:1])


def test_no_texts_make_no_request(make_embedder, scripted_server):
    vectors = make_embedder().embed([])
    assert (0, 0) == (vectors.shape[0], scripted_server.calls(path="/v1/embeddings"))


def test_an_empty_text_is_sent_as_a_space(make_embedder, scripted_server):
    make_embedder().embed(["", "x"])
    assert [" ", "x"] == embedding_requests(scripted_server)[0].body["input"]


def test_embed_query_is_the_first_row_of_embed(make_embedder):
    embedder = make_embedder()
    assert np.array_equal(embedder.embed(TEXTS[:1])[0], embedder.embed_query(TEXTS[0]))


def test_a_server_error_is_retried(make_embedder, scripted_server):
    scripted_server.script(server_error(503), step="embeddings")
    vectors = make_embedder().embed(TEXTS[:1])
    assert ((1, 384), 2) == (vectors.shape, scripted_server.calls(path="/v1/embeddings"))


def test_a_refused_key_is_a_configuration_error_without_the_key(make_embedder, scripted_server):
    scripted_server.script(unauthorized(), step="embeddings")
    with pytest.raises(LLMConfigurationError) as caught:
        make_embedder().embed(TEXTS[:1])
    assert (1, False) == (
        scripted_server.calls(path="/v1/embeddings"),
        SENTINEL_KEY in str(caught.value),
    )


def test_embed_base_url_and_key_override_the_llm_ones(scripted_server):
    settings = scripted_settings(
        scripted_server, llm_base_url="http://127.0.0.1:9/v1",
        embed_base_url=scripted_server.url + "/v1", embed_api_key="sk-embed-key-123456",
    )
    embedder = OpenAIEmbedder(settings)
    embedder.embed(TEXTS[:1])
    embedder.close()
    assert "Bearer sk-embed-key-123456" == scripted_server.requests[0].headers["authorization"]


def test_stages_asking_the_size_at_once_share_one_probe():
    with ScriptedServer(embed_dim=16, latency_ms=300) as server:
        embedder = OpenAIEmbedder(scripted_settings(server))
        with ThreadPoolExecutor(4) as pool:
            dims = list(pool.map(lambda _: embedder.dim, range(4)))

    assert ([16] * 4, 1) == (dims, len(embedding_requests(server)))
