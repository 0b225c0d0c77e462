"""The three values of the sandbox layer: what a job may use (Limits), what to run (Job), what happened (Result).

Every status a sandbox can report is listed in Status; only SANDBOX_ERROR is a fault of ours.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    OK = "ok"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    KILLED = "killed"
    SANDBOX_ERROR = "sandbox_error"


@dataclass(frozen=True)
class Limits:
    """Each limit has one meaning, enforced by the in-sandbox runner (rlimits, SIGKILL from outside)."""

    wall_s: float = 10.0  # wall clock of one process, or of one test case in a judged job
    total_s: float = 30.0  # wall clock of the whole job (all test cases)
    cpu_s: float = 10.0  # CPU seconds of one process (RLIMIT_CPU)
    memory_mb: int = 512  # address space of one process (RLIMIT_AS)
    output_bytes: int = 1 << 20  # cap on each of stdout and stderr; more ends the job as output_limit
    file_size_mb: int = 16  # largest file a job may write (RLIMIT_FSIZE)
    nofile: int = 64  # open files per process
    nproc: int = 64  # processes of the job's uid

    def to_wire(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Job:
    """One request to the runner.

    op "run": ``program`` is ``{"code": python source}`` (run as __main__ in a forked interpreter) or
    ``{"argv": [...]}`` (exec), with ``stdin`` and optional ``files`` written to the working directory.
    op "judge": ``candidate`` = ``{"code", "module"}`` and ``judge`` = the test spec (see inside/judge.py).
    op "lint": ``program`` = ``{"code": source, "language": "python" | "javascript" | "typescript", "roots":
    names the tests call | [] (a script) | None (unknown)}``; the result's stdout is the linter's JSON.
    op "measure": ``measure`` = programs, workloads and rounds (see inside/measure.py); the result's ``runs`` hold
    each run's CPU time and peak memory.
    op "repo": ``repo`` = snapshot, change and tests (see inside/repo_judge.py); the result's ``events`` hold the
    per-test verdicts.
    op "session": ``repo`` = snapshot, delta and command of an agent session (see inside/session_exec.py); the
    result's ``events`` hold the session's new delta.
    """

    op: str
    program: dict[str, Any] | None = None
    stdin: str = ""
    files: dict[str, Any] | None = None  # path -> text, or {"b64": ...} for bytes
    fetch_files: list[str] | None = None  # op "run": files to read back after the run (base64 in Result.files)
    env: dict[str, str] | None = None
    candidate: dict[str, Any] | None = None
    judge: dict[str, Any] | None = None
    limits: Limits = field(default_factory=Limits)
    measure: dict[str, Any] | None = None
    repo: dict[str, Any] | None = None
    account: bool = False  # op "run" / "judge": the result's usage counts orphans and files (inside/measure.py)

    def to_wire(self) -> dict[str, Any]:
        job: dict[str, Any] = {"limits": self.limits.to_wire()}
        if self.op == "lint":
            job["code"] = (self.program or {}).get("code", "")
            job["language"] = (self.program or {}).get("language", "python")
            job["roots"] = (self.program or {}).get("roots")  # the names the tests call (lint.py)
        elif self.op == "measure":
            job.update(self.measure or {})
        elif self.op in ("repo", "session"):
            job.update(self.repo or {})
        else:
            for key in ("program", "stdin", "files", "fetch_files", "env", "candidate", "judge"):
                value = getattr(self, key)
                if value:
                    job[key] = value
            if self.account:
                job["account"] = True
        return {"op": self.op, "job": job}

    def deadline_s(self) -> float:
        """How long the host waits for the runner before declaring the sandbox broken."""
        own = self.limits.total_s if self.op in ("judge", "measure", "repo", "session") else self.limits.wall_s
        return own + 10.0


@dataclass
class Result:
    status: Status
    exit_code: int | None = None
    signal: int | None = None
    wall_ms: float = 0.0
    cpu_ms: float = 0.0
    peak_memory_kb: int = 0
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    error: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)  # judge jobs: load report and test cases
    runs: list[dict[str, Any]] = field(default_factory=list)  # measure jobs: one record per run
    spec_error: str | None = None  # judge jobs: the test specification itself is broken
    files: dict[str, str] = field(default_factory=dict)  # fetched files, base64
    usage: dict[str, Any] | None = None  # accounted jobs: {"cpu_ms", "peak_memory_kb", "complete"} (Job.account)
    sandbox_id: str | None = None

    @property
    def truncated(self) -> bool:
        return self.stdout_truncated or self.stderr_truncated

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> Result:
        try:
            status = Status(raw.get("status", "sandbox_error"))
        except ValueError:
            status = Status.SANDBOX_ERROR
        return cls(
            status=status,
            exit_code=raw.get("exit_code"),
            signal=raw.get("signal"),
            wall_ms=float(raw.get("wall_ms") or 0.0),
            cpu_ms=float(raw.get("cpu_ms") or 0.0),
            peak_memory_kb=int(raw.get("peak_memory_kb") or 0),
            stdout=raw.get("stdout") or "",
            stderr=raw.get("stderr") or "",
            stdout_truncated=bool(raw.get("stdout_truncated")),
            stderr_truncated=bool(raw.get("stderr_truncated")),
            error=raw.get("error"),
            events=list(raw.get("events") or []),
            runs=list(raw.get("runs") or []),
            spec_error=raw.get("spec_error"),
            files=dict(raw.get("files") or {}),
            usage=_usage(raw.get("usage")),
        )

    @classmethod
    def infra(cls, message: str) -> Result:
        return cls(status=Status.SANDBOX_ERROR, error=message)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = str(self.status)
        return d


def _usage(raw: Any) -> dict[str, Any] | None:
    """The runner's accounting of a job (never the program's word: the runner computes it from wait4 and statvfs)."""
    if not isinstance(raw, dict):
        return None
    return {"cpu_ms": float(raw.get("cpu_ms") or 0.0), "peak_memory_kb": int(raw.get("peak_memory_kb") or 0),
            "complete": raw.get("complete") is True}
