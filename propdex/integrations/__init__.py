"""Retrievers for LangChain (propdex.integrations.langchain) and LlamaIndex
(propdex.integrations.llama_index) over the default search, each an optional extra."""
