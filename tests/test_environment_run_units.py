"""Items' and sessions' `environment` (no sandbox): resolution to a target, the 4xx of each way it can fail, where
it enters the result cache key, and what a repo item may leave out in an image that holds its repository."""

from __future__ import annotations

import pytest

from sandboxes.targets import DEFAULT_TARGET, SandboxTarget
from service.cache import cache_key
from service.config import Settings
from service.environments import pools as environment_pools
from service.environments.models import EnvironmentRef
from service.environments.pools import EnvironmentProblem, Resolver
from service.environments.store import EnvironmentNotFound, EnvironmentNotReady
from service.models import RewardItem
from service.validation import Problem, check_item

IMAGE = "sweb.eval.x86_64.demo:latest"
TESTS = {"kind": "repo", "fail_to_pass": ["tests/test_a.py::test_a"], "test_files": {}}


def resolver(images: set[str] = frozenset({IMAGE}), backend: str = "docker", lookup=None) -> Resolver:  # type: ignore[assignment]
    return Resolver(backend, lookup, image_exists=lambda ref: ref in images)


def test_no_environment_is_the_default_target():
    assert resolver().resolve(None) is DEFAULT_TARGET


def test_an_image_on_the_host_is_a_foreign_target_with_its_interpreter_and_repository():
    ref = EnvironmentRef(image=IMAGE, python="/opt/miniconda3/envs/testbed/bin/python", repo_path="/testbed")
    target = resolver().resolve(ref)
    assert target == SandboxTarget(key=f"image:{IMAGE}", docker_image=IMAGE, foreign=True,
                                   python="/opt/miniconda3/envs/testbed/bin/python", repo_path="/testbed")


def test_an_image_not_on_the_host_is_the_requests_fault_naming_environment_image():
    with pytest.raises(EnvironmentProblem) as e:
        resolver(images=set()).resolve(EnvironmentRef(image="nope:1"))
    assert e.value.loc == ("environment", "image") and "nope:1" in e.value.message


def test_an_own_image_on_bubblewrap_is_refused_naming_environment_image():
    with pytest.raises(EnvironmentProblem) as e:
        resolver(backend="bubblewrap").resolve(EnvironmentRef(image=IMAGE))
    assert e.value.loc == ("environment", "image") and "Docker" in e.value.message


def test_an_id_without_a_store_is_refused_naming_environment_id():
    with pytest.raises(EnvironmentProblem) as e:
        resolver().resolve(EnvironmentRef(id="a" * 64))
    assert e.value.loc == ("environment", "id")


def test_an_id_goes_through_the_lookup_and_its_errors_are_4xx():
    built = SandboxTarget(key="b" * 64)

    def lookup(env_id: str) -> SandboxTarget:
        if env_id == "b" * 64:
            return built
        if env_id == "c" * 64:
            raise EnvironmentNotReady(env_id, "building")
        raise EnvironmentNotFound(f"no environment {env_id[:12]}")

    r = resolver(lookup=lookup)
    assert r.resolve(EnvironmentRef(id="b" * 64)) is built
    with pytest.raises(EnvironmentProblem) as e:
        r.resolve(EnvironmentRef(id="c" * 64))
    assert e.value.loc == ("environment", "id") and "building" in e.value.message
    with pytest.raises(EnvironmentProblem) as e:
        r.resolve(EnvironmentRef(id="d" * 64))
    assert e.value.loc == ("environment", "id") and "no environment" in e.value.message


def test_a_lookup_that_fails_on_its_own_is_not_the_request_s_fault():
    def lookup(env_id: str) -> SandboxTarget:
        raise OSError("cache folder unreadable")

    with pytest.raises(OSError):  # an infrastructure fault, never a 4xx naming the request's field
        resolver(lookup=lookup).resolve(EnvironmentRef(id="e" * 64))


def test_an_image_found_is_not_asked_for_again_per_item():
    asked: list[str] = []
    r = Resolver("docker", None, image_exists=lambda ref: asked.append(ref) or True)
    for _ in range(3):
        r.resolve(EnvironmentRef(image=IMAGE))
    assert asked == [IMAGE]


def test_a_repo_item_needs_no_repo_when_the_image_holds_it():
    item = RewardItem.model_validate({"tests": TESTS, "patch": "", "environment": {"image": IMAGE,
                                                                                  "repo_path": "/testbed"}})
    assert item.repo is None


def test_a_repo_item_without_repo_or_repo_path_is_refused():
    with pytest.raises(ValueError, match="repo: required"):
        RewardItem.model_validate({"tests": TESTS, "patch": "", "environment": {"image": IMAGE}})


def test_check_item_names_environment_image_when_it_is_missing(monkeypatch):
    monkeypatch.setattr(environment_pools, "_resolvers", {"docker": resolver(images=set())})
    item = RewardItem.model_validate({"tests": TESTS, "patch": "", "environment": {"image": "gone:1",
                                                                                  "repo_path": "/testbed"}})
    problem = check_item(item, Settings(backend="docker"))
    assert isinstance(problem, Problem) and problem.loc == ("environment", "image")


def test_the_environment_is_part_of_the_cache_key_and_absent_leaves_old_keys_alone():
    plain = RewardItem.model_validate({"code": "print(1)"})
    here = RewardItem.model_validate({"code": "print(1)", "environment": {"image": IMAGE}})
    there = RewardItem.model_validate({"code": "print(1)", "environment": {"image": "other:1"}})
    keys = {cache_key(i, {"v": "1"}) for i in (plain, here, there)}
    assert len(keys) == 3
    dump = plain.model_dump(mode="json")
    dump.pop("environment")
    assert cache_key(plain, {"v": "1"}) == cache_key(plain, {"v": "1"}, dump)
