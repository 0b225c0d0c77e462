"""A warm pool of sandboxes, safe under heavy asyncio concurrency: `result = await pool.run(job)`.

Each sandbox runs one job at a time. A sandbox goes back to the pool only after its runner announced that the
job's processes and files are gone; it is replaced after `max_jobs`, after any anomaly, or when its runner stops
answering. After a sandbox_error it first passes a health check (the runner forks a real job through each of its
zygotes); one that fails it is replaced. A runner whose machinery breaks while idle hangs up, and the pool
replaces that sandbox at once. The pool refills itself in the background. Whatever goes wrong on our side comes
back as a sandbox_error Result, never as an exception and never as a verdict on the program; the runner's own
traces go to this module's log, never into a result.

Sandboxes that die (killed from outside, the engine restarted): one that dies while starting is noticed within
about a second (the backend says it no longer runs) and started again; a job whose sandbox died under it runs
again on the next healthy sandbox, for as long as the job could have waited for a sandbox (acquire_timeout_s from
its arrival). Only then is it a sandbox_error.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import random
import time
from dataclasses import dataclass, field

from .backends import Backend, SandboxHandle, SandboxSpec, choose_backend
from .backends.base import release_socket_root
from .connection import RunnerConnection, RunnerGone
from .types import Job, Result, Status

log = logging.getLogger("rewardbox.sandbox")

START_TIMEOUT_S = 60.0
START_RETRY_S = (0.5, 3.0)  # after failed starts: first pause, doubling to the second, from each attempt's start
HEALTH_TIMEOUT_S = 60.0
MAX_JOBS = 1000  # jobs a sandbox runs before it is replaced (the service's REWARDBOX_SANDBOX_MAX_JOBS)


@dataclass(eq=False)
class Sandbox:
    handle: SandboxHandle
    conn: RunnerConnection
    jobs: int = 0
    broken: bool = False  # known not to run jobs: being replaced (or health-checked after a sandbox_error)


@dataclass
class PoolStats:
    size: int
    idle: int = 0
    busy: int = 0
    started: int = 0
    replaced: int = 0
    start_failures: int = 0
    jobs: int = 0
    rerun: int = 0  # jobs run again because their sandbox died under them
    sandbox_errors: int = 0
    health_checks: int = 0
    unhealthy: int = 0
    started_at: float = field(default_factory=time.time)


class SandboxPool:
    def __init__(
        self,
        backend: Backend | None = None,
        size: int | None = None,
        spec: SandboxSpec | None = None,
        max_jobs: int | None = None,
        acquire_timeout_s: float = 60.0,
    ) -> None:
        self.backend = backend or choose_backend()
        self.size = size or os.cpu_count() or 1
        self.spec = spec or SandboxSpec()
        self.max_jobs = max_jobs or MAX_JOBS
        self.acquire_timeout_s = acquire_timeout_s
        self.stats = PoolStats(size=self.size)
        self._idle: asyncio.Queue[Sandbox] = asyncio.Queue()
        self._idle_now: set[Sandbox] = set()  # what _idle holds (an asyncio.Queue cannot be looked into)
        self._all: set[Sandbox] = set()
        self._tasks: set[asyncio.Task] = set()
        # RLIMIT_NPROC counts every process and thread of a uid on the whole host, across containers: each pool
        # starts its uid cycle at a random place, so that pools of other processes rarely share a job uid (a JVM or
        # Go program's threads would otherwise count against another pool's job).
        first = random.randrange(4000) * 10
        self._uids = itertools.cycle([*range(20000 + first, 60000, 10), *range(20000, 20000 + first, 10)])
        self._closed = False

    # -- lifecycle

    async def start(self, wait: bool = True) -> None:
        check = getattr(self.backend, "check_image", None)
        if check:
            await asyncio.to_thread(check)
        removed = await self.backend.remove_stale()
        if removed:
            log.warning("removed %d stale sandboxes from an earlier run", removed)
        starts = [self._spawn_replacement() for _ in range(self.size)]
        if wait:
            await asyncio.gather(*starts)

    @property
    def healthy(self) -> int:
        """Sandboxes that can take jobs: started and not known to be broken (idle, busy, or cleaning up)."""
        return sum(not sb.broken for sb in self._all)

    @property
    def warm(self) -> bool:
        """Every sandbox is started and none is known to be broken: what readiness (/readyz) reports."""
        return not self._closed and self.healthy >= self.size

    async def close(self) -> None:
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(self._destroy(sb) for sb in list(self._all)), return_exceptions=True)
        remove_own = getattr(self.backend, "remove_own", None)
        if remove_own:
            await remove_own()
        release_socket_root()  # a clean stop leaves no empty folder behind (unless another pool still runs here)

    async def __aenter__(self) -> SandboxPool:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- jobs

    async def run(self, job: Job) -> Result:
        if self._closed:
            return Result.infra("sandbox pool is closed")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.acquire_timeout_s
        self.stats.jobs += 1
        while True:
            sandbox = await self._acquire(deadline)
            if sandbox is None:
                result = Result.infra(f"no sandbox free within {self.acquire_timeout_s:g}s")
                break
            self.stats.busy += 1
            try:
                result, died = await self._run_on(sandbox, job)
            finally:
                self.stats.busy -= 1
            # The sandbox died under the job (killed, its engine failed): the job did nothing wrong, so it runs again
            # on the next healthy sandbox while it could still have been waiting for one.
            if not died or self._closed or loop.time() >= deadline:
                break
            self.stats.rerun += 1
            log.warning("running the job of sandbox %s again on another sandbox", sandbox.handle.id)
        if result.status == Status.SANDBOX_ERROR:
            self.stats.sandbox_errors += 1
        return result

    async def _acquire(self, deadline: float) -> Sandbox | None:
        """The next idle sandbox that is not broken (a broken one left in the queue is being replaced), by `deadline`
        (the event loop's clock)."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                sandbox = self._idle.get_nowait()  # one free: no task, no timer, no turn of the event loop
            except asyncio.QueueEmpty:
                try:
                    sandbox = await asyncio.wait_for(self._idle.get(), max(0.0, deadline - loop.time()))
                except TimeoutError:
                    return None
            self._idle_now.discard(sandbox)
            if not sandbox.broken:
                return sandbox

    def _put_idle(self, sandbox: Sandbox) -> None:
        self._idle_now.add(sandbox)
        self._idle.put_nowait(sandbox)

    async def _run_on(self, sandbox: Sandbox, job: Job) -> tuple[Result, bool]:
        """The job's result, and whether the sandbox died under it (the job may run again elsewhere)."""
        sandbox.jobs += 1
        try:
            async with asyncio.timeout(job.deadline_s()):  # unlike wait_for, no task of its own
                raw = await sandbox.conn.request(job.to_wire())
        except (RunnerGone, TimeoutError) as e:
            sandbox.broken = True
            oom = await self._died_of_oom(sandbox)
            log.warning("sandbox %s failed during a job: %r", sandbox.handle.id, e)
            self._background(self._replace(sandbox))
            if oom:
                return Result(status=Status.MEMORY_LIMIT, error="the job exhausted the sandbox's memory",
                              sandbox_id=sandbox.handle.id), False
            # A timeout is not run again: the job had its whole time, and a second run would double it.
            return Result.infra(f"sandbox {sandbox.handle.id} failed during the job"), isinstance(e, RunnerGone)
        trace = raw.pop("trace", None)
        result = Result.from_wire(raw)
        result.sandbox_id = sandbox.handle.id
        if trace or result.status == Status.SANDBOX_ERROR:
            log.warning("sandbox %s: %s: %s%s", sandbox.handle.id, result.status, result.error,
                        f"\n{trace}" if trace else "")
        check = result.status == Status.SANDBOX_ERROR
        sandbox.broken = sandbox.broken or check  # until the health check says otherwise
        self._background(self._release(sandbox, check))
        return result, False

    async def _died_of_oom(self, sandbox: Sandbox) -> bool:
        try:
            return await sandbox.handle.died_of_oom()
        except Exception:  # noqa: BLE001
            return False

    async def _release(self, sandbox: Sandbox, check: bool = False) -> None:
        """Back into the pool once the runner has cleaned up (and, after a sandbox_error, passed a health check);
        replaced when due or unhealthy."""
        if sandbox.jobs >= self.max_jobs:
            await self._replace(sandbox)
            return
        try:
            await sandbox.conn.wait_ready(30.0)
            if check:
                await self._health_check(sandbox)
        except RunnerGone as e:
            log.warning("sandbox %s not reusable: %s", sandbox.handle.id, e)
            await self._replace(sandbox)
            return
        if self._closed:
            await self._destroy(sandbox)
        elif sandbox.conn.gone:
            await self._replace(sandbox)
        else:
            sandbox.broken = False
            self._put_idle(sandbox)

    async def _health_check(self, sandbox: Sandbox) -> None:
        """Raises RunnerGone unless the runner forks and runs a real job through each of its zygotes."""
        self.stats.health_checks += 1
        try:
            answer = await asyncio.wait_for(sandbox.conn.request({"op": "health"}), HEALTH_TIMEOUT_S)
        except TimeoutError:
            answer = {"ok": False, "error": f"no answer within {HEALTH_TIMEOUT_S:g}s"}
        if not answer.get("ok"):
            self.stats.unhealthy += 1
            raise RunnerGone(f"health check failed: {answer.get('error') or answer.get('status')}")
        await sandbox.conn.wait_ready(30.0)

    def _hung_up(self, sandbox: Sandbox) -> None:
        """The runner closed its channel. An idle sandbox is replaced now; a busy one by the job that fails."""
        if sandbox.broken or sandbox not in self._all or self._closed:
            return
        sandbox.broken = True
        if sandbox in self._idle_now:
            log.warning("sandbox %s hung up while idle: replacing it", sandbox.handle.id)
            self._background(self._replace(sandbox))

    async def _replace(self, sandbox: Sandbox) -> None:
        self.stats.replaced += 1
        await self._destroy(sandbox)
        await self._spawn_replacement()

    async def _spawn_replacement(self) -> None:
        loop = asyncio.get_running_loop()
        delay = START_RETRY_S[0]
        while not self._closed:
            attempt = loop.time()
            try:
                sandbox = await self._start_one()
            except Exception as e:  # noqa: BLE001 - keep trying: a pool that gives up serves nobody
                self.stats.start_failures += 1
                log.error("starting a sandbox failed: %s", e)
                # Paced from the attempt's start: a start that failed slowly (it was killed late) is tried again at
                # once, while an engine that refuses at once is not asked more than once per `delay`.
                await asyncio.sleep(max(0.0, attempt + delay - loop.time()))
                delay = min(delay * 2, START_RETRY_S[1])
                continue
            self._put_idle(sandbox)
            return

    async def _start_one(self) -> Sandbox:
        handle = await self.backend.start(next(self._uids), self.spec)
        try:
            conn = await RunnerConnection.open(handle.socket_path, START_TIMEOUT_S, handle.alive)
            sandbox = Sandbox(handle, conn)
            conn.on_hangup = lambda: self._hung_up(sandbox)
            self._all.add(sandbox)
        except BaseException:
            await handle.destroy()
            raise
        self.stats.started += 1
        return sandbox

    async def _destroy(self, sandbox: Sandbox) -> None:
        self._all.discard(sandbox)
        self._idle_now.discard(sandbox)
        sandbox.conn.close()
        try:
            await sandbox.handle.destroy()
        except Exception as e:  # noqa: BLE001
            log.error("destroying sandbox %s failed: %s", sandbox.handle.id, e)

    def _background(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def snapshot(self) -> dict:
        return {
            "backend": self.backend.name,
            "size": self.size,
            "idle": sum(not sb.broken for sb in self._idle_now),
            "busy": self.stats.busy,
            "healthy": self.healthy,
            "warm": self.warm,
            "started": self.stats.started,
            "replaced": self.stats.replaced,
            "start_failures": self.stats.start_failures,
            "jobs": self.stats.jobs,
            "rerun": self.stats.rerun,
            "sandbox_errors": self.stats.sandbox_errors,
            "health_checks": self.stats.health_checks,
            "unhealthy": self.stats.unhealthy,
        }
