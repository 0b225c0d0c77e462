"""docker-compose.yml is valid for the compose tool and describes a scalable deployment (it is not run here: no
registry to pull images from)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def compose(*args: str) -> str:
    if shutil.which("docker-compose"):
        cmd = ["docker-compose"]
    elif subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        cmd = ["docker", "compose"]
    elif os.environ.get("REWARDBOX_NEED_REDIS") == "1":
        pytest.fail("no docker compose tool (REWARDBOX_NEED_REDIS=1): apt-get install docker-compose")
    else:
        pytest.skip("no docker compose tool")
    env = {**os.environ, "PWD": str(ROOT)}
    done = subprocess.run([*cmd, "-f", str(ROOT / "docker-compose.yml"), *args], capture_output=True, text=True,
                          env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


def services(config: str) -> dict[str, str]:
    """The normalised config's text per service (entries two spaces in, under `services:`)."""
    body = config.split("\nservices:\n", 1)[1] if not config.startswith("services:") else config[10:]
    blocks = re.split(r"^  ([\w-]+):\n", body.split("\nvolumes:\n")[0], flags=re.M)
    return dict(zip(blocks[1::2], blocks[2::2], strict=True))


def test_compose_file_is_valid_with_api_worker_and_redis_each_health_checked():
    config = services(compose("config"))
    assert set(config) == {"api", "worker", "redis"}
    assert all("healthcheck:" in text for text in config.values())
    assert "/var/run/docker.sock" in config["worker"]  # the host engine, for the worker only
    assert not any("docker.sock" in config[name] for name in ("api", "redis"))
    assert "container_name" not in config["worker"] and "published" not in config["worker"]  # --scale worker=N
