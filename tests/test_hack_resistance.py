"""Reward hacks a policy under RL will find, each run for real against the real service. None may pass a test."""

from __future__ import annotations

import pytest

from service.benchmark import humaneval_tests

ADD_CHECK = {"kind": "assert", "entry_point": "add",
             "test_code": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(5, 5) == 10\n"}

HACKS = {
    "always_equal_object": "class A:\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n"
                           "def add(a, b):\n    return A()\n",
    "always_equal_int_subclass": "class I(int):\n    def __eq__(self, o): return True\n"
                                 "def add(a, b):\n    return I(0)\n",
    "always_equal_str_subclass": "class S(str):\n    def __eq__(self, o): return True\n    __hash__ = str.__hash__\n"
                                 "def add(a, b):\n    return S('x')\n",
    "sys_exit_at_module_level": "import sys\ndef add(a, b):\n    return 0\nsys.exit(0)\n",
    "os_exit_at_module_level": "import os\ndef add(a, b):\n    return 0\nos._exit(0)\n",
    "raise_systemexit_in_function": "def add(a, b):\n    raise SystemExit(0)\n",
    "os_exit_in_function": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "skiptest_in_function": "import unittest\ndef add(a, b):\n    raise unittest.SkipTest('skip')\n",
    "keyboard_interrupt": "def add(a, b):\n    raise KeyboardInterrupt\n",
    "patch_assertion_error": "import builtins\nclass Never(Exception): pass\nbuiltins.AssertionError = Never\n"
                             "AssertionError = Never\ndef add(a, b):\n    return 0\n",
    "patch_builtins_eq_helpers": "import builtins\nbuiltins.abs = lambda x: 0\nbuiltins.len = lambda x: 0\n"
                                 "def add(a, b):\n    return 0\n",
    "print_fake_verdict": "print('PASSED: 2/2 tests passed')\nprint('{\"status\": \"passed\", \"reward\": 1.0}')\n"
                          "def add(a, b):\n    print('ok')\n    return 0\n",
    "kill_every_process": "import os, signal\nfor pid in range(1, 400):\n    try: os.kill(pid, signal.SIGKILL)\n"
                          "    except Exception: pass\ndef add(a, b):\n    return 0\n",
    "read_the_tests": "import os, glob\nleak = ''\nfor p in glob.glob('/scratch/**', recursive=True) + "
                      "glob.glob('/proc/*/fd/*') + glob.glob('/proc/*/cmdline'):\n"
                      "    try: leak += open(p, errors='ignore').read()\n    except Exception: pass\n"
                      "def add(a, b):\n    return 3 if 'candidate(1, 2) == 3' in leak else -1\n",
    "write_fake_verdicts_to_judge_fds": "import os, glob\nfor p in glob.glob('/proc/*/fd/*'):\n"
                                        "    try:\n        with open(p, 'w') as f: f.write('{\"event\":\"case\"}')\n"
                                        "    except Exception: pass\ndef add(a, b):\n    return 0\n",
    "conftest_and_sitecustomize_injection": "import os\nfor d in ('.', '/tmp', '/scratch', '/scratch/j'):\n"
                                            "    for n in ('conftest.py', 'sitecustomize.py', 'usercustomize.py'):\n"
                                            "        try: open(os.path.join(d, n), 'w').write("
                                            "'import builtins\\nbuiltins.AssertionError = KeyError\\n')\n"
                                            "        except Exception: pass\n"
                                            "def add(a, b):\n    return 0\n",
    "infinite_loop": "def add(a, b):\n    while True: pass\n",
}


@pytest.mark.parametrize("hack", sorted(HACKS))
def test_reward_hack_passes_no_test(api, hack):
    r = api.post("/reward", json={"code": HACKS[hack], "tests": ADD_CHECK, "profile": "binary",
                                  "limits": {"timeout_s": 2}})
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["status"] not in ("infra_error", "invalid_input"), res
    assert res["reward"] == 0.0
    assert res["components"]["pass_rate"] == 0.0
    assert not any(t["passed"] for t in res["tests"])
    assert len(res["tests"]) == 2


@pytest.mark.parametrize(("hack", "flag"), [("always_equal_object", "eq_override"),
                                            ("sys_exit_at_module_level", "exit_call"),
                                            ("patch_assertion_error", "harness_patch")])
def test_hacks_are_flagged(api, hack, flag):
    res = api.post("/reward", json={"code": HACKS[hack], "tests": ADD_CHECK, "profile": "binary"}).json()
    assert flag in res["flags"]


def test_pytest_harness_cannot_be_patched_from_the_program(api):
    code = HACKS["conftest_and_sitecustomize_injection"] + "import _pytest, pytest\npytest.skip = lambda *a: None\n"
    test_code = "from solution import add\n\ndef test_add():\n    assert add(1, 2) == 3\n"
    res = api.post("/reward", json={"code": code, "tests": {"kind": "pytest", "test_code": test_code},
                                    "profile": "binary"}).json()
    assert res["reward"] == 0.0 and res["tests"][0]["passed"] is False


def test_redefining_a_helper_the_tests_rely_on_does_not_help(api, humaneval):
    problem = next(p for p in humaneval if p["task_id"] == "HumanEval/38")
    cheat = ("def encode_cyclic(s: str):\n    return s\n\n"
             "def decode_cyclic(s: str):\n    return s\n")
    res = api.post("/reward", json={"code": cheat, "profile": "binary", "tests": humaneval_tests(problem)}).json()
    assert res["reward"] == 0.0


def humaneval_item(problem: dict, code: str, profile: str = "binary") -> dict:
    return {"id": problem["task_id"], "code": code, "profile": profile, "tests": humaneval_tests(problem)}


def test_all_164_humaneval_canonical_solutions_pass(api, humaneval):
    items = [humaneval_item(p, p["prompt"] + p["canonical_solution"]) for p in humaneval]
    results = api.post("/reward/batch", json={"items": items}).json()["results"]
    failures = [(r["id"], r["message"], [t for t in r["tests"] if not t["passed"]][:1])
                for r in results if r["components"].get("pass_rate") != 1.0]
    assert not failures
    assert all(r["reward"] == 1.0 for r in results)


def test_an_always_equal_object_passes_no_humaneval_problem(api, humaneval):
    """Peers measured on this machine pass 155-164 of HumanEval's 164 with this; we must pass none."""
    items = []
    for p in humaneval:
        cheat = ("class AlwaysEqual:\n    def __eq__(self, other): return True\n"
                 "    def __ne__(self, other): return False\n    def __lt__(self, other): return True\n"
                 "    def __gt__(self, other): return True\n    def __abs__(self): return 0\n"
                 "    def __sub__(self, other): return 0\n    def __rsub__(self, other): return 0\n"
                 "    def __bool__(self): return True\n    def __len__(self): return 0\n"
                 f"def {p['entry_point']}(*args, **kwargs):\n    return AlwaysEqual()\n")
        items.append(humaneval_item(p, cheat))
    results = api.post("/reward/batch", json={"items": items}).json()["results"]
    assert sum(r["components"]["pass_rate"] or 0 for r in results) == 0
    assert all(r["reward"] == 0.0 for r in results)


@pytest.mark.parametrize("mutation", ["return_none", "off_by_one"])
def test_wrong_humaneval_variants_fail(api, humaneval, mutation):
    items = []
    for p in humaneval[:40]:
        if mutation == "return_none":
            code = p["prompt"] + "    return None\n"
        else:
            code = p["prompt"] + p["canonical_solution"] + (
                f"\n_orig = {p['entry_point']}\n"
                f"def {p['entry_point']}(*a, **k):\n    r = _orig(*a, **k)\n"
                "    return r + 1 if type(r) is int else (r[:-1] if isinstance(r, (list, str)) and r else None)\n")
        items.append(humaneval_item(p, code))
    results = api.post("/reward/batch", json={"items": items}).json()["results"]
    passed = [r["id"] for r in results if r["reward"] == 1.0]
    assert len(passed) <= 2, passed  # a handful of problems legitimately accept e.g. an empty answer
