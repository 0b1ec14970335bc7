"""The order xdist's workers get the test modules in: longest first, by the seconds a
whole-suite run wrote to tests/module_durations.json."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.module_durations import (
    ModuleDurationsRecorder,
    modules_longest_first,
    read_module_durations,
)


def test_the_modules_go_longest_first_by_the_durations_file(tmp_path):
    durations = tmp_path / "module_durations.json"
    durations.write_text(json.dumps({"tests/test_a.py": 3.0, "tests/test_b.py": 90.0,
                                     "tests/test_c.py": 20.0}))
    tests_in = Counter({"tests/test_a.py": 40, "tests/test_b.py": 1, "tests/test_c.py": 2})

    order = modules_longest_first(tests_in, set(), read_module_durations(durations))

    assert ["tests/test_b.py", "tests/test_c.py", "tests/test_a.py"] == order


def test_a_module_not_measured_goes_by_whether_it_starts_processes():
    seconds = {"tests/test_long.py": 100.0, "tests/test_mid.py": 30.0, "tests/test_short.py": 1.0,
               "tests/test_unit.py": 2.0}
    tests_in = Counter({"tests/test_long.py": 1, "tests/test_mid.py": 1, "tests/test_short.py": 1,
                        "tests/test_unit.py": 50, "tests/test_new_prefect.py": 1,
                        "tests/test_new_unit.py": 9})
    # The measured modules that start processes: 100 s, 30 s and 1 s, a median of 30 s.
    with_processes = {"tests/test_long.py", "tests/test_mid.py", "tests/test_short.py",
                      "tests/test_new_prefect.py"}

    order = modules_longest_first(tests_in, with_processes, seconds)

    assert ["tests/test_long.py", "tests/test_mid.py", "tests/test_new_prefect.py",
            "tests/test_unit.py", "tests/test_short.py", "tests/test_new_unit.py"] == order


def _report(nodeid: str, when: str, seconds: float) -> pytest.TestReport:
    return pytest.TestReport(nodeid, (nodeid, 0, ""), {}, "passed", None, when, duration=seconds)


def test_recording_sums_each_modules_phases_and_keeps_the_modules_not_run(tmp_path):
    for name in ("test_a.py", "test_b.py"):
        (tmp_path / "tests").mkdir(exist_ok=True)
        (tmp_path / "tests" / name).touch()
    durations = tmp_path / "module_durations.json"
    durations.write_text(json.dumps({"tests/test_b.py": 7.0, "tests/test_gone.py": 50.0}))
    recorder = ModuleDurationsRecorder(tmp_path, durations)

    for when, seconds in (("setup", 4.0), ("call", 1.5), ("teardown", 0.3)):
        recorder.pytest_runtest_logreport(_report("tests/test_a.py::test_one", when, seconds))
    recorder.pytest_runtest_logreport(_report("tests/test_a.py::test_two", "call", 0.5))
    recorder.pytest_sessionfinish()

    assert {"tests/test_a.py": 6.3, "tests/test_b.py": 7.0} == read_module_durations(durations)


def test_a_durations_file_that_is_not_json_is_named_in_the_error(tmp_path):
    durations = tmp_path / "module_durations.json"
    durations.write_text("<<<<<<< HEAD\n")

    with pytest.raises(pytest.UsageError, match="module_durations.json: not JSON"):
        read_module_durations(durations)
