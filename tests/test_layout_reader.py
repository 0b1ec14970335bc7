"""PDFs read through PyMuPDF's layout engine: Markdown text, exact offsets, page regions."""

from __future__ import annotations

import re
from pathlib import Path

import pymupdf
import pytest

from propdex.extract import extract_document
from propdex.extract.pdf import PAGE_SEPARATOR
from propdex.models import ExtractedDocument, PageBox
from propdex.pipeline.plan import plan_sources
from propdex.regions import boxes_for_span
from propdex.settings import Settings
from propdex.store import Index
from tests.pdf_factory import (
    MARGIN,
    MINERALS,
    PAGE_RECT,
    TABLE_ROW_HEIGHT,
    TABLE_TOP,
    make_pdf,
    make_table_pdf,
    make_turned_pdf,
    make_two_column_pdf,
)
from tests.store_rows import DIM, make_version

LAYOUT = Settings(pdf_reader="layout")
FAST = Settings(pdf_reader="fast")

MINERAL_TABLE = (
    "|Mineral|Hardness|Density|\n"
    "|---|---|---|\n"
    "|Talc|1|2.7|\n"
    "|Gypsum|2|2.3|\n"
    "|Calcite|3||\n"
    "|Quartz|7|2.65|"
)
LEFT = [f"Left column line {n} tells of the tides." for n in range(1, 13)]
RIGHT = [f"Right column line {n} tells of the winds." for n in range(1, 13)]
SURVEY = [f"Page {n} of the reef survey describes coral colonies, their growth rate and the "
          "water temperature measured at dawn on the outer reef." for n in range(1, 5)]
HEADER = "Great Barrier Reef Survey 2023"
FOOTER = "Page {page} of {pages}"


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("layout")
    return {
        "ruled": make_table_pdf(folder / "ruled.pdf", ruled=True),
        "borderless": make_table_pdf(folder / "borderless.pdf", ruled=False),
        "columns": make_two_column_pdf(folder / "columns.pdf", LEFT, RIGHT, order="lines",
                                       title="Coastal notes"),
        "furniture": make_pdf(folder / "furniture.pdf", SURVEY, header=HEADER, footer=FOOTER),
    }


@pytest.fixture(scope="module")
def read(built) -> dict[str, ExtractedDocument]:
    return {name: extract_document(path, LAYOUT) for name, path in built.items()}


CASES = ["ruled", "borderless", "columns", "furniture"]


def page(doc: ExtractedDocument, number: int) -> str:
    span = doc.pages[number - 1]
    return doc.text[span.start:span.end]


def words(text: str) -> list[str]:
    return re.findall(r"[A-Za-z]{3,}|\d+(?:\.\d+)?", text)


@pytest.mark.parametrize("kind", ["ruled", "borderless"])
def test_table_is_a_pipe_table_with_empty_cells_kept(read, kind: str) -> None:
    assert MINERAL_TABLE in read[kind].text


def test_caption_is_the_paragraph_before_the_table(read) -> None:
    caption = "Table 1: Hardness and density of minerals"
    assert caption + "\n\n" + MINERAL_TABLE in read["ruled"].text


def test_heading_is_a_markdown_heading_and_a_section(read) -> None:
    doc = read["ruled"]
    assert [("Mohs scale", 1, "# Mohs scale")] == [
        (s.title, s.level, doc.text[s.char_start:s.char_start + len("# Mohs scale")])
        for s in doc.sections
    ]


def test_two_columns_are_read_column_by_column(read) -> None:
    text = read["columns"].text
    assert (" ".join(LEFT), " ".join(RIGHT)) == tuple(text.split("\n\n")[1:3])


def test_running_header_and_footer_are_left_out(read) -> None:
    doc = read["furniture"]
    assert (PAGE_SEPARATOR.join(SURVEY), 2 * len(SURVEY)) == (doc.text, doc.furniture_removed)


