"""MiniLM's word pieces through tokie: the ids Hugging Face tokenizers gives for the packaged
tokenizer.json, with neither the file's padding nor its truncation."""

from __future__ import annotations

import importlib.util

import pytest

from propdex.embed.minilm_tokens import minilm_tokenizer, token_counts
from propdex.embed.minilm_weights import packaged_model_dir

SAMPLES = [
    "",
    " ",
    "The Transformer (big) scores 28.4 BLEU on English-to-German newstest2014.",
    "Café naïve façade — “quotes” ２０２３ 東京 emoji 🙂 ¹²³ ﬁ ligature 10⁻¹⁹ x²",
    "| Model | EN-DE | EN-FR |\n| --- | --- | --- |\n| ByteNet [18] | 23.75 | |",
    "e.g. U.S. $1,234.56; A\u0301 (a combining accent)",
    "word " * 400,
]


def reference_tokenizer():
    if importlib.util.find_spec("tokenizers") is None:
        pytest.skip("Hugging Face tokenizers is not installed (it comes with the 'torch' extra)")
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(packaged_model_dir() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def assert_same_ids(texts: list[str]) -> None:
    reference = reference_tokenizer()
    for special in (True, False):
        expected = [e.ids for e in reference.encode_batch(texts, add_special_tokens=special)]
        actual = [e.ids for e in minilm_tokenizer().encode_batch(texts, add_special_tokens=special)]
        assert expected == actual


def test_ids_equal_hugging_face_tokenizers():
    assert_same_ids(SAMPLES)


def test_ids_equal_hugging_face_tokenizers_on_corpus_text(corpus):
    import pymupdf

    texts = [(corpus / "nike_2023_annual_report.txt").read_text(encoding="utf-8")[:200_000]]
    with pymupdf.open(corpus / "attention_is_all_you_need.pdf") as document:
        texts += [page.get_text() for page in document]
    assert_same_ids(texts)


def test_long_text_is_neither_truncated_nor_padded():
    assert [402, 2] == token_counts(["word " * 400, ""])


def test_special_token_ids():
    tokenizer = minilm_tokenizer()
    assert (101, 102) == (tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]"))
