"""Task environments built for real (issue 28 part 1): apt in bubblewrap over an overlay of the base rootfs, host
pip for cp311 manylinux wheels, the Docker image FROM the base image; sandboxes started from the built target on
both backends. One small environment (a compiled wheel + a Debian package) is built once for the module."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from sandboxes import Limits, RunJob, SandboxPool
from sandboxes.backends.bwrap_backend import BubblewrapBackend
from sandboxes.backends.docker_backend import DockerBackend
from sandboxes.targets import SandboxTarget
from service.environments.build import BASE_FILE, WHEELS_DIR, BuildLimits, docker_image
from service.environments.models import EnvironmentSpec
from service.environments.routes import install
from service.environments.store import EnvironmentNotFound, EnvironmentNotReady, EnvironmentStore

from .conftest import BACKENDS

# markupsafe 2.1.5 has a compiled extension (_speedups) in its cp311 manylinux wheel; jq is a small Debian package;
# left-pad a tiny npm package.
SPEC = {"debian": ["jq"], "python": ["markupsafe==2.1.5"], "npm": ["left-pad@1.3.0"]}
FAILING = {"setup": ["echo about to fail; exit 3"]}
BUILD_S = 600
LIMITS = Limits(wall_s=20, total_s=30, cpu_s=20)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> EnvironmentStore:
    s = EnvironmentStore(tmp_path_factory.mktemp("envs"))
    yield s
    s.close()


@pytest.fixture(scope="module")
def built(store: EnvironmentStore) -> str:
    rec = store.submit(EnvironmentSpec(**SPEC))
    rec = store.wait(rec.id, BUILD_S)
    assert rec.state == "ready", store.log_tail(rec.id)
    return rec.id


def _client(store: EnvironmentStore) -> httpx.AsyncClient:
    app = FastAPI()
    install(app, store)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


def _backend(name: str, target: SandboxTarget) -> DockerBackend | BubblewrapBackend:
    # env-run adds choose_backend(name, target=...); until it lands, the backends are built from the target here.
    return DockerBackend(target.docker_image) if name == "docker" else BubblewrapBackend(rootfs=target.rootfs)


async def _run(name: str, target: SandboxTarget, program: dict[str, object]):
    async with SandboxPool(_backend(name, target), size=1, acquire_timeout_s=120) as pool:
        return await pool.run(RunJob(program=program, limits=LIMITS))


@pytest.mark.parametrize("backend", BACKENDS)
async def test_compiled_wheel_imports_in_a_sandbox_of_the_environment(store, built, backend):
    code = "import markupsafe, markupsafe._speedups as s; print(markupsafe.escape('<a>'), s.__file__.endswith('.so'))"
    result = await _run(backend, store.target(built), {"code": code})
    assert result.stdout.split() == ["&lt;a&gt;", "True"], result


@pytest.mark.parametrize("backend", BACKENDS)
async def test_debian_package_runs_in_a_sandbox_of_the_environment(store, built, backend):
    result = await _run(backend, store.target(built), {"argv": ["/usr/bin/jq", "-n", "1 + 41"]})
    assert result.stdout.strip() == "42", result


@pytest.mark.parametrize("backend", BACKENDS)
async def test_npm_package_is_found_by_node_in_a_sandbox_of_the_environment(store, built, backend):
    program = {"argv": ["/usr/bin/node", "-e", "console.log(require('left-pad')('x', 3))"]}
    result = await _run(backend, store.target(built), program)
    assert result.stdout == "  x\n", result


@pytest.mark.parametrize("backend", BACKENDS)
async def test_environment_keeps_its_wheels_for_offline_pip(store, built, backend):
    target = store.target(built)
    code = f"import os; print(sorted(os.listdir({target.wheels!r})))"
    result = await _run(backend, target, {"code": code})
    assert "MarkupSafe-2.1.5-cp311" in result.stdout, result


def test_target_names_the_environment_image_rootfs_and_wheels(store, built):
    target = store.target(built)
    assert target.key == built
    assert target.docker_image == docker_image(built) == f"rewardbox-env:{built[:12]}"
    assert Path(target.rootfs or "").is_dir() and (store.root / f"{built}.ready").is_file()
    assert target.wheels == WHEELS_DIR


def test_base_rootfs_is_untouched_by_the_build(store, built):
    from sandboxes.image import rootfs_dir
    assert not (rootfs_dir() / "usr/bin/jq").exists()
    assert (Path(store.target(built).rootfs or "") / "usr/bin/jq").exists()


def test_same_spec_is_built_once_and_a_restarted_store_knows_it(store, built):
    log = store.log_path(built)
    mtime = log.stat().st_mtime_ns
    again = store.submit(EnvironmentSpec(**SPEC))
    assert (again.id, again.state) == (built, "ready")
    restarted = EnvironmentStore(store.root)
    assert restarted.submit(EnvironmentSpec(**dict(reversed(list(SPEC.items()))))).state == "ready"
    assert restarted.target(built).key == built
    assert log.stat().st_mtime_ns == mtime  # no build ran again
    restarted.close()


async def test_http_post_answers_at_once_and_get_shows_the_environment(store, built):
    async with _client(store) as http:
        posted = await http.post("/environments", json=SPEC)
        assert posted.status_code == 200 and posted.json() == {"id": built, "state": "ready"}
        got = (await http.get(f"/environments/{built}")).json()
        assert got["state"] == "ready" and got["size_bytes"] > 0 and got["created"] > 0
        listed = (await http.get("/environments")).json()["environments"]
        assert built in [e["id"] for e in listed]


async def test_failing_build_is_failed_with_its_log_and_never_a_target(store):
    async with _client(store) as http:
        posted = await http.post("/environments", json=FAILING)
        assert posted.status_code == 202 and posted.json()["state"] == "building"
        env_id = posted.json()["id"]
        store.wait(env_id, BUILD_S)
        got = (await http.get(f"/environments/{env_id}")).json()
        assert got["state"] == "failed" and "setup[0]" in got["error"]
        assert "about to fail" in got["log_tail"]
        again = await http.post("/environments", json=FAILING)
        assert again.json() == {"id": env_id, "state": "failed"}  # not rebuilt
    with pytest.raises(EnvironmentNotReady):
        store.target(env_id)
    assert not store.rootfs(env_id).exists() and not (store.root / f"{env_id}.ready").exists()


async def test_unknown_environment_is_404_and_bad_spec_422_naming_the_field(store):
    with pytest.raises(EnvironmentNotFound):
        store.target("0" * 64)
    async with _client(store) as http:
        assert (await http.get(f"/environments/{'0' * 64}")).status_code == 404
        bad = await http.post("/environments", json={"python": ["--index-url=http://evil/"]})
        assert bad.status_code == 422 and "python" in bad.json()["detail"][0]["loc"]


def test_build_past_its_time_limit_fails(tmp_path):
    store = EnvironmentStore(tmp_path, BuildLimits(timeout_s=3), with_docker=False)
    rec = store.wait(store.submit(EnvironmentSpec(setup=["sleep 60"])).id, 60)
    assert rec.state == "failed" and "time limit" in (rec.error or "")
    assert not store.rootfs(rec.id).exists()
    store.close()


def test_setup_commands_have_no_network(tmp_path):
    store = EnvironmentStore(tmp_path, with_docker=False)
    probe = "python3 -c 'import socket; socket.create_connection((\"deb.debian.org\", 80), 5)'"
    rec = store.wait(store.submit(EnvironmentSpec(setup=[probe])).id, 120)
    assert rec.state == "failed" and "setup[0]" in (rec.error or ""), store.log_tail(rec.id)
    assert "OSError" in store.log_tail(rec.id) or "gaierror" in store.log_tail(rec.id)
    store.close()


# Issue 28: an environment built on another base image. Its record says so and its image and root hold that other
# base's tag (as a build from an older checkout leaves them); POST rebuilds it on the current base, the previous
# root is gone once the rebuild is ready, and sandboxes of both backends run on the current base.
STALE_SPEC = {"setup": ["echo stale-test > /srv/stale-test"]}
OLD_BASE = "0123456789ab"


def _age(store: EnvironmentStore, env_id: str) -> None:
    """Make a ready environment look built on OLD_BASE: record, root filesystem and Docker image."""
    import subprocess

    path = store.root / f"{env_id}.json"
    path.write_text(path.read_text().replace(f'"base":"{store.base}"', f'"base":"{OLD_BASE}"'))
    (store.rootfs(env_id) / BASE_FILE.lstrip("/")).write_text(OLD_BASE + "\n")
    if store.get(env_id).docker_image:
        dockerfile = f"FROM {docker_image(env_id)}\nRUN echo {OLD_BASE} > {BASE_FILE}\n"
        subprocess.run(["docker", "build", "-q", "--network", "none", "-t", docker_image(env_id), "-"],
                       input=dockerfile, text=True, check=True, capture_output=True)


@pytest.fixture(scope="module")
def rebuilt(store: EnvironmentStore) -> str:
    env_id = store.wait(store.submit(EnvironmentSpec(**STALE_SPEC)).id, BUILD_S).id
    assert store.get(env_id).state == "ready", store.log_tail(env_id)
    _age(store, env_id)
    rec = store.get(env_id)
    assert (rec.state, rec.base, rec.stale) == ("ready", OLD_BASE, True)
    with pytest.raises(EnvironmentNotReady, match="building"):  # never used as it is
        store.target(env_id)
    rec = store.wait(env_id, BUILD_S)
    assert (rec.state, rec.base, rec.stale) == ("ready", store.base, False), store.log_tail(env_id)
    return env_id


async def test_post_of_a_stale_environment_answers_building_and_rebuilds_it(store):
    env_id = store.wait(store.submit(EnvironmentSpec(**STALE_SPEC)).id, BUILD_S).id
    _age(store, env_id)
    async with _client(store) as http:
        got = (await http.get(f"/environments/{env_id}")).json()
        assert (got["base"], got["stale"]) == (OLD_BASE, True)
        posted = await http.post("/environments", json=STALE_SPEC)
        assert (posted.status_code, posted.json()) == (202, {"id": env_id, "state": "building"})
        store.wait(env_id, BUILD_S)
        got = (await http.get(f"/environments/{env_id}")).json()
        assert (got["state"], got["base"], got["stale"]) == ("ready", store.base, False)


def test_the_previous_build_s_root_and_image_are_removed_when_the_rebuild_is_ready(store, rebuilt):
    import subprocess

    assert not (store.root / f".old-{rebuilt}").exists()
    assert (store.rootfs(rebuilt) / BASE_FILE.lstrip("/")).read_text().strip() == store.base
    if store.get(rebuilt).docker_image:
        images = subprocess.run(["docker", "images", "-q", "--filter", f"label=rewardbox.environment={rebuilt}"],
                                capture_output=True, text=True, check=True).stdout.split()
        labels = subprocess.run(["docker", "image", "inspect", "-f", '{{index .Config.Labels "rewardbox.base"}}',
                                 docker_image(rebuilt)], capture_output=True, text=True, check=True).stdout
        assert len(images) == 1 and labels.strip() == store.base, (images, labels)


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_rebuilt_environment_runs_on_the_current_base(store, rebuilt, backend):
    result = await _run(backend, store.target(rebuilt), {"argv": ["/bin/cat", BASE_FILE]})
    assert result.stdout.strip() == store.base, result
    result = await _run(backend, store.target(rebuilt), {"argv": ["/usr/bin/git", "--version"]})
    assert result.stdout.startswith("git version"), result
