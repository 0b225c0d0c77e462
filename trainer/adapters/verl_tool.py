"""verl multi-turn tools (verl >= 0.9 `BaseTool`) over rewardbox agent sessions, HTTP only.

One class, four tools (`action` in each tool's config): `bash`, `read_file`, `write_file` and `submit`; the tool
YAML users copy is `trainer/adapters/verl_tools.yaml`, the reward function that goes with it
`trainer/adapters/verl_session.py`. verl's ToolAgentLoop calls create / execute / release around every single tool
call, so a session cannot live in a tool instance: it lives on the trajectory's `agent_data`, as the plain dict
`agent_data.extra_fields["rewardbox"]` (url, session id, repo id, tests, the grade once submitted, the first
infrastructure fault). verl copies `extra_fields` into the batch and hands them to the reward function as
`extra_info["rewardbox"]`, in whatever process that runs: that is how the grade reaches the trainer (verl never
calls a tool's `calc_reward`), and how the reward function closes a session that `submit` did not.

The session opens on the trajectory's first tool call, from the row's `extra_info.tools_kwargs`: `repo_id` and
`tests` are looked up in the calling tool's `create_kwargs` first, then in every other tool's (verl passes each tool
only its own entry), so one entry carries them for all. `submit` grades the session, records the grade, closes the
session and answers the grade as its step reward; later calls are told the episode was submitted. The calls of
one trajectory run one at a time, in the order the policy wrote them (verl may run a turn's calls concurrently).

A call that fails on the service's side (unreachable, 429 past the client's retries, 5xx, a session ended under
the trajectory) is recorded as the trajectory's fault and raised (verl shows the policy the error); the reward
function then reports the trajectory as not graded rather than scoring it. The policy's own mistakes (a bad path,
a binary file: 404/415/422) are told to the policy as text.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from rewardbox import AsyncClient, HTTPStatusError, RewardboxError
from rewardbox.ground_truth import from_verl
from rewardbox.sessions import OUTPUT_CHARS, TOOLS, format_exec

try:  # verl is optional: the class still imports (and is tested) where it is installed
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
except ImportError:  # pragma: no cover - exercised only without verl
    BaseTool = object  # type: ignore[assignment,misc]
    OpenAIFunctionToolSchema = ToolResponse = None  # type: ignore[assignment,misc]

log = logging.getLogger("rewardbox.verl_tool")
ACTIONS = {t["function"]["name"]: t for t in TOOLS}
STATE = "rewardbox"  # the key of agent_data.extra_fields (and of the reward function's extra_info)
TOLD = (404, 415, 422)  # the policy's mistakes: answered as text, the episode goes on


def row_task(own: dict[str, Any] | None, tools_kwargs: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """The row's (repo_id, tests): the calling tool's create_kwargs first, then any other tool's. A row without
    them is a dataset mistake, raised naming the fields."""
    entries = [own or {}] + [dict((v or {}).get("create_kwargs") or {}) for v in (tools_kwargs or {}).values()]
    repo_id = next((e["repo_id"] for e in entries if e.get("repo_id")), None)
    tests = next((e["tests"] for e in entries if e.get("tests")), None)
    if repo_id is None or tests is None:
        raise ValueError("extra_info.tools_kwargs.<tool>.create_kwargs: repo_id (a snapshot stored by POST /repos) "
                         "and tests (a repo test spec) are required, in at least one tool's entry")
    return str(repo_id), from_verl(tests)


def _is_fault(error: Exception) -> bool:
    return not (isinstance(error, HTTPStatusError) and error.status in TOLD)


class RewardboxSessionTool(BaseTool):
    def __init__(self, config: dict, tool_schema: Any = None) -> None:
        self.action = str(config.get("action") or (tool_schema.function.name if tool_schema else "bash"))
        if self.action not in ACTIONS:
            raise ValueError(f"action: one of {', '.join(ACTIONS)}, not {self.action!r}")
        if tool_schema is None and OpenAIFunctionToolSchema is not None:
            tool_schema = OpenAIFunctionToolSchema.model_validate(ACTIONS[self.action])
        super().__init__(config, tool_schema)
        self.url = config.get("url")
        self.client = AsyncClient(self.url, config.get("token"), retries=int(config.get("retries", 5)))
        self.ttl_s = float(config.get("ttl_s", 1800.0))
        self.profile = str(config.get("profile", "binary"))
        self.limits = dict(config.get("limits") or {})
        self.timeout_s = float(config.get("timeout_s", 30.0))
        self.create_kwargs: dict[str, dict[str, Any]] = {}  # tool instance id -> its create_kwargs, until release

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, Any]:
        instance_id = instance_id or uuid.uuid4().hex
        self.create_kwargs[instance_id] = dict(kwargs.get("create_kwargs") or {})
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[Any, float | None,
                                                                                                  dict]:
        agent_data = kwargs.get("agent_data")
        if agent_data is None:
            raise TypeError("RewardboxSessionTool needs verl's agent_data (verl >= 0.9 ToolAgentLoop passes it)")
        state = agent_data.extra_fields.setdefault(STATE, {})
        if not hasattr(agent_data, "_rewardbox_lock"):
            agent_data._rewardbox_lock = asyncio.Lock()
        # one call of a trajectory at a time, in the order the policy wrote them (asyncio.Lock is FIFO): a session
        # runs one command at a time, and a submit next to a bash call in one turn must not close it under the call
        async with agent_data._rewardbox_lock:
            return await self._execute(agent_data, state, self.create_kwargs.get(instance_id), parameters)

    async def _execute(self, agent_data: Any, state: dict[str, Any], own: dict[str, Any] | None,
                       parameters: dict[str, Any]) -> tuple[Any, float | None, dict]:
        if "grade" in state:
            grade = state["grade"]
            return ToolResponse(text=f"the episode was submitted: reward {grade['reward']}"), 0.0, {}
        try:
            sid = await self._session(agent_data, state, own)
            if self.action == "submit":
                grade = await self._submit(state, sid)
                reward = grade["reward"]
                return ToolResponse(text=f"submitted: {grade['status']}, reward {reward}"), reward, dict(grade)
            return ToolResponse(text=await self._act(sid, parameters)), 0.0, {}
        except RewardboxError as e:
            if not _is_fault(e):
                return ToolResponse(text=f"error: {getattr(e, 'body', str(e))[:500]}"), 0.0, {}
            state.setdefault("fault", f"{self.action}: {e}"[:1000])
            log.warning("rewardbox session call failed (the trajectory will not be graded): %s", e)
            raise

    async def _session(self, agent_data: Any, state: dict[str, Any], own: dict[str, Any] | None) -> str:
        """The trajectory's session, opened by its first call (under the trajectory's lock)."""
        if "session_id" not in state:
            repo_id, tests = row_task(own, agent_data.tools_kwargs)
            body = await self.client.call("POST", "/sessions", ok=(201,), json={
                "repo": {"id": repo_id}, "ttl_s": self.ttl_s, "limits": self.limits})
            state.update(url=self.client.base_url, session_id=str(body["session_id"]), repo_id=repo_id, tests=tests)
        return str(state["session_id"])

    async def _act(self, sid: str, p: dict[str, Any]) -> str:
        if self.action == "bash":
            out = await self.client.call("POST", f"/sessions/{sid}/exec", json={
                "command": str(p.get("command", "")), "timeout_s": float(p.get("timeout_s", self.timeout_s))})
            return format_exec(out)
        if self.action == "read_file":
            body = await self.client.call("GET", f"/sessions/{sid}/files", params={"path": str(p.get("path", ""))})
            return str(body.get("content", ""))[-OUTPUT_CHARS * 4:]
        await self.client.call("PUT", f"/sessions/{sid}/files", json={"path": str(p.get("path", "")),
                                                                      "content": str(p.get("content", ""))})
        return f"wrote {p.get('path')}"

    async def _submit(self, state: dict[str, Any], sid: str) -> dict[str, Any]:
        result = self.client.item_result(await self.client.call("POST", f"/sessions/{sid}/reward", json={
            "tests": state["tests"], "profile": self.profile}))
        if result.get("reward") is None:  # the service could not grade it: a fault, not a zero
            raise RewardboxError(f"the session's grade: {result.get('status')}: {result.get('message')}")
        grade = state["grade"] = {"reward": float(result["reward"]), "status": str(result["status"])}
        await close_session(self.client, sid)
        state["closed"] = True
        return grade

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        """The grade submitted, else 0.0 (BaseTool's type). verl 0.9 never calls this: what reaches the trainer is
        verl_session.compute_score, which tells "not graded" apart."""
        agent_data = kwargs.get("agent_data")
        grade = getattr(agent_data, "extra_fields", {}).get(STATE, {}).get("grade")
        return 0.0 if grade is None else float(grade["reward"])

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self.create_kwargs.pop(instance_id, None)


async def close_session(client: AsyncClient, sid: str) -> None:
    """DELETE; a session that already ended is fine."""
    try:
        await client.call("DELETE", f"/sessions/{sid}")
    except HTTPStatusError as e:
        if e.status not in (404, 410):
            raise
