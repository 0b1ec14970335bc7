"""Defer the import of LanceDB's REST namespace client until something uses it.

``import lancedb`` imports ``lance_namespace``, which imports the models of the generated
REST client ``lance_namespace_urllib3_client``; that package's ``__init__`` also imports
every one of its API modules, whose hundreds of pydantic ``validate_call`` methods cost
about a second of CPU: two thirds of ``import lancedb``, and most of a one-shot
``propdex search``. propdex opens local folders and object-store URIs, never a REST
namespace, so the package is registered without running its ``__init__``: its submodules
(the models lance_namespace needs) import as usual, and the first attribute asked of the
package itself runs the real ``__init__`` then, so nothing behaves differently, only later.
"""

from __future__ import annotations

import importlib.util
import sys

REST_CLIENT = "lance_namespace_urllib3_client"


def defer_rest_namespace_client() -> None:
    """Register the REST client package lazily (no-op once it or lancedb is imported)."""
    if REST_CLIENT in sys.modules or "lancedb" in sys.modules:
        return
    spec = importlib.util.find_spec(REST_CLIENT)
    if spec is None or spec.loader is None:
        return  # another lancedb version without it: nothing to defer
    package = importlib.util.module_from_spec(spec)

    def load_on_first_use(name: str):
        del package.__dict__["__getattr__"]
        spec.loader.exec_module(package)
        return getattr(package, name)

    package.__getattr__ = load_on_first_use  # PEP 562: asked only for missing names
    sys.modules[REST_CLIENT] = package
