"""Real processes for the distributed-mode tests: a redis-server of our own (random port, temporary dir), worker
processes (`rewardbox worker`), API processes (`rewardbox serve` with REWARDBOX_REDIS_URL), network namespaces."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import pytest
import redis

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_binary() -> str:
    """redis-server, or fail (CI: REWARDBOX_NEED_REDIS=1) / skip (a developer box without it)."""
    found = shutil.which("redis-server") or next(
        (p for p in ("/usr/bin/redis-server", "/usr/sbin/redis-server") if os.path.exists(p)), None)
    if found:
        return found
    if os.environ.get("REWARDBOX_NEED_REDIS") == "1":
        pytest.fail("redis-server is not installed (REWARDBOX_NEED_REDIS=1): apt-get install redis-server")
    pytest.skip("redis-server is not installed")


def wait_until(check, timeout_s: float, what: str, interval_s: float = 0.1):
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval_s)


class RedisServer:
    def __init__(self, bind: tuple[str, ...] = ("127.0.0.1",), persistent: bool = False) -> None:
        self.binary = redis_binary()
        self.persistence = ["--appendonly", "yes", "--appendfsync", "always"] if persistent else ["--appendonly", "no"]
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="rewardbox-redis-")
        self.bind = bind
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def url_on(self, host: str) -> str:
        return f"redis://{host}:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", *self.bind, "--save", "", *self.persistence,
             "--dir", self.dir, "--protected-mode", "no", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = self.client()
        wait_until(lambda: _pings(client), 10, "redis-server to answer")
        client.close()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, decode_responses=True, socket_timeout=5)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def service_env(redis_url: str, prefix: str, **extra: str) -> dict[str, str]:
    env = {**os.environ, "REWARDBOX_REDIS_URL": redis_url, "REWARDBOX_REDIS_PREFIX": prefix, "REWARDBOX_POOL_SIZE": "1",
           "REWARDBOX_BACKEND": "bubblewrap",  # bwrap sandboxes die with their worker, SIGKILL included
           "REWARDBOX_CLAIM_IDLE_S": "2", "REWARDBOX_WORKER_GRACE_S": "10", "PYTHONPATH": str(ROOT)}
    env.update(extra)
    return env


def start_worker(env: dict[str, str], netns: str | None = None, log_to: Path | None = None) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "service.cli", "worker", "--log-level", "info" if log_to else "warning"]
    log = open(log_to, "w") if log_to else None  # noqa: SIM115 - the child writes it until it exits
    return subprocess.Popen((["ip", "netns", "exec", netns] if netns else []) + cmd, env=env, cwd=ROOT,
                            stderr=log)


def start_api(env: dict[str, str], host: str = "127.0.0.1", netns: str | None = None
              ) -> tuple[subprocess.Popen, str]:
    """`rewardbox serve` in distributed mode; returns once /readyz says a warm worker is there."""
    port = free_port()
    cmd = [sys.executable, "-m", "service.cli", "serve", "--host", host, "--port", str(port), "--log-level",
           "warning"]
    proc = subprocess.Popen((["ip", "netns", "exec", netns] if netns else []) + cmd, env=env, cwd=ROOT)
    url = f"http://{host}:{port}"

    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError("rewardbox serve exited")
        try:
            return httpx.get(url + "/readyz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(ready, 120, "the API to see a warm worker", 0.2)
    return proc, url


def wait_for_workers(r: redis.Redis, prefix: str, count: int) -> None:
    import json

    def warm() -> bool:
        beats = [json.loads(b) for b in r.hgetall(f"{prefix}:workers").values()]
        return sum(1 for b in beats if b["pool"]["warm"] and time.time() - b["time"] < 10) >= count

    wait_until(warm, 120, f"{count} warm workers", 0.2)


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout_s: float = 30) -> int | None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return proc.returncode


def new_prefix() -> str:
    return f"rbtest-{uuid.uuid4().hex[:8]}"


class NetNamespace:
    """A network namespace joined to the root namespace by one veth pair on its own /30 subnet: a "host" that can
    reach only the root namespace's address on that link (where redis-server listens)."""

    def __init__(self, index: int) -> None:
        tag = uuid.uuid4().hex[:6]
        self.name = f"rb6-{tag}-{index}"
        self.outer_if, self.inner_if = f"rb{tag}{index}o", f"rb{tag}{index}i"
        octet = int(tag[:2], 16) % 200 + 20
        self.outer_ip, self.inner_ip = f"10.{octet}.{index}.1", f"10.{octet}.{index}.2"

    def __enter__(self) -> NetNamespace:
        run = self._ip
        run("netns", "add", self.name)
        run("link", "add", self.outer_if, "type", "veth", "peer", "name", self.inner_if)
        run("link", "set", self.inner_if, "netns", self.name)
        run("addr", "add", f"{self.outer_ip}/30", "dev", self.outer_if)
        run("link", "set", self.outer_if, "up")
        run("-n", self.name, "addr", "add", f"{self.inner_ip}/30", "dev", self.inner_if)
        run("-n", self.name, "link", "set", self.inner_if, "up")
        run("-n", self.name, "link", "set", "lo", "up")
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["ip", "netns", "del", self.name], check=False)
        subprocess.run(["ip", "link", "del", self.outer_if], check=False, stderr=subprocess.DEVNULL)

    @staticmethod
    def _ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True)

    def can_connect(self, host: str, port: int) -> bool:
        probe = (f"import socket; s=socket.socket(); s.settimeout(2); "
                 f"print(s.connect_ex(({host!r}, {port})) == 0)")
        out = subprocess.run(["ip", "netns", "exec", self.name, sys.executable, "-c", probe], capture_output=True,
                             text=True, check=True).stdout
        return out.strip() == "True"


def start_cluster(redis_server: RedisServer, procs: list, workers: int, first_worker_log: Path | None = None,
                  **extra: str) -> tuple[str, dict[str, str], redis.Redis, subprocess.Popen, str]:
    """`workers` worker processes and one API on a fresh key prefix, all appended to `procs` (workers first);
    returns (prefix, env, redis client, API process, API URL) once the workers have announced themselves."""
    prefix = new_prefix()
    env = service_env(redis_server.url, prefix, **extra)
    procs += [start_worker(env, log_to=first_worker_log if i == 0 else None) for i in range(workers)]
    r = redis_server.client()
    wait_for_workers(r, prefix, workers)
    api, url = start_api(env)
    procs.append(api)
    return prefix, env, r, api, url
