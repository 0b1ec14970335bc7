"""mkdocs hook: the reference pages, generated from propdex's code on every build.

mkdocs.yml names this file under `hooks:`. The pages never exist on disk, so they cannot go
stale; a flag, setting or column without a description stops the build with the list
(propdex.docs_reference.UndocumentedError).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from mkdocs.structure.files import File

REPOSITORY = Path(__file__).resolve().parents[1]
if str(REPOSITORY) not in sys.path:
    sys.path.insert(0, str(REPOSITORY))  # the checkout's propdex, installed or not


def _openapi() -> dict:
    """The service's OpenAPI description, from an app over an index that is never opened."""
    from propdex.api import open_index
    from propdex.service.app import create_app

    with tempfile.TemporaryDirectory(prefix="propdex-docs-") as tmp:
        return create_app(open_index(str(Path(tmp) / "index"))).openapi()


def reference_pages() -> dict[str, str]:
    """Each generated page's path under docs/ and its Markdown."""
    from propdex import docs_reference
    from propdex.cli import build_parser

    return {
        "reference/cli.md": docs_reference.cli_markdown(build_parser()),
        "reference/configuration.md": docs_reference.settings_markdown(),
        "reference/tables.md": docs_reference.tables_markdown(),
        "reference/http.md": docs_reference.http_markdown(_openapi()),
    }


def on_files(files, config):
    for path, markdown in reference_pages().items():
        files.append(File.generated(config, path, content=markdown))
    return files
