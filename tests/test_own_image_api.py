"""Items and sessions naming a user's own image, through the real service (`rewardbox serve`, Docker backend): the
repo item graded in the image (its interpreter, its /testbed), the image's pool in /readyz and /metrics, a missing
image a 422 naming environment.image, a session whose commands run in the image."""

from __future__ import annotations

import httpx
import pytest

from service.compat.swebench import to_item

from .conftest import serving
from .old_python_image import PYTESTS, mirror_problem
from .old_python_image import build as build_old
from .own_image import PYTHON, TESTBED, build
from .test_distributed import procs, redis_server  # noqa: F401 - the fixtures
from .test_own_image import TASK


@pytest.fixture(scope="module")
def env_api():
    ref = build(TASK)
    with serving({"REWARDBOX_BACKEND": "docker", "REWARDBOX_SESSION_POOL_SIZE": "1"}) as client:
        client.image = ref  # type: ignore[attr-defined]
        yield client


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


def test_in_an_image_without_git_or_pip_a_session_says_so(env_api):
    import base64

    body = {"repo": {"archive_b64": base64.b64encode(TASK["archive"]).decode()},
            "environment": {"image": env_api.image, "python": PYTHON, "repo_path": TESTBED}}
    sid = env_api.post("/sessions", json=body).json()["session_id"]
    git = env_api.post(f"/sessions/{sid}/exec", json={"command": "git status"}).json()
    assert git["exit_code"] == 127 and "git: not found" in git["stderr"], git
    pip = env_api.post(f"/sessions/{sid}/exec", json={"command": "pip install pytest"}).json()
    assert pip["exit_code"] != 0 and "No module named pip" in pip["stderr"], pip


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


def test_a_swebench_row_is_graded_in_its_instance_image(env_api, tmp_path):
    """issue 28 part 6, the converter as a user runs it: a SWE-bench row (test_patch, no test_files, no snapshot)
    and predictions, with the instance image under SWE-bench's own name on the host: the converter names the image,
    reads the test files from it to apply the test_patch, and the items grade gold resolved, empty not resolved."""
    swebench_row_resolves_gold_only(env_api, env_api.image, "", tmp_path)


@pytest.mark.parametrize("pytest_version", PYTESTS)
def test_a_swebench_row_is_graded_in_an_old_python_instance_image(env_api, tmp_path, pytest_version):
    """The same in an instance image as SWE-bench's mostly are: Python 3.9 and pytest 5 or 7
    (tests/old_python_image.py), under its own namespace (the result cache keys an item by the image's name)."""
    problem = mirror_problem()
    if problem:
        pytest.skip(problem)
    swebench_row_resolves_gold_only(env_api, build_old(TASK, pytest_version), f"oldpy{pytest_version}", tmp_path)


def swebench_row_resolves_gold_only(env_api, image: str, namespace: str, tmp_path) -> None:
    import difflib
    import json
    import subprocess
    import sys

    import docker

    from service.compat.swebench import archive_files, instance_image, node_ids, report

    name = instance_image(TASK["instance_id"], namespace)
    docker.from_env().images.get(image).tag(name)
    snapshot = archive_files(TASK["archive"])
    # the test_patch adds a test to the task's test file; the item must carry the file as patched
    path, old = next(iter(TASK["test_files"].items()))
    patched = old + "\n\ndef test_added_by_the_test_patch():\n    assert True\n"
    test_patch = "".join(difflib.unified_diff(snapshot[path].decode().splitlines(True), patched.splitlines(True),
                                              f"a/{path}", f"b/{path}"))
    row = {k: TASK[k] for k in ("instance_id", "FAIL_TO_PASS", "PASS_TO_PASS", "patch")}
    row["PASS_TO_PASS"] = json.dumps([*node_ids(TASK["PASS_TO_PASS"]), f"{path}::test_added_by_the_test_patch"])
    row.update(test_patch=test_patch, repo="pytoolz/toolz", version="1.2.0", base_commit="0" * 40)
    (tmp_path / "instances.jsonl").write_text(json.dumps(row) + "\n")
    preds = [{"instance_id": row["instance_id"], "model_patch": p, "model_name_or_path": m}
             for m, p in (("gold", TASK["patch"]), ("empty", ""))]
    (tmp_path / "preds.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    out = subprocess.run([sys.executable, "-m", "service.compat.swebench",
                          "--instances", str(tmp_path / "instances.jsonl"),
                          "--predictions", str(tmp_path / "preds.jsonl"), "--image-namespace", namespace,
                          "--url", str(env_api.base_url)], capture_output=True, text=True, check=True)
    items = [json.loads(line) for line in out.stdout.splitlines()]
    assert all(i["environment"]["image"] == name and "repo" not in i for i in items), items
    assert items[0]["tests"]["test_files"] == {path: patched}
    assert items[0]["metadata"]["repo"] == "pytoolz/toolz"
    results = [env_api.post("/reward", json=i).json() for i in items]
    resolved = [report(i, r)[row["instance_id"]]["resolved"] for i, r in zip(items, results, strict=True)]
    assert resolved == [True, False], results
