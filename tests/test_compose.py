"""docker-compose.yml for real: the service image built offline (scripts/service_image.sh), `docker compose up`
with the API, two workers and Redis, a batch through it with the token, health checks that pass with the token
set, and no way to start it without one."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest

from .distributed import free_port, wait_until
from .test_distributed import check_results, item

ROOT = Path(__file__).resolve().parent.parent


def compose_command() -> list[str]:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if os.environ.get("REWARDBOX_NEED_REDIS") == "1":
        pytest.fail("no docker compose tool (REWARDBOX_NEED_REDIS=1): apt-get install docker-compose")
    pytest.skip("no docker compose tool")


def compose(*args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    full = {**os.environ, "PWD": str(ROOT), **(env or {})}
    done = subprocess.run([*compose_command(), "-f", str(ROOT / "docker-compose.yml"), *args], capture_output=True,
                          text=True, env=full, cwd=ROOT, timeout=600)
    assert done.returncode == 0 or not check, done.stderr[-3000:]
    return done


def services(config: str) -> dict[str, str]:
    """The normalised config's text per service (entries two spaces in, under `services:`)."""
    body = config.split("\nservices:\n", 1)[1] if not config.startswith("services:") else config[10:]
    blocks = re.split(r"^  ([\w-]+):\n", body.split("\nvolumes:\n")[0], flags=re.M)
    return dict(zip(blocks[1::2], blocks[2::2], strict=True))


def test_compose_file_is_valid_with_api_worker_and_redis_each_health_checked():
    config = services(compose("config", env={"REWARDBOX_TOKEN": "t"}).stdout)
    assert set(config) == {"api", "worker", "redis"}
    assert all("healthcheck:" in text for text in config.values())
    assert "Authorization" in config["api"]  # the API's health check sends the token
    assert "/var/run/docker.sock" in config["worker"]  # the host engine, for the worker only
    assert not any("docker.sock" in config[name] for name in ("api", "redis"))
    assert "container_name" not in config["worker"] and "published" not in config["worker"]  # --scale worker=N
    assert "127.0.0.1:8000:8000" in config["api"]  # published on loopback unless told otherwise


def test_compose_refuses_to_start_without_a_token():
    env = {k: v for k, v in os.environ.items() if k != "REWARDBOX_TOKEN"}
    done = subprocess.run([*compose_command(), "-f", str(ROOT / "docker-compose.yml"), "config"], capture_output=True,
                          text=True, env={**env, "PWD": str(ROOT)}, cwd=ROOT)
    assert done.returncode != 0 and "REWARDBOX_TOKEN" in done.stderr


def _api_health(project: str) -> str:
    ids = subprocess.run(["docker", "ps", "-q", "--filter", f"label=com.docker.compose.project={project}",
                          "--filter", "label=com.docker.compose.service=api"], capture_output=True, text=True)
    if not ids.stdout.strip():
        return ""
    state = subprocess.run(["docker", "inspect", "--format", "{{json .State.Health}}", ids.stdout.split()[0]],
                           capture_output=True, text=True).stdout
    return (json.loads(state) or {}).get("Status", "") if state.strip() not in ("", "null") else ""


def test_compose_up_serves_a_batch_through_the_api_two_workers_and_redis():
    built = subprocess.run(["bash", str(ROOT / "scripts/service_image.sh")], capture_output=True, text=True,
                           timeout=1200)
    assert built.returncode == 0, built.stderr[-3000:]
    project, token, port = f"rbtest{uuid.uuid4().hex[:8]}", uuid.uuid4().hex, free_port()
    env = {"REWARDBOX_TOKEN": token, "REWARDBOX_PORT": str(port)}
    url, auth = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {token}"}
    compose("-p", project, "up", "-d", "--scale", "worker=2", env=env)
    try:
        def two_warm_workers() -> bool:
            try:
                snap = httpx.get(url + "/readyz", headers=auth, timeout=5).json()
            except (httpx.HTTPError, ValueError):
                return False
            return snap.get("workers") == 2 and snap.get("warm") is True

        wait_until(two_warm_workers, 300, "the API to see two warm workers", 1.0)
        assert httpx.post(url + "/reward", json=item(1), timeout=30).status_code == 401
        items = [item(i, right=i % 4 > 0) for i in range(24)]
        res = httpx.post(url + "/reward/batch", json={"items": items}, headers=auth, timeout=300)
        assert res.status_code == 200, res.text[:500]
        check_results(items, res.json()["results"], set(range(0, 24, 4)))
        info = httpx.get(url + "/v1/info", headers=auth, timeout=30).json()
        assert info["mode"] == "distributed" and info["sandbox"]["backend"] == "docker"
        wait_until(lambda: _api_health(project) == "healthy", 120, "the API's health check (with the token)", 2.0)
    finally:
        compose("-p", project, "down", "-v", "--timeout", "45", env=env, check=False)
