"""The reward API over real HTTP against the real service and sandbox."""

from __future__ import annotations

import json
import socket

import pytest

ADD = "def add(a, b):\n    return a + b\n"
ADD_TESTS = {"kind": "assert", "test_code": "assert add(1, 2) == 3\nassert add(2, 2) == 4\n"}


def post(api, **item):
    r = api.post("/reward", json=item)
    assert r.status_code == 200, r.text
    return r.json()


def test_passing_program_gets_every_component_and_a_high_reward(api):
    res = post(api, id="r1", code=ADD, tests=ADD_TESTS)
    assert res["id"] == "r1" and res["rollout_id"]
    assert res["status"] == "passed"
    assert res["components"]["executability"] == 1.0
    assert res["components"]["pass_rate"] == 1.0
    assert 0 < res["components"]["quality"] <= 1
    assert 0.9 < res["components"]["efficiency"] <= 1
    assert res["reward"] == pytest.approx(sum(res["weights"][k] * res["components"][k] for k in res["weights"]))
    assert [t["passed"] for t in res["tests"]] == [True, True]
    assert res["execution"]["peak_memory_kb"] > 0


def test_partial_pass_rate_is_a_real_fraction(api):
    tests = {"kind": "assert", "test_code": "assert add(1, 2) == 3\nassert add(2, 2) == 5\nassert add(0, 0) == 0\n"
                                            "assert add(1, 1) == 3\n"}
    res = post(api, code=ADD, tests=tests, profile="binary")
    assert res["status"] == "failed"
    assert res["components"]["pass_rate"] == 0.5
    assert res["reward"] == 0.0
    failed = [t for t in res["tests"] if not t["passed"]]
    assert "add(2, 2) == 5" in failed[0]["message"]


def test_syntax_error_scores_zero_executability_and_coderl_minus_one(api):
    res = post(api, code="def add(a, b)\n    return a + b\n", tests=ADD_TESTS, profile="coderl")
    assert res["status"] == "syntax_error"
    assert res["components"]["executability"] == 0.0
    assert res["reward"] == -1.0


def test_runtime_error_at_top_level(api):
    res = post(api, code="raise ValueError('boom')\n" + ADD, tests=ADD_TESTS, profile="coderl")
    assert res["status"] == "runtime_error"
    assert res["components"]["executability"] == 0.0
    assert res["reward"] == -0.6
    assert "ValueError" in res["message"]


def test_a_raising_case_is_a_failed_case_not_a_crash(api):
    code = "def inv(x):\n    return 1 / x\n"
    tests = {"kind": "assert", "test_code": "assert inv(1) == 1\nassert inv(0) == 0\n"}
    res = post(api, code=code, tests=tests, profile="coderl")
    assert res["status"] == "failed" and res["components"]["executability"] == 1.0
    assert res["components"]["pass_rate"] == 0.5 and res["reward"] == -0.3
    assert "ZeroDivisionError" in res["tests"][1]["message"]


def test_humaneval_check_function_cases_are_split_and_constant_asserts_ignored(api):
    tests = {"kind": "assert", "entry_point": "add",
             "test_code": "METADATA = {}\n\ndef check(candidate):\n    assert candidate(1, 2) == 3\n"
                          "    assert True, 'not a case'\n"
                          "    for i in range(5):\n        assert candidate(i, i) == 2 * i\n"}
    res = post(api, code=ADD, tests=tests)
    assert [t["passed"] for t in res["tests"]] == [True, True]


def test_missing_entry_point_is_not_executable(api):
    tests = {"kind": "function", "entry_point": "mul", "cases": [{"args": [2, 3], "expected": 6}]}
    res = post(api, code=ADD, tests=tests)
    assert res["components"]["executability"] == 0.0
    assert res["components"]["pass_rate"] == 0.0


