"""The result cache's key and rules (service/cache.py): what changes the key and what does not, which verdicts are
kept, and the in-process LRU with its TTL."""

from __future__ import annotations

from typing import Any

import pytest

from service.cache import LocalResultCache, as_hit, cache_key, cacheable_status
from service.models import RewardItem

VERSIONS = {"rewardbox": "1.0", "runner": "abc", "python_hash_seed": "0", "image": "img1"}
BASE: dict[str, Any] = {
    "language": "python", "code": "print(input())",
    "tests": {"kind": "io", "cases": [{"stdin": "1", "stdout": "1"}]},
}


def key(versions: dict[str, str] = VERSIONS, **changes: Any) -> str:
    return cache_key(RewardItem.model_validate({**BASE, **changes}), versions)


@pytest.mark.parametrize("changes", [
    {"code": "print(input() )"},
    {"language": "javascript", "code": "console.log(1)"},
    {"tests": {"kind": "io", "cases": [{"stdin": "2", "stdout": "2"}]}},
    {"tests": {"kind": "io", "cases": [{"stdin": "1", "stdout": "1"}], "compare": "exact"}},
    {"tests": None},
    {"limits": {"timeout_s": 5.0}},
    {"reference_code": "print(input())"},
    {"profile": "binary"},
    {"weights": {"quality": 0.0}},
    {"flag_penalty": 0.5},
])
def test_what_a_verdict_depends_on_changes_the_key(changes):
    assert key(**changes) != key()


@pytest.mark.parametrize("versions", [
    {**VERSIONS, "rewardbox": "1.1"}, {**VERSIONS, "runner": "abd"}, {**VERSIONS, "image": "img2"},
    {**VERSIONS, "python_hash_seed": "1"},
])
def test_a_new_release_runner_or_image_changes_the_key(versions):
    assert key(versions) != key()


@pytest.mark.parametrize("changes", [
    {"id": "rollout-7"},
    {"metadata": {"step": 3}},
    {"language": "Python"},  # normalised before the key is taken
    {"limits": {"timeout_s": 10.0, "memory_mb": 512}},  # the defaults, spelled out
])
def test_what_a_verdict_does_not_depend_on_leaves_the_key(changes):
    assert key(**changes) == key()


def test_the_key_is_a_sha256_and_a_given_dump_gives_the_same_one():
    item = RewardItem.model_validate(BASE)
    k = cache_key(item, VERSIONS)
    assert len(k) == 64 and set(k) <= set("0123456789abcdef")
    assert cache_key(item, VERSIONS, item.model_dump(mode="json")) == k


@pytest.mark.parametrize(("status", "kept"), [
    ("passed", True), ("failed", True), ("syntax_error", True), ("timeout", True), ("memory_limit", True),
    ("infra_error", False), ("invalid_input", False),
])
def test_only_verdicts_on_the_program_are_cached(status, kept):
    assert cacheable_status(status) is kept


def test_a_hit_keeps_the_verdict_under_the_asking_item_and_rollout():
    cached = {"id": "a", "rollout_id": "r1", "status": "passed", "reward": 0.9, "details": {"lint": []}}
    hit = as_hit(cached, RewardItem.model_validate({**BASE, "id": "b"}), "r2")
    assert (hit.id, hit.rollout_id, hit.reward, hit.status) == ("b", "r2", 0.9, "passed")
    assert hit.details == {"lint": [], "cache_hit": True, "cached_from": "r1"}


def test_the_local_cache_evicts_the_least_recently_used():
    cache = LocalResultCache(size=2, ttl_s=60)
    cache.put("a", {"n": 1})
    cache.put("b", {"n": 2})
    assert cache.get("a") == {"n": 1}  # a is now the most recent
    cache.put("c", {"n": 3})
    assert (cache.get("a"), cache.get("b"), cache.get("c"), len(cache)) == ({"n": 1}, None, {"n": 3}, 2)


def test_an_expired_entry_is_dropped_and_size_zero_keeps_nothing():
    expired = LocalResultCache(size=2, ttl_s=-1)
    expired.put("a", {"n": 1})
    assert len(expired) == 1 and expired.get("a") is None and len(expired) == 0
    off = LocalResultCache(size=0, ttl_s=60)
    off.put("a", {"n": 1})
    assert off.get("a") is None and len(off) == 0
