"""Stale environments (issue 28), without building anything: an environment built on another base image than the
current one (or on an unknown base: a record written before bases were recorded) is reported stale, is never a
target, and is rebuilt on POST or when an item or session names it; the result cache keys an environment's items
by the base they ran on. The rebuilds themselves are real in tests/test_environments.py; here the store's build is
replaced by a recorder, so these tests start none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from sandboxes.image import image_tag
from service.cache import cache_key, code_versions
from service.environments.models import EnvironmentSpec
from service.environments.routes import install
from service.environments.store import EnvironmentNotReady, EnvironmentRecord, EnvironmentStore, is_stale
from service.models import RewardItem

OLD = "0123456789ab"
SPEC = EnvironmentSpec(setup=["true stale"])


def _store(root: Path) -> tuple[EnvironmentStore, list[str]]:
    """A store whose builds are recorded, not run."""
    store = EnvironmentStore(root)
    started: list[str] = []
    store._build = lambda rec: started.append(rec.id)  # type: ignore[method-assign]
    return store, started


def _record(root: Path, state: str, base: str, created: float = 1000.0) -> str:
    rec = EnvironmentRecord(id=SPEC.environment_id(), state=state, spec=SPEC, created=created, base=base)  # type: ignore[arg-type]
    (root / f"{rec.id}.json").write_text(rec.model_dump_json(exclude={"stale"}))
    if state == "ready":
        (root / f"{rec.id}.ready").write_text(rec.id)
    return rec.id


def _unbuilt(store: EnvironmentStore, env_id: str) -> None:
    """What a finished recorded build leaves: nobody building it (the recorder ran no build)."""
    store._building.discard(env_id)


@pytest.mark.parametrize("state", ["ready", "failed"])
def test_built_on_another_base_is_stale(state):
    rec = EnvironmentRecord(id="a" * 64, state=state, spec=SPEC, created=0.0, base=OLD)  # type: ignore[arg-type]
    assert is_stale(rec, image_tag())
    assert not is_stale(rec.model_copy(update={"base": image_tag()}), image_tag())


def test_a_record_without_a_base_counts_as_built_on_an_unknown_base():
    rec = EnvironmentRecord.model_validate({"id": "a" * 64, "state": "ready", "spec": {}, "created": 0.0})
    assert rec.base == "" and is_stale(rec, image_tag())


def test_a_building_environment_is_never_stale():
    rec = EnvironmentRecord(id="a" * 64, state="building", spec=SPEC, created=0.0, base=OLD)
    assert not is_stale(rec, image_tag())


def test_the_store_reports_base_and_stale_and_never_stores_stale(tmp_path):
    env_id = _record(tmp_path, "ready", OLD)
    store, _ = _store(tmp_path)
    rec = store.get(env_id)
    assert (rec.state, rec.base, rec.stale) == ("ready", OLD, True)
    assert store.base == image_tag()
    store.close()


def test_a_stale_environment_is_never_a_target_and_naming_it_starts_its_rebuild(tmp_path):
    env_id = _record(tmp_path, "ready", OLD)
    store, started = _store(tmp_path)
    with pytest.raises(EnvironmentNotReady) as e:
        store.target(env_id)
    assert e.value.state == "building" and OLD in str(e.value) and image_tag() in str(e.value)
    with pytest.raises(EnvironmentNotReady):  # asked again while it rebuilds: the same answer, one rebuild
        store.target(env_id)
    store._pool.shutdown(wait=True)
    assert started == [env_id]
    store.close()


def test_post_of_a_stale_spec_rebuilds_it_on_the_current_base_keeping_created(tmp_path):
    env_id = _record(tmp_path, "ready", OLD, created=1000.0)
    store, started = _store(tmp_path)
    rec = store.submit(SPEC)
    assert (rec.state, rec.base, rec.stale, rec.created) == ("building", image_tag(), False, 1000.0)
    stored = json.loads((tmp_path / f"{env_id}.json").read_text())
    assert stored["base"] == image_tag() and stored["state"] == "building" and "stale" not in stored
    store._pool.shutdown(wait=True)
    assert started == [env_id]
    store.close()


def test_a_build_failed_on_another_base_is_retried_by_post_but_not_one_failed_on_the_current(tmp_path):
    env_id = _record(tmp_path, "failed", OLD)
    store, started = _store(tmp_path)
    assert store.submit(SPEC).state == "building"
    store._pool.shutdown(wait=True)
    _unbuilt(store, env_id)
    _record(tmp_path, "failed", image_tag())
    assert store.submit(SPEC).state == "failed"
    assert started == [env_id]
    store.close()


def test_an_environment_on_the_current_base_is_answered_as_is(tmp_path):
    env_id = _record(tmp_path, "ready", image_tag())
    store, started = _store(tmp_path)
    assert store.submit(SPEC).state == "ready" and not store.get(env_id).stale
    assert store.target(env_id).key == env_id
    assert started == []
    store.close()


def test_routes_show_base_and_stale_and_post_answers_building(tmp_path):
    env_id = _record(tmp_path, "ready", OLD)
    store, _ = _store(tmp_path)
    app = FastAPI()
    install(app, store)
    with TestClient(app) as client:
        assert client.get(f"/environments/{env_id}").json()["stale"] is True
        listed = {e["id"]: e for e in client.get("/environments").json()["environments"]}
        assert (listed[env_id]["base"], listed[env_id]["stale"]) == (OLD, True)
        posted = client.post("/environments", json=SPEC.model_dump())
        assert (posted.status_code, posted.json()) == (202, {"id": env_id, "state": "building"})
        got = client.get(f"/environments/{env_id}").json()
        assert (got["state"], got["base"], got["stale"]) == ("building", image_tag(), False)
    store.close()


def test_the_previous_root_left_by_a_killed_rebuild_is_removed_at_start(tmp_path):
    old = tmp_path / f".old-{'a' * 64}"
    (old / "usr").mkdir(parents=True)
    EnvironmentStore(tmp_path).close()
    assert not old.exists()


def test_an_environment_item_is_keyed_by_the_base_it_runs_on():
    # A store hands out only environments built on its base, fixed at start as code_versions()["image"] is; a
    # verdict given in an environment built on another base has another key.
    item = RewardItem.model_validate({"code": "print(1)", "environment": {"id": "a" * 64}})
    versions = code_versions()
    assert cache_key(item, versions) != cache_key(item, {**versions, "image": OLD})


def test_the_store_base_is_the_cache_key_image(tmp_path):
    store = EnvironmentStore(tmp_path)
    assert store.base == code_versions()["image"]
    store.close()
