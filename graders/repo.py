"""Repo tasks: a change to a repository graded by the repository's own tests (the SWE-bench verdict).

The change is applied in a fresh sandbox to the stored snapshot, the trusted test files are restored over it, and
the listed tests run under rewardbox's own pytest reporter (sandboxes/inside/repo_judge.py, repo_reporter.py).
This module turns that job's verdicts into an Outcome:
- one verdict per listed node id (FAIL_TO_PASS first, then PASS_TO_PASS); a test not collected, deselected,
  skipped or never reported is failed;
- `passed` only when every listed test passed; `patch_error` when the change does not apply (the program's
  failure: executability 0, the patch tool's message);
- executability 1 when the patched package imports and the listed tests' files collect; never for a run whose
  reporter found the harness tampered with (every test failed, flag `harness_patch`).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Awaitable, Callable
from typing import Any

from sandboxes import Limits, RepoJob, Result, Status
from sandboxes.builds import JobRunner
from sandboxes.targets import DEFAULT_TARGET, SandboxTarget

from .flags import python_flags
from .outcome import Outcome, Verdict
from .verdicts import execution

GIT_PATHS = re.compile(r"^(?:--- (?:a/|/dev/null)|\+\+\+ (?:b/|/dev/null)|diff --git a/)", re.MULTILINE)
PLAIN_PATHS = re.compile(r"^(?:---|\+\+\+) (?!/dev/null)\S", re.MULTILINE)
RESOURCE_STATUSES = ("timeout", "memory_limit", "output_limit")

Fetch = Callable[[str], Awaitable[bytes | None]]  # repo id -> the normalized snapshot, or None when not stored


def strip_level(patch: str) -> int:
    """-p1 for git-style paths (a/, b/), -p0 for diffs whose headers name the paths plainly."""
    if GIT_PATHS.search(patch) or not PLAIN_PATHS.search(patch):
        return 1
    return 0


class RepoGrader:
    """Grades repo items on a pool. Each sandbox keeps the snapshots it was sent (sandboxes/inside/
    repo_workspace.py): a snapshot travels with the job until every sandbox of the pool holds it, then by id only;
    a sandbox that lacks it anyway (replaced meanwhile) answers repo_missing and gets it with a second try."""

    def __init__(self, pool: JobRunner, fetch: Fetch, target: SandboxTarget = DEFAULT_TARGET) -> None:
        self.pool, self.fetch, self.target = pool, fetch, target
        self.holders: dict[str, set[str]] = {}  # repo id -> sandboxes known to hold it

    async def grade(self, repo_id: str | None, patch: str | None, files: dict[str, str] | None, tests: Any,
                    limits: Limits) -> Outcome:
        """tests: service.repos.models.RepoTests. repo_id None: the repository in the target's image
        (target.repo_path), which each sandbox reads once itself."""
        job: dict[str, Any] = {"test_files": tests.test_files, "tests": tests.listed(), "args": tests.pytest_args(),
                               "framework": tests.framework}
        if self.target.foreign or self.target.python != DEFAULT_TARGET.python:
            job["python"] = self.target.python  # not forked from our zygote: the task's interpreter, exec'd
        if files is not None:
            job["files"] = files
        else:
            job["patch"], job["strip"] = patch or "", strip_level(patch or "")
        if repo_id is None:
            return await self._grade_in_image(job, tests, limits)
        holders = self.holders.setdefault(repo_id, set())
        sent = len(holders) < self.pool.size
        result = await self._run(job, repo_id, limits, sent)
        if isinstance(result, Result) and _missing(result):
            holders.discard(result.sandbox_id)
            result, sent = await self._run(job, repo_id, limits, True), True
        if isinstance(result, Outcome):
            return result
        if _python_missing(result):
            return _python_outcome(job["python"])
        if result.status != Status.SANDBOX_ERROR and result.sandbox_id:
            holders.add(result.sandbox_id)
        outcome = outcome_from(result, tests.fail_to_pass, tests.pass_to_pass)
        outcome.details.setdefault("repo", {}).update(snapshot_sent=sent, sandbox=result.sandbox_id)
        return outcome

    async def _grade_in_image(self, job: dict, tests: Any, limits: Limits) -> Outcome:
        path = self.target.repo_path
        if not path:
            return Outcome("invalid_input", message="repo: required unless environment.repo_path names the "
                                                    "repository in the image")
        repo = {"id": f"path:{self.target.key}:{path}", "path": path}
        in_image = await self.pool.run(RepoJob(repo={**job, "repo": repo}, limits=limits))
        if _python_missing(in_image):
            return _python_outcome(job["python"])
        outcome = outcome_from(in_image, tests.fail_to_pass, tests.pass_to_pass)
        outcome.details.setdefault("repo", {}).update(snapshot_sent=False, sandbox=in_image.sandbox_id)
        return outcome

    async def _run(self, job: dict, repo_id: str, limits: Limits, with_data: bool) -> Result | Outcome:
        repo: dict[str, str] = {"id": repo_id}
        if with_data:
            data = await self.fetch(repo_id)
            if data is None:
                return Outcome("invalid_input", message=f"repo.id: repository {repo_id} is no longer stored "
                                                        "(evicted): upload it again with POST /repos")
            repo["archive_b64"] = base64.b64encode(data).decode()
        return await self.pool.run(RepoJob(repo={**job, "repo": repo}, limits=limits))


def _python_missing(result: Result) -> bool:
    return result.status == Status.OK and any(e.get("event") == "python_missing" for e in result.events)


def _python_outcome(python: str) -> Outcome:
    return Outcome("invalid_input", message=f"environment.python: {python!r} is not an executable file in the "
                                            "image")


def _missing(result: Result) -> bool:
    return result.status == Status.OK and any(e.get("event") == "repo_missing" for e in result.events)


def outcome_from(result: Result, fail_to_pass: list[str], pass_to_pass: list[str]) -> Outcome:
    if result.status == Status.SANDBOX_ERROR:
        return Outcome("infra_error", message=result.error or "sandbox error")
    event = next((e for e in result.events if e.get("event") == "repo"), None)
    if event is None:
        if result.status in (Status.MEMORY_LIMIT, Status.TIMEOUT):  # the whole sandbox went down with the job
            return execution(Outcome(str(result.status), message=result.error or ""), result)
        return Outcome("infra_error", message=result.error or "the repo job gave no verdict")
    listed = list(dict.fromkeys(fail_to_pass + pass_to_pass))
    patch = event.get("patch") or {}
    details: dict[str, Any] = {
        "patch": {"applied": bool(patch.get("ok")), "message": str(patch.get("message", ""))[:2000]},
        **{k: event.get(k) for k in ("changed", "deleted", "restored", "edited_tests", "collected", "collect_errors",
                                     "timings") if k in event}}
    if not patch.get("ok"):
        verdicts = [Verdict(n, False, "not_run", "the change does not apply") for n in listed]
        outcome = Outcome("patch_error", verdicts=verdicts, message=details["patch"]["message"])
        outcome.details["repo"] = details
        return execution(outcome, result)
    by_name = {v.get("name"): v for v in event.get("verdicts") or [] if isinstance(v, dict)}
    verdicts = []
    for name in listed:
        v = by_name.get(name) or {"passed": False, "status": "not_run", "message": "no verdict"}
        verdicts.append(Verdict(name, v.get("passed") is True, str(v.get("status")), str(v.get("message", ""))))
    tampered = event.get("tampered")
    flags = sorted(added_flags(event.get("changed_sources")) | ({"harness_patch"} if tampered else set())
                   | ({"tests_or_config_edited"} if event.get("edited_tests") else set()))
    outcome = Outcome("failed", executable=bool(event.get("executable")) and not tampered, verdicts=verdicts,
                      flags=flags)
    passed = {v.name for v in verdicts if v.passed}
    details["fail_to_pass"] = {"passed": sum(n in passed for n in fail_to_pass), "total": len(fail_to_pass)}
    details["pass_to_pass"] = {"passed": sum(n in passed for n in pass_to_pass), "total": len(pass_to_pass)}
    if tampered:
        details["tampering"] = tampered
    outcome.details["repo"] = details
    statuses = {v.status for v in verdicts if not v.passed}
    if outcome.all_passed:
        outcome.status = "passed"
    elif str(result.status) in RESOURCE_STATUSES:
        outcome.status = str(result.status)
    elif "timeout" in statuses:
        outcome.status = "timeout"
    elif not outcome.executable and not tampered:
        outcome.status = "runtime_error"
    outcome.message = _message(event, tampered, outcome)
    return execution(outcome, result)


def _message(event: dict, tampered: str | None, outcome: Outcome) -> str:
    if tampered:
        return f"harness tampering detected: {tampered}"
    if event.get("crashed"):
        return f"pytest crashed: {event['crashed']}"
    errors = event.get("collect_errors") or []
    if errors:
        return f"collection failed: {errors[0].get('nodeid')}: {str(errors[0].get('message', ''))[-500:]}"
    if outcome.status == "runtime_error":
        return f"the test process ended early (exit code {event.get('exit_code')})"
    failed = [v for v in outcome.verdicts if not v.passed]
    return f"{len(failed)} of {len(outcome.verdicts)} listed tests failed" if failed else ""


def added_flags(pairs: object) -> set[str]:
    """The suspicious constructs a change added: those of its changed statements minus those they had before."""
    found: set[str] = set()
    for pair in pairs if isinstance(pairs, list) else []:
        if isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair):
            found |= set(python_flags(pair[1])) - set(python_flags(pair[0]))
    return found
