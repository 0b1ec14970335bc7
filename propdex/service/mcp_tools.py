"""`propdex mcp`: an MCP server (stdio) with the tools ``search`` and ``get_chunk``.

The tools take the arguments of POST /search and GET /chunks/{chunk_id} and call the same
IndexReader methods, so an agent gets the service's results, with pages and offsets to cite.
The `mcp` package is an optional extra.
"""

# No `from __future__ import annotations`: the MCP server reads the tool signatures, whose
# query bound is a local value a string annotation could not resolve.

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

from pydantic import Field

from propdex.api import IndexReader
from propdex.errors import PropdexError
from propdex.search import DEFAULT_K, DEFAULT_LEVEL, DEFAULT_MODE, Level, Mode
from propdex.service.bounds import MAX_DOC_IDS, Id, K, Where, query_type


class McpUnavailableError(PropdexError):
    """`propdex mcp` needs the optional `mcp` package."""


@contextmanager
def told_to_agent(tool_error: type[Exception]) -> Iterator[None]:
    """propdex's errors inside (no index, an unreadable table, a bad argument) as the MCP
    ``tool_error``, whose message the agent sees; any other exception MCPServer reports as
    "Error executing tool" without its reason."""
    try:
        yield
    except PropdexError as exc:
        raise tool_error(str(exc)) from exc


def build_mcp_server(reader: IndexReader) -> Any:
    """An MCPServer whose tools search ``reader``'s index and fetch its chunks."""
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError as exc:
        raise McpUnavailableError(
            "`propdex mcp` needs the 'mcp' extra: pip install 'propdex[mcp]' "
            f"(missing: {exc.name})") from exc
    max_query = reader.settings.api_max_query_chars
    server = MCPServer(
        "propdex", log_level="WARNING",
        instructions="Search a propdex index of documents. `search` returns the best "
                     "propositions or chunks with title, source, pages and character "
                     "offsets to cite; `get_chunk` returns a chunk's full text and its graded "
                     "propositions.")

    @server.tool()
    def search(
        query: query_type(max_query),  # type: ignore[valid-type]
        level: Annotated[Level, Field(description="propositions, chunks or both")] = DEFAULT_LEVEL,
        mode: Annotated[Mode, Field(description="vector, fts or hybrid")] = DEFAULT_MODE,
        k: K = DEFAULT_K,
        source: Annotated[Id | None, Field(description="glob over source paths")] = None,
        doc_ids: Annotated[list[Id] | None, Field(max_length=MAX_DOC_IDS,
                                                  description="restrict to these documents")] = None,
        where: Where = None,
    ) -> list[dict[str, Any]]:
        """Search the index; each result cites its document (title, source), pages and
        character offsets, and carries its parent chunk's text."""
        with told_to_agent(ToolError):
            results = reader.search(query, level=level, mode=mode, k=k, doc_ids=doc_ids,
                                    source=source, where=where)
        return [r.to_dict() for r in results]

    @server.tool()
    def get_chunk(chunk_id: Id) -> dict[str, Any]:
        """A chunk by chunk_id (from a search result): its text, header, pages, offsets,
        document title and source, and its propositions with their grades."""
        with told_to_agent(ToolError):
            chunk = reader.chunk(chunk_id)
        if chunk is None:
            raise ToolError(f"no live chunk {chunk_id!r}")  # shown to the agent as is
        return chunk

    return server


def run_mcp(reader: IndexReader) -> None:
    """Serve the tools over stdin/stdout until the client closes them."""
    server = build_mcp_server(reader)
    reader.warm_up()  # the embedder loads before the first tool call
    server.run("stdio")
