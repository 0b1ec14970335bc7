"""The README and the docs site, held to the code: every `propdex ...` command line they show
parses with the CLI's own parser, every `PROPDEX_*` name they mention is a setting, every
extra they install is defined, and their Python examples run against a small index and print
what the pages say they print; `propdex --help`'s examples parse and its exit codes are the
troubleshooting page's.

A failure names the page and line, so a renamed flag or setting cannot leave a page behind.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from propdex.cli.main import build_parser
from propdex.settings import Settings

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
# Words that run the command after them (`time propdex ingest ...`).
WRAPPERS = {"time", "/usr/bin/time", "env", "nohup", "exec"}
SHELL_OPERATORS = {"&&", "||", ";", "|", "&", "(", ")"}
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# Not inside a longer name (PYTEST_PROPDEX_PREFECT_HOME is no propdex setting).
PROPDEX_NAME = re.compile(r"(?<![A-Za-z0-9_])PROPDEX_[A-Z0-9_]*")


@dataclass(frozen=True)
class Snippet:
    page: Path
    line: int  # 1-based line of the page where the snippet starts
    text: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def _fences_and_spans(page: Path) -> tuple[list[tuple[str, Snippet]], list[Snippet]]:
    """The page's fenced blocks (language, snippet) and inline code spans."""
    lines = page.read_text(encoding="utf-8").splitlines()
    tokens = MarkdownIt("commonmark").enable("table").parse("\n".join(lines))
    fences, spans = [], []
    for token in tokens:
        if token.type == "fence" and token.map:
            # The content starts on the line after the opening fence.
            fences.append((token.info.strip().split(" ")[0],
                           Snippet(page, token.map[0] + 2, token.content)))
        elif token.type == "inline" and token.map:
            for child in token.children or []:
                if child.type == "code_inline":
                    first, last = token.map
                    line = next((n for n in range(first, last) if child.content in lines[n]),
                                first)
                    spans.append(Snippet(page, line + 1, child.content))
    return fences, spans


def _shell_lines(block: Snippet) -> list[Snippet]:
    """A shell block's commands, continuation lines joined, each with its first line."""
    joined, start, current = [], None, ""
    for offset, line in enumerate(block.text.splitlines()):
        if start is None:
            start = block.line + offset
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        joined.append(Snippet(block.page, start, current + line))
        start, current = None, ""
    return joined


