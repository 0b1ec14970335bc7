"""The two PDF readers on 405 crowd-written questions: SQuAD's Super Bowl 50 article typeset as
a PDF (two columns, a running header and page numbers), ingested once per reader, then
``propdex eval`` of ../shared/corpus/squad/questions_dev.jsonl against each index.

The dev set holds 50 questions, so one question moves a recall cell by 2 points; this set moves
it by 0.25. The article is the one squad/ holds as Markdown, so the Markdown row (no PDF reader)
is the reference both readers are compared with.

Usage: python bench/bench_reader_squad.py [--out DIR] [--columns 1|2] [--readers layout fast]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pymupdf

REPO = Path(__file__).resolve().parents[1]
SQUAD = REPO.parent / "shared" / "corpus" / "squad"
UNITS = ("recall@1", "recall@5", "recall@20", "mrr")
PAGE = pymupdf.paper_rect("letter")
MARGIN, GUTTER = 54, 18


def wrapped(text: str, font: pymupdf.Font, size: float, width: float) -> list[str]:
    lines, line = [], ""
    for word in text.split():
        candidate = f"{line} {word}".strip()
        if line and font.text_length(candidate, fontsize=size) > width:
            lines.append(line)
            candidate = word
        line = candidate
    return lines + [line] if line else lines


def column_rects(columns: int) -> list[pymupdf.Rect]:
    top, bottom = MARGIN + 14, PAGE.height - MARGIN
    width = (PAGE.width - 2 * MARGIN - (columns - 1) * GUTTER) / columns
    return [pymupdf.Rect(MARGIN + i * (width + GUTTER), top, MARGIN + i * (width + GUTTER) + width, bottom)
            for i in range(columns)]


def typeset(markdown: str, path: Path, columns: int) -> int:
    """Write the article as a PDF, ragged right, paragraphs flowing from column to column and
    page to page (so some break mid-sentence, as in any paper); returns its page count."""
    body, heading = pymupdf.Font("tiro"), pymupdf.Font("tibo")
    rects = column_rects(columns)
    doc = pymupdf.open()
    page, column, y = None, columns, 0.0

    def next_line(height: float) -> tuple[pymupdf.Page, float, float]:
        nonlocal page, column, y
        if page is None or y + height > rects[column].y1:
            column += 1
            if column >= columns:
                page, column = doc.new_page(width=PAGE.width, height=PAGE.height), 0
            y = rects[column].y0
        y += height
        return page, rects[column].x0, y

    for block in markdown.split("\n\n"):
        block = block.strip()
        if not block:
            continue
        font, size = (heading, 16) if block.startswith("# ") else (body, 10)
        for line in wrapped(block.removeprefix("# "), font, size, rects[0].width):
            target, x, baseline = next_line(size * 1.25)
            writer = pymupdf.TextWriter(target.rect)
            writer.append((x, baseline), line, font=font, fontsize=size)
            writer.write_text(target)
        y += 5  # paragraph spacing
    # Running header and page numbers: the furniture a reader must leave out of the text.
    for number, page in enumerate(doc, 1):
        page.insert_text((MARGIN, MARGIN - 6), "Super Bowl 50 - from Wikipedia, the free encyclopedia",
                         fontsize=8, fontname="helv")
        page.insert_text((PAGE.width / 2 - 8, PAGE.height - MARGIN / 2), str(number), fontsize=8,
                         fontname="helv")
    count = doc.page_count
    doc.save(path, garbage=3, deflate=True)
    doc.close()
    return count


def questions_for(source: str, out: Path) -> Path:
    path = out / f"questions_{Path(source).suffix[1:]}.jsonl"
    with open(SQUAD / "questions_dev.jsonl", encoding="utf-8") as lines, open(path, "w", encoding="utf-8") as f:
        for line in lines:
            row = json.loads(line)
            row["source"] = source
            f.write(json.dumps(row) + "\n")
    return path


def propdex(*args: str, env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "propdex.cli", *args], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def score(document: Path, questions: Path, reader: str | None, out: Path) -> tuple[dict, float]:
    tag = reader or "markdown"
    db, report = out / f"db_{tag}", out / f"eval_{tag}"
    env = dict(os.environ, PROPDEX_CACHE_DIR=str(out / f"cache_{tag}"), PREFECT_HOME=str(out / f"prefect_{tag}"))
    args = ["ingest", str(document), "--db", str(db)] + (["--pdf-reader", reader] if reader else [])
    started = time.monotonic()
    propdex(*args, env=env)
    seconds = time.monotonic() - started
    propdex("eval", str(questions), "--db", str(db), "--out", str(report), env=env)
    units = json.loads((report / "report.json").read_text())["units"]
    return {u["label"]: u for u in units}, seconds


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--columns", type=int, default=2, choices=(1, 2))
    parser.add_argument("--readers", nargs="+", default=["layout", "fast"])
    args = parser.parse_args(argv)
    if not SQUAD.is_dir():
        print(f"needs {SQUAD} (../shared/corpus/squad)", file=sys.stderr)
        return 2
    out = args.out or Path(tempfile.mkdtemp(prefix="squad-readers-"))
    out.mkdir(parents=True, exist_ok=True)
    markdown = (SQUAD / "super_bowl_50.md").read_text(encoding="utf-8")
    pdf = out / "super_bowl_50.pdf"
    pages = typeset(markdown, pdf, args.columns)
    print(f"{pdf}: {pages} pages, {args.columns} column(s)")
    rows = {"markdown": score(SQUAD / "super_bowl_50.md", SQUAD / "questions_dev.jsonl", None, out)}
    pdf_questions = questions_for(pdf.name, out)
    for reader in args.readers:
        rows[reader] = score(pdf, pdf_questions, reader, out)
    names = list(rows)
    print("ingest seconds: " + ", ".join(f"{n} {rows[n][1]:.1f}" for n in names))
    print("| unit | " + " | ".join(f"{n} R@1/R@5/R@20/MRR" for n in names) + " |")
    print("|---|" + "---|" * len(names))
    for label in rows[names[0]][0]:
        cells = []
        for n in names:
            unit = rows[n][0].get(label)
            cells.append("-" if unit is None else
                         " / ".join(f"{unit[k] * 100:.1f}" if k != "mrr" else f"{unit[k]:.3f}" for k in UNITS))
        print(f"| {label} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
