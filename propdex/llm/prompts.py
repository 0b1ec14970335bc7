"""Versioned prompt files (``prompts/<step>.v<N>.md``) and how they are filled in.

A file holds a comment, then ``=== system ===`` and the system message, optionally
``=== format ===`` and a description of the JSON answer, then ``=== user ===`` and the user
message. The format part is added to the system message only when the server is not given
the JSON schema (the structured-output form negotiated with it, see ``propdex.llm.structured``,
or ``llm_json_schema`` off): with the schema, it would only repeat it at a token cost on every
call. All parts are ``string.Template`` texts (``$name`` fields), so JSON
examples with braces need no escaping. The recorded version, e.g. ``propositions-v1+1a2b3c4d``,
carries the file's hash, so editing a prompt changes the version even if nobody bumps N.

Document text is data: every value is put inside a delimited block by the templates, and any
copy of a delimiter tag inside a value is defused first so text cannot close its block early
and smuggle in instructions.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from string import Template

PROMPT_STEPS = ("title", "summary", "propositions", "grading")

_SYSTEM_MARK = "=== system ==="
_FORMAT_MARK = "=== format ==="
_USER_MARK = "=== user ==="
# The marks count only as whole lines, so the file's comment may mention them.
_PARTS = re.compile(
    rf"^{re.escape(_SYSTEM_MARK)}[ \t]*\n(?P<system>.*?)"
    rf"(?:^{re.escape(_FORMAT_MARK)}[ \t]*\n(?P<format>.*?))?"
    rf"^{re.escape(_USER_MARK)}[ \t]*\n(?P<user>.*)\Z",
    re.MULTILINE | re.DOTALL,
)
_FILE_NAME = re.compile(r"^(?P<step>[a-z_]+)\.v(?P<number>\d+)\.md$")
# The block tags used by the templates; a copy inside a value becomes "[content]" etc.
_DELIMITER_TAG = re.compile(r"<\s*(/?)\s*(content|source|propositions|document)\s*>", re.IGNORECASE)


class PromptFileError(ValueError):
    """A prompt file is missing or lacks its system/user parts."""


@dataclass(frozen=True)
class Prompt:
    name: str  # the step: title, summary, propositions, grading
    version: str  # e.g. "propositions-v1+1a2b3c4d"
    system: str
    user: str
    format: str = ""  # the answer's JSON shape, for servers not given the schema

    def messages(self, *, describe_format: bool = True, **values: object) -> list[dict[str, str]]:
        """The chat messages with every ``$field`` filled in (a missing one raises KeyError)."""
        safe = {key: defuse_delimiters(str(value)) for key, value in values.items()}
        system = self.system
        if describe_format and self.format:
            system = f"{system}\n{self.format}"
        return [
            {"role": "system", "content": Template(system).substitute(safe)},
            {"role": "user", "content": Template(self.user).substitute(safe)},
        ]


def defuse_delimiters(text: str) -> str:
    return _DELIMITER_TAG.sub(lambda m: f"[{m.group(1)}{m.group(2)}]", text)


def parse_prompt_file(name: str, text: str, digest: str, number: int) -> Prompt:
    match = _PARTS.search(text)
    if not match:
        raise PromptFileError(
            f"prompt {name!r} needs a '{_SYSTEM_MARK}' line followed by a '{_USER_MARK}' line"
        )
    return Prompt(
        name=name,
        version=f"{name}-v{number}+{digest[:8]}",
        system=match.group("system").strip(),
        user=match.group("user").strip(),
        format=(match.group("format") or "").strip(),
    )


@cache
def load_prompt(step: str) -> Prompt:
    """The newest version of the prompt for ``step`` shipped in propdex/llm/prompts."""
    folder = resources.files("propdex.llm").joinpath("prompts")
    versions = []
    for entry in folder.iterdir():
        match = _FILE_NAME.match(entry.name)
        if match and match["step"] == step:
            versions.append((int(match["number"]), entry))
    if not versions:
        raise PromptFileError(f"no prompt file for step {step!r} in {folder}")
    number, entry = max(versions, key=lambda pair: pair[0])
    raw = entry.read_bytes()
    return parse_prompt_file(step, raw.decode("utf-8"), hashlib.sha256(raw).hexdigest(), number)


def prompt_versions() -> dict[str, str]:
    return {step: load_prompt(step).version for step in PROMPT_STEPS}