@pytest.mark.parametrize("kind", CASES)
def test_page_spans_slice_the_text(read, kind: str) -> None:
    doc = read[kind]
    assert doc.text == PAGE_SEPARATOR.join(doc.text[s.start:s.end] for s in doc.pages)


@pytest.mark.parametrize("kind", CASES)
def test_regions_lie_within_their_page_spans_in_order(read, kind: str) -> None:
    doc = read[kind]
    spans = {s.page: s for s in doc.pages}
    ends = [0] + [r.end for r in doc.regions]
    assert all(
        spans[r.box.page].start <= r.start < r.end <= spans[r.box.page].end and ends[i] <= r.start
        for i, r in enumerate(doc.regions)
    )


@pytest.mark.parametrize("kind", CASES)
def test_boxes_lie_within_page_bounds(built, read, kind: str) -> None:
    with pymupdf.open(built[kind]) as pdf:
        bounds = {n + 1: pdf[n].rect for n in range(pdf.page_count)}
    boxes = boxes_for_span(read[kind].regions, 0, len(read[kind].text))
    assert boxes and all(
        pymupdf.Rect(b.x0, b.y0, b.x1, b.y1) in bounds[b.page] + (-1, -1, 1, 1) for b in boxes
    )



def test_boxes_of_text_running_past_the_crop_box_lie_within_the_page(built, tmp_path) -> None:
    with pymupdf.open(built["ruled"]) as pdf:
        pdf[0].set_cropbox(pymupdf.Rect(40, 60, 500, 700))  # the paragraph runs to x = 539
        pdf.save(tmp_path / "cropped.pdf")
        page = pdf[0].rect
    doc = extract_document(tmp_path / "cropped.pdf", LAYOUT)
    assert [] == [r.box for r in doc.regions
                  if not pymupdf.Rect(r.box.x0, r.box.y0, r.box.x1, r.box.y1) in page]

@pytest.mark.parametrize("kind", CASES)
def test_boxes_cover_the_text_of_each_paragraph(built, read, kind: str) -> None:
    doc = read[kind]
    uncovered = []
    with pymupdf.open(built[kind]) as pdf:
        offset = 0
        for paragraph in doc.text.split("\n\n"):
            start, offset = offset, offset + len(paragraph) + 2
            boxes = boxes_for_span(doc.regions, start, start + len(paragraph))
            printed = " ".join(
                pdf[b.page - 1].get_text("text", clip=pymupdf.Rect(b.x0, b.y0, b.x1, b.y1) + (-1, -1, 1, 1))
                for b in boxes
            )
            uncovered += [w for w in words(paragraph.replace("|", " ")) if w not in printed]
    assert [] == uncovered


def test_a_table_row_has_the_box_of_its_row(read) -> None:
    doc = read["ruled"]
    start = doc.text.index("|Quartz|7|2.65|")
    [box] = boxes_for_span(doc.regions, start, start + len("|Quartz|7|2.65|"))
    row = len(MINERALS) - 1
    assert (1, True, True) == (
        box.page,
        TABLE_TOP + row * TABLE_ROW_HEIGHT - 2 <= box.y0,
        box.y1 <= TABLE_TOP + (row + 1) * TABLE_ROW_HEIGHT + 2,
    )


def test_a_span_over_a_whole_table_gets_one_box(read) -> None:
    doc = read["ruled"]
    start = doc.text.index(MINERAL_TABLE)
    assert 1 == len(boxes_for_span(doc.regions, start, start + len(MINERAL_TABLE)))


