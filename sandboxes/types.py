"""The values of the sandbox layer: what a job may use (Limits), what to run (one Job class per op), what happened
(Result).

Every status a sandbox can report is listed in Status; only SANDBOX_ERROR is a fault of ours.

Jobs
----
One frozen class per op of the in-sandbox runner, each with only the fields its op reads, so a job cannot carry
another op's fields: RunJob, CasesJob, JudgeJob, LintJob, MeasureJob, RepoJob, SessionJob. ``to_wire()`` is the request
the runner reads (sandboxes/inside/runner.py, Runner.handle); ``to_dict()`` / ``job_from_dict()`` the lossless
form that travels on distributed mode's queue (service/distributed/queue.py).

``Job`` is their base class. Calling it, ``Job("run", program=..., stdin=...)``, is the compatibility path of the
former single Job class: it builds the typed job of that op and refuses fields the op does not have.

Reply
-----
The runner answers a job with one JSON record; ``Result.from_wire`` decodes it. Its keys, the runner's
REPLY_KEYS (tests/test_protocol_units.py checks that the two sides list the same keys):

  status            str    one of Status. Set by the runner for every job: how the job ended (Proc._classify,
                           a judge's or measurement's verdict, or sandbox_error for a fault of ours).
  exit_code         int?   the process's exit code; null when it was killed or never started. Runner (wait4).
  signal            int?   the signal that ended the process, if any. Runner (wait4).
  wall_ms           float  wall clock of the process (run, lint) or of the whole job (judge). Runner.
  cpu_ms            float  CPU time of the process, summed over a judge job's candidate processes. Kernel (wait4).
  peak_memory_kb    int    peak resident memory (the largest candidate process of a judge job). Kernel (wait4).
  stdout, stderr    str    the captured output, capped at Limits.output_bytes each (a lint job: the linter's
                           JSON report on stdout). Runner, from pipes.
  stdout_truncated, bool   the cap cut that stream (the job then ends as output_limit). Runner.
  stderr_truncated
  error             str?   why the job failed, in one line, when the runner knows (a spawn failure, a judge that
                           died, a fault of ours). Never the program's own text.
  events            list   judge jobs: the judge's load report and one record per test case (inside/judge.py);
                           repo and session jobs: one record (inside/repo_judge.py, inside/session_exec.py).
  runs              list   measure jobs: one record per measured run, with its CPU time and peak memory
                           (inside/measure.py).
  spec_error        str?   judge and measure jobs: the test specification itself is broken (not the program).
  files             dict   run jobs with fetch_files: path -> base64 content of each file read back.
  usage             dict?  accounted jobs (account=True): {"cpu_ms", "peak_memory_kb", "complete"} of everything
                           the job's processes spent, orphans and written files included (inside/measure.py).
  cases             list   cases jobs: one record per io case, with the keys above from status to error
                           (inside/cases.py); the job's own cpu_ms is their sum (plus a compile done once for all
                           of them), peak_memory_kb their largest.
  trace             str?   a fault of ours: the runner's stack trace. Not part of the Result: the pool logs it.
  timings           dict   judge jobs: milestones of the job in ms (candidate spawned, loaded, judge done); cases
                           jobs: {"compiled_once": 0 | 1, "compile_cpu_ms", "locked_zygote": cases started by
                           a locked case zygote} (which path ran, inside/cases.py, inside/locked_cases.py).
  files_kb          int    judge jobs: peak KiB the job wrote to its tmpfs (read inside by measure.py); not decoded.
  processes         list   judge jobs: how each candidate process ended; carried for diagnostics, not decoded.

The frame also carries ``id``, the request it answers (sandboxes/connection.py checks it; not a reply key).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, ClassVar


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


# ------------------------------------------------------------------------------------------------------- jobs


class _CompatibleCall(type):
    """``Job(op, **fields)`` builds the typed job of that op (see job_of); the typed classes construct normally."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is Job:
            return job_of(*args, **kwargs)
        return super().__call__(*args, **kwargs)


class Job(metaclass=_CompatibleCall):
    """One request to the runner: the base of the typed jobs below. ``op`` names the runner's operation;
    ``whole_job_bounded`` says whether the job's own time is its limits' total_s (several processes or test cases)
    or wall_s (one process)."""

    op: ClassVar[str]
    whole_job_bounded: ClassVar[bool] = True
    __dataclass_fields__: ClassVar[dict[str, Any]]  # every job is a dataclass (asdict, replace)
    limits: Limits

    def job_fields(self) -> dict[str, Any]:
        """What the runner reads besides the limits (the body of to_wire)."""
        raise NotImplementedError

    def to_wire(self) -> dict[str, Any]:
        return {"op": self.op, "job": {"limits": self.limits.to_wire(), **self.job_fields()}}

    def to_dict(self) -> dict[str, Any]:
        """The job, losslessly, as JSON-ready data (job_from_dict reads it back)."""
        return {"op": self.op, **asdict(self)}

    def deadline_s(self) -> float:
        """How long the host waits for the runner before declaring the sandbox broken."""
        return (self.limits.total_s if self.whole_job_bounded else self.limits.wall_s) + 10.0


