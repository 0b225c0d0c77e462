"""The no-isolation floors the benches print beside rewardbox (bench/codecontests.py fork_per_case, bench/humaneval.py
judge_apart_executor): each runs the programs for real and says pass only for a right answer, so a ratio against it
compares with work actually done."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

codecontests = importlib.import_module("codecontests")
humaneval_bench = importlib.import_module("humaneval")  # the fixture `humaneval` is the problems


def test_fork_per_case_passes_right_outputs_and_fails_wrong_ones():
    problems = codecontests.make_problems(2, 6, seed=3)
    right = codecontests.samples_of(problems, 1, "right")
    wrong = [{**s, "code": s["code"] + "print(0)\n"} for s in right]  # one more line of output: wrong everywhere
    crash = [{**s, "code": "raise SystemExit(3)\n"} for s in right]
    assert codecontests.fork_per_case(right)[1] == 12
    assert codecontests.fork_per_case(wrong)[1] == 0
    assert codecontests.fork_per_case(crash)[1] == 0


def test_tests_apart_runs_check_against_the_program_in_another_process(humaneval):
    problems = humaneval[:6]
    assert judge_apart(problems) == 6
    assert judge_apart([{**p, "canonical_solution": "    return None\n"} for p in problems]) == 0
    # a program that ends its process when called passes the one-process fork executor (exit status 0), and
    # not the floor, whose tests run in a process the program does not own: the floor pays for a real guarantee
    exiting = [{**p, "canonical_solution": "    import os\n    os._exit(0)\n"} for p in problems]
    assert humaneval_bench.fork_executor(exiting, 2)["passed"] == 6
    assert judge_apart(exiting) == 0


def judge_apart(problems: list[dict]) -> int:
    return int(humaneval_bench.judge_apart_executor(problems, 2)["passed"])
