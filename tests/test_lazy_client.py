"""LanceDB's REST namespace client is imported only when something uses it."""

from __future__ import annotations

import subprocess
import sys

from tests.service_harness import REPO


def test_searching_a_folder_never_imports_the_rest_client_which_still_works(tmp_path):
    code = f"""
import sys
from propdex.search import search
from propdex.store import Index
from tests.store_rows import DIM, axis, make_version
index = Index.open({str(tmp_path / "db")!r}, dim=DIM)
index.replace_document(*make_version("a", "r1", ["Owls hunt at night."]).rows)
hits = len(search(index, "owls", axis(0), level="both", k=3))
loaded = any(m.startswith("lance_namespace_urllib3_client.api") for m in sys.modules)
import lance_namespace_urllib3_client as rest
print(hits, loaded, rest.ApiClient.__name__)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=True)
    assert "1 False ApiClient" == done.stdout.strip()