def test_text_files_have_no_regions(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("# Notes\n\nTides and winds.\n", encoding="utf-8")
    assert ([], None) == (extract_document(path, LAYOUT).regions, extract_document(path, LAYOUT).pdf_reader)


def test_reader_is_recorded(read) -> None:
    assert ("layout", []) == (read["ruled"].pdf_reader, read["ruled"].layout_fallback_pages)


def test_fast_mode_reads_the_table_one_cell_per_line(built) -> None:
    doc = extract_document(built["ruled"], FAST)
    cells = "\n".join(cell for row in MINERALS for cell in row if cell)
    assert (cells, [], "fast") == (
        doc.text[doc.text.index("Mineral\n"):doc.text.index("2.65") + 4], doc.regions, doc.pdf_reader
    )


def test_a_page_the_engine_fails_on_is_read_in_fast_mode(tmp_path: Path, monkeypatch) -> None:
    path = make_pdf(tmp_path / "three.pdf", SURVEY[:3])
    get_layout = pymupdf.Page.get_layout

    def fail_on_page_two(page, *args, **kwargs):
        if page.number == 1:
            raise RuntimeError("layout model failed")
        return get_layout(page, *args, **kwargs)

    fast = extract_document(path, FAST)
    monkeypatch.setattr(pymupdf.Page, "get_layout", fail_on_page_two)
    doc = extract_document(path, LAYOUT)
    assert ([2], [SURVEY[0], page(fast, 2), SURVEY[2]]) == (
        doc.layout_fallback_pages, [page(doc, n) for n in (1, 2, 3)]
    )


def test_a_page_the_engine_finds_no_text_on_is_read_in_fast_mode(tmp_path: Path,
                                                                 monkeypatch) -> None:
    path = make_pdf(tmp_path / "three.pdf", SURVEY[:3])
    get_layout = pymupdf.Page.get_layout

    def nothing_on_page_two(page, *args, **kwargs):
        get_layout(page, *args, **kwargs)
        if page.number == 1:
            page.layout_information = []  # no box found: the page would read empty

    fast = extract_document(path, FAST)
    monkeypatch.setattr(pymupdf.Page, "get_layout", nothing_on_page_two)
    doc = extract_document(path, LAYOUT)
    assert ([2], page(fast, 2)) == (doc.layout_fallback_pages, page(doc, 2))


def test_a_page_shown_sideways_by_its_rotate_is_read_upright(tmp_path: Path) -> None:
    # The engine reads a page as shown: with /Rotate 90 the text of this page runs sideways.
    path = make_pdf(tmp_path / "two.pdf", SURVEY[:2])
    with pymupdf.open(path) as pdf:
        pdf[0].set_rotation(90)
        pdf.save(tmp_path / "rotated.pdf")
    doc = extract_document(tmp_path / "rotated.pdf", LAYOUT)
    assert ([], extract_document(path, LAYOUT).text) == (doc.layout_fallback_pages, doc.text)


@pytest.mark.parametrize(("turn", "rotate"), [(90, 90), (-90, 270), (90, 0)],
                         ids=["landscape", "landscape-270", "sideways"])
def test_a_table_on_a_turned_page_keeps_its_rows(built, tmp_path, turn: int, rotate: int) -> None:
    # A landscape page (its content turned, its /Rotate turning it back) or a table printed
    # sideways on a portrait page (read by turning the page).
    path = make_turned_pdf(tmp_path / "turned.pdf", built["ruled"], turn, rotate)
    assert MINERAL_TABLE in extract_document(path, LAYOUT).text


def test_the_boxes_of_a_turned_page_cover_its_rows(built, tmp_path) -> None:
    # In the page's unrotated space, where MuPDF gives the page's text.
    path = make_turned_pdf(tmp_path / "turned.pdf", built["ruled"], 90, 90)
    doc = extract_document(path, LAYOUT)
    uncovered = []
    with pymupdf.open(path) as pdf:
        for row in MINERAL_TABLE.split("\n"):
            if "---" in row:
                continue
            start = doc.text.index(row)
            [box] = boxes_for_span(doc.regions, start, start + len(row))
            printed = pdf[0].get_text("text", clip=pymupdf.Rect(box.x0, box.y0, box.x1, box.y1)
                                      + (-1, -1, 1, 1))
            uncovered += [w for w in words(row.replace("|", " ")) if w not in printed]
    assert [] == uncovered


def test_the_fallback_page_has_a_box_of_the_whole_page(tmp_path: Path, monkeypatch) -> None:
    path = make_pdf(tmp_path / "one.pdf", SURVEY[:1])
    monkeypatch.setattr(pymupdf.Page, "get_layout", lambda *a, **k: 1 / 0)
    doc = extract_document(path, LAYOUT)
    with pymupdf.open(path) as pdf:
        page = pdf[0].rect
    assert [PageBox(1, page.x0, page.y0, page.x1, page.y1)] == boxes_for_span(doc.regions, 0, 5)


def test_switching_reader_changes_the_fingerprint() -> None:
    assert LAYOUT.fingerprint({}) != FAST.fingerprint({})


def test_switching_reader_re_plans_pdfs_and_leaves_markdown_unchanged(tmp_path: Path) -> None:
    folder = tmp_path / "sources"
    folder.mkdir()
    make_pdf(folder / "survey.pdf", SURVEY[:1])
    (folder / "notes.md").write_text("# Notes\n\nTides and winds.\n", encoding="utf-8")
    db = str(tmp_path / "db")
    index = Index.open(db, dim=DIM)
    layout = plan_sources([str(folder)], Settings(db=db, pdf_reader="layout"), force=False,
                          prune=True)
    for item in layout.to_process:  # indexed as a layout run stores them
        version = make_version(item.doc_id, "r1", ["Tides."], source=item.source)
        for row in [version.document, *version.chunks, *version.propositions]:
            row["content_sha256"] = item.content_sha256
        version.document["pipeline_version"] = layout.fingerprint_for(item.source)
        index.replace_document(*version.rows)
    fast = plan_sources([str(folder)], Settings(db=db, pdf_reader="fast"), force=False,
                        prune=True)
    assert (["notes.md"], ["survey.pdf"]) == (
        [Path(s).name for s in fast.unchanged], [Path(i.source).name for i in fast.to_process]
    )


# Scanned pages: the engine decides per page whether to OCR (Tesseract, where installed).

def _scan_of(path: Path, scanned: set[int]) -> Path:
    """The PDF with the pages numbered in ``scanned`` (1-based) replaced by their image."""
    out = path.with_name(f"scan-{path.name}")
    with pymupdf.open(path) as source, pymupdf.open() as scan:
        for number, original in enumerate(source, start=1):
            page = scan.new_page(width=original.rect.width, height=original.rect.height)
            if number in scanned:
                page.insert_image(page.rect, pixmap=original.get_pixmap(dpi=200))
            else:
                page.show_pdf_page(page.rect, source, number - 1)
        scan.save(out)
    return out


@pytest.fixture
def tesseract() -> None:
    from propdex.extract.pdf import tesseract_available

    if not tesseract_available():
        pytest.skip("Tesseract (tessdata) is not installed: the engine cannot OCR")


def test_a_scanned_page_among_text_pages_is_read_with_ocr(tmp_path: Path, tesseract) -> None:
    path = _scan_of(make_pdf(tmp_path / "survey.pdf", SURVEY[:3]), {2})
    doc = extract_document(path, LAYOUT)
    assert (True, SURVEY[1].split()) == (doc.ocr, page(doc, 2).split())


def test_a_scanned_document_is_read_with_ocr(tmp_path: Path, tesseract) -> None:
    path = _scan_of(make_pdf(tmp_path / "survey.pdf", SURVEY[:2]), {1, 2})
    doc = extract_document(path, LAYOUT)
    assert (True, " ".join(SURVEY[:2]).split()) == (doc.ocr, doc.text.split())


def test_the_engine_writes_nothing_to_stdout(tmp_path: Path, tesseract, capfd) -> None:
    # `propdex ingest --json` prints its summary on stdout: the engine's OCR notes must not
    # land there.
    extract_document(_scan_of(make_pdf(tmp_path / "survey.pdf", SURVEY[:2]), {2}), LAYOUT)
    assert "" == capfd.readouterr().out


# A raster picture on a page with text: Tesseract would read the picture's words as text.
PICTURE_WORDS = "Quarterly turbine output chart"


def _page_with_picture(path: Path) -> Path:
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE_RECT.width, height=PAGE_RECT.height)
    page.insert_textbox(pymupdf.Rect(MARGIN, MARGIN, PAGE_RECT.width - MARGIN, 300),
                        " ".join(SURVEY), fontsize=11)
    # The picture: large words drawn on a page of their own and rendered to an image.
    with pymupdf.open() as drawing:
        canvas = drawing.new_page(width=400, height=200)
        canvas.insert_text((20, 110), PICTURE_WORDS, fontsize=26)
        pixmap = canvas.get_pixmap(dpi=200)
    page.insert_image(pymupdf.Rect(MARGIN, 340, MARGIN + 400, 540), pixmap=pixmap)
    doc.save(path)
    doc.close()
    return path


