"""How a batch is cut to the service's limits (rewardbox/batching.py) and when the client learns them: pure logic."""

from __future__ import annotations

import json

from rewardbox.batching import BatchLimits, item_work, parts
from rewardbox.client import HTTPStatusError, _Policy


def cases(n: int) -> dict:
    return {"code": "x", "tests": {"kind": "function", "entry_point": "f", "cases": [{"args": [i]} for i in range(n)]}}


def test_an_item_weighs_its_test_cases_and_at_least_one():
    assert [item_work(x) for x in (cases(5), cases(0), {"code": "x"}, "not an item")] == [5, 1, 1, 1]


def test_parts_cover_every_item_once_in_order():
    works = [3, 1, 4, 1, 5, 9, 2, 6]
    ranges = parts(works, BatchLimits(max_batch=100, max_queued=16))
    assert [i for r in ranges for i in r] == list(range(len(works)))


def test_a_part_holds_at_most_half_the_queue_bound_so_two_fit_in_flight():
    ranges = parts([3] * 20, BatchLimits(max_batch=100, max_queued=20))
    assert all(sum(3 for _ in r) <= 10 for r in ranges) and len(ranges) == 7


def test_a_part_holds_at_most_max_batch_items():
    assert [len(r) for r in parts([1] * 10, BatchLimits(max_batch=4, max_queued=1000))] == [4, 4, 2]


def test_a_part_holds_at_most_half_the_body_limit():
    ranges = parts([1] * 6, BatchLimits(max_batch=100, max_queued=100, max_body_bytes=100), sizes=[20] * 6)
    assert [len(r) for r in ranges] == [2, 2, 2]  # 2 x (20 + 1) <= 50 < 3 x 21


def test_an_item_over_a_bound_on_its_own_is_a_part_of_its_own():
    assert [list(r) for r in parts([1, 50, 1], BatchLimits(max_batch=10, max_queued=10))] == [[0], [1], [2]]


def test_a_batch_within_the_limits_is_one_part():
    assert parts([2] * 5, BatchLimits(max_batch=5, max_queued=20)) == [range(0, 5)]


def test_limits_come_from_v1_info_and_an_answer_without_them_gives_none():
    info = {"limits": {"max_batch": 300, "max_queued": 8, "max_body_bytes": 4 << 20}}
    assert BatchLimits.from_info(info) == BatchLimits(300, 8, 4 << 20)
    assert BatchLimits.from_info({"limits": {"max_batch": 300}}) is None and BatchLimits.from_info([1]) is None


def refusal(status: int, detail: object) -> HTTPStatusError:
    return HTTPStatusError(status, json.dumps({"detail": detail}))


def test_the_client_splits_only_after_a_refusal_for_size():
    too_many_cases = refusal(422, [{"loc": ["body", "items"], "msg": "send it in smaller requests",
                                    "type": "too_long"}])
    assert _Policy.too_large(too_many_cases) and _Policy.too_large(HTTPStatusError(413, "too large"))
    a_field = refusal(422, [{"loc": ["body", "items", 0, "code"], "msg": "longer than", "type": "too_long"}])
    assert not _Policy.too_large(a_field) and not _Policy.too_large(HTTPStatusError(422, "not json"))


def test_the_client_sends_parts_as_the_items_own_json():
    policy = _Policy("http://127.0.0.1:1")
    items = [cases(2), cases(2), cases(2)]
    assert policy.plan(items) is None  # limits unknown: the batch goes whole
    encoded, ranges, head = policy.plan(items, {"limits": {"max_batch": 10, "max_queued": 4}}) or ([], [], b"")
    assert ranges == [range(0, 1), range(1, 2), range(2, 3)]
    assert json.loads(policy.part_body(encoded, range(0, 2), head)) == {"items": items[:2]}
    defaults = {"profile": "binary", "tests": {"kind": "io", "cases": [{"stdin": "1\n", "stdout": "1\n"}]}}
    encoded, ranges, head = policy.plan([{"code": "a"}, {"code": "b"}], defaults=defaults) or ([], [], b"")
    assert json.loads(policy.part_body(encoded, ranges[0], head)) == {"defaults": defaults,
                                                                      "items": [{"code": "a"}, {"code": "b"}]}
