"""The process of the ephemeral Prefect API a CLI ingest reports to:
``python -m propdex.prefect_runtime.server PORT``.

The CLI launches it before importing Prefect itself, so this process imports Prefect on the
other core instead of after the CLI's own import: its start-up is a first run's critical
path. It exits at once with NOT_NEEDED when a server is configured (PREFECT_API_URL in a
profile or prefect.toml) or ephemeral mode is off; otherwise it creates Prefect's home
(propdex.prefect_runtime.api.prepare_prefect_home) and serves Prefect's API app, without the
UI, on 127.0.0.1:PORT with uvicorn, as Prefect's SubprocessASGIServer does.
"""

from __future__ import annotations

import sys

# Distinct from uvicorn's start-up failure (3), which the CLI answers with a new port.
NOT_NEEDED = 4
# Prefect's home cannot be prepared: the CLI checks it again itself to report why.
HOME_UNUSABLE = 5


def serve(port: int) -> int:
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_SERVER_EPHEMERAL_ENABLED,
        get_current_settings,
    )

    if PREFECT_API_URL.value() or not PREFECT_SERVER_EPHEMERAL_ENABLED.value():
        return NOT_NEEDED
    import uvicorn

    from propdex.errors import PrefectStartError
    from propdex.prefect_runtime.api import prepare_prefect_home

    try:
        prepare_prefect_home(get_current_settings())
    except PrefectStartError:
        return HOME_UNUSABLE
    uvicorn.run("prefect.server.api.server:create_app", factory=True, host="127.0.0.1",
                port=port, log_level="error", lifespan="on")
    return 0


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1])))
