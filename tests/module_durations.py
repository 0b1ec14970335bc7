"""How long each test module takes, measured by a whole-suite run and kept in
tests/module_durations.json, and the order it gives xdist's workers: longest first.

``pytest -q -n 2 --dist loadfile --record-module-durations`` (README's test command plus the
option) rewrites the file: each module's seconds are the sum of its tests' setup, call and
teardown times, so its module-scoped servers and ingests count once."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path

import pytest

DURATIONS_FILE = Path(__file__).with_name("module_durations.json")
RECORD_OPTION = "--record-module-durations"


def read_module_durations(path: Path = DURATIONS_FILE) -> dict[str, float]:
    """Seconds per module (``tests/test_x.py``); empty when the file is absent."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except json.JSONDecodeError as exc:  # e.g. a merge left conflict markers in it
        raise pytest.UsageError(
            f"{path}: not JSON ({exc}); rewrite it with `pytest -q -n 2 --dist loadfile "
            f"{RECORD_OPTION}`") from exc


def modules_longest_first(tests_in: Counter[str], with_processes: set[str],
                          seconds: dict[str, float]) -> list[str]:
    """The modules of ``tests_in`` (module: number of tests) in the order to hand them out.

    A measured module counts its measured seconds. A module not measured yet counts as long as
    the median measured module that starts real processes when it starts some itself (a test
    in ``with_processes``), else as nothing: it comes after the measured ones, most tests
    first, xdist's own order."""
    started = [seconds[m] for m in tests_in if m in seconds and m in with_processes]
    unmeasured_with_processes = statistics.median(started) if started else 0.0

    def estimate(module: str) -> float:
        if module in seconds:
            return seconds[module]
        return unmeasured_with_processes if module in with_processes else 0.0

    return sorted(tests_in, key=lambda m: (-estimate(m), -tests_in[m], m))


class ModuleDurationsRecorder:
    """A plugin for the controlling process (xdist's workers report their tests to it): sums
    each module's report durations and writes them to ``path`` at the end of the session.
    Modules not run keep their entry while their file exists, so a partial run updates only
    what it ran."""

    def __init__(self, root: Path, path: Path = DURATIONS_FILE):
        self.root, self.path = root, path
        self.seconds: Counter[str] = Counter()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid.split("::")[0]] += report.duration

    def pytest_sessionfinish(self) -> None:
        if not self.seconds:
            return
        kept = {m: s for m, s in read_module_durations(self.path).items()
                if (self.root / m).is_file()}
        merged = kept | {m: round(s, 1) for m, s in self.seconds.items()}
        ordered = dict(sorted(merged.items(), key=lambda item: (-item[1], item[0])))
        self.path.write_text(json.dumps(ordered, indent=1) + "\n", encoding="utf-8")
