"""The host's side of cases jobs (graders/io_cases.py): how an item's stdins are cut into jobs and how a job's
reply becomes one Result per case. Pure: no sandbox."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from graders.io_cases import COMPILED_ONCE_PATH, PATH, case_results, chunks, path_of
from sandboxes import Result, Status


def test_the_stdins_of_an_item_fit_one_job_when_small() -> None:
    assert chunks(["a", "b", "c"]) == [["a", "b", "c"]]


def test_the_stdins_are_cut_in_order_at_the_input_cap() -> None:
    assert chunks(["aa", "bb", "c", "dddd", "e"], limit=4) == [["aa", "bb"], ["c"], ["dddd"], ["e"]]


def test_a_stdin_over_the_cap_goes_alone_and_is_never_dropped() -> None:
    assert chunks(["x" * 10, "y"], limit=4) == [["x" * 10], ["y"]]


def test_the_cap_counts_encoded_bytes_not_characters() -> None:
    assert chunks(["éé", "é"], limit=4) == [["éé"], ["é"]]


def test_each_case_record_becomes_its_own_result() -> None:
    job = Result.from_wire({"status": "ok", "cases": [{"status": "ok", "stdout": "1\n", "cpu_ms": 2.0},
                                                      {"status": "timeout", "cpu_ms": 1000.0}]})
    job.sandbox_id = "sb"
    cases = case_results(job, 2)
    assert [(c.status, c.stdout, c.cpu_ms, c.sandbox_id) for c in cases] == [
        (Status.OK, "1\n", 2.0, "sb"), (Status.TIMEOUT, "", 1000.0, "sb")]


def test_a_job_that_ran_no_case_gives_its_own_result_to_every_case() -> None:
    fault = Result.infra("sandbox x failed during the job")
    assert case_results(fault, 3) == [fault] * 3


def test_the_io_path_is_compiled_once_only_when_every_job_of_the_item_said_so() -> None:
    once = Result.from_wire({"status": "ok", "timings": {"compiled_once": 1, "compile_cpu_ms": 0.2}})
    each = Result.from_wire({"status": "ok", "timings": {"compiled_once": 0}})
    assert path_of([once, once]) == COMPILED_ONCE_PATH
    assert path_of([once, each]) == PATH
    assert path_of([Result.infra("gone")]) == PATH
    assert path_of([]) == PATH


def inside(name: str):
    """A module of sandboxes/inside as the sandbox loads it (runner.py puts its own directory on sys.path)."""
    folder = Path(__file__).resolve().parent.parent / "sandboxes" / "inside"
    loaded = []
    for module in ("runner", name):
        spec = importlib.util.spec_from_file_location(f"rewardbox_inside_{module}", folder / f"{module}.py")
        assert spec is not None and spec.loader is not None
        loaded.append(importlib.util.module_from_spec(spec))
        spec.loader.exec_module(loaded[-1])
    return loaded[-1]


def test_only_a_python_program_run_as_main_is_compiled_once() -> None:
    compiled_once = inside("cases")._compiled_once
    assert compiled_once({"code": "print(1)", "filename": "solution.py"})
    assert not compiled_once({"argv": ["./main"]})
    assert not compiled_once({"code": "x", "host": True})  # our own in-sandbox programs keep their path
    assert not compiled_once({"code": "x", "lint": True})
    assert not compiled_once({"code": None})