def _propdex_argvs(text: str) -> list[list[str]]:
    """The arguments of each `propdex` command in a shell line (after assignments and
    wrappers such as `time`), split at `&&`, `|`, `;` and `&`."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    commands, current = [], []
    for token in [*tokens, ";"]:
        if token in SHELL_OPERATORS:
            commands.append(current)
            current = []
        else:
            current.append(token)
    argvs = []
    for command in commands:
        while command and (ASSIGNMENT.match(command[0]) or command[0] in WRAPPERS):
            command = command[1:]
        if command[:1] == ["propdex"]:
            argvs.append(command[1:])
    return argvs


def _command_snippets() -> list[tuple[Snippet, list[str], bool]]:
    """Every `propdex` command of the pages: (where, its arguments, whether it is a fragment
    of prose, whose positional arguments may be left out)."""
    found = []
    for page in PAGES:
        fences, spans = _fences_and_spans(page)
        for language, block in fences:
            if language in SHELL_LANGUAGES:
                for line in _shell_lines(block):
                    found += [(line, argv, False) for argv in _propdex_argvs(line.text)]
        for span in spans:
            if span.text.startswith("propdex ") or " propdex " in span.text:
                try:
                    argvs = _propdex_argvs(span.text)
                except ValueError:  # prose quoting a message, not a command line
                    continue
                found += [(span, argv, True) for argv in argvs if argv]
    return found


def parse_failure(argv: list[str], *, fragment: bool) -> str | None:
    """argparse's complaint about ``argv`` (None when it parses). A fragment of prose may
    leave out positional arguments (placeholders stand in for those argparse asks for, so
    that its flags are still checked) and be followed by words (a message quoted: `propdex
    watch needs the optional dependency watchfiles`): only its flags must exist."""
    for _ in range(3):
        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
                _, extra = build_parser().parse_known_args(argv)
            unknown = [word for word in extra if word.startswith("-") or not fragment]
            if unknown:
                return f"unrecognized arguments: {' '.join(unknown)}"
        except SystemExit as ended:
            if ended.code == 0:  # --help
                return None
            message = stderr.getvalue().strip().splitlines()[-1].split("error: ", 1)[-1]
            missing = message.removeprefix("the following arguments are required: ")
            if fragment and missing != message and argv:
                argv = [*argv, *["PLACEHOLDER"] * len(missing.split(", "))]
                continue
            return message
        return None
    return "positional arguments missing"


COMMANDS = _command_snippets()


def test_the_pages_show_propdex_commands():
    # The scan itself works: README's two commands and the examples are found.
    assert {"ingest", "search", "status", "serve", "mcp", "verify", "watch", "eval"} <= {
        argv[0] for _, argv, _ in COMMANDS}


@pytest.mark.parametrize(("where", "argv", "fragment"), COMMANDS,
                         ids=[f"{where}:{' '.join(argv)[:40]}" for where, argv, _ in COMMANDS])
def test_every_propdex_command_in_the_docs_parses(where, argv, fragment):
    assert (str(where), None) == (str(where), parse_failure(argv, fragment=fragment))


def test_the_examples_of_propdex_help_parse():
    from propdex.cli.main import EXAMPLES_AND_EXIT_CODES

    examples = EXAMPLES_AND_EXIT_CODES.split("examples:\n", 1)[1].split("\n\n", 1)[0]
    commands = [shlex.split(line.split("  ")[1].strip())[1:]
                for line in examples.splitlines()]
    assert [None] * 4 == [parse_failure(argv, fragment=False) for argv in commands]


def test_the_exit_codes_of_propdex_help_are_those_of_the_troubleshooting_page():
    from propdex.cli.main import EXAMPLES_AND_EXIT_CODES

    listed = EXAMPLES_AND_EXIT_CODES.split("exit codes:\n", 1)[1]
    page = (REPO / "docs" / "how-to" / "troubleshooting.md").read_text(encoding="utf-8")
    table = page.split("## Exit codes", 1)[1].split("\n\n", 2)[1]
    assert re.findall(r"^  (\d+) ", listed, re.M) == re.findall(r"^\| (\d+) \|", table, re.M)


EXTRAS_INSTALLED = re.compile(r"pip install -e '\.\[([^\]]*)\]'")
# A row of the tables headed "| extra |" (README, getting-started): "| `local` |", "| `docs` / `lint` |".
EXTRAS_ROW = re.compile(r"^\| ((?:`[a-z-]+`(?: / )?)+) \|")


def unknown_extras(page: Path) -> list[str]:
    """``page:line EXTRA`` for each extra a `pip install -e '.[...]'` or an extras table
    names that pyproject.toml does not define."""
    import tomllib

    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    defined = set(pyproject["project"]["optional-dependencies"])
    found, in_extras_table = [], False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        in_extras_table = line.startswith("| extra |") or (in_extras_table and line != "")
        named = [e for m in EXTRAS_INSTALLED.finditer(line) for e in m.group(1).split(",")]
        if in_extras_table and (row := EXTRAS_ROW.match(line)):
            named += re.findall(r"`([a-z-]+)`", row.group(1))
        found += [f"{page.relative_to(REPO)}:{number} {e}" for e in named if e not in defined]
    return found


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_extra_the_docs_install_is_defined(page):
    assert [] == unknown_extras(page)


def _setting_names() -> set[str]:
    return {f"PROPDEX_{name.upper()}" for name in Settings.model_fields}


def undefined_propdex_names(page: Path) -> list[str]:
    """``page:line NAME`` for each PROPDEX_* name that is no setting's variable: an exact
    name, or a prefix written with a `*` (`PROPDEX_STORAGE_*`) that some setting has."""
    names = _setting_names()
    found = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        for match in PROPDEX_NAME.finditer(line):
            name = match.group()
            if line[match.end():match.end() + 1] == "*":
                defined = any(n.startswith(name) for n in names)
            else:
                defined = name in names
            if not defined:
                found.append(f"{page.relative_to(REPO)}:{number} {name}")
    return found


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_propdex_variable_in_the_docs_is_a_setting(page):
    assert [] == undefined_propdex_names(page)


# The Python examples -------------------------------------------------------------------------
AGI = """---
team: research
---
# Levels of AGI

## Performance

The framework defines five levels of AGI performance: Emerging, Competent, Expert, Virtuoso
and Superhuman. An Emerging AGI is equal to or somewhat better than an unskilled human.

## Generality

Generality is the breadth of tasks a system masters. A narrow system is competent at one task
only, while a general system is competent at a wide range of non-physical tasks.

## Autonomy

