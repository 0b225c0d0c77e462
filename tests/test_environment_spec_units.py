"""Environment specs without building anything: canonical form, content-addressed ids, field validation, and how
a store reads records left by an earlier process."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from sandboxes.image import image_tag
from service.environments.models import EnvironmentSpec
from service.environments.store import EnvironmentNotFound, EnvironmentNotReady, EnvironmentRecord, EnvironmentStore

JQ_MARKUPSAFE = "f1128771c275eca0ebd49c103e54fbd022e45b123a62c602300b58d9a2aeac0f"


def test_id_is_sha256_of_the_canonical_spec():
    spec = EnvironmentSpec(debian=["jq"])
    assert spec.canonical() == '{"debian":["jq"],"npm":[],"python":[],"setup":[]}'
    assert spec.environment_id() == hashlib.sha256(spec.canonical().encode()).hexdigest()


def test_id_is_stable_across_releases():
    # A changed id would rebuild every user's environments: this value is part of the interface.
    assert EnvironmentSpec(debian=["jq"], python=["markupsafe==2.1.5"]).environment_id() == JQ_MARKUPSAFE


def test_key_order_and_omitted_fields_do_not_change_the_id():
    a = EnvironmentSpec.model_validate({"python": ["markupsafe==2.1.5"], "debian": ["jq"]})
    b = EnvironmentSpec.model_validate({"debian": ["jq"], "npm": [], "python": ["markupsafe==2.1.5"], "setup": []})
    assert a.environment_id() == b.environment_id() == JQ_MARKUPSAFE


def test_list_order_is_part_of_the_id():
    # setup commands run in order, so two orders are two environments
    assert EnvironmentSpec(setup=["a", "b"]).environment_id() != EnvironmentSpec(setup=["b", "a"]).environment_id()


@pytest.mark.parametrize("line", ["numpy==1.26.4", "MarkupSafe[x]>=2, <3", "pyyaml", "a.b-c_d~=1.0"])
def test_pip_requirements_accepted(line):
    EnvironmentSpec(python=[line])


@pytest.mark.parametrize("line", ["-i http://evil/simple", "--find-links=/tmp", "-r /etc/passwd",
                                  "x @ https://evil/x.whl", "x==1\n-e .", "a; os_name == 'nt'", "git+https://x/y"])
def test_pip_options_urls_and_markers_are_rejected_naming_the_field(line):
    with pytest.raises(ValidationError) as err:
        EnvironmentSpec(python=[line])
    assert err.value.errors()[0]["loc"][0] == "python"


@pytest.mark.parametrize("name", ["jest@29.7.0", "@types/node@20.11.5", "left-pad@^1.3.0"])
def test_npm_pinned_packages_accepted(name):
    EnvironmentSpec(npm=[name])


@pytest.mark.parametrize("name", ["jest", "--registry=http://evil@1", "git+https://x/y@1", "../x@1", "x@1\n"])
def test_npm_unpinned_or_non_registry_packages_rejected(name):
    with pytest.raises(ValidationError) as err:
        EnvironmentSpec(npm=[name])
    assert err.value.errors()[0]["loc"][0] == "npm"


@pytest.mark.parametrize("name", ["-o", "--allow-unauthenticated", "Jq", "jq tool"])
def test_debian_options_and_bad_names_rejected(name):
    with pytest.raises(ValidationError):
        EnvironmentSpec(debian=[name])


@pytest.mark.parametrize("command", ["", "   ", "x" * 10_001])
def test_empty_or_huge_setup_commands_rejected(command):
    with pytest.raises(ValidationError):
        EnvironmentSpec(setup=[command])


def test_unknown_fields_rejected():
    with pytest.raises(ValidationError):
        EnvironmentSpec.model_validate({"pip": ["numpy"]})


def _record(root: Path, state: str, base: str | None = None) -> str:
    """A record as a store left it; base: the tag it was built on (default: the current one)."""
    spec = EnvironmentSpec(setup=[f"true {state}"])
    rec = EnvironmentRecord(id=spec.environment_id(), state=state, spec=spec, created=time.time(),  # type: ignore[arg-type]
                            base=image_tag() if base is None else base)
    (root / f"{rec.id}.json").write_text(rec.model_dump_json())
    return rec.id


def test_build_interrupted_by_a_restart_reads_as_failed(tmp_path):
    env_id = _record(tmp_path, "building")
    store = EnvironmentStore(tmp_path)
    rec = store.get(env_id)
    assert rec.state == "failed" and "interrupted" in (rec.error or "")
    with pytest.raises(EnvironmentNotReady):
        store.target(env_id)


def test_ready_record_without_its_marker_is_never_a_target(tmp_path):
    # the marker is written last: a record saying ready without it is a build that did not finish
    env_id = _record(tmp_path, "ready")
    with pytest.raises(EnvironmentNotReady):
        EnvironmentStore(tmp_path).target(env_id)


def test_ready_record_with_its_marker_is_a_target(tmp_path):
    env_id = _record(tmp_path, "ready")
    (tmp_path / f"{env_id}.ready").write_text(env_id)
    target = EnvironmentStore(tmp_path).target(env_id)
    assert target.key == env_id and target.rootfs == str(tmp_path / env_id) and target.wheels is None


@pytest.mark.parametrize("env_id", ["0" * 64, "../etc", "x", "../" + "a" * 61, "A" * 64])
def test_unknown_ids_are_not_found(tmp_path, env_id):
    with pytest.raises(EnvironmentNotFound):
        EnvironmentStore(tmp_path).get(env_id)


def test_service_answers_environment_routes_422_and_404():
    from .test_http_units import client_for
    with client_for() as (client, _):
        bad = client.post("/environments", json={"python": ["-i http://evil/simple"]})
        assert bad.status_code == 422 and "python" in bad.json()["detail"][0]["loc"]
        assert client.get(f"/environments/{'0' * 64}").status_code == 404
        assert "environments" in client.get("/environments").json()


def test_build_running_in_another_process_reads_as_building(tmp_path):
    import fcntl
    env_id = _record(tmp_path, "building")
    with (tmp_path / f".{env_id}.lock").open("a") as lock:  # what a building process holds
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert EnvironmentStore(tmp_path).get(env_id).state == "building"
    assert EnvironmentStore(tmp_path).get(env_id).state == "failed"


def test_work_folder_of_a_killed_build_is_removed_at_start(tmp_path):
    work = tmp_path / f".build-{'a' * 12}-x1"
    (work / "upper").mkdir(parents=True)
    EnvironmentStore(tmp_path)
    assert not work.exists()


def test_a_store_whose_folder_cannot_be_made_starts_lists_and_refuses_builds(tmp_path):
    """An API running as an unprivileged user with no writable cache (docker-compose.yml) must still start."""
    from service.environments.store import EnvironmentsUnavailable

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    store = EnvironmentStore(blocker / "envs")
    try:
        assert store.list() == [] and store.unwritable
        with pytest.raises(EnvironmentsUnavailable, match="REWARDBOX_CACHE"):
            store.submit(EnvironmentSpec(debian=["jq"]))
    finally:
        store.close()
