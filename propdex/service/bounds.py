"""Bounds on what one request may ask for, shared by the HTTP service and the MCP tools."""

MAX_K = 100
MAX_DOC_IDS = 1000
MAX_ID_CHARS = 512  # doc_id, chunk_id and source glob lengths (ids are ~40-100 characters)
# Ids and globs come straight from a request; NUL is part of no stored id or path.
ID_PATTERN = r"^[^\x00]+$"
