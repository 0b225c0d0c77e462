"""Task environments: built once per spec (content-addressed), remembered across restarts, handed to pools as a
`SandboxTarget`.

On disk, under `sandboxes.image.cache_dir()/envs/`:
  <id>.json    the record (spec, state, created, size, error), rewritten at each state change
  <id>.log     the build log
  <id>/        the bubblewrap root filesystem (renamed in only when complete)
  <id>.ready   written last, after the rootfs and the Docker image exist: its presence is what "ready" means
Builds run on a background thread (one at a time: they are heavy), so POST answers at once.
"""

from __future__ import annotations

import fcntl
import json
import re
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from sandboxes import image
from sandboxes.targets import SandboxTarget
from service.environments import build as eb
from service.environments.models import ENVIRONMENT_ID, EnvironmentSpec

State = Literal["building", "ready", "failed"]
LOG_TAIL = 4000


class EnvironmentNotFound(LookupError):
    """No environment with this id was ever posted (answer 404 / 422 naming the field)."""


class EnvironmentNotReady(RuntimeError):
    """The environment is still building or its build failed (answer 409 naming the field)."""

    def __init__(self, env_id: str, state: str, detail: str = "") -> None:
        super().__init__(f"environment {env_id} is {state}" + (f": {detail}" if detail else ""))
        self.env_id, self.state = env_id, state


class EnvironmentsUnavailable(RuntimeError):
    """This process cannot build environments: its cache folder cannot be written (answer 503). An API that runs
    no sandbox as an unprivileged user (docker-compose.yml) still starts and lists; builds need a writable
    REWARDBOX_CACHE."""


class EnvironmentRecord(BaseModel):
    id: str
    state: State
    spec: EnvironmentSpec
    created: float  # unix time of the first POST
    built_s: float | None = None
    size_bytes: int | None = None  # what the environment adds to the base rootfs
    error: str | None = None
    base: str = ""  # base image tag it was built on
    docker_image: str | None = None


