"""Admission by time (service/wait_line.py): the wait a newcomer faces, the refusal and its Retry-After, the hold
learned per unit of work, and an item's worst case. Pure arithmetic, no sandbox, no clock."""

from __future__ import annotations

import pytest

from service.config import Settings
from service.errors import Overloaded
from service.validation import item_worst_s
from service.wait_line import HoldEstimate, WaitLine


def test_equal_calls_wait_in_line_and_the_one_past_the_bound_is_refused_with_retry_after():
    line = WaitLine(max_wait_s=10, capacity=2)
    places = [line.join("runs", 2.0, 1) for _ in range(11)]  # the 11th waits for 10 x 2 s over 2 slots: 10 s
    assert line.wait_s("runs", 2.0) == 11.0
    with pytest.raises(Overloaded) as refused:
        line.join("runs", 2.0, 1)
    assert refused.value.retry_after_s == 1 and "11 s" in str(refused.value)
    places[0].started(1)  # one of them took a slot: the next fits again
    line.join("runs", 2.0, 1)


def test_a_request_on_an_idle_service_is_admitted_however_large():
    line = WaitLine(max_wait_s=1, capacity=1)
    line.join("items", 10_000.0, 100)
    with pytest.raises(Overloaded):
        line.join("items", 10_000.0, 100)


def test_a_small_request_waits_a_turn_of_a_big_batch_not_the_whole_batch():
    line = WaitLine(max_wait_s=5, capacity=4)
    line.join("items", 1000.0, 1000)  # a batch: 250 s of work over 4 slots
    assert line.wait_s("items", 1.0) == 0.25  # round robin by request: one turn of the batch
    line.join("items", 1.0, 1)


def test_the_other_kind_waiting_halves_the_slots():
    line = WaitLine(max_wait_s=100, capacity=4)
    line.join("runs", 8.0, 4)
    assert line.wait_s("runs", 8.0) == 2.0
    line.join("items", 5.0, 5)
    assert line.wait_s("runs", 8.0) == 4.0


def test_a_request_s_own_deadline_bounds_its_wait_when_shorter():
    line = WaitLine(max_wait_s=100, capacity=1)
    line.join("items", 20.0, 1)
    line.join("items", 5.0, 1, deadline_s=30)
    with pytest.raises(Overloaded):
        line.join("items", 5.0, 1, deadline_s=4)


def test_a_place_left_or_resized_stops_counting():
    line = WaitLine(max_wait_s=100, capacity=1)
    place = line.join("items", 10.0, 10)
    place.resize(5)  # half of its items were cache hits
    assert line.wait_s("items", 100.0) == 5.0
    place.started(5)
    assert line.wait_s("items", 100.0) == 0.0
    place.leave()
    assert not line.places


def test_an_unknown_capacity_refuses_nobody():
    line = WaitLine(max_wait_s=1, capacity=0)  # distributed mode before any worker was seen
    for _ in range(5):
        line.join("items", 100.0, 1)


def test_the_hold_is_the_worst_case_until_work_finished_then_the_learned_mean_capped_by_it():
    hold = HoldEstimate()
    assert hold.seconds(4, worst_s=40.0) == 40.0
    hold.observe(2, 1.0)  # 0.5 s per unit
    assert hold.seconds(4, worst_s=40.0) == 2.0 and hold.seconds(4, worst_s=1.0) == 1.0
    hold.observe(1, 2.5)  # moves a fifth of the way: 0.5 + 0.2 x 2.0
    assert hold.per_unit == pytest.approx(0.9)


def test_an_item_s_worst_case_is_its_cases_at_their_wall_limit_within_its_budget():
    settings = Settings(max_item_s=120, max_timeout_s=30)
    cases = {"kind": "function", "entry_point": "f", "cases": [{"args": [i]} for i in range(4)]}
    assert item_worst_s({"code": "x", "tests": cases, "limits": {"timeout_s": 2}}, settings) == 8.0
    assert item_worst_s({"code": "x", "tests": cases}, settings) == 40.0  # the default limit, 10 s a case
    assert item_worst_s({"code": "x", "tests": cases, "limits": {"timeout_s": "x"}}, settings) == 40.0
    assert item_worst_s({"code": "x", "tests": {**cases, "cases": cases["cases"] * 10}}, settings) == 120.0


def test_in_a_fifo_line_a_newcomer_waits_for_all_the_work_ahead_whatever_its_own():
    line = WaitLine(max_wait_s=10, capacity=2, fifo=True)
    line.join("exec", 8.0, 1)
    line.join("exec", 8.0, 1)
    assert line.wait_s("exec", 0.1) == 8.0  # not one turn of each (0.1 s): the slots go in arrival order
    with pytest.raises(Overloaded):
        line.join("exec", 0.1, 1, ahead_s=2.5)  # a wait known before the line counts too


def test_refuse_over_gives_a_retry_after_of_the_excess_at_least_one_second():
    line = WaitLine(max_wait_s=10, capacity=1)
    line.refuse_over("exec", 10.0, 1.0)  # at the bound: admitted
    with pytest.raises(Overloaded) as refused:
        line.refuse_over("exec", 10.2, 5.0)
    assert refused.value.retry_after_s == 1
