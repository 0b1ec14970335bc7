"""Process-wide resources built once from settings: LLM backend, embedder, cache, pool.

Prefect tasks receive only settings (cheap to pickle, safe to ship to a Dask worker); each
process builds these objects on first use and shares them across documents, so a run holds
one model in memory, one HTTP connection pool and one global bound on LLM concurrency.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from propdex.cache import ResultCache
from propdex.embed import Embedder, make_embedder
from propdex.llm.base import LLMBackend
from propdex.settings import Settings

_lock = threading.Lock()
_backends: dict[str, LLMBackend] = {}
_embedders: dict[str, Embedder] = {}
_caches: dict[str, ResultCache] = {}
_pools: dict[int, ThreadPoolExecutor] = {}


def _settings_key(settings: Settings) -> str:
    # Secrets take part in the key (a new key means a new client) without being stored in clear.
    secrets = (key.get_secret_value() if key else None
               for key in (settings.llm_api_key, settings.embed_api_key))
    return settings.model_dump_json(round_trip=True) + repr(hash(tuple(secrets)))


def backend_for(settings: Settings) -> LLMBackend:
    key = _settings_key(settings)
    with _lock:
        if key not in _backends:
            if settings.llm_backend == "openai":
                from propdex.llm.openai_backend import OpenAIBackend

                _backends[key] = OpenAIBackend(settings)
            else:
                from propdex.llm.offline import OfflineBackend

                _backends[key] = OfflineBackend(settings)
        return _backends[key]


def embedder_for(settings: Settings) -> Embedder:
    """The process's embedder for ``settings``: built once, so a remote one learns its vector
    size once and every document's requests share one connection pool."""
    if settings.embedder != "openai":
        return make_embedder(settings)  # cached per model configuration by propdex.embed
    key = _settings_key(settings)
    with _lock:
        if key not in _embedders:
            _embedders[key] = make_embedder(settings)
        return _embedders[key]


def warm_up_embedder(settings: Settings) -> None:
    """Load a local embedding model now (the CLI does it while Prefect starts), so the first
    document's embed stage does not wait for it. A remote embedder needs no loading.

    A model that cannot load is left to the embed stage: it fails there, per document and
    with its reason, exactly as without the warm-up."""
    if settings.embedder == "openai":
        return
    try:
        embedder_for(settings).embed(["warm-up"])
    except Exception:  # noqa: BLE001 - reported by the embed stage (see above)
        return


def cache_for(settings: Settings) -> ResultCache:
    folder = settings.cache_path
    with _lock:
        if str(folder) not in _caches:
            _caches[str(folder)] = ResultCache(folder)
        return _caches[str(folder)]


def llm_pool(settings: Settings) -> ThreadPoolExecutor:
    """The one pool chunk-level LLM work fans out over; its size bounds calls in flight
    across every document of the run."""
    with _lock:
        size = settings.llm_concurrency
        if size not in _pools:
            _pools[size] = ThreadPoolExecutor(max_workers=size, thread_name_prefix="propdex-llm")
        return _pools[size]
