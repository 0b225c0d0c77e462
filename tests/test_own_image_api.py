"""Items and sessions naming a user's own image, through the real service (`rewardbox serve`, Docker backend): the
repo item graded in the image (its interpreter, its /testbed), the image's pool in /readyz and /metrics, a missing
image a 422 naming environment.image, a session whose commands run in the image."""

from __future__ import annotations

import httpx
import pytest

from service.swebench import to_item

from .conftest import start_server, stop_server
from .own_image import PYTHON, TESTBED, build
from .test_distributed import procs, redis_server  # noqa: F401 - the fixtures
from .test_own_image import TASK


@pytest.fixture(scope="module")
def env_api():
    ref = build(TASK)
    proc, url = start_server({"REWARDBOX_BACKEND": "docker", "REWARDBOX_SESSION_POOL_SIZE": "1"})
    try:
        with httpx.Client(base_url=url, timeout=300) as client:
            client.image = ref  # type: ignore[attr-defined]
            yield client
    finally:
        stop_server(proc)


def item(api, patch: str, image: str | None = None) -> dict:
    body = to_item(TASK, "0" * 64, patch=patch)
    body.pop("repo")  # the repository is the image's /testbed
    body["environment"] = {"image": image or api.image, "python": PYTHON, "repo_path": TESTBED}
    return body


def test_a_repo_item_is_graded_in_the_image(env_api):
    gold = env_api.post("/reward", json=item(env_api, TASK["patch"]))
    assert gold.status_code == 200 and gold.json()["status"] == "passed", gold.text
    empty = env_api.post("/reward", json=item(env_api, ""))
    assert empty.status_code == 200 and empty.json()["status"] == "failed", empty.text


def test_readyz_and_metrics_show_the_images_pool(env_api):
    env_api.post("/reward", json=item(env_api, ""))
    ready = env_api.get("/readyz").json()
    key = f"image:{env_api.image}"
    assert ready["environments"][key]["size"] == 1, ready
    assert f'rewardbox_environment_pool_sandboxes{{environment="{key}",state="size"}} 1.0' in env_api.get(
        "/metrics").text


def test_an_image_not_on_the_host_is_a_422_naming_environment_image(env_api):
    r = env_api.post("/reward", json=item(env_api, "", image="rewardbox-no-such-image:1"))
    assert r.status_code == 422, r.text
    assert any(d["loc"][-2:] == ["environment", "image"] for d in r.json()["detail"]), r.text


def test_a_session_runs_its_commands_in_the_image(env_api):
    import base64

    body = {"repo": {"archive_b64": base64.b64encode(TASK["archive"]).decode()},
            "environment": {"image": env_api.image, "python": PYTHON, "repo_path": TESTBED}}
    r = env_api.post("/sessions", json=body)
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    out = env_api.post(f"/sessions/{sid}/exec", json={
        "command": "python -c 'import sys; print(sys.executable)'; test -e /usr/bin/python3 || echo no-python3"})
    assert out.status_code == 200 and out.json()["stdout"].split() == [PYTHON, "no-python3"], out.text
    tests = to_item(TASK, "0" * 64)["tests"]
    assert f"image:{env_api.image}" in env_api.get("/readyz").json()["session_environments"]
    reward = env_api.post(f"/sessions/{sid}/reward", json={"tests": tests})
    assert reward.status_code == 200 and reward.json()["status"] == "failed", reward.text  # the bug is still there


def test_a_session_naming_a_missing_image_is_a_422(env_api):
    import base64

    body = {"repo": {"archive_b64": base64.b64encode(TASK["archive"]).decode()},
            "environment": {"image": "rewardbox-no-such-image:1"}}
    r = env_api.post("/sessions", json=body)
    assert r.status_code == 422 and "environment" in r.text, r.text


def test_distributed_workers_grade_items_in_the_image(redis_server, procs):  # noqa: F811
    """Through Redis: the API takes the item as sent (it holds no images), the worker resolves and runs it."""
    import json

    from .distributed import start_cluster, wait_until

    ref = build(TASK)
    prefix, _env, r, _api, url = start_cluster(redis_server, procs, workers=1, REWARDBOX_BACKEND="docker")
    with httpx.Client(base_url=url, timeout=300) as client:
        client.image = ref  # type: ignore[attr-defined]
        results = client.post("/reward/batch", json={"items": [item(client, TASK["patch"]), item(client, ""),
                                                               item(client, "", image="rewardbox-no-such-image:1")]})
        assert [x["status"] for x in results.json()["results"]] == ["passed", "failed", "invalid_input"], results.text

    def reported() -> bool:  # the worker's next heartbeat carries its environments' pools
        beats = [json.loads(b) for b in r.hgetall(f"{prefix}:workers").values()]
        return any(f"image:{ref}" in b.get("environments", {}) for b in beats)

    wait_until(reported, 30, "the worker's heartbeat to show the image's pool")
