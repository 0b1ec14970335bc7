"""Content-addressed cache for LLM answers and embeddings.

Keys hash everything that determines an output (step, model, prompt version, parameters,
input text), so an unchanged chunk inside a changed document reuses its results, and a
changed prompt or model misses exactly the entries it affects. SQLite in WAL mode: safe
across the threads of a run and across processes (Dask workers, a crashed-and-resumed run).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

import numpy as np

_SCHEMA = """
CREATE TABLE IF NOT EXISTS llm (key TEXT PRIMARY KEY, step TEXT, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS embeddings (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL
);
"""


def cache_key(**parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResultCache:
    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "results.sqlite"
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=60)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)

    # LLM answers ---------------------------------------------------------------
    def get_llm(self, key: str) -> Any | None:
        with self._lock:
            row = self._conn.execute("SELECT value FROM llm WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put_llm(self, key: str, step: str, value: Any) -> None:
        # Committed at once: a run killed mid-way keeps every answer it already paid for.
        with self._lock, self._conn:
            self._conn.execute(
                "INSERT OR REPLACE INTO llm (key, step, value) VALUES (?, ?, ?)",
                (key, step, json.dumps(value, ensure_ascii=False)),
            )

    # Embeddings ----------------------------------------------------------------
    @staticmethod
    def embedding_key(model: str, text: str) -> str:
        return hashlib.sha256(f"{model}\x00{text}".encode()).hexdigest()

    def get_embeddings(self, model: str, texts: list[str]) -> dict[int, np.ndarray]:
        """Cached vectors by position in ``texts``."""
        keys = [self.embedding_key(model, t) for t in texts]
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                batch = keys[start : start + 500]
                marks = ",".join("?" * len(batch))
                rows = self._conn.execute(
                    f"SELECT key, dim, vector FROM embeddings WHERE key IN ({marks})", batch
                ).fetchall()
                for key, dim, blob in rows:
                    found[key] = np.frombuffer(blob, dtype=np.float32, count=dim)
        return {i: found[k] for i, k in enumerate(keys) if k in found}

    def put_embeddings(self, model: str, texts: list[str], vectors: np.ndarray) -> None:
        rows = [
            (self.embedding_key(model, t), model, int(v.shape[0]), np.asarray(v, np.float32).tobytes())
            for t, v in zip(texts, vectors, strict=True)
        ]
        with self._lock, self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO embeddings (key, model, dim, vector) VALUES (?, ?, ?, ?)",
                rows,
            )

    def close(self) -> None:
        with self._lock:
            self._conn.close()
