"""A TRL `environment_factory` environment over rewardbox agent sessions (TRL >= 1.16, GRPOTrainer), HTTP only.

    from trainer.adapters.trl_env import session_environment
    trainer = GRPOTrainer(model=..., train_dataset=ds, environment_factory=session_environment(url=URL))

Each dataset row carries `repo_id` (a snapshot stored by POST /repos) and `tests` (a repo test spec: a dict or its
JSON string, `{"kind": "repo", "fail_to_pass": [...], ...}`), optionally `task` (shown to the policy). TRL makes
one environment per rollout and calls `reset(**row)`: that opens a session (a fork of the row's warm base session
when `fork=True`: the rollouts of one prompt then start from one snapshot, the GRPO primitive). The public methods
`bash`, `read_file` and `write_file` are the policy's tools; `get_reward` grades the session's diff (the
environment owns the reward, so `reward_funcs` may be omitted) and closes the session. None when the service could
not grade it (TRL masks the row), never a made-up 0.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from rewardbox import Client, HTTPStatusError, RewardboxError
from rewardbox.sessions import Session, format_exec

log = logging.getLogger("rewardbox.trl_env")


class RewardboxRepoEnv:
    """One rollout's session. Tool methods answer text, the policy's mistakes included (a bad path is told, not
    raised), so that an episode goes on."""

    _bases: dict[str, Session] = {}  # repo id -> warm base session, shared by the environments of this process
    _lock = threading.Lock()

    def __init__(self, client: Client, *, profile: str = "binary", ttl_s: float = 1800.0,
                 limits: dict[str, Any] | None = None, fork: bool = True) -> None:
        self._client, self._profile, self._ttl_s, self._limits, self._fork = client, profile, ttl_s, limits, fork
        self._session: Session | None = None
        self._tests: dict[str, Any] = {}

    def reset(self, **row: Any) -> str | None:
        self._close()
        repo_id = str(row["repo_id"])
        tests = row.get("tests")
        self._tests = json.loads(tests) if isinstance(tests, str) else dict(tests or {})
        self._session = self._base(repo_id).fork(1)[0] if self._fork else Session.create(
            self._client, repo_id, ttl_s=self._ttl_s, limits=self._limits)
        task = row.get("task")
        return f"{task}\n" if task else None

    def _base(self, repo_id: str) -> Session:
        with self._lock:
            base = self._bases.get(repo_id)
            if base is None:
                base = self._bases[repo_id] = Session.create(self._client, repo_id, ttl_s=self._ttl_s,
                                                             limits=self._limits)
            return base

    def bash(self, command: str) -> str:
        """Run a shell command in the repository's root directory. Files persist between calls.

        Args:
            command: The shell command line to run.

        Returns:
            The exit code, stdout and stderr of the command.
        """
        return format_exec(self._live().exec(command))

    def read_file(self, path: str) -> str:
        """Read a text file of the repository.

        Args:
            path: The file's path, relative to the repository's root.

        Returns:
            The file's content.
        """
        try:
            return self._live().read_file(path)
        except HTTPStatusError as e:
            return _told(e)

    def write_file(self, path: str, content: str) -> str:
        """Write (create or replace) a text file of the repository.

        Args:
            path: The file's path, relative to the repository's root.
            content: The whole new content of the file.

        Returns:
            A confirmation.
        """
        try:
            self._live().write_file(path, content)
        except HTTPStatusError as e:
            return _told(e)
        return f"wrote {path}"

    def get_reward(self) -> float | None:
        if self._session is None:
            return None
        try:
            result = self._session.reward(self._tests, self._profile)
        except RewardboxError as e:
            log.warning("session reward failed: %s", e)
            return None
        finally:
            self._close()
        return result.get("reward")

    def _live(self) -> Session:
        if self._session is None:
            raise RuntimeError("reset() was not called")
        return self._session

    def _close(self) -> None:
        if self._session is not None:
            try:
                self._session.close()
            except RewardboxError as e:
                log.warning("closing a session failed: %s", e)
            self._session = None


def _told(e: HTTPStatusError) -> str:
    if e.status in (404, 415, 422):
        return f"error: {e.body[:500]}"
    raise e


def session_environment(url: str | None = None, token: str | None = None, **options: Any
                        ) -> Callable[[], RewardboxRepoEnv]:
    """The `environment_factory`: one client shared by every environment it makes."""
    client = Client(url, token)
    return lambda: RewardboxRepoEnv(client, **options)
