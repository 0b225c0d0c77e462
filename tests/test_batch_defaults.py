"""`/reward/batch` with `defaults`: the fields a GRPO group's samples share (tests, profile, limits) sent once, for
real over HTTP against a real server. Each item scores exactly as it does with the fields inline; an item's own
field wins over the default; a default that no item may take is a 422 naming it; a bad default fails each item alone
as invalid_input, as the same field inline would."""

from __future__ import annotations

import httpx

TESTS = {"kind": "io", "cases": [{"stdin": f"{i} {i + 1}\n", "stdout": f"{2 * i + 1}\n"} for i in range(5)]}
RIGHT = "a, b = map(int, input().split())\nprint(a + b)\n"
WRONG = "a, b = map(int, input().split())\nprint(a - b)\n"


def _scored(results: list[dict]) -> list[tuple]:
    return [(r["status"], r["reward"], r["components"], [(t["name"], t["status"]) for t in r["tests"]])
            for r in results]


def test_defaults_score_each_item_as_inline_fields_do(server):
    codes = [RIGHT, WRONG, "print(1\n", RIGHT + "# another sample\n"]
    with httpx.Client(base_url=server, timeout=120) as client:
        inline = client.post("/reward/batch", json={"items": [
            {"id": f"s{i}", "code": c, "tests": TESTS, "profile": "binary"} for i, c in enumerate(codes)]})
        shared = client.post("/reward/batch", json={"defaults": {"tests": TESTS, "profile": "binary"}, "items": [
            {"id": f"s{i}", "code": c + "# shared\n"} for i, c in enumerate(codes)]})
    assert inline.status_code == shared.status_code == 200, shared.text
    inline_results, shared_results = inline.json()["results"], shared.json()["results"]
    assert _scored(inline_results) == _scored(shared_results)
    assert [r["id"] for r in shared_results] == ["s0", "s1", "s2", "s3"]
    assert [r["status"] for r in shared_results] == ["passed", "failed", "syntax_error", "passed"]
    assert {r["profile"] for r in shared_results} == {"binary"}


def test_an_items_own_field_wins_over_the_default(server):
    other = {"kind": "io", "cases": [{"stdin": "1 1\n", "stdout": "0\n"}]}
    with httpx.Client(base_url=server, timeout=120) as client:
        r = client.post("/reward/batch", json={"defaults": {"tests": TESTS, "profile": "binary"}, "items": [
            {"code": WRONG + "# own tests\n", "tests": other}, {"code": WRONG + "# default tests\n"},
            {"code": RIGHT + "# own profile\n", "profile": "seed"}]})
    assert r.status_code == 200, r.text
    own, default, profiled = r.json()["results"]
    assert (own["status"], len(own["tests"])) == ("passed", 1)
    assert (default["status"], len(default["tests"])) == ("failed", 5)
    assert profiled["profile"] == "seed" and profiled["status"] == "passed"


def test_a_default_no_item_may_take_is_refused_naming_it(server):
    with httpx.Client(base_url=server, timeout=60) as client:
        for key in ("id", "nonsense"):
            r = client.post("/reward/batch", json={"defaults": {key: "x", "tests": TESTS}, "items": [{"code": RIGHT}]})
            assert r.status_code == 422, r.text
            assert [d["loc"] for d in r.json()["detail"]] == [["body", "defaults", key]], r.text
        r = client.post("/reward/batch", json={"defaults": ["tests"], "items": [{"code": RIGHT}]})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"][:2] == ["body", "defaults"], r.text


def test_a_bad_default_fails_each_item_alone_as_the_field_inline_would(server):
    bad = {"kind": "io", "cases": [{"stdin": "1\n"}]}  # no stdout
    with httpx.Client(base_url=server, timeout=60) as client:
        shared = client.post("/reward/batch", json={"defaults": {"tests": bad}, "items": [{"code": RIGHT}, "x"]})
        inline = client.post("/reward/batch", json={"items": [{"code": RIGHT, "tests": bad}, "x"]})
    assert shared.status_code == inline.status_code == 200, shared.text
    for a, b in zip(shared.json()["results"], inline.json()["results"], strict=True):
        assert (a["status"], a["reward"], a["message"], a["details"]) == (b["status"], b["reward"], b["message"],
                                                                          b["details"])
        assert a["status"] == "invalid_input" and a["reward"] is None
