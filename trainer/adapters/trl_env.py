"""A TRL `environment_factory` environment over rewardbox agent sessions (TRL >= 1.16, GRPOTrainer), HTTP only.

    from rewardbox.adapters.trl_env import session_environment
    trainer = GRPOTrainer(model=..., train_dataset=ds, environment_factory=session_environment(url=URL))

Each dataset row carries `repo_id` (a snapshot stored by POST /repos) and `tests` (a repo test spec: a dict or its
JSON string, `{"kind": "repo", "fail_to_pass": [...], ...}`), optionally `task` (shown to the policy). TRL makes
one environment per rollout and calls `reset(**row)`: that opens a session (a fork of the row's warm base session
when `fork=True`: the rollouts of one prompt then start from one snapshot, the GRPO primitive). The public methods
`bash`, `read_file` and `write_file` are the policy's tools; `get_reward` grades the session's diff (the
environment owns the reward, so `reward_funcs` may be omitted) and closes the session.

No grade is None, which TRL masks (advantage 0): the service could not grade the session, or could not be reached
while the episode ran (opening the session, 429 past the client's retries, a 5xx, a session ended under it), so
that what the policy saw was not its own doing; never a made-up 0. The policy's own mistakes (a bad path) are told
as text and the episode goes on.

The warm base sessions belong to the factory (its client, its URL), one per repository, re-opened when one ended
(TTL); `factory.close()` closes them, and so does the interpreter's exit.
"""

from __future__ import annotations

import json
import logging
import threading
import weakref
from typing import Any

from rewardbox import Client, HTTPStatusError, RewardboxError
from rewardbox.sessions import Session, format_exec

log = logging.getLogger("rewardbox.trl_env")


class WarmBases:
    """One warm base session per repository on one client, shared by the environments of one factory."""

    def __init__(self, client: Client, ttl_s: float, limits: dict[str, Any] | None) -> None:
        self.client, self.ttl_s, self.limits = client, ttl_s, limits
        self.sessions: dict[str, Session] = {}
        self.lock = threading.Lock()
        # at the latest when the interpreter exits; then one try each (a service already gone must not hold the exit)
        weakref.finalize(self, _close_all, self.sessions, self.lock, client, 0)

    def fork(self, repo_id: str) -> Session:
        """A fork of the repository's base; a base that ended (TTL, a restarted worker) is opened again once."""
        for attempt in (0, 1):
            with self.lock:
                base = self.sessions.get(repo_id)
                if base is None:
                    base = self.sessions[repo_id] = Session.create(self.client, repo_id, ttl_s=self.ttl_s,
                                                                   limits=self.limits)
            try:
                return base.fork(1)[0]
            except HTTPStatusError as e:
                if e.status not in (404, 410) or attempt:
                    raise
                with self.lock:
                    if self.sessions.get(repo_id) is base:
                        del self.sessions[repo_id]
        raise AssertionError("unreachable")

    def close(self) -> None:
        _close_all(self.sessions, self.lock, self.client, None)


def _close_all(sessions: dict[str, Session], lock: threading.Lock, client: Client, retries: int | None) -> None:
    with lock:
        bases = list(sessions.values())
        sessions.clear()
    if retries is not None and bases:
        client.retries = retries
    for base in bases:
        try:
            base.close()
        except RewardboxError as e:  # its TTL ends it anyway
            log.warning("closing a base session failed: %s", e)


class RewardboxRepoEnv:
    """One rollout's session. Tool methods answer text, the policy's mistakes included (a bad path is told, not
    raised), so that an episode goes on."""

    def __init__(self, client: Client, *, profile: str = "binary", ttl_s: float = 1800.0,
                 limits: dict[str, Any] | None = None, fork: bool = True, bases: WarmBases | None = None) -> None:
        self._client, self._profile, self._ttl_s, self._limits, self._fork = client, profile, ttl_s, limits, fork
        self._bases = bases or WarmBases(client, ttl_s, limits)
        self._session: Session | None = None
        self._tests: dict[str, Any] = {}
        self._fault: str | None = None

    def reset(self, **row: Any) -> str | None:
        self._close()
        self._fault = None
        repo_id = str(row["repo_id"])
        tests = row.get("tests")
        self._tests = json.loads(tests) if isinstance(tests, str) else dict(tests or {})
        try:
            self._session = self._bases.fork(repo_id) if self._fork else Session.create(
                self._client, repo_id, ttl_s=self._ttl_s, limits=self._limits)
        except RewardboxError as e:  # the rollout goes on, told; get_reward gives None
            self._faulted(e)
        task = row.get("task")
        return f"{task}\n" if task else None

    def bash(self, command: str) -> str:
        """Run a shell command in the repository's root directory. Files persist between calls.

        Args:
            command: The shell command line to run.

        Returns:
            The exit code, stdout and stderr of the command.
        """
        try:
            return format_exec(self._live().exec(command))
        except RewardboxError as e:
            return self._told(e, (422,))  # 404 here is the session, not a file: a fault

    def read_file(self, path: str) -> str:
        """Read a text file of the repository.

        Args:
            path: The file's path, relative to the repository's root.

        Returns:
            The file's content.
        """
        try:
            return self._live().read_file(path)
        except RewardboxError as e:
            return self._told(e)

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
        except RewardboxError as e:
            return self._told(e)
        return f"wrote {path}"

    def get_reward(self) -> float | None:
        if self._fault is not None:
            log.warning("no grade for this rollout (TRL masks it): %s", self._fault)
            self._close()
            return None
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
            if self._fault is not None:
                raise RewardboxError(f"no session: {self._fault}")
            raise RuntimeError("reset() was not called")
        return self._session

    def _faulted(self, e: RewardboxError) -> None:
        log.warning("rewardbox session call failed (this rollout will not be graded): %s", e)
        if self._fault is None:
            self._fault = str(e)[:1000]

    def _told(self, e: RewardboxError, told: tuple[int, ...] = (404, 415, 422)) -> str:
        """The policy's mistake as text; a fault of the service is recorded (no grade) and raised, which TRL shows
        the policy as the tool's error."""
        if isinstance(e, HTTPStatusError) and e.status in told:
            return f"error: {e.body[:500]}"
        self._faulted(e)
        raise e

    def _close(self) -> None:
        if self._session is not None:
            try:
                self._session.close()
            except RewardboxError as e:
                log.warning("closing a session failed: %s", e)
            self._session = None


class SessionEnvironments:
    """The `environment_factory`: TRL calls it for each environment it pools. One client and one set of warm
    bases, its own: another factory (another URL) never shares them. `close()` closes the bases."""

    def __init__(self, client: Client, **options: Any) -> None:
        self.client, self.options = client, options
        self.bases = WarmBases(client, float(options.get("ttl_s", 1800.0)), options.get("limits"))

    def __call__(self) -> RewardboxRepoEnv:
        return RewardboxRepoEnv(self.client, bases=self.bases, **self.options)

    def close(self) -> None:
        self.bases.close()


def session_environment(url: str | None = None, token: str | None = None, **options: Any) -> SessionEnvironments:
    """The `environment_factory` (options: profile, ttl_s, limits, fork) over a client of its own."""
    return SessionEnvironments(Client(url, token), **options)
