"""MiniLM's word pieces: the packaged tokenizer, its window, and cutting long texts into windows."""

from __future__ import annotations

import functools

from propdex.embed.minilm_weights import packaged_model_dir

MAX_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2, [CLS]/[SEP] included


@functools.lru_cache(maxsize=1)
def minilm_tokenizer():
    """The packaged tokenizer.json through the ``tokenizers`` package (no transformers, no torch)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(packaged_model_dir() / "tokenizer.json"))
    # The packaged file pads to 128 and truncates: callers window and pad themselves.
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def token_counts(texts: list[str]) -> list[int]:
    """Word pieces of each text as MiniLM reads it, [CLS] and [SEP] included."""
    return [len(e.ids) for e in minilm_tokenizer().encode_batch(texts, add_special_tokens=True)]


def token_windows(ids: list[int], size: int, overlap: int) -> list[list[int]]:
    """``ids`` cut into windows of at most ``size`` covering all of it, neighbours sharing at
    least ``overlap`` ids; the last window ends at the end (a short tail is not a window alone)."""
    if len(ids) <= size:
        return [ids]
    step = size - overlap
    starts = list(range(0, len(ids) - size, step)) + [len(ids) - size]
    return [ids[start : start + size] for start in starts]
