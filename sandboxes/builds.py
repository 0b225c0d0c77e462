"""Compile once, run many times: compiled artefacts cached by (language, toolchain version, command, source hash).

The compile runs in a sandbox like any job (the candidate uid, rlimits, seccomp); its artefacts come back to the
host and live here, in the service's own memory. Run jobs get a copy written into their job directory. So:
- N test cases compile once (concurrent requests for the same key wait for the one compile), and a repeated
  program compiles once until it falls out of the LRU;
- no job can poison the cache: a job never sees the cache, only its own copy, which is wiped with the job. An
  entry is only ever stored under the hash of the very source it was compiled from, by the toolchain the key
  names; what a compile produces depends on nothing but that source (the sandbox is wiped between jobs and
  offline), so the worst a "poisoned" entry could hold is what compiling that same source yields. Artefacts only
  ever run inside a sandbox, with the same trust as the source.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Protocol

from .languages import Language
from .types import Job, Result, RunJob, Status

DIAGNOSTICS_IN_RESULT = 2000


@dataclass
class Build:
    status: str  # ok | syntax_error | timeout | memory_limit | output_limit | infra_error
    files: dict[str, str] = field(default_factory=dict)  # artefact path -> base64
    diagnostics: str = ""
    compile_ms: float = 0.0
    cached: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"


class JobRunner(Protocol):
    """What builds run on: a SandboxPool, or an executor that hands jobs to remote workers."""

    size: int

    async def run(self, job: Job) -> Result: ...


class Builder:
    def __init__(self, pool: JobRunner, max_entries: int = 512, max_bytes: int = 512 << 20) -> None:
        self.pool = pool
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._cache: OrderedDict[str, Build] = OrderedDict()
        self._bytes = 0
        self._inflight: dict[str, asyncio.Future[Build]] = {}
        self._versions: dict[str, str] = {}
        self._version_locks: dict[str, asyncio.Lock] = {}
        # At most pool.size compiles wait in the pool's queue: a batch of many compiled items queues here instead
        # (no acquire timeout), so run jobs of programs already built are not starved behind hundreds of compiles.
        self._slots = asyncio.Semaphore(max(1, pool.size))
        self.compiles = 0
        self.hits = 0

    async def toolchain_version(self, lang: Language) -> str | None:
        """What the sandbox's toolchain says it is (asked once per language; concurrent callers wait for it)."""
        async with self._version_locks.setdefault(lang.name, asyncio.Lock()):
            if lang.name not in self._versions:
                result = await self.pool.run(lang.version_job())
                if result.status != Status.OK:
                    return None
                self._versions[lang.name] = (result.stdout + result.stderr).strip().splitlines()[0][:200]
        return self._versions[lang.name]

    def key(self, lang: Language, version: str, code: str, job: RunJob) -> str:
        digest = hashlib.sha256()
        for part in (lang.name, version, json.dumps(job.program, sort_keys=True), json.dumps(job.env, sort_keys=True),
                     str(job.limits.memory_mb), code):
            digest.update(part.encode() + b"\0")
        return digest.hexdigest()

    async def build(self, lang: Language, code: str, timeout_s: float, memory_mb: int | None = None,
                    job: RunJob | None = None) -> Build:
        """Compile code (job: a custom compile job, e.g. rustc --test), or return the cached artefacts."""
        job = job or lang.compile_job(code, timeout_s, memory_mb)
        version = await self.toolchain_version(lang)
        if version is None:
            return Build("infra_error", diagnostics=f"the {lang.name} toolchain did not answer in the sandbox")
        key = self.key(lang, version, code, job) + f":{timeout_s:g}"
        if key in self._cache:
            self._cache.move_to_end(key)
            self.hits += 1
            hit = self._cache[key]
            return Build(hit.status, hit.files, hit.diagnostics, hit.compile_ms, cached=True)
        if key in self._inflight:
            self.hits += 1
            build = await asyncio.shield(self._inflight[key])
            return Build(build.status, build.files, build.diagnostics, build.compile_ms, cached=True)
        future: asyncio.Future[Build] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            async with self._slots:
                result = await self.pool.run(job)
            build = from_compile_result(result, job)
            self.compiles += 1
            if build.status in ("ok", "syntax_error"):  # resource failures can depend on the machine's load
                self._store(key, build)
            future.set_result(build)
        except BaseException as e:
            future.set_exception(e)
            raise
        finally:
            del self._inflight[key]
        return build

    def _store(self, key: str, build: Build) -> None:
        size = sum(len(v) for v in build.files.values()) + len(build.diagnostics)
        self._cache[key] = build
        self._bytes += size
        while self._cache and (len(self._cache) > self.max_entries or self._bytes > self.max_bytes):
            _, old = self._cache.popitem(last=False)
            self._bytes -= sum(len(v) for v in old.files.values()) + len(old.diagnostics)


def from_compile_result(result: Result, job: RunJob) -> Build:
    """The compile job's result: compile.py's JSON report, or how the runner ended the compiler."""
    ms = result.wall_ms
    if result.status == Status.SANDBOX_ERROR:
        return Build("infra_error", diagnostics=result.error or "sandbox error", compile_ms=ms)
    if result.status in (Status.TIMEOUT, Status.MEMORY_LIMIT, Status.OUTPUT_LIMIT):
        what = {"timeout": f"compilation exceeded its {job.limits.wall_s:g} s limit",
                "memory_limit": f"compilation exceeded its memory limit ({job.limits.memory_mb} MiB)",
                "output_limit": "the compiler's output exceeded its limit"}[str(result.status)]
        return Build(str(result.status), diagnostics=what, compile_ms=ms)
    try:
        report = json.loads(result.stdout)
    except ValueError:
        return Build("infra_error", diagnostics="compile report unreadable: " + result.stderr[-500:], compile_ms=ms)
    diagnostics = summarise(str(report.get("diagnostics") or ""))
    if report.get("ok"):
        return Build("ok", files=dict(report.get("files") or {}), diagnostics=diagnostics, compile_ms=ms)
    # A compiler that died on a signal or on our CPU limit ran out of resources, not into a compile error.
    if result.cpu_ms >= job.limits.cpu_s * 1000 - 100 or "terminated signal" in diagnostics:
        return Build("timeout", diagnostics="compilation exceeded its CPU limit: " + diagnostics[:500], compile_ms=ms)
    if any(m in diagnostics for m in ("out of memory", "Cannot allocate memory", "memory exhausted",
                                      "OutOfMemoryError", "memory allocation of")):
        return Build("memory_limit", diagnostics=diagnostics, compile_ms=ms)
    return Build("syntax_error", diagnostics=diagnostics, compile_ms=ms)



def summarise(diagnostics: str, cap: int = DIAGNOSTICS_IN_RESULT) -> str:
    """The compiler's message, capped; when it is too long, the lines that say "error" come first (an include
    chain or a template backtrace would otherwise push the error itself out)."""
    if len(diagnostics) <= cap:
        return diagnostics
    lines = diagnostics.splitlines()
    errors = [line for line in lines if "error" in line.lower()]
    return "\n".join(errors + ["..."] + [line for line in lines if line not in errors])[:cap]
