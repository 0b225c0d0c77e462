"""The verl reward function of agent sessions: a trajectory's score is its session's grade.

    actor_rollout_ref.rollout.multi_turn.tool_config_path=trainer/adapters/verl_tools.yaml
    reward.custom_reward_function.path=trainer/adapters/verl_session.py
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.url=http://rewardbox:8000

verl 0.9's ToolAgentLoop never calls a tool's `calc_reward`: a trajectory's score is what this function returns.
verl calls it once per trajectory, after the trajectory ended, with the tools' record of it in
`extra_info["rewardbox"]` (see verl_tool.py). The score is, in order:
- the grade `submit` recorded (status as the service said it);
- a session the trajectory opened but did not submit: graded now, as it stands (what RepoEnv does at its last step);
- no session at all (the policy called no tool): the repository unchanged, graded as a repo item with an empty patch.
Then the session is closed, whatever happened: a trajectory that never submits leaves nothing open until its TTL.
The record reaches this function in verl's agent reward loop (each trajectory scored as it ends, the default without
a colocated reward model); scored any other way, it raises rather than grade the wrong thing.

`reward_kwargs` are those of trainer/adapters/verl.py: `url`, `token` (else REWARDBOX_URL / REWARDBOX_TOKEN; the
session's own URL, recorded by the tools, wins), `profile` (for a grade given here; default binary),
`retry_budget_s`, `on_infra_error`, `fallback_score`. Every result has the keys `score`, `acc`, `status`,
`submitted` (1.0 when the policy submitted) and `graded` (0.0 for a fallback score).

No grade (a tool call failed on the service's side, so the trajectory is not the policy's own; the session ended
under it; the service could not grade it within `retry_budget_s`) is never scored 0. verl has no way to mask one
sample: a None score drops the whole batch's `rm_scores` and its reward manager then fails on `float(None)`, and
nothing in its PPO trainer reads a per-sample mask from the reward. So, as with verl.py: `on_infra_error=raise`
(default) stops training with RewardboxUnavailable naming the fault; `fallback` returns the `fallback_score` the
user set, with status `infra_error` and `graded` 0.0, and logs a warning each time.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

from rewardbox import AsyncClient, HTTPStatusError, RewardboxError
from rewardbox.adapters import retry
from rewardbox.adapters.verl import Options, RewardboxUnavailable
from rewardbox.adapters.verl_tool import STATE, close_session, row_task

log = logging.getLogger("rewardbox.verl_session")
KEYS = ("score", "acc", "status", "submitted", "graded")

_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop -> {(url, token): client}


def _client(url: str | None, token: str | None) -> AsyncClient:
    """One client per event loop: an httpx AsyncClient belongs to the loop it first ran on."""
    per_loop = _clients.setdefault(asyncio.get_running_loop(), {})
    if (url, token) not in per_loop:
        per_loop[(url, token)] = AsyncClient(url, token=token)
    return per_loop[(url, token)]


class NoGrade(Exception):
    """The trajectory cannot be graded: its message says why."""


async def _grade_session(client: AsyncClient, sid: str, tests: dict[str, Any], options: Options) -> dict[str, Any]:
    budget = retry.Budget(options.retry_budget_s)
    while True:
        try:
            result = client.item_result(await client.call("POST", f"/sessions/{sid}/reward",
                                                          json={"tests": tests, "profile": options.profile}))
        except HTTPStatusError as e:
            if e.status in (404, 410):
                raise NoGrade(f"the session ended before it was graded (its TTL?): {e}") from None
            if e.status == 422:
                raise ValueError(f"rewardbox rejected this row's tests: {e.body[:500]}") from None
            result = retry.unreachable(str(e))
        except RewardboxError as e:
            result = retry.unreachable(str(e))
        if result.get("reward") is not None:
            return result
        delay = budget.next_delay()
        if delay is None:
            raise NoGrade(f"{result['status']}: {result.get('message')}")
        await asyncio.sleep(delay)


async def _grade(client: AsyncClient, state: dict[str, Any], extra_info: dict[str, Any],
                 options: Options) -> dict[str, Any]:
    if "fault" in state:
        raise NoGrade(f"a tool call failed on the service's side: {state['fault']}")
    if "grade" in state:
        return dict(state["grade"])
    if "session_id" in state:
        return await _grade_session(client, str(state["session_id"]), state["tests"], options)
    repo_id, tests = row_task(None, extra_info.get("tools_kwargs"))
    item = {"repo": {"id": repo_id}, "patch": "", "tests": tests, "profile": options.profile}
    result = await retry.score_async(client, item, options.retry_budget_s)
    if result["status"] == "invalid_input":
        raise ValueError(f"rewardbox rejected this row's repo item: {result.get('message')}")
    if result.get("reward") is None:
        raise NoGrade(f"{result['status']}: {result.get('message')}")
    return result


async def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None,
                        **kwargs: Any) -> dict[str, Any]:
    options = Options(**{"profile": "binary", **kwargs})
    extra_info = extra_info if isinstance(extra_info, dict) else {}
    if "tool_rewards" not in extra_info:  # scored without the trajectory's record: it would grade the wrong thing
        raise ValueError("verl_session.compute_score scores ToolAgentLoop trajectories: it needs the tools' record "
                         "(extra_info['tool_rewards'] and ['rewardbox']), which verl hands over in its agent reward "
                         "loop (the default without a colocated reward model)")
    state = dict(extra_info.get(STATE) or {})
    client = _client(state.get("url") or options.url, options.token)
    submitted = 1.0 if "grade" in state else 0.0
    try:
        result = await _grade(client, state, extra_info, options)
    except NoGrade as e:
        message = (f"rewardbox could not grade a trajectory ({e}). Training stops rather than learn from a "
                   "made-up reward; fix the service, or set reward_kwargs.on_infra_error=fallback with a "
                   "fallback_score.")
        if options.on_infra_error == "raise":
            raise RewardboxUnavailable(message) from None
        log.warning("%s Using fallback_score=%s.", message, options.fallback_score)
        return {"score": options.fallback_score, "acc": None, "status": "infra_error", "submitted": submitted,
                "graded": 0.0}
    finally:
        if "session_id" in state and not state.get("closed"):
            try:
                await close_session(client, str(state["session_id"]))
            except RewardboxError as e:  # the TTL ends it anyway; a failed close must not stop training
                log.warning("closing session %s failed: %s", state["session_id"], e)
    status = str(result["status"])
    return {"score": float(result["reward"]), "acc": 1.0 if status == "passed" else 0.0, "status": status,
            "submitted": submitted, "graded": 1.0}
