"""Agent mode of the PPO demo (`python -m trainer.ppo --agent`): each completion is acted out in an agent
session before it is graded, so the multi-turn loop (create, fork, exec, files, reward) runs end to end in CI.

Each task becomes a tiny repository (an empty `solution.py` and a pytest file with one test per case); one base
session per task is opened once and forked for every rollout of its group (the GRPO primitive: n rollouts from one
state). The scripted policy then takes four actions in its fork: write the model's program to `solution.py`,
compile it, run the tests, submit. The reward is the session's (its diff graded as a repo item, the test file
restored), so a rollout that edits the tests gains nothing. Everything goes through HTTP (rewardbox.sessions).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rewardbox import Client, RewardboxError
from rewardbox.archive import repo_archive
from rewardbox.sessions import Session, run_tool
from trainer.tasks import Task

TEST_FILE = "tests/test_solution.py"
SCRIPT = (("bash", {"command": "python3 -m py_compile solution.py"}), ("bash", {"command": "python3 -m pytest -q"}))


def task_repo(task: Task) -> tuple[dict[str, bytes], dict[str, Any]]:
    """(files, repo tests) of a function task: one pytest test per case, calling the entry point."""
    spec = task.tests
    entry = spec["entry_point"]
    lines = [f"from solution import {entry}\n"]
    for i, case in enumerate(spec["cases"]):
        lines.append(f"\n\ndef test_case_{i}():\n    assert {entry}(*{case['args']!r}) == {case['expected']!r}\n")
    test_source = "".join(lines)
    tests = {"kind": "repo", "fail_to_pass": [f"{TEST_FILE}::test_case_{i}" for i in range(len(spec["cases"]))],
             "test_files": {TEST_FILE: test_source}}
    return {"solution.py": b"", TEST_FILE: test_source.encode()}, tests


class SessionGrader:
    """Grades a batch of (task, program) through agent sessions; one base session per task, forked per rollout."""

    def __init__(self, client: Client, workers: int = 8) -> None:
        self.client, self.workers = client, workers
        self._bases: dict[str, tuple[Session, dict[str, Any]]] = {}

    def _base(self, task: Task) -> tuple[Session, dict[str, Any]]:
        if task.prompt not in self._bases:
            files, tests = task_repo(task)
            base = Session.create(self.client, archive=repo_archive(files), ttl_s=3600)
            self._bases[task.prompt] = (base, tests)
        return self._bases[task.prompt]

    def grade(self, tasks: list[Task], programs: list[str]) -> list[dict[str, Any]]:
        for task in tasks:
            self._base(task)  # before the threads: one base per task
        with ThreadPoolExecutor(self.workers) as ex:
            return list(ex.map(self._episode, tasks, programs))

    def _episode(self, task: Task, program: str) -> dict[str, Any]:
        base, tests = self._bases[task.prompt]
        try:
            session = base.fork(1)[0]
        except RewardboxError as e:
            return _null(f"fork failed: {e}")
        try:
            run_tool(session, "write_file", {"path": "solution.py", "content": program})
            transcript = [run_tool(session, name, args) for name, args in SCRIPT]
            result = session.reward(tests, "binary")
            result.setdefault("details", {})["agent_transcript"] = [t[-500:] for t in transcript]
            return result
        except RewardboxError as e:
            return _null(str(e))
        finally:
            try:
                session.close()
            except RewardboxError:
                pass

    def close(self) -> None:
        for base, _ in self._bases.values():
            try:
                base.close()
            except RewardboxError:
                pass
        self._bases.clear()


def _null(message: str) -> dict[str, Any]:
    """A rollout the service could not grade: reward null (left out of the update), never a made-up zero."""
    return {"status": "infra_error", "reward": None, "components": {}, "message": message}
