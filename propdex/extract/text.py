"""Plain text and Markdown files: one page, whitespace tidied, Markdown headings as sections."""

from __future__ import annotations

from dataclasses import dataclass, field

from markdown_it import MarkdownIt

from propdex.errors import ExtractionError
from propdex.extract.normalise import tidy_whitespace
from propdex.models import SectionHint

# Block rules only: headings need fences and indented code recognised (a "# comment" in a
# code block is no heading) but no inline parsing.
_MARKDOWN = MarkdownIt("zero").enable(["heading", "lheading", "fence", "code"])


@dataclass
class TextContent:
    text: str
    title_hint: str | None = None
    sections: list[SectionHint] = field(default_factory=list)


def decode_text(data: bytes, source: str) -> str:
    """UTF-8 text of a file (a BOM is dropped), tidied; binary or empty content is refused."""
    if b"\x00" in data:
        raise ExtractionError(source, "not a text file (binary content)")
    try:
        raw = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ExtractionError(source, "not a text file (binary content)") from None
    text = tidy_whitespace(raw)
    if not text:
        raise ExtractionError(source, "empty document")
    return text


def extract_plain_text(data: bytes, source: str) -> TextContent:
    return TextContent(decode_text(data, source))


def extract_markdown(data: bytes, source: str) -> TextContent:
    text = decode_text(data, source)
    sections = markdown_sections(text)
    title = next((s.title for s in sections if s.level == 1), None)
    return TextContent(text, title, sections)


def markdown_sections(text: str) -> list[SectionHint]:
    """ATX and setext headings with their level and the offset of their first line."""
    tokens = _MARKDOWN.parse(text)
    line_starts = _line_starts(text)
    sections = []
    for index, token in enumerate(tokens):
        if token.type != "heading_open" or token.map is None:
            continue
        title = " ".join(tokens[index + 1].content.split())
        if title:
            sections.append(
                SectionHint(
                    title=title, level=int(token.tag[1]), char_start=line_starts[token.map[0]]
                )
            )
    return sections


def _line_starts(text: str) -> list[int]:
    starts = [0]
    position = text.find("\n")
    while position != -1:
        starts.append(position + 1)
        position = text.find("\n", position + 1)
    return starts
