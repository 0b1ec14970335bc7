"""Prefect start-up for a CLI ingest: the ephemeral API launched early (propdex.prefect_runtime.api)
and the server process it runs (propdex.prefect_runtime.server)."""