def test_a_picture_on_a_text_page_is_not_read_by_ocr(tmp_path: Path, tesseract) -> None:
    doc = extract_document(_page_with_picture(tmp_path / "picture.pdf"), LAYOUT)
    assert (False, False) == (doc.ocr, "turbine" in doc.text.lower())


# A paragraph the engine cut around a figure's caption: the sentence goes on after it.
REEF_START = ("The survey team dived on the outer reef every morning of the season. "
              "On the last day of the season the divers counted the coral colonies")
REEF_CAPTION = "Figure 1: Coral colonies counted per dive."
REEF_REST = ("of the outer reef one by one and compared them with the counts of the year "
             "before. The comparison showed a slow recovery after the bleaching.")


def test_a_paragraph_cut_by_a_caption_on_its_page_is_joined(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "reef.pdf", [f"{REEF_START}\n\n{REEF_CAPTION}\n\n{REEF_REST}"])
    doc = extract_document(path, LAYOUT)
    assert f"{REEF_START} {REEF_REST}\n\n{REEF_CAPTION}" == doc.text


def test_a_paragraph_going_on_after_a_caption_atop_the_next_page_comes_first(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "reef.pdf", [REEF_START, f"{REEF_CAPTION}\n\n{REEF_REST}"])
    doc = extract_document(path, LAYOUT)
    assert [REEF_START, f"{REEF_REST}\n\n{REEF_CAPTION}"] == [page(doc, 1), page(doc, 2)]


