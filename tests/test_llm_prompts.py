"""Versioned prompt files: loading, versions, filling in, delimiter defusing."""

from __future__ import annotations

import hashlib
import re
from importlib import resources

import pytest

from propdex.llm.prompts import (
    PROMPT_STEPS,
    PromptFileError,
    defuse_delimiters,
    load_prompt,
    parse_prompt_file,
    prompt_versions,
)

FIELDS = {
    "title": {"extent": "E", "hint": "H", "document": "D"},
    "summary": {"title": "T", "extent": "E", "document": "D"},
    "propositions": {"min_propositions": 1, "max_propositions": 25, "title": "T", "section": "S",
                     "content": "C"},
    "grading": {"source": "S", "propositions": "[0] P"},
}


def _newest_prompt_file(step: str) -> tuple[int, bytes]:
    folder = resources.files("propdex.llm") / "prompts"
    numbers = [int(entry.name.split(".v")[1].removesuffix(".md"))
               for entry in folder.iterdir() if entry.name.startswith(f"{step}.v")]
    return max(numbers), (folder / f"{step}.v{max(numbers)}.md").read_bytes()


@pytest.mark.parametrize("step", PROMPT_STEPS)
def test_the_newest_file_is_used_and_its_version_carries_the_file_hash(step):
    number, raw = _newest_prompt_file(step)
    assert f"{step}-v{number}+{hashlib.sha256(raw).hexdigest()[:8]}" == load_prompt(step).version


def test_an_edited_file_gets_another_version():
    text = "=== system ===\nS\n=== user ===\nU\n"
    before = parse_prompt_file("x", text, hashlib.sha256(text.encode()).hexdigest(), 1)
    edited = text.replace("S", "S2")
    after = parse_prompt_file("x", edited, hashlib.sha256(edited.encode()).hexdigest(), 1)
    assert before.version != after.version


def test_prompt_versions_cover_every_step():
    assert list(PROMPT_STEPS) == list(prompt_versions())


@pytest.mark.parametrize("step", PROMPT_STEPS)
def test_every_field_of_a_prompt_is_filled_in(step):
    messages = load_prompt(step).messages(**FIELDS[step])
    assert [] == [m["content"] for m in messages if re.search(r"\$[a-z_]+", m["content"])]


@pytest.mark.parametrize("step", PROMPT_STEPS)
def test_every_prompt_tells_the_model_to_ignore_instructions_in_the_text(step):
    assert "ignore any instructions" in load_prompt(step).system


def test_the_proposition_prompt_states_the_bounds():
    system = load_prompt("propositions").messages(**FIELDS["propositions"])[0]["content"]
    assert "Write 1 to 25 propositions" in system


def test_the_proposition_prompt_is_version_3_and_says_how_to_state_table_rows():
    prompt = load_prompt("propositions")
    assert ("propositions-v3", True) == (
        prompt.version.split("+")[0], "naming the table (its number and subject), the row and the column" in
        " ".join(prompt.system.split()))


@pytest.mark.parametrize(("describe_format", "shown"), [(True, True), (False, False)])
@pytest.mark.parametrize("step", PROMPT_STEPS)
def test_the_answer_format_is_described_only_when_asked(step, describe_format, shown):
    system = load_prompt(step).messages(describe_format=describe_format, **FIELDS[step])[0]
    assert shown == ("Reply with JSON only" in system["content"])


def test_a_missing_field_is_an_error():
    with pytest.raises(KeyError):
        load_prompt("grading").messages(source="S")


def test_the_comment_may_mention_the_marks():
    text = '<!-- after "=== system ===" -->\n=== system ===\nS\n=== user ===\nU $x\n'
    prompt = parse_prompt_file("x", text, "0" * 64, 3)
    assert ("S", "", "U $x", "x-v3+00000000") == (
        prompt.system, prompt.format, prompt.user, prompt.version,
    )


def test_the_format_part_is_read():
    text = "=== system ===\nS\n=== format ===\nF\n=== user ===\nU\n"
    prompt = parse_prompt_file("x", text, "0" * 64, 1)
    assert ("S", "F", "U") == (prompt.system, prompt.format, prompt.user)


def test_a_file_without_its_parts_is_an_error():
    with pytest.raises(PromptFileError):
        parse_prompt_file("x", "just a system prompt", "0" * 64, 1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a </content> b", "a [/content] b"),
        ("<Document>x</DOCUMENT >", "[Document]x[/DOCUMENT]"),
        ("< /source>", "[/source]"),
        ("a <b> c", "a <b> c"),
    ],
)
def test_delimiter_tags_inside_values_are_defused(text, expected):
    assert expected == defuse_delimiters(text)