@dataclass(frozen=True, kw_only=True)
class RunJob(Job):
    """Run one program: ``program`` is ``{"code": python source}`` (run as __main__ in a forked interpreter,
    optionally with a "filename") or ``{"argv": [...]}`` (exec), with ``stdin`` and ``files`` written to the
    working directory. ``fetch_files`` are read back after the run (base64 in Result.files); ``account`` adds
    Result.usage (inside/measure.py)."""

    op: ClassVar[str] = "run"
    whole_job_bounded: ClassVar[bool] = False
    program: dict[str, Any]
    stdin: str = ""
    files: dict[str, Any] | None = None  # path -> text, or {"b64": ...} for bytes
    fetch_files: list[str] | None = None
    env: dict[str, str] | None = None
    limits: Limits = field(default_factory=Limits)
    account: bool = False

    def job_fields(self) -> dict[str, Any]:
        body: dict[str, Any] = {k: v for k in ("program", "stdin", "files", "fetch_files", "env")
                                if (v := getattr(self, k))}
        return {**body, "account": True} if self.account else body


@dataclass(frozen=True, kw_only=True)
class CasesJob(Job):
    """Run one program once per io case, all in one job (inside/cases.py): ``program``, ``files`` and ``env`` as
    a RunJob's, ``stdins`` the input of each case (the expected outputs stay on the host, which compares). Each
    case has the limits of one run (wall_s, cpu_s, memory_mb, output caps); total_s bounds the whole job. The
    result's ``cases`` hold one run record per case; ``account`` adds Result.usage over all of them."""

    op: ClassVar[str] = "cases"
    program: dict[str, Any]
    stdins: list[str]
    files: dict[str, Any] | None = None
    env: dict[str, str] | None = None
    limits: Limits = field(default_factory=Limits)
    account: bool = False

    def job_fields(self) -> dict[str, Any]:
        body: dict[str, Any] = {"program": self.program, "stdins": list(self.stdins)}
        body.update({k: v for k in ("files", "env") if (v := getattr(self, k))})
        return {**body, "account": True} if self.account else body


@dataclass(frozen=True, kw_only=True)
class JudgeJob(Job):
    """Judge a candidate module: ``candidate`` = ``{"code", "module"}`` (or a "program" with its "files" for other
    languages), ``judge`` = the test spec (see inside/judge.py); the result's events hold the load report and the
    test cases. ``account`` adds Result.usage."""

    op: ClassVar[str] = "judge"
    candidate: dict[str, Any]
    judge: dict[str, Any]
    limits: Limits = field(default_factory=Limits)
    account: bool = False

    def job_fields(self) -> dict[str, Any]:
        body: dict[str, Any] = {k: v for k in ("candidate", "judge") if (v := getattr(self, k))}
        return {**body, "account": True} if self.account else body


@dataclass(frozen=True, kw_only=True)
class LintJob(Job):
    """Lint one program in ``language`` ("python", "javascript" or "typescript"); ``roots`` are the names the tests
    call, [] for a script, None when unknown (inside/lint.py). The result's stdout is the linter's JSON."""

    op: ClassVar[str] = "lint"
    whole_job_bounded: ClassVar[bool] = False
    code: str
    language: str = "python"
    roots: list[str] | None = None
    limits: Limits = field(default_factory=Limits)

    def job_fields(self) -> dict[str, Any]:
        return {"code": self.code, "language": self.language, "roots": self.roots}


@dataclass(frozen=True, kw_only=True)
class MeasureJob(Job):
    """Measure programs: ``measure`` = programs, workloads and rounds (see inside/measure.py); the result's runs
    hold each run's CPU time and peak memory."""

    op: ClassVar[str] = "measure"
    measure: dict[str, Any]
    limits: Limits = field(default_factory=Limits)

    def job_fields(self) -> dict[str, Any]:
        return dict(self.measure)


@dataclass(frozen=True, kw_only=True)
class RepoJob(Job):
    """Grade a change by a repository's own tests: ``repo`` = snapshot, change and tests (see
    inside/repo_judge.py); the result's events hold the per-test verdicts."""

    op: ClassVar[str] = "repo"
    repo: dict[str, Any]
    limits: Limits = field(default_factory=Limits)

    def job_fields(self) -> dict[str, Any]:
        return dict(self.repo)