def test_function_cases_with_solution_class_and_float_tolerance(api):
    code = "class Solution:\n    def half(self, x):\n        return x / 2 + 1e-9\n"
    tests = {"kind": "function", "entry_point": "half", "float_tol": 1e-6,
             "cases": [{"args": [3], "expected": 1.5}, {"args": [4], "expected": 2.0},
                       {"kwargs": {"x": 1}, "expected": 9}, {"args": [4], "expected": 2}]}
    res = post(api, code=code, tests=tests, profile="binary")
    # float_tol is for floats: an expected int must come back exactly (tests/test_judging_integrity.py)
    assert [t["passed"] for t in res["tests"]] == [True, True, False, False]


def test_function_results_keep_tuples_sets_big_ints_and_non_finite_floats(api):
    code = ("def f(kind):\n    return {'t': (1, 2), 's': {1, 2}, 'i': 2**100, 'f': float('inf'),"
            " 'd': {(1, 2): b'x'}}[kind]\n")
    tests = {"kind": "assert", "test_code": "assert f('t') == (1, 2)\nassert f('s') == {2, 1}\n"
                                            "assert f('i') == 2**100\nassert f('f') == float('inf')\n"
                                            "assert f('d') == {(1, 2): b'x'}\nassert f('t') != [1, 2]\n"}
    res = post(api, code=code, tests=tests, profile="binary")
    assert [t["passed"] for t in res["tests"]] == [True] * 6


@pytest.mark.parametrize(("compare", "out", "ok"), [
    ("exact", "3\n", True), ("exact", "3", False), ("lines", "3   \n\n", True),
    ("tokens", " 3 ", True), ({"float_tol": 1e-3}, "3.0004", True), ({"float_tol": 1e-6}, "3.0004", False),
])
def test_io_compare_modes(api, compare, out, ok):
    code = f"a, b = map(int, input().split())\nprint({out!r}, end='')\n"
    want = "3.0\n" if isinstance(compare, dict) else "3\n"  # float_tol never applies to an integer token
    res = post(api, code=code, tests={"kind": "io", "compare": compare, "cases": [{"stdin": "1 2\n", "stdout": want}]},
               profile="binary")
    assert res["tests"][0]["passed"] is ok


def test_io_program_is_run_per_case_with_its_stdin(api):
    code = "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n"
    cases = [{"stdin": "1 2", "stdout": "3"}, {"stdin": "5 5 5", "stdout": "15"}, {"stdin": "0", "stdout": "1"}]
    res = post(api, code=code, tests={"kind": "io", "cases": cases})
    assert [t["passed"] for t in res["tests"]] == [True, True, False]
    assert res["components"]["executability"] == 1.0


def test_pytest_tests_import_the_program_as_solution(api):
    test_code = ("import pytest\nfrom solution import add\n\ndef test_one():\n    assert add(1, 1) == 2\n\n"
                 "def test_two():\n    assert add(1, 1) == 3\n\n@pytest.mark.parametrize('x', [1, 2])\n"
                 "def test_many(x):\n    assert add(x, 0) == x\n")
    res = post(api, code=ADD, tests={"kind": "pytest", "test_code": test_code}, profile="binary")
    assert sorted((t["name"], t["passed"]) for t in res["tests"]) == [
        ("test_many[1]", True), ("test_many[2]", True), ("test_one", True), ("test_two", False)]


def test_profiles(api):
    wrong = "def add(a, b):\n    return a - b\n"
    assert post(api, code=ADD, tests=ADD_TESTS, profile="binary")["reward"] == 1.0
    binary = post(api, code=wrong, tests=ADD_TESTS, profile="binary")
    assert binary["reward"] == 0.0
    assert binary["components"]["quality"] is None and binary["components"]["efficiency"] is None
    assert post(api, code=wrong, tests=ADD_TESTS, profile="coderl")["reward"] == -0.3
    assert post(api, code=ADD, tests=ADD_TESTS, profile="coderl")["reward"] == 1.0
    # A program failing some test is scaled below 0.75, the least a passing one gets (service/reward.py).
    gated = post(api, code=wrong, tests=ADD_TESTS, profile="gated")
    assert gated["reward"] == pytest.approx(0.4 * 0.99)  # executability only: pass_rate 0, quality gated out
    seed = post(api, code=wrong, tests=ADD_TESTS, profile="seed")
    assert seed["components"]["efficiency"] is None  # measured only when every test passes
    assert seed["reward"] == pytest.approx((0.4 + 0.15 * seed["components"]["quality"]) * 0.75 * 0.99, abs=1e-6)


