"""Agent sessions from the client side, over HTTP only: `Session` (one /sessions workspace), `RepoEnv` (a tiny
gym-style environment on it) and `TOOLS` (an OpenAI-style tool schema: bash, read_file, write_file, submit).

    env = RepoEnv(repo_id, tests={"kind": "repo", "fail_to_pass": [...]})
    obs = env.reset()                                   # a new session (or a fork of `base`, for GRPO groups)
    obs, reward, done, info = env.step({"tool": "bash", "arguments": {"command": "pytest -x -q"}})
    obs, reward, done, info = env.step({"tool": "submit", "arguments": {}})   # reward: the session's grade
    env.close()

Every failure is a `RewardboxError` (rewardbox.Client's tree). A session that ended (TTL, DELETE, its worker died)
raises `HTTPStatusError` with status 410. Creating and forking retry on 429 (admission) as every call does.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from .client import BadResponse, Client, HTTPStatusError

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "bash", "description": "Run a shell command in the repository's root; files persist between calls, "
        "background processes do not.",
        "parameters": {"type": "object", "properties": {
            "command": {"type": "string", "description": "the shell line (/bin/sh -c)"},
            "timeout_s": {"type": "number", "description": "wall-clock limit, seconds (default 30)"}},
            "required": ["command"]}}},
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a text file of the repository.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string", "description": "relative to the repository's root"}}, "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "write_file", "description": "Write (create or replace) a text file of the repository.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string", "description": "relative to the repository's root"},
            "content": {"type": "string", "description": "the whole new content"}},
            "required": ["path", "content"]}}},
    {"type": "function", "function": {
        "name": "submit", "description": "Submit the repository as it is now for grading; ends the episode.",
        "parameters": {"type": "object", "properties": {}}}},
]
OUTPUT_CHARS = 8000  # of a command's stdout and stderr shown to the policy


class Session:
    """One open /sessions workspace."""

    def __init__(self, client: Client, session_id: str) -> None:
        self.client, self.id = client, session_id

    @classmethod
    def create(cls, client: Client, repo_id: str | None = None, archive: bytes | None = None, ttl_s: float = 600.0,
               limits: dict[str, Any] | None = None) -> Session:
        repo = {"id": repo_id} if archive is None else {"archive_b64": base64.b64encode(archive).decode()}
        body = client.call("POST", "/sessions", json={"repo": repo, "ttl_s": ttl_s, "limits": limits or {}},
                           ok=(201,))
        return cls(client, _field(body, "session_id"))

    def exec(self, command: str, timeout_s: float = 30.0, stdin: str | None = None) -> dict[str, Any]:
        body = {"command": command, "timeout_s": timeout_s, **({"stdin": stdin} if stdin is not None else {})}
        return self.client.call("POST", f"/sessions/{self.id}/exec", json=body)

    def read_file(self, path: str) -> str:
        return _field(self.client.call("GET", f"/sessions/{self.id}/files", params={"path": path}), "content")

    def write_file(self, path: str, content: str) -> None:
        self.client.call("PUT", f"/sessions/{self.id}/files", json={"path": path, "content": content})

    def diff(self) -> str:
        return _field(self.client.call("GET", f"/sessions/{self.id}/diff"), "patch")

    def fork(self, n: int = 1) -> list[Session]:
        body = self.client.call("POST", f"/sessions/{self.id}/fork", json={"n": n}, ok=(201,))
        return [Session(self.client, sid) for sid in _field(body, "session_ids")]

    def reward(self, tests: dict[str, Any], profile: str = "binary") -> dict[str, Any]:
        return self.client.item_result(self.client.call("POST", f"/sessions/{self.id}/reward",
                                                        json={"tests": tests, "profile": profile}))

    def close(self) -> None:
        """DELETE; a session that already ended is fine."""
        try:
            self.client.call("DELETE", f"/sessions/{self.id}")
        except HTTPStatusError as e:
            if e.status not in (404, 410):
                raise


def run_tool(session: Session, name: str, arguments: dict[str, Any] | str) -> str:
    """What a tool call of TOOLS shows the policy (submit is the caller's: it ends the episode)."""
    args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
    try:
        if name == "bash":
            out = session.exec(str(args.get("command", "")), float(args.get("timeout_s", 30.0)))
            return format_exec(out)
        if name == "read_file":
            return session.read_file(str(args.get("path", "")))
        if name == "write_file":
            session.write_file(str(args.get("path", "")), str(args.get("content", "")))
            return f"wrote {args.get('path')}"
    except HTTPStatusError as e:
        if e.status in (404, 410) and name == "bash":
            raise
        if 400 <= e.status < 500 and e.status not in (404, 410, 429):
            return f"error: {_detail(e.body)}"  # the policy's mistake (a bad path, a binary file): it may retry
        raise
    return f"error: unknown tool {name!r}; the tools are {', '.join(t['function']['name'] for t in TOOLS)}"


def format_exec(out: dict[str, Any]) -> str:
    text = f"exit code: {out.get('exit_code')} ({out.get('status')})\n"
    if out.get("stdout"):
        text += f"stdout:\n{str(out['stdout'])[-OUTPUT_CHARS:]}\n"
    if out.get("stderr"):
        text += f"stderr:\n{str(out['stderr'])[-OUTPUT_CHARS:]}\n"
    if out.get("truncated"):
        text += "(output truncated)\n"
    return text


class RepoEnv:
    """A gym-style environment over one session: reset() -> observation, step(action) -> (observation, reward,
    done, info), reward() -> the session's grade (None on an infrastructure fault), close().

    action: {"tool": name, "arguments": {...}} with a name of TOOLS, or a plain string (a bash command). The reward
    is 0.0 on every step but submit (or the last allowed step), where it is the session's grade.
    `base`: a session to fork on every reset (a warm snapshot, e.g. after installing, shared by a GRPO group)."""

    def __init__(self, repo_id: str, tests: dict[str, Any], *, client: Client | None = None,
                 base: Session | None = None, profile: str = "binary", ttl_s: float = 600.0,
                 limits: dict[str, Any] | None = None, max_steps: int = 30, task: str = "") -> None:
        self.client = client or Client()
        self.repo_id, self.tests, self.base, self.profile = repo_id, tests, base, profile
        self.ttl_s, self.limits, self.max_steps, self.task = ttl_s, limits, max_steps, task
        self.session: Session | None = None
        self.steps = 0
        self.result: dict[str, Any] | None = None

    def reset(self) -> str:
        self.close()
        self.session = (self.base.fork(1)[0] if self.base is not None else
                        Session.create(self.client, self.repo_id, ttl_s=self.ttl_s, limits=self.limits))
        self.steps, self.result = 0, None
        return (self.task + "\n" if self.task else "") + "The repository is checked out in the working directory."

    def step(self, action: dict[str, Any] | str) -> tuple[str, float, bool, dict[str, Any]]:
        if self.session is None:
            raise RuntimeError("call reset() first")
        if self.result is not None:
            raise RuntimeError("the episode is over: call reset()")
        name, args = ("bash", {"command": action}) if isinstance(action, str) else (
            str(action.get("tool", "")), action.get("arguments") or {})
        self.steps += 1
        if name == "submit" or self.steps >= self.max_steps:
            obs = "" if name == "submit" else run_tool(self.session, name, args)
            reward = self.reward()
            assert self.result is not None  # reward() recorded it
            return obs + f"submitted: {self.result.get('status')}", reward if reward is not None else 0.0, True, {
                "result": self.result}
        return run_tool(self.session, name, args), 0.0, False, {}

    def reward(self) -> float | None:
        if self.session is None:
            raise RuntimeError("call reset() first")
        if self.result is None:
            self.result = self.session.reward(self.tests, self.profile)
        return self.result.get("reward")

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


def _field(body: Any, name: str) -> Any:
    if not isinstance(body, dict) or name not in body:
        raise BadResponse(f"no {name!r} in the answer: {str(body)[:200]}")
    return body[name]


def _detail(body: str) -> str:
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        return body[:500]
    if isinstance(detail, list):
        return "; ".join(str(d.get("msg", d)) if isinstance(d, dict) else str(d) for d in detail)[:500]
    return str(detail)[:500]
