"""Semantic sectioning (dsRAG): a document divided into titled sections before chunking.

With an LLM, the model labels sections by line number and gives each a title
(``propdex.sectioning.llm``); its answer is checked and repaired by
``propdex.sectioning.guards``. The offline backend cannot read meaning, so it uses what the
document itself states: the PDF outline or Markdown headings, else heading-like lines
(``propdex.sectioning.outline``). Chunks never straddle a section start, and each section's
title goes into the chunks' ``section`` column and their contextual headers.
"""

from __future__ import annotations

import dataclasses

from propdex.models import ExtractedDocument, Usage
from propdex.settings import Settings


def section_document(doc: ExtractedDocument, settings: Settings) -> tuple[ExtractedDocument, Usage]:
    """``doc`` with its sections replaced by semantic sections (offsets unchanged), and the
    LLM usage that cost (none offline)."""
    if settings.llm_backend == "openai":
        from propdex.sectioning.llm import llm_sections

        sections, usage = llm_sections(doc.text, settings, source=doc.source)
    else:
        from propdex.sectioning.outline import outline_sections

        sections, usage = outline_sections(doc), Usage()
    return dataclasses.replace(doc, sections=sections), usage
