"""Items and sessions naming a built environment by id, through the real service (`rewardbox serve`), on both
backends: POST /environments builds it, an item with `environment.id` imports its compiled wheel, a session runs
in it, and an id the store does not know (or whose build failed) is a 4xx naming `environment`."""

from __future__ import annotations

import base64
import io
import json
import os
import tarfile
import time

import httpx
import pytest

from .conftest import BACKENDS, serving

# A compiled wheel (markupsafe's _speedups) the default image lacks; small, so the build is quick.
SPEC = {"python": ["markupsafe==2.1.5"]}
CODE = "import markupsafe._speedups as s\ndef escaped(x):\n    return str(s.escape(x))\n"
TESTS = {"kind": "function", "entry_point": "escaped", "cases": [{"args": ["<a>"], "expected": "&lt;a&gt;"}]}
BUILD_S = 600


def _wait_ready(api: httpx.Client, env_id: str) -> dict:
    deadline = time.monotonic() + BUILD_S
    while time.monotonic() < deadline:
        record = api.get(f"/environments/{env_id}").json()
        if record["state"] != "building":
            return record
        time.sleep(1)
    raise AssertionError(f"environment {env_id} still building after {BUILD_S} s")


@pytest.fixture(scope="module", params=BACKENDS)
def api(request):
    with serving({"REWARDBOX_BACKEND": request.param, "REWARDBOX_SESSION_POOL_SIZE": "1"}) as client:
        posted = client.post("/environments", json=SPEC)
        assert posted.status_code in (200, 202), posted.text
        record = _wait_ready(client, posted.json()["id"])
        assert record["state"] == "ready", record
        client.env_id = record["id"]  # type: ignore[attr-defined]
        yield client


def _item(env: dict | None) -> dict:
    body = {"language": "python", "code": CODE, "tests": TESTS, "profile": "binary"}
    return {**body, "environment": env} if env is not None else body


def test_an_item_in_the_environment_uses_its_compiled_wheel(api):
    r = api.post("/reward", json=_item({"id": api.env_id}))
    assert r.status_code == 200 and r.json()["status"] == "passed", r.text
    assert api.env_id in api.get("/readyz").json()["environments"]


def test_the_same_item_in_the_default_image_lacks_the_wheel(api):
    r = api.post("/reward", json=_item(None))
    assert r.status_code == 200 and r.json()["status"] != "passed", r.text


def test_an_unknown_environment_id_is_a_4xx_naming_environment(api):
    r = api.post("/reward", json=_item({"id": "0" * 64}))
    assert 400 <= r.status_code < 500, r.text
    assert "environment" in r.text, r.text


def test_an_environment_whose_build_failed_is_a_4xx_for_items(api):
    posted = api.post("/environments", json={"setup": ["echo this build fails on purpose; exit 7"]})
    assert posted.status_code in (200, 202), posted.text
    record = _wait_ready(api, posted.json()["id"])
    assert record["state"] == "failed" and "fails on purpose" in record.get("log_tail", ""), record
    r = api.post("/reward", json=_item({"id": record["id"]}))
    assert 400 <= r.status_code < 500 and "environment" in r.text, r.text


def _archive() -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = b"def f():\n    return 1\n"
        info = tarfile.TarInfo("pkg/mod.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buf.getvalue()).decode()


def test_a_session_in_the_environment_imports_its_compiled_wheel(api):
    r = api.post("/sessions", json={"repo": {"archive_b64": _archive()}, "environment": {"id": api.env_id}})
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    out = api.post(f"/sessions/{sid}/exec", json={"command": "python3 -c 'import markupsafe._speedups; print(1)'"})
    assert out.status_code == 200 and out.json()["stdout"].strip() == "1", out.text


# An environment id is its spec's hash alone: one built before the base image had git and pip (a cache of an
# older checkout) would be reused as it is, so this test builds a spec of its own.
PIP_SPEC = {"python": ["markupsafe==2.1.5", "six==1.17.0"]}


def test_a_session_in_the_environment_pip_installs_its_wheel_offline_and_has_git(api):
    posted = api.post("/environments", json=PIP_SPEC)
    assert posted.status_code in (200, 202), posted.text
    record = _wait_ready(api, posted.json()["id"])
    assert record["state"] == "ready", record
    r = api.post("/sessions", json={"repo": {"archive_b64": _archive()}, "environment": {"id": record["id"]}})
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]

    def run(command: str) -> dict:
        out = api.post(f"/sessions/{sid}/exec", json={"command": command})
        assert out.status_code == 200, out.text
        return out.json()

    # markupsafe's wheel is in the environment's wheel folder only (the default image's has none)
    installed = run("pip install markupsafe==2.1.5")
    assert installed["exit_code"] == 0 and "Successfully installed markupsafe-2.1.5" in installed["stdout"], installed
    where = run("python -c 'import markupsafe._speedups as s; print(s.__file__)'")
    assert where["stdout"].startswith("/scratch/c/.rewardbox-site/markupsafe/"), where
    edited = run("sed -i 's/return 1/return 2/' mod.py && git diff")  # the archive's top folder is stripped
    assert "+    return 2" in edited["stdout"], edited
    patch = api.get(f"/sessions/{sid}/diff").json()["patch"]
    assert "+    return 2" in patch and "rewardbox-site" not in patch


# Issue 28: an environment built on another base image than the server's (here: its record rewritten to say so, as a
# cache of an older checkout leaves it) is reported stale, an item naming it starts its rebuild and is answered as for
# a building environment, and once rebuilt the item runs on the current base (the tag the build wrote in the image).
STALE_SPEC = {"setup": ["echo built for the stale test > /srv/stale-test"]}
BASE_PROGRAM = "print(open('/opt/rewardbox-env/base').read().strip())"


def _mark_built_on(env_id: str, base: str) -> None:
    from pathlib import Path

    from sandboxes.image import DEFAULT_CACHE

    path = Path(os.environ.get("REWARDBOX_CACHE") or DEFAULT_CACHE) / "envs" / f"{env_id}.json"
    record = json.loads(path.read_text())
    path.write_text(json.dumps({**record, "base": base}))


def test_an_item_naming_a_stale_environment_starts_its_rebuild_and_then_runs_on_the_current_base(api):
    from sandboxes.image import image_tag

    posted = api.post("/environments", json=STALE_SPEC)
    assert posted.status_code in (200, 202), posted.text
    env_id = posted.json()["id"]
    assert _wait_ready(api, env_id)["state"] == "ready"
    _mark_built_on(env_id, "0123456789ab")
    got = api.get(f"/environments/{env_id}").json()
    assert (got["state"], got["base"], got["stale"]) == ("ready", "0123456789ab", True), got
    item = {"code": BASE_PROGRAM, "tests": {"kind": "io", "cases": [{"stdin": "", "stdout": image_tag() + "\n"}]},
            "profile": "binary", "environment": {"id": env_id}}
    refused = api.post("/reward", json=item)
    assert 400 <= refused.status_code < 500 and "environment" in refused.text, refused.text
    assert "building" in refused.text and "0123456789ab" in refused.text, refused.text
    record = _wait_ready(api, env_id)
    assert (record["state"], record["base"], record["stale"]) == ("ready", image_tag(), False), record
    r = api.post("/reward", json=item)
    assert r.status_code == 200 and r.json()["status"] == "passed", r.text