def test_custom_weights_and_zero_weight_components_are_not_computed(api):
    res = post(api, code=ADD, tests=ADD_TESTS, weights={"executability": 0, "pass_rate": 1, "quality": 0,
                                                         "efficiency": 0})
    assert res["reward"] == 1.0
    assert res["components"]["quality"] is None and res["components"]["efficiency"] is None


def test_efficiency_against_a_reference(api):
    slow = "def total(n):\n    s = 0\n    for i in range(n):\n        for j in range(300):\n            s += 0\n" \
           "    return n * (n - 1) // 2\n"
    fast = "def total(n):\n    return n * (n - 1) // 2\n"
    tests = {"kind": "assert", "test_code": "assert total(20000) == 199990000\n"}
    slow_res = post(api, code=slow, tests=tests, reference_code=fast)
    same_res = post(api, code=fast, tests=tests, reference_code=fast)
    assert slow_res["components"]["efficiency"] < 0.8
    assert same_res["components"]["efficiency"] >= 0.9


def test_flag_penalty_applies_only_when_flagged(api):
    code = "import sys\n" + ADD + "if False:\n    sys.exit(0)\n"
    res = post(api, code=code, tests=ADD_TESTS, profile="binary", flag_penalty=0.5)
    assert "exit_call" in res["flags"] and res["reward"] == 0.5
    assert post(api, code=ADD, tests=ADD_TESTS, profile="binary", flag_penalty=0.5)["reward"] == 1.0


@pytest.mark.parametrize(("item", "field"), [
    ({"tests": ADD_TESTS}, "code"),
    ({"code": ADD, "tests": {"kind": "nope"}}, "tests"),
    ({"code": ADD, "weights": {"executability": -1, "pass_rate": 1, "quality": 0, "efficiency": 0}}, "weights"),
    ({"code": ADD, "weights": {"executability": 0, "pass_rate": 0, "quality": 0, "efficiency": 0}}, "weights"),
    ({"code": ADD, "profile": "greedy"}, "profile"),
    ({"code": ADD, "limits": {"timeout_s": -1}}, "limits"),
])
def test_invalid_input_is_422_naming_the_field(api, item, field):
    r = api.post("/reward", json=item)
    assert r.status_code == 422
    assert any(field in err["loc"] for err in r.json()["detail"]), r.text


def test_unknown_language_is_400_listing_supported_ones(api):
    r = api.post("/reward", json={"code": "println(1)", "language": "kotlin"})  # ruby was the example until served
    assert r.status_code == 400
    assert "python" in json.dumps(r.json()) and "ruby" in json.dumps(r.json())


def test_batch_keeps_order_and_one_bad_item_fails_alone(api):
    items = [{"id": "a", "code": ADD, "tests": ADD_TESTS, "profile": "binary"},
             {"id": "b", "code": ADD, "profile": "nonsense"},
             {"id": "c", "code": "def add(a, b):\n    return 0\n", "tests": ADD_TESTS, "profile": "binary"},
             {"id": "d", "language": "cobol", "code": "x"}]
    r = api.post("/reward/batch", json={"items": items})
    assert r.status_code == 200
    res = r.json()["results"]
    assert [x["id"] for x in res] == ["a", "b", "c", "d"]
    assert [x["status"] for x in res] == ["passed", "invalid_input", "failed", "invalid_input"]
    assert res[1]["reward"] is None and "profile" in res[1]["message"]
    assert "python" in res[3]["message"]


