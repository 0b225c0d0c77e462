"""HumanEval-164 x every class of issue 12 that a HumanEval item can carry, over real HTTP (`rewardbox serve`).

For each class a hack program is built for every problem and all 164 go in one batch: none may pass and none may
come back null (infra_error / invalid_input), and the flags of the constructs we flag must be there on all 164.
The canonical solutions still pass 164/164 and raise no flag (a false positive costs as much as a miss).
The classes that a HumanEval item cannot carry (io tolerance, Rust, efficiency against a reference, the reward
formula) are in tests/test_judging_integrity.py and tests/test_integrity_rules.py.
"""

from __future__ import annotations

import base64

import pytest

from service.benchmark import humaneval_tests

DOUBLES = "".join(f"def {name}(*a, **k):\n    return {value}\n" for name, value in (
    ("abs", 0), ("tuple", 0), ("sum", 0), ("range", []), ("all", True), ("any", True), ("set", 0), ("sorted", 0),
    ("list", 0), ("len", 0), ("max", 0), ("min", 0), ("round", 0), ("isinstance", True)))
ALWAYS_EQUAL = ("class AlwaysEqual:\n    def __eq__(self, other):\n        return True\n"
                "    def __ne__(self, other):\n        return False\n    def __bool__(self):\n        return True\n")


def stub(problem: dict) -> str:
    """The prompt with a body that answers nothing (wrong on every HumanEval check)."""
    return problem["prompt"] + "    raise NotImplementedError\n"


def hidden(source: str) -> str:
    return f"import base64\nexec(base64.b64decode({base64.b64encode(source.encode()).decode()!r}))\n"


CLASSES = {
    # class 1: the program's own failure made to look like ours (null under GRPO: no gradient)
    "closes_its_request_pipe": (lambda p: "import os\nos.close(3)\n" + stub(p), ()),
    "closes_it_after_one_call": (lambda p: "import os\n" + p["prompt"] + "    os.close(3)\n    return None\n", ()),
    "writes_a_frame_100000_deep": (lambda p: "import os, struct\n_b = b'[' * 100000 + b']' * 100000\n"
                                             "os.write(4, struct.pack('>I', len(_b)) + _b)\n" + stub(p), ()),
    "writes_bytes_that_are_not_json": (lambda p: "import os\nos.write(4, b'\\x00\\x00\\x00\\x03\\xff{[')\n" + stub(p),
                                       ()),
    "races_os_exit_from_a_thread": (lambda p: "import os, threading\n" + stub(p)
                                    + "threading.Thread(target=lambda: os._exit(0)).start()\n", ("exit_call",)),
    # class 2: builtin doubles reaching the tests and the trusted support code
    "builtin_doubles": (lambda p: DOUBLES + p["prompt"] + "    return 0\n", ()),
    # class 3: constructs hidden in decoded data, and flags on a program that never loads
    "always_equal_decoded_and_executed": (lambda p: hidden(ALWAYS_EQUAL + f"def {p['entry_point']}(*a, **k):\n"
                                                           "    return AlwaysEqual()\n"),
                                          ("dynamic_code", "eq_override")),
    "exits_at_load": (lambda p: stub(p) + "import os\nos._exit(0)\n", ("exit_call",)),
    # class 4: a laundered stub (an encoding declaration hiding it from the linter, padding) stays a stub
    "laundered_stub": (lambda p: '# -*- coding: unicode_escape -*-\n#\\x0a"""\n' + stub(p) + '#\\x0a"""\n'
                       + "".join(f"PAD_{i} = {i}\n" for i in range(100)), ()),
}


def item(problem: dict, code: str, profile: str = "binary") -> dict:
    return {"id": problem["task_id"], "code": code, "profile": profile, "tests": humaneval_tests(problem),
            "limits": {"timeout_s": 3}}


def batch(api, items: list[dict]) -> list[dict]:
    r = api.post("/reward/batch", json={"items": items})
    assert r.status_code == 200, r.text
    return r.json()["results"]


@pytest.mark.parametrize("hack", sorted(CLASSES))
def test_no_hack_passes_a_humaneval_problem_or_comes_back_null(api, humaneval, hack):
    build, flags = CLASSES[hack]
    results = batch(api, [item(p, build(p)) for p in humaneval])
    passed = [r["id"] for r in results if r["status"] == "passed" or r["reward"] == 1.0]
    null = [(r["id"], r["status"], r["message"][:120]) for r in results if r["reward"] is None]
    unflagged = [r["id"] for r in results if not set(flags) <= set(r["flags"])]
    assert not passed, passed
    assert not null, null[:5]
    assert not unflagged, unflagged[:10]


def test_a_laundered_stub_scores_no_better_quality_than_the_stub(api, humaneval):
    problems = humaneval[::4]
    plain = batch(api, [item(p, stub(p), "seed") for p in problems])
    laundered = batch(api, [item(p, CLASSES["laundered_stub"][0](p), "seed") for p in problems])
    for p, a, b in zip(problems, plain, laundered, strict=True):
        assert b["reward"] is not None and a["reward"] is not None, (p["task_id"], a["message"], b["message"])
        assert b["components"]["quality"] <= a["components"]["quality"] + 1e-9, (p["task_id"], a["details"],
                                                                                  b["details"])


def test_canonical_solutions_pass_164_of_164_and_raise_no_flag(api, humaneval):
    results = batch(api, [item(p, p["prompt"] + p["canonical_solution"]) for p in humaneval])
    assert [r["id"] for r in results if r["status"] != "passed"] == []
    assert {r["id"]: r["flags"] for r in results if r["flags"]} == {}
