"""SandboxFusion-compatible `POST /run_code`, so that verl (`reward_model.sandbox_fusion.url`) and other
SandboxFusion clients work by changing a URL. Request and response follow SandboxFusion's `RunCodeRequest` /
`RunCodeResponse`; what its users ask for and it lacks (memory-limit status, output truncation, CPU time, peak
memory) comes in an extra `rewardbox` field that old clients ignore.

Statuses: `Success` when the program exits 0 within limits; `Failed` when it does not (non-zero exit, time, memory
or output limit); `SandboxError` only for our own faults. Languages: SandboxFusion's names python, cpp, nodejs,
go, java, rust, bash, typescript (and c, javascript); compiled ones report `compile_result`, and a compile error
is `Failed` with the compiler's message in `compile_result.stderr` and no `run_result`.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, Field

from sandboxes import Job, Limits, Result, Status
from sandboxes.builds import Build
from sandboxes.languages import LANGUAGES

from .models import SUPPORTED_LANGUAGES

router = APIRouter()
LANGUAGE_ALIASES = {"python": "python", "python3": "python", "cpp": "cpp", "c": "c", "nodejs": "javascript",
                    "javascript": "javascript", "typescript": "typescript", "go": "go", "java": "java",
                    "rust": "rust", "bash": "bash"}
DEFAULT_MEMORY_MB = 512
RUN_STATUS = {Status.OK: "Finished", Status.RUNTIME_ERROR: "Finished", Status.KILLED: "Finished",
              Status.TIMEOUT: "TimeLimitExceeded"}
FAILURE_MESSAGES = {Status.MEMORY_LIMIT: "memory limit exceeded", Status.OUTPUT_LIMIT: "output limit exceeded",
                    Status.TIMEOUT: "time limit exceeded"}


class RunCodeRequest(BaseModel):
    code: str
    language: str = "python"
    compile_timeout: float = Field(10, gt=0)
    run_timeout: float = Field(10, gt=0)
    memory_limit_MB: int = -1
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


def _safe_path(path: str) -> bool:
    return bool(path) and not path.startswith("/") and ".." not in path.split("/")


@router.post("/run_code", response_model=RunCodeResponse)
async def run_code(req: RunCodeRequest, request: Request) -> RunCodeResponse:
    language = LANGUAGE_ALIASES.get(req.language.strip().lower())
    if language not in SUPPORTED_LANGUAGES:
        raise HTTPException(400, detail=[{"loc": ["body", "language"], "supported": list(LANGUAGE_ALIASES),
                                          "msg": f"language {req.language!r} is not supported"}])
    executor = request.app.state.executor
    settings = executor.settings
    files = {}
    for path, content in req.files.items():
        if not _safe_path(path):
            raise HTTPException(422, detail=[{"loc": ["body", "files", path], "msg": "relative path required"}])
        try:
            files[path] = {"b64": base64.b64encode(base64.b64decode(content or "", validate=True)).decode()}
        except binascii.Error:
            raise HTTPException(422, detail=[{"loc": ["body", "files", path], "msg": "not base64"}]) from None
    memory = DEFAULT_MEMORY_MB if req.memory_limit_MB <= 0 else min(req.memory_limit_MB, settings.max_memory_mb)
    timeout = min(req.run_timeout, settings.max_timeout_s)
    limits = Limits(wall_s=timeout, cpu_s=timeout, memory_mb=memory)
    fetch = [p for p in req.fetch_files if _safe_path(p)] or None
    if language == "python":
        job = Job("run", program={"code": req.code, "filename": "main.py"}, stdin=req.stdin or "",
                  files=files or None, fetch_files=fetch, limits=limits)
        return to_response(await executor.run(job))
    lang = LANGUAGES[language]
    build = await executor.builder.build(lang, req.code, min(req.compile_timeout, settings.max_item_s))
    if build.status == "infra_error":
        return RunCodeResponse(status="SandboxError", message=build.diagnostics)
    compiled = _compile_result(build)
    if not build.ok:
        return RunCodeResponse(status="Failed", message="compile error" if build.status == "syntax_error"
                               else build.diagnostics, compile_result=compiled, rewardbox={"status": build.status})
    job = lang.run_job(req.code, build.files, req.stdin or "", limits)
    job = dataclasses.replace(job, files={**(files or {}), **(job.files or {})}, fetch_files=fetch)
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
