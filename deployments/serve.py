"""Serve propdex's deployments without a work pool or worker.

    python deployments/serve.py                      # every deployment
    python deployments/serve.py ingest               # only the named ones

The deployments, their parameters, schedules, concurrency limits and event triggers are read
from deployments/prefect.yaml, so serving and `prefect deploy` offer the same deployments.
This process registers them with the Prefect server (PREFECT_API_URL) and runs their flow
runs itself, in the repository folder, until it is stopped (Ctrl-C pauses the schedules).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

REPOSITORY = Path(__file__).resolve().parents[1]
PREFECT_FILE = Path(__file__).with_name("prefect.yaml")


def deployment_specs(prefect_file: Path = PREFECT_FILE) -> list[dict[str, Any]]:
    return yaml.safe_load(prefect_file.read_text(encoding="utf-8"))["deployments"]


def schedule_from_spec(spec: dict[str, Any]):
    """A prefect.yaml schedule entry (cron, interval or rrule, plus options) as a Schedule."""
    from prefect.schedules import Schedule

    values = dict(spec)
    if isinstance(values.get("interval"), (int, float)):
        values["interval"] = datetime.timedelta(seconds=values["interval"])
    if isinstance(values.get("anchor_date"), str):
        values["anchor_date"] = datetime.datetime.fromisoformat(values["anchor_date"])
    return Schedule(**values)


def load_flow(spec: dict[str, Any]):
    """The flow a prefect.yaml deployment's entrypoint names, with this checkout as its source.

    A flow from a source is deployed with a pull step into the repository, like prefect.yaml's,
    and each run imports its entrypoint afresh: serving then also takes over deployments that
    `prefect deploy` created, and type hints resolve as they do under a worker.
    """
    from prefect import Flow

    return Flow.from_source(source=str(REPOSITORY), entrypoint=spec["entrypoint"])


def serve_options(spec: dict[str, Any]) -> dict[str, Any]:
    """One prefect.yaml deployment as keyword arguments of `Flow.to_deployment`."""
    from prefect.client.schemas.objects import ConcurrencyLimitConfig
    from prefect.events import DeploymentTriggerTypes
    from pydantic import TypeAdapter

    triggers = [TypeAdapter(DeploymentTriggerTypes).validate_python(
        {"name": f"{spec['name']}__automation_{i}", **trigger})
        for i, trigger in enumerate(spec.get("triggers") or [], start=1)]
    limit = spec.get("concurrency_limit")
    return {
        "name": spec["name"],
        "description": spec.get("description"),
        "tags": spec.get("tags"),
        "parameters": spec.get("parameters"),
        "schedules": [schedule_from_spec(s) for s in spec.get("schedules") or []],
        "triggers": triggers,
        "concurrency_limit": ConcurrencyLimitConfig(**limit) if isinstance(limit, dict) else limit,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="deployments to serve (default: all)")
    args = parser.parse_args(argv)
    specs = deployment_specs()
    unknown = set(args.names) - {s["name"] for s in specs}
    if unknown:
        parser.error(f"no such deployment in {PREFECT_FILE.name}: {', '.join(sorted(unknown))}")
    # Like the prefect.yaml pull step: entrypoints and a relative `db` resolve in the repository.
    os.chdir(REPOSITORY)
    sys.path.insert(0, str(REPOSITORY))
    from prefect import serve

    serve(*(load_flow(s).to_deployment(**serve_options(s))
            for s in specs if not args.names or s["name"] in args.names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