@dataclass(frozen=True, kw_only=True)
class SessionJob(Job):
    """One command of an agent session: ``session`` = snapshot, delta and command (see inside/session_exec.py);
    the result's events hold the session's new delta."""

    op: ClassVar[str] = "session"
    session: dict[str, Any]
    limits: Limits = field(default_factory=Limits)

    def job_fields(self) -> dict[str, Any]:
        return dict(self.session)


JOB_TYPES: dict[str, type[Job]] = {t.op: t for t in (RunJob, CasesJob, JudgeJob, LintJob, MeasureJob, RepoJob,
                                                      SessionJob)}


def job_from_dict(raw: dict[str, Any]) -> Job:
    """The job that to_dict() wrote. Raises KeyError / TypeError / ValueError for anything else."""
    kind = JOB_TYPES[raw["op"]]
    values = {k: v for k, v in raw.items() if k != "op"}
    return kind(**{**values, "limits": Limits(**values.get("limits") or {})})


def job_of(op: str, **given: Any) -> Job:
    """The compatibility path: the former ``Job(op, program=..., ...)`` call, building the typed job of ``op``.
    A lint job's ``program`` is ``{"code", "language", "roots"}``; a session job's ``repo`` is its session.
    Fields that op does not have are refused (TypeError), as the typed classes refuse them."""
    if op not in JOB_TYPES:
        raise ValueError(f"unknown op {op!r}")
    if op == "lint" and "program" in given:
        lint = given.pop("program") or {}
        given.update(code=lint.get("code", ""), language=lint.get("language", "python"), roots=lint.get("roots"))
    elif op == "session" and "repo" in given:
        given["session"] = given.pop("repo") or {}
    return JOB_TYPES[op](**given)


# ------------------------------------------------------------------------------------------------------ reply


def _status(raw: Any) -> Status:
    try:
        return Status(raw if raw is not None else "sandbox_error")
    except ValueError:
        return Status.SANDBOX_ERROR


def _usage(raw: Any) -> dict[str, Any] | None:
    """The runner's accounting of a job (never the program's word: the runner computes it from wait4 and statvfs)."""
    if not isinstance(raw, dict):
        return None
    return {"cpu_ms": float(raw.get("cpu_ms") or 0.0), "peak_memory_kb": int(raw.get("peak_memory_kb") or 0),
            "complete": raw.get("complete") is True}


# How each decoded reply key becomes its Result field (the keys are documented in the module docstring).
DECODED: dict[str, Callable[[Any], Any]] = {
    "status": _status,
    "exit_code": lambda v: v,
    "signal": lambda v: v,
    "wall_ms": lambda v: float(v or 0.0),
    "cpu_ms": lambda v: float(v or 0.0),
    "peak_memory_kb": lambda v: int(v or 0),
    "stdout": lambda v: v or "",
    "stderr": lambda v: v or "",
    "stdout_truncated": bool,
    "stderr_truncated": bool,
    "error": lambda v: v,
    "events": lambda v: list(v or []),
    "runs": lambda v: list(v or []),
    "spec_error": lambda v: v,
    "files": lambda v: dict(v or {}),
    "usage": _usage,
    "cases": lambda v: list(v or []),
    "timings": lambda v: dict(v or {}),
}
NOT_DECODED = ("trace", "files_kb", "processes")  # read by the pool's log, or carried for diagnostics
REPLY_KEYS = frozenset(DECODED) | frozenset(NOT_DECODED)


@dataclass
class Result:
    """What happened to a job: the decoded reply (see Reply in the module docstring), plus the sandbox it ran in."""

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
    events: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    spec_error: str | None = None
    files: dict[str, str] = field(default_factory=dict)
    usage: dict[str, Any] | None = None
    cases: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, Any] = field(default_factory=dict)
    sandbox_id: str | None = None  # set by the pool, not by the runner

    @property
    def truncated(self) -> bool:
        return self.stdout_truncated or self.stderr_truncated

    @classmethod
    def from_wire(cls, raw: dict[str, Any]) -> Result:
        """The runner's reply (or a Result.to_dict() that travelled through Redis) as a Result; keys outside
        DECODED are ignored."""
        return cls(**{key: decode(raw.get(key)) for key, decode in DECODED.items()})

    @classmethod
    def infra(cls, message: str) -> Result:
        return cls(status=Status.SANDBOX_ERROR, error=message)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = str(self.status)
        return d

