"""propdex: citable proposition and chunk retrieval over PDFs, text and Markdown."""

__version__ = "0.1.0"
