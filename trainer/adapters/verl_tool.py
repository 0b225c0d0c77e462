"""verl multi-turn tools (verl >= 0.9 `BaseTool`) over rewardbox agent sessions, HTTP only.

One class, four tools (`action` in each tool's config): `bash`, `read_file`, `write_file` and `submit`. verl's
ToolAgentLoop calls create / execute / release around every single tool call, so a session cannot live in a tool
instance: the tools of one trajectory share it through `agent_data.request_id` (one per trajectory), opened on
the trajectory's first call from the row's `create_kwargs` (`repo_id`, `tests`) and ended by `submit` (its reward
is the step reward verl records, and `calc_reward` answers it) or by its TTL. Config (tool YAML, README):

    tools:
      - class_name: trainer.adapters.verl_tool.RewardboxSessionTool
        config: {type: native, url: http://rewardbox:8000, action: bash, ttl_s: 1800}
        tool_schema: {type: function, function: {name: bash, description: ..., parameters: ...}}

`tool_schema` may be left out: the schema of rewardbox.sessions.TOOLS for `action` is used.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import OrderedDict
from typing import Any

from rewardbox import AsyncClient, HTTPStatusError, RewardboxError
from rewardbox.sessions import OUTPUT_CHARS, TOOLS, format_exec

try:  # verl is optional: the class still imports (and is tested) where it is installed
    from verl.tools.base_tool import BaseTool
    from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse
except ImportError:  # pragma: no cover - exercised only without verl
    BaseTool = object  # type: ignore[assignment,misc]
    OpenAIFunctionToolSchema = ToolResponse = None  # type: ignore[assignment,misc]

log = logging.getLogger("rewardbox.verl_tool")
ACTIONS = {t["function"]["name"]: t for t in TOOLS}
REWARDS_KEPT = 100_000


class _Trajectories:
    """Sessions by trajectory (request id), shared by every tool of this process."""

    def __init__(self) -> None:
        self.sessions: dict[str, str] = {}
        self.rewards: OrderedDict[str, float | None] = OrderedDict()  # the last REWARDS_KEPT submitted
        self.tests: dict[str, dict[str, Any]] = {}
        self.instances: dict[str, str] = {}  # tool instance id -> trajectory
        self.locks: dict[str, asyncio.Lock] = {}


TRAJECTORIES = _Trajectories()


class RewardboxSessionTool(BaseTool):
    def __init__(self, config: dict, tool_schema: Any = None) -> None:
        self.action = str(config.get("action") or (tool_schema.function.name if tool_schema else "bash"))
        if self.action not in ACTIONS:
            raise ValueError(f"action: one of {', '.join(ACTIONS)}, not {self.action!r}")
        if tool_schema is None and OpenAIFunctionToolSchema is not None:
            tool_schema = OpenAIFunctionToolSchema.model_validate(ACTIONS[self.action])
        super().__init__(config, tool_schema)
        self.client = AsyncClient(config.get("url"), config.get("token"))
        self.ttl_s = float(config.get("ttl_s", 1800.0))
        self.profile = str(config.get("profile", "binary"))
        self.limits = dict(config.get("limits") or {})
        self.timeout_s = float(config.get("timeout_s", 30.0))

    async def create(self, instance_id: str | None = None, **kwargs: Any) -> tuple[str, Any]:
        instance_id = instance_id or uuid.uuid4().hex
        TRAJECTORIES.instances[instance_id] = json.dumps(kwargs.get("create_kwargs") or {})
        return instance_id, ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[Any, float, dict]:
        agent_data = kwargs.get("agent_data")
        key = str(getattr(agent_data, "request_id", None) or instance_id)
        create = json.loads(TRAJECTORIES.instances.get(instance_id) or "{}")
        if self.action == "submit" and key in TRAJECTORIES.rewards:
            reward = TRAJECTORIES.rewards[key]
            return ToolResponse(text=f"already submitted: reward {reward}"), 0.0, {"reward": reward}
        try:
            sid = await self._session(key, create)
            if self.action == "submit":
                reward = await self._submit(key, sid)
                return ToolResponse(text=f"submitted: reward {reward}"), float(reward or 0.0), {"reward": reward}
            return ToolResponse(text=await self._act(sid, parameters)), 0.0, {}
        except HTTPStatusError as e:
            if e.status in (404, 415, 422):
                return ToolResponse(text=f"error: {e.body[:500]}"), 0.0, {}
            raise
        except RewardboxError as e:
            log.warning("rewardbox session call failed: %s", e)
            raise

    async def _session(self, key: str, create: dict[str, Any]) -> str:
        lock = TRAJECTORIES.locks.setdefault(key, asyncio.Lock())
        async with lock:
            sid = TRAJECTORIES.sessions.get(key)
            if sid is None:
                if "repo_id" not in create:
                    raise ValueError("create_kwargs: repo_id (a snapshot stored by POST /repos) is required")
                body = await self.client.call("POST", "/sessions", ok=(201,), json={
                    "repo": {"id": create["repo_id"]}, "ttl_s": self.ttl_s, "limits": self.limits})
                sid = TRAJECTORIES.sessions[key] = str(body["session_id"])
                tests = create.get("tests")
                TRAJECTORIES.tests[key] = json.loads(tests) if isinstance(tests, str) else dict(tests or {})
            return sid

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

    async def _submit(self, key: str, sid: str) -> float | None:
        if key in TRAJECTORIES.rewards:
            return TRAJECTORIES.rewards[key]
        result = await self.client.call("POST", f"/sessions/{sid}/reward",
                                        json={"tests": TRAJECTORIES.tests.get(key) or {}, "profile": self.profile})
        reward = result.get("reward")
        TRAJECTORIES.rewards[key] = reward
        while len(TRAJECTORIES.rewards) > REWARDS_KEPT:
            TRAJECTORIES.rewards.popitem(last=False)
        for table in (TRAJECTORIES.sessions, TRAJECTORIES.tests, TRAJECTORIES.locks):
            table.pop(key, None)
        try:
            await self.client.call("DELETE", f"/sessions/{sid}")
        except HTTPStatusError as e:
            if e.status not in (404, 410):
                raise
        return reward

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        agent_data = kwargs.get("agent_data")
        key = str(getattr(agent_data, "request_id", None) or instance_id)
        reward = TRAJECTORIES.rewards.get(key)
        return float(reward) if reward is not None else 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        TRAJECTORIES.instances.pop(instance_id, None)