def test_batch_size_is_capped(api):
    r = api.post("/reward/batch", json={"items": [{"code": "pass"}] * 301})
    assert r.status_code == 422


def test_oversized_body_gets_413_and_the_client_reads_it(server):
    host, port = server.removeprefix("http://").split(":")
    body = b'{"code": "' + b"x" * (5 << 20) + b'"}'
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b"POST /reward HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        s.sendall(body)
        reply = s.recv(4096)
    assert reply.startswith(b"HTTP/1.1 413")


def post_with_urllib(url: str, body: bytes) -> int:
    import urllib.error
    import urllib.request

    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:  # urllib sends `Connection: close`
            return reply.status
    except urllib.error.HTTPError as e:
        return e.code


def post_with_requests(url: str, body: bytes) -> int:
    import requests

    return requests.post(url, data=body, headers={"Content-Type": "application/json"}, timeout=60).status_code


def post_with_requests_chunked(url: str, body: bytes) -> int:
    import requests

    chunks = (body[i:i + (1 << 16)] for i in range(0, len(body), 1 << 16))  # no length declared
    return requests.post(url, data=chunks, headers={"Content-Type": "application/json"}, timeout=60).status_code


@pytest.mark.parametrize("post", [post_with_urllib, post_with_requests, post_with_requests_chunked])
@pytest.mark.parametrize("mib", [5, 64])
def test_every_common_client_reads_the_413_of_a_body_over_the_limit(server, post, mib):
    """The server keeps reading (and dropping) what a client still sends after its 413: closing under it would
    reset the connection, which urllib and requests report as a network fault instead of the answer."""
    body = b'{"code": "' + b"x" * (mib << 20) + b'"}'
    assert post(server + "/reward", body) == 413


def test_health_readiness_and_info(api):
    assert api.get("/healthz").json() == {"ok": True}
    assert api.get("/readyz").status_code == 200
    info = api.get("/v1/info").json()
    assert info["languages"][0] == "python" and "rust" in info["languages"] and "coderl" in info["profiles"]
    assert info["sandbox"]["backend"] in ("docker", "bubblewrap")
    assert api.get("/openapi.json").status_code == 200


async def test_a_fault_of_ours_is_infra_error_with_null_reward():
    from sandboxes import SandboxPool, choose_backend
    from service.config import Settings
    from service.models import RewardItem
    from service.scoring import Scorer

    pool = SandboxPool(choose_backend(), size=1)
    await pool.start()
    await pool.close()  # every job on a closed pool is our failure, not the program's
    res = await Scorer(pool, Settings()).score(RewardItem(code=ADD, tests=ADD_TESTS))
    assert res.status == "infra_error" and res.reward is None


def test_suppression_pragmas_do_not_raise_quality(api):
    messy = "import os,sys\ndef f( x ):\n  l=[]\n  for i in range(x): l.append(i)\n  return l\n"
    pragma = "# pylint: disable=all\n" + messy.replace("\n", "  # noqa\n")
    plain = post(api, code=messy, profile="seed")
    hidden = post(api, code=pragma, profile="seed")
    assert hidden["components"]["quality"] <= plain["components"]["quality"]
    assert hidden["details"]["quality"]["suppressions"] >= 6
    assert hidden["details"]["quality"]["messages"]


def test_quality_is_cached_by_content_hash(api):
    code = "def twice(x):\n    '''Double x.'''\n    return 2 * x\n"
    first = post(api, code=code, profile="seed")
    again = post(api, code=code, profile="seed", limits={"timeout_s": 9})  # not the same item: scored again
    assert "cache_hit" not in again["details"]
    assert again["details"]["quality"]["cached"] is True
    assert again["components"]["quality"] == first["components"]["quality"]
