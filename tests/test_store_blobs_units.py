"""An item's tests are encoded once on the server (service/cache.py keyed) and kept once by the rollout store however
many rollouts share them (service/rollouts/store.py blobs): the cache key is the canonical-JSON key it always was, and
every rollout reads back with its request exactly as it was scored."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path
from typing import Any

from service.cache import KEY_FIELDS, cache_key, keyed
from service.models import RewardItem
from service.rollouts.store import RolloutStore

VERSIONS = {"rewardbox": "1.0", "runner": "abc", "python_hash_seed": "0", "image": "img1"}
CASES = [{"stdin": f"{i} é\n" * 50, "stdout": f"{i}\n"} for i in range(20)]
ITEM: dict[str, Any] = {"id": "a", "language": "python", "code": "print(input())", "metadata": {"x": [1, 2]},
                        "limits": {"timeout_s": 3}, "tests": {"kind": "io", "cases": CASES}}


def dumped(**changes: Any) -> tuple[RewardItem, dict[str, Any]]:
    item = RewardItem.model_validate({**ITEM, **changes})
    return item, item.model_dump(mode="json")


def add(store: RolloutStore, dump: dict[str, Any], item: RewardItem, pre_encoded: bool = True) -> str:
    rollout_id = uuid.uuid4().hex
    key, tests = keyed(item, VERSIONS, dump)
    store.add(dump, {"rollout_id": rollout_id, "id": dump["id"], "status": "passed", "reward": 1.0}, "img",
              VERSIONS, cache_key=key, tests=tests if pre_encoded else None)
    return rollout_id


def canonical_sha(value: Any, ascii: bool = True) -> str:
    """sha256 of compact JSON with sorted keys; the tests' (ascii=False) as UTF-8 text, not escaped (what orjson
    writes: the same as json.dumps for the strings and integers here)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=ascii)
    return hashlib.sha256(text.encode()).hexdigest()


def expected_key(dump: dict[str, Any]) -> str:
    content = {k: v for k, v in dump.items()
               if k in KEY_FIELDS and k != "tests" and not (k == "environment" and v is None)}
    return canonical_sha({"item": content, "tests": canonical_sha(dump["tests"], False), "versions": VERSIONS})


def test_the_key_hashes_the_canonical_item_with_its_tests_digest_and_versions():
    item, dump = dumped()
    assert keyed(item, VERSIONS, dump)[0] == expected_key(dump) == cache_key(item, VERSIONS)


def test_the_key_of_an_item_without_tests_is_the_canonical_one_too():
    item, dump = dumped(tests=None)
    assert keyed(item, VERSIONS, dump)[0] == expected_key(dump)


def test_the_store_names_the_tests_by_the_digest_in_the_key(tmp_path: Path):
    store = RolloutStore(tmp_path / "r.sqlite3")
    item, dump = dumped()
    add(store, dump, item)
    assert store.db.execute("SELECT sha256 FROM blobs").fetchone()[0] == canonical_sha(dump["tests"], False)


def test_rollouts_sharing_tests_store_them_once_and_read_back_whole(tmp_path: Path):
    store = RolloutStore(tmp_path / "r.sqlite3")
    ids = []
    for n in range(4):
        item, dump = dumped(id=f"s{n}", code=f"print(input())  # {n}")
        ids.append((add(store, dump, item, pre_encoded=n % 2 == 0), dump))
    assert store.db.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == 1
    for rollout_id, dump in ids:
        record = store.get(rollout_id)
        assert record is not None and record["request"] == dump


def test_an_item_without_tests_reads_back_without_a_blob(tmp_path: Path):
    store = RolloutStore(tmp_path / "r.sqlite3")
    item, dump = dumped(tests=None)
    record = store.get(add(store, dump, item))
    assert record is not None and record["request"] == dump
    assert store.db.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == 0


def test_retention_drops_tests_no_kept_rollout_uses(tmp_path: Path):
    store = RolloutStore(tmp_path / "r.sqlite3", retention=2)
    kept = []
    for n in range(5):
        item, dump = dumped(id=f"p{n}", tests={"kind": "io", "cases": [{"stdin": str(n), "stdout": str(n)}]})
        kept.append((add(store, dump, item), dump))
    assert store.db.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == 2
    for rollout_id, dump in kept[-2:]:
        record = store.get(rollout_id)
        assert record is not None and record["request"] == dump