def _figure_label_before_its_heading(path: Path) -> Path:
    """A page whose outline entry "Coral Growth" titles section 2, with a figure above the
    section whose first label reads "Coral Growth" too."""
    doc = pymupdf.open()
    page = doc.new_page(width=PAGE_RECT.width, height=PAGE_RECT.height)
    page.insert_textbox(pymupdf.Rect(MARGIN, MARGIN, PAGE_RECT.width - MARGIN, 160),
                        " ".join(SURVEY[:2]), fontsize=11)
    shape = page.new_shape()
    for x in (80, 250, 420):
        shape.draw_rect(pymupdf.Rect(x, 200, x + 120, 260))
    shape.finish(color=(0, 0, 0), width=1)
    shape.commit()
    for position, label in (((95, 215), "Coral Growth"), ((262, 235), "Water Temperature"),
                            ((440, 255), "Bleaching")):
        page.insert_text(position, label, fontsize=9)
    page.insert_textbox(pymupdf.Rect(MARGIN, 275, PAGE_RECT.width - MARGIN, 300),
                        "Figure 1: What drives the bleaching of the reef.", fontsize=10)
    page.insert_text((MARGIN, 340), "2 Coral Growth", fontsize=16, fontname="hebo")
    page.insert_textbox(pymupdf.Rect(MARGIN, 355, PAGE_RECT.width - MARGIN, 500),
                        SURVEY[2], fontsize=11)
    doc.set_toc([[1, "Coral Growth", 1]])
    doc.save(path)
    doc.close()
    return path


def test_an_outline_section_starts_at_its_heading_not_at_a_figure_label(tmp_path: Path) -> None:
    doc = extract_document(_figure_label_before_its_heading(tmp_path / "labels.pdf"), LAYOUT)
    assert ["# 2 Coral Growth"] == [doc.text[s.char_start:].split("\n")[0] for s in doc.sections]
