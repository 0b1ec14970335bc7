"""LLM semantic sectioning: numbered lines in, titled line ranges out (dsRAG's method).

Long documents go in windows of about ``WINDOW_CHARS`` characters. Every window but the
last drops its final section, which may run on past the window, and the next window starts
at that section's first line, so a section is always seen whole when it fits in a window.
Answers are cached by content and checked by ``guards.repair_sections``.
"""

from __future__ import annotations

import logging
from collections import Counter

from propdex.cache import cache_key
from propdex.llm.client import LLMClient
from propdex.llm.prompts import load_prompt
from propdex.llm.schemas import SectionsAnswer
from propdex.models import SectionHint, Usage
from propdex.sectioning.guards import MIN_SECTION_CHARS, LineSection, repair_sections
from propdex.sectioning.lines import Lines
from propdex.settings import Settings

log = logging.getLogger("propdex.sectioning")

WINDOW_CHARS = 20_000
STEP = "sectioning"


def llm_sections(text: str, settings: Settings, source: str = "") -> tuple[list[SectionHint], Usage]:
    """The document's sections, and the LLM calls and tokens they cost (cache hits counted
    as cached calls)."""
    from propdex.runtime import cache_for

    lines = Lines.of(text)
    if not text.strip():
        return [], Usage()
    prompt = load_prompt(STEP)
    model = settings.model_for("context")
    cache = cache_for(settings)
    client = LLMClient(settings)
    found: list[LineSection] = []
    repairs: Counter[str] = Counter()
    usage = Usage()
    first = 0
    while first < len(lines):
        last = lines.last_within(first, WINDOW_CHARS)
        final = last == len(lines) - 1
        numbered = lines.numbered(first, last)
        key = cache_key(step=STEP, model=model, prompt=prompt.version, final=final, text=numbered)
        answer = cache.get_llm(key)
        if answer is not None:
            usage += Usage(cached_calls=1)
        else:
            messages = prompt.messages(
                describe_format=False, first_line=first,
                last_line=last, extent=f"Lines {first} to {last} of a document of {len(lines)} lines.",
                document=numbered,
            )
            # Bounds for the schema and the output cap: sections under
            # MIN_SECTION_CHARS are merged away, so a window holds at most this many.
            bounds = {"first_line": first, "last_line": last,
                      "max_sections": min(last - first + 1, len(numbered) // MIN_SECTION_CHARS + 1)}
            parsed, spent = client.chat_json(model, messages, SectionsAnswer, step=STEP,
                                             context=bounds, answer_format=prompt.format)
            usage += spent
            answer = [vars(s) for s in parsed.sections]
            cache.put_llm(key, STEP, answer)
        proposed = [LineSection(a["title"], a["start_line"], a["end_line"]) for a in answer]
        sections, fixed = repair_sections(proposed, first, last, lines)
        repairs += fixed
        if not final and len(sections) > 1:
            sections = sections[:-1]  # may continue past the window: asked again whole
        found.extend(sections)
        first = sections[-1].end + 1 if sections else last + 1
    if repairs:
        log.warning("%s: sectioning answer repaired (%s)", source or "document",
                    ", ".join(f"{kind}: {n}" for kind, n in sorted(repairs.items())))
    return [SectionHint(title=s.title, level=1, char_start=lines.starts[s.start]) for s in found], usage
