"""`python -m propdex.cli`: the `propdex` command."""

from propdex.cli.main import run

run()
