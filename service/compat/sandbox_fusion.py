"""SandboxFusion-compatible `POST /run_code`, so that verl (`reward_model.sandbox_fusion.url`) and other
SandboxFusion clients work by changing a URL. Request and response follow SandboxFusion's `RunCodeRequest` /
`RunCodeResponse`; what its users ask for and it lacks (memory-limit status, output truncation, CPU time, peak
memory) comes in an extra `rewardbox` field that old clients ignore.

Statuses: `Success` when the program exits 0 within limits; `Failed` when it does not (non-zero exit, time, memory
or output limit); `SandboxError` only for our own faults. Languages: SandboxFusion's names python, cpp, nodejs,
go, java, rust, bash, typescript, php, ruby, lua, perl, scala, csharp (and c, javascript); compiled ones report
`compile_result`, and a compile error is `Failed` with the compiler's message in `compile_result.stderr` and no
`run_result`. Interpreted ones (nodejs, bash, php, ruby, lua, perl) run the source as SandboxFusion does: a syntax
error is in `run_result` (the interpreter's exit status and stderr). `pytest` runs the code as a pytest file.
Any other language or mode (jest, junit, R, kotlin, swift, ...) is a 400 listing the supported names.
"""

from __future__ import annotations

import dataclasses

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from sandboxes import Limits, Result, RunJob, Status
from sandboxes.builds import Build
from sandboxes.languages import LANGUAGES, Language, language_aliases
from service.errors import NotStarted, Overloaded, Unavailable
from service.models import UNSUPPORTED_LANGUAGE
from service.schema import ERRORS, retry_after
from service.validation import InvalidRequest, Problem, check_files, value_problem

router = APIRouter()
LANGUAGE_ALIASES = {**language_aliases(), "pytest": "pytest"}  # the registry's names and aliases, and one mode
# SandboxFusion's `pytest` mode: the code is a pytest test file, run by the image's pytest; Success when every test
# passes (pytest's exit status). A /run_code mode only: /reward has its own pytest test kind.
PYTEST_MODE = Language("pytest", "test_solution.py", (), ("/usr/bin/python3", "-m", "pytest", "-q", "-p",
                       "no:cacheprovider", "test_solution.py"), ("/usr/bin/python3", "-m", "pytest", "--version"),
                       runs_source=True)
RUN_CODE_LANGUAGES: dict[str, Language] = {**LANGUAGES, "pytest": PYTEST_MODE}
DEFAULT_MEMORY_MB = 512
MIN_MEMORY_MB = 32
MAX_COMPILE_S = 120.0
RUN_STATUS = {Status.OK: "Finished", Status.RUNTIME_ERROR: "Finished", Status.KILLED: "Finished",
              Status.TIMEOUT: "TimeLimitExceeded"}
FAILURE_MESSAGES = {Status.MEMORY_LIMIT: "memory limit exceeded", Status.OUTPUT_LIMIT: "output limit exceeded",
                    Status.TIMEOUT: "time limit exceeded"}


class RunCodeRequest(BaseModel):
    # Fields SandboxFusion has and rewardbox does not use are ignored (extra allowed): its clients send them.
    model_config = ConfigDict(allow_inf_nan=False)

    code: str
    language: str = "python"
    compile_timeout: float = Field(10, gt=0, le=MAX_COMPILE_S, strict=True)
    run_timeout: float = Field(10, gt=0, strict=True, description="at most REWARDBOX_MAX_TIMEOUT_S")
    memory_limit_MB: int = Field(-1, strict=True, description=f"-1 or 0: {DEFAULT_MEMORY_MB}; else {MIN_MEMORY_MB} "
                                 "to REWARDBOX_MAX_MEMORY_MB")
    stdin: str | None = None
    files: dict[str, str | None] = Field(default_factory=dict, description="path -> base64 content")
    fetch_files: list[str] = Field(default_factory=list)


class CommandRunResult(BaseModel):
    status: str  # Finished | Error | TimeLimitExceeded
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class RunCodeResponse(BaseModel):
    status: str  # Success | Failed | SandboxError
    message: str = ""
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = Field(default_factory=dict)
    rewardbox: dict | None = None


