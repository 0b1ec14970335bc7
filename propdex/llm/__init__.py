"""Language-model backends: the offline rules and any OpenAI-compatible server."""