Autonomy levels range from AI as a tool to AI as an agent. The levels of AGI are paired with
levels of autonomy to weigh the risks of deployment.
"""
OWLS = "# Owls\n\nOwls hunt small mammals at night. Barn owls nest in old barns.\n"


def _python_blocks() -> list[Snippet]:
    return [block for page in PAGES for language, block in _fences_and_spans(page)[0]
            if language == "python"]


PYTHON_BLOCKS = _python_blocks()


@pytest.fixture(scope="module")
def examples_dir(tmp_path_factory) -> Path:
    """A folder holding `papers-db` and `propdex-db`, the indexes the examples open: the two
    documents above, through the pipeline's stages on the offline backend and the default
    embedder (the task functions, without a Prefect flow run: seconds, not a server start)."""
    pytest.importorskip("onnxruntime", reason="the default embedder needs the 'local' extra")
    from propdex.pipeline.plan import plan_sources
    from tasks.documents import embed, extract, propose, split, write_context
    from tasks.index import commit_document

    folder = tmp_path_factory.mktemp("examples")
    sources = folder / "papers"
    sources.mkdir()
    (sources / "levels_of_agi.md").write_text(AGI, encoding="utf-8")
    (sources / "owls.md").write_text(OWLS, encoding="utf-8")
    settings = Settings(db=str(folder / "propdex-db"), llm="offline")
    plan = plan_sources([str(sources)], settings, force=False, prune=False)
    for item in plan.to_process:
        fingerprint = plan.fingerprint_for(item.source)
        doc = extract.fn(item, settings, fingerprint)
        context = write_context.fn(doc, settings, fingerprint)
        chunks = split.fn(doc, context, settings, fingerprint)
        propositions = propose.fn(doc, chunks, context, settings, fingerprint)
        vectors = embed.fn(doc, chunks, propositions, settings, fingerprint)
        commit_document.fn(item, doc, context, chunks, propositions, vectors, settings,
                           fingerprint, "docs-examples")
    shutil.copytree(folder / "propdex-db", folder / "papers-db")
    return folder


def run_block(block: Snippet, folder: Path, monkeypatch) -> tuple[dict, list[str]]:
    """The block's variables after it ran in ``folder``, and the lines it printed."""
    monkeypatch.chdir(folder)
    printed = io.StringIO()
    namespace: dict = {}
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(block.text, str(block), "exec"), namespace)  # noqa: S102
    except ImportError as exc:  # an example of an extra that is not installed
        pytest.skip(f"{block}: {exc}")
    return namespace, printed.getvalue().splitlines()


def block_where(needle: str, page: str) -> Snippet:
    return next(b for b in PYTHON_BLOCKS if needle in b.text and str(b).startswith(page))


HIT_LINE = re.compile(r"^\d\.\d{3} Levels of AGI p\. 1: .+")


def test_the_readme_example_prints_three_hits_from_the_agi_document(examples_dir, monkeypatch):
    _, printed = run_block(block_where("open_index", "README.md"), examples_dir, monkeypatch)
    assert [True, True, True] == [bool(HIT_LINE.match(line)) for line in printed]


def test_the_serving_example_reads_the_last_hits_chunk_and_the_documents(examples_dir,
                                                                         monkeypatch):
    names, printed = run_block(block_where("open_index", "docs/how-to/serving.md"),
                               examples_dir, monkeypatch)
    assert (3, names["hit"].chunk_id, ["Levels of AGI", "Owls"]) == (
        len(printed), names["chunk"]["chunk_id"],
        sorted(d["title"] for d in names["documents"]))


def test_the_langchain_example_returns_documents_of_the_research_team(examples_dir,
                                                                      monkeypatch):
    names, _ = run_block(block_where("langchain", "docs/how-to/metadata.md"), examples_dir,
                         monkeypatch)
    assert (True, {"research"}) == (
        0 < len(names["docs"]) <= 4,
        {d.metadata["document_metadata"]["team"] for d in names["docs"]})


def test_the_llama_index_example_returns_nodes_with_offsets(examples_dir, monkeypatch):
    names, _ = run_block(block_where("llama_index", "docs/how-to/metadata.md"), examples_dir,
                         monkeypatch)
    nodes = names["nodes"]
    assert (4, True) == (len(nodes), all(n.node.start_char_idx is not None for n in nodes))


def test_every_python_block_is_checked():
    # A new Python block needs a test above that says what it should print.
    assert 4 == len(PYTHON_BLOCKS), [str(b) for b in PYTHON_BLOCKS]
