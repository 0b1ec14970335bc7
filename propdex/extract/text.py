"""Plain text and Markdown files: decoded (see ``encoding``), one page, whitespace tidied,
Markdown headings as sections."""

from __future__ import annotations

from dataclasses import dataclass, field

from markdown_it import MarkdownIt

from propdex.errors import ExtractionError
from propdex.extract.encoding import UTF8, decode_bytes
from propdex.extract.normalise import tidy_whitespace
from propdex.metadata import split_front_matter
from propdex.models import SectionHint

# Block rules only: headings need fences and indented code recognised (a "# comment" in a
# code block is no heading) but no inline parsing.
_MARKDOWN = MarkdownIt("zero").enable(["heading", "lheading", "fence", "code"])


@dataclass
class TextContent:
    text: str
    encoding: str = UTF8
    title_hint: str | None = None
    sections: list[SectionHint] = field(default_factory=list)


def decode_text(data: bytes, source: str) -> tuple[str, str]:
    """The tidied text of a file and the encoding it was read in; binary or empty content
    is refused."""
    decoded = decode_bytes(data, source)
    text = tidy_whitespace(decoded.text)
    if not text:
        raise ExtractionError(source, "empty document")
    return text, decoded.encoding


def extract_plain_text(data: bytes, source: str) -> TextContent:
    return TextContent(*decode_text(data, source))


def extract_markdown(data: bytes, source: str) -> TextContent:
    """A Markdown file's text without its YAML front matter, which is the document's metadata
    (propdex.metadata), not its content."""
    text, encoding = decode_text(data, source)
    block, body = split_front_matter(text)
    if block is not None:
        text = body.strip()
        if not text:
            raise ExtractionError(source, "empty document (front matter only)")
    sections = markdown_sections(text)
    title = next((s.title for s in sections if s.level == 1), None)
    return TextContent(text, encoding, title, sections)


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