def checked_request(req: RunCodeRequest, settings) -> tuple[str, Limits, dict, list[str]]:
    """(language, limits, files, fetch paths); raises InvalidRequest naming the field."""
    language = LANGUAGE_ALIASES.get(req.language.strip().lower())
    if language not in RUN_CODE_LANGUAGES:
        raise InvalidRequest([Problem(("language",), f"{req.language[:64]!r} is not supported; supported: "
                                      f"{', '.join(LANGUAGE_ALIASES)}", UNSUPPORTED_LANGUAGE)])
    for name in ("code", "stdin"):
        problem = value_problem(getattr(req, name), (name,))
        if problem:
            raise InvalidRequest([problem])
    if len(req.code.encode()) > settings.max_code_bytes:
        raise InvalidRequest([Problem(("code",), f"longer than {settings.max_code_bytes} bytes", "too_long")])
    if req.run_timeout > settings.max_timeout_s:
        raise InvalidRequest([Problem(("run_timeout",), f"at most {settings.max_timeout_s:g}", "less_than_equal")])
    memory = req.memory_limit_MB
    if memory > 0 and not MIN_MEMORY_MB <= memory <= settings.max_memory_mb:
        raise InvalidRequest([Problem(("memory_limit_MB",), f"-1 (the default, {DEFAULT_MEMORY_MB}) or "
                                      f"{MIN_MEMORY_MB} to {settings.max_memory_mb}", "range")])
    files, fetch = check_files(req.files, req.fetch_files)
    limits = Limits(wall_s=req.run_timeout, cpu_s=req.run_timeout, memory_mb=memory if memory > 0
                    else DEFAULT_MEMORY_MB)
    return language, limits, files, fetch


@router.post("/run_code", response_model=RunCodeResponse, responses=ERRORS(400, 413, 422, 504))
async def run_code(req: RunCodeRequest, request: Request) -> RunCodeResponse | JSONResponse:
    executor = request.app.state.executor
    language, limits, files, fetch = checked_request(req, executor.settings)
    lang = RUN_CODE_LANGUAGES[language]
    compiles = not (lang.in_process or lang.runs_source)
    worst_s = req.run_timeout + (req.compile_timeout if compiles else 0.0)  # the longest it may hold a sandbox
    try:  # SandboxFusion clients (verl) retry 504 and nothing else: every "nothing ran, ask again" is a 504
        async with executor.admit(1 if lang.in_process else 2, worst_s=worst_s):
            return await _run(executor, req, lang, limits, files, fetch)
    except (Overloaded, NotStarted, Unavailable) as e:
        return JSONResponse({"detail": str(e)}, status_code=504, headers=retry_after(e))


async def _run(executor, req: RunCodeRequest, lang: Language, limits: Limits, files: dict, fetch: list[str]
               ) -> RunCodeResponse:
    if lang.in_process:  # SandboxFusion runs Python programs as main.py
        job = RunJob(program={"code": req.code, "filename": "main.py"}, stdin=req.stdin or "",
                     files=files or None, fetch_files=fetch or None, limits=limits)
        return to_response(await executor.run(job))
    if lang.runs_source:
        # As SandboxFusion runs them: the interpreter reads the source, so a syntax error is the run's own
        # failure (`bash` exits 2 with "syntax error" on stderr), in run_result, with no compile_result.
        job = lang.run_job(req.code, {}, req.stdin or "", limits)
        job = dataclasses.replace(job, files={**files, **(job.files or {})}, fetch_files=fetch or None)
        return to_response(await executor.run(job))
    build = await executor.builder.build(lang, req.code, req.compile_timeout)
    if build.status == "infra_error":
        return RunCodeResponse(status="SandboxError", message=build.diagnostics)
    compiled = _compile_result(build)
    if not build.ok:
        return RunCodeResponse(status="Failed", message="compile error" if build.status == "syntax_error"
                               else build.diagnostics, compile_result=compiled, rewardbox={"status": build.status})
    job = lang.run_job(req.code, build.files, req.stdin or "", limits)
    job = dataclasses.replace(job, files={**files, **(job.files or {})}, fetch_files=fetch or None)
    response = to_response(await executor.run(job))
    response.compile_result = compiled
    return response


def _compile_result(build: Build) -> CommandRunResult:
    return CommandRunResult(status="TimeLimitExceeded" if build.status == "timeout" else "Finished",
                            execution_time=build.compile_ms / 1000.0, return_code=0 if build.ok else 1,
                            stdout="", stderr=build.diagnostics)


def to_response(result: Result) -> RunCodeResponse:
    extra = {"status": str(result.status), "cpu_ms": result.cpu_ms, "peak_memory_kb": result.peak_memory_kb,
             "stdout_truncated": result.stdout_truncated, "stderr_truncated": result.stderr_truncated,
             "signal": result.signal}
    if result.status == Status.SANDBOX_ERROR:
        return RunCodeResponse(status="SandboxError", message=result.error or "sandbox error", rewardbox=extra)
    # SandboxFusion: "Finished" whenever the command ran to an exit (the exit code tells success or failure).
    run_status = RUN_STATUS.get(result.status, "Error")
    run = CommandRunResult(status=run_status, execution_time=result.wall_ms / 1000.0,
                           return_code=result.exit_code if result.exit_code is not None else -(result.signal or 1),
                           stdout=result.stdout, stderr=result.stderr)
    ok = result.status == Status.OK
    message = "" if ok else FAILURE_MESSAGES.get(result.status, "")
    return RunCodeResponse(status="Success" if ok else "Failed", message=message, run_result=run,
                           files=result.files, rewardbox=extra)
