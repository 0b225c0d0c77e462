"""The verl session reward function's decisions that need no service: where a row's task is found, what a
recorded grade or fault becomes (no network: nothing is left open to close)."""

from __future__ import annotations

import asyncio

import pytest

from rewardbox.adapters.verl import RewardboxUnavailable
from rewardbox.adapters.verl_session import KEYS, compute_score
from rewardbox.adapters.verl_tool import row_task

TESTS = {"kind": "repo", "fail_to_pass": ["tests/test_x.py::test_y"]}


def test_the_task_is_found_in_any_tools_entry_the_callers_own_first():
    row = {"submit": {"create_kwargs": {"repo_id": "r1", "tests": '{"kind": "repo", "fail_to_pass": ["a"]}'}},
           "bash": {"create_kwargs": {}}}
    assert row_task({}, row) == ("r1", {"kind": "repo", "fail_to_pass": ["a"]})
    assert row_task({"repo_id": "r2", "tests": TESTS}, row) == ("r2", TESTS)


def test_a_row_without_its_task_is_a_dataset_mistake_naming_the_fields():
    with pytest.raises(ValueError, match="repo_id .* and tests"):
        row_task({}, {"bash": {"create_kwargs": {"repo_id": "r1"}}})


def test_a_submitted_grade_is_the_score_with_the_batch_keys():
    state = {"session_id": "s", "closed": True, "grade": {"reward": 1.0, "status": "passed"}}
    result = asyncio.run(compute_score("d", "", "", {"rewardbox": state, "tool_rewards": []}, url="http://127.0.0.1:9"))
    assert result == {"score": 1.0, "acc": 1.0, "status": "passed", "submitted": 1.0, "graded": 1.0}
    assert tuple(result) == KEYS


def test_a_trajectory_with_a_service_fault_is_never_scored_zero():
    state = {"fault": "bash: POST /sessions: 429"}
    with pytest.raises(RewardboxUnavailable, match="a tool call failed on the service's side: bash"):
        asyncio.run(compute_score("d", "", "", {"rewardbox": state, "tool_rewards": []}, url="http://127.0.0.1:9"))
    result = asyncio.run(compute_score("d", "", "", {"rewardbox": state, "tool_rewards": []}, url="http://127.0.0.1:9",
                                       on_infra_error="fallback", fallback_score=-1.0))
    assert result == {"score": -1.0, "acc": None, "status": "infra_error", "submitted": 0.0, "graded": 0.0}


def test_scored_without_the_tools_record_it_refuses_rather_than_grade_the_unchanged_repository():
    with pytest.raises(ValueError, match="agent reward loop"):
        asyncio.run(compute_score("d", "", "", {"tools_kwargs": {}}, url="http://127.0.0.1:9"))


def test_the_session_cap_is_a_fault_of_the_service_a_bad_path_the_policys_mistake():
    from rewardbox import HTTPStatusError, TransportError
    from rewardbox.adapters.verl_tool import _is_fault

    assert _is_fault(HTTPStatusError(429, "sessions: at the cap")) and _is_fault(TransportError("refused"))
    assert _is_fault(HTTPStatusError(410, "the session ended"))
    assert not any(_is_fault(HTTPStatusError(s, "path")) for s in (404, 415, 422))