class EnvironmentStore:
    """The environments of this host. Thread-safe; one build at a time."""

    def __init__(self, root: Path | None = None, limits: eb.BuildLimits | None = None,
                 with_docker: bool | None = None) -> None:
        self.root = root or image.cache_dir() / "envs"
        self.unwritable: str | None = None  # why builds cannot happen here; reading records still works
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            self.unwritable = f"the environments folder {self.root} cannot be created: {e}"
        self.limits = limits or eb.BuildLimits()
        self._with_docker = with_docker
        self._lock = threading.Lock()
        self._building: set[str] = set()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="env-build")
        self._clean_stale()

    # --- paths -------------------------------------------------------------------------------------------
    def _record_path(self, env_id: str) -> Path:
        return self.root / f"{env_id}.json"

    def rootfs(self, env_id: str) -> Path:
        return self.root / env_id

    def _ready_path(self, env_id: str) -> Path:
        return self.root / f"{env_id}.ready"

    def log_path(self, env_id: str) -> Path:
        return self.root / f"{env_id}.log"

    def _lock_path(self, env_id: str) -> Path:
        return self.root / f".{env_id}.lock"

    def _locked(self, env_id: str) -> bool:
        """Whether a build of env_id holds its lock (in any process sharing this folder)."""
        try:
            with self._lock_path(env_id).open("a") as f:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return False
        except BlockingIOError:
            return True

    def _clean_stale(self) -> None:
        """Work folders of builds killed with their process (no lock held): unmounted, then removed."""
        if self.unwritable:
            return
        for work in self.root.glob(".build-*"):
            if any(self._locked(p.name[1:-5]) for p in self.root.glob(f".{work.name[7:19]}*.lock")):
                continue
            subprocess.run(["umount", str(work / "merged")], capture_output=True, check=False)
            shutil.rmtree(work, ignore_errors=True)

    # --- records -----------------------------------------------------------------------------------------
    def _write(self, rec: EnvironmentRecord) -> None:
        tmp = self._record_path(rec.id).with_suffix(".json.tmp")
        tmp.write_text(rec.model_dump_json())
        tmp.replace(self._record_path(rec.id))

    def get(self, env_id: str) -> EnvironmentRecord:
        if not re.fullmatch(ENVIRONMENT_ID, env_id):  # never a path
            raise EnvironmentNotFound(env_id)
        path = self._record_path(env_id)
        if not path.is_file():
            raise EnvironmentNotFound(env_id)
        rec = EnvironmentRecord.model_validate_json(path.read_text())
        if rec.state == "building" and env_id not in self._building and not self._locked(env_id):
            # A build no process runs (its lock is free): the server stopped mid-build. POST the spec to retry.
            rec.state, rec.error = "failed", "build interrupted (server restarted); POST the spec again"
        elif rec.state == "ready" and not self._ready_path(env_id).is_file():
            rec.state = "building" if env_id in self._building else "failed"
            rec.error = None if env_id in self._building else "ready marker missing"
        return rec

    def list(self) -> list[EnvironmentRecord]:
        out = []
        for path in sorted(self.root.glob("*.json")):
            try:
                out.append(self.get(path.stem))
            except (EnvironmentNotFound, ValueError):
                continue
        return sorted(out, key=lambda r: r.created)

    def log_tail(self, env_id: str, chars: int = LOG_TAIL) -> str:
        try:
            return self.log_path(env_id).read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    # --- building ----------------------------------------------------------------------------------------
    def submit(self, spec: EnvironmentSpec) -> EnvironmentRecord:
        """The environment of `spec`: its record if known (ready, building or failed), else a build started."""
        env_id = spec.environment_id()
        if self.unwritable:
            raise EnvironmentsUnavailable(f"{self.unwritable}; set REWARDBOX_CACHE to a writable folder")
        with self._lock:
            try:
                rec = self.get(env_id)
                if rec.state != "failed" or rec.error != "build interrupted (server restarted); POST the spec again":
                    return rec
            except EnvironmentNotFound:
                pass
            rec = EnvironmentRecord(id=env_id, state="building", spec=spec, created=time.time(),
                                    base=image.image_tag())
            self._building.add(env_id)
            self._write(rec)
        self._pool.submit(self._build, rec)
        return rec

    def _build(self, rec: EnvironmentRecord) -> None:
        env_id = rec.id
        t0 = time.monotonic()
        with_docker = eb.docker_ok() if self._with_docker is None else self._with_docker
        try:
            with self._lock_path(env_id).open("a") as lock, self.log_path(env_id).open("w") as log:
                fcntl.flock(lock, fcntl.LOCK_EX)  # held until the ready marker is written (see _locked)
                try:
                    self._ready_path(env_id).unlink(missing_ok=True)  # leftovers of an interrupted attempt
                    shutil.rmtree(self.rootfs(env_id), ignore_errors=True)
                    rec.size_bytes = eb.build(env_id, rec.spec, self.rootfs(env_id), log, self.limits,
                                              with_docker=with_docker)
                    rec.state, rec.docker_image = "ready", eb.docker_image(env_id) if with_docker else None
                except eb.BuildFailed as e:
                    log.write(f"[env] FAILED: {e}\n")
                    rec.state, rec.error = "failed", str(e)
                except Exception as e:  # noqa: BLE001 - the trusted side broke: still a failed state, logged
                    log.write(f"[env] FAILED (internal): {type(e).__name__}: {e}\n")
                    rec.state, rec.error = "failed", f"internal error: {type(e).__name__}: {e}"
                rec.built_s = round(time.monotonic() - t0, 2)
                self._write(rec)
                if rec.state == "ready":
                    self._ready_path(env_id).write_text(env_id + "\n")  # last: the environment is usable from now
        finally:
            with self._lock:
                self._building.discard(env_id)

    def wait(self, env_id: str, timeout_s: float) -> EnvironmentRecord:
        """The record once it is no longer building (tests and the CLI)."""
        deadline = time.monotonic() + timeout_s
        while True:
            rec = self.get(env_id)
            if rec.state != "building" or time.monotonic() > deadline:
                return rec
            time.sleep(0.5)

    # --- for pools ---------------------------------------------------------------------------------------
    def target(self, env_id: str) -> SandboxTarget:
        """Where a sandbox of this environment starts from. Raises EnvironmentNotFound / EnvironmentNotReady."""
        rec = self.get(env_id)
        if rec.state != "ready":
            raise EnvironmentNotReady(env_id, rec.state, rec.error or "")
        # Always the environment's own image and rootfs (never None, which would mean the default sandbox image).
        return SandboxTarget(key=env_id, docker_image=eb.docker_image(env_id), rootfs=str(self.rootfs(env_id)),
                             wheels=eb.WHEELS_DIR if rec.spec.python else None)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def record_json(store: EnvironmentStore, rec: EnvironmentRecord) -> dict[str, object]:
    """The answer of GET /environments/{id}: the record, and the log's tail when the build failed."""
    out: dict[str, object] = json.loads(rec.model_dump_json())
    if rec.state == "failed":
        out["log_tail"] = store.log_tail(rec.id)
    return out
