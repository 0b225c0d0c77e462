"""Result cache: an item that was already scored (same language, code, tests, limits, reference, profile, weights,
flag penalty, under the same sandbox image, runner and service version) is answered without running again.

The key is computed here for both modes; embedded mode keeps results in an in-process LRU with a TTL, distributed
mode in Redis (service/distributed/queue.py). Only verdicts on the program are cached, never our own faults.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import orjson

from service.models import ItemResult, RewardItem

# What a result depends on; id and metadata are the client's and do not change a verdict.
KEY_FIELDS = ("language", "code", "tests", "limits", "reference_code", "profile", "weights", "flag_penalty",
              "repo", "patch", "files", "environment")
UNCACHEABLE = ("infra_error", "invalid_input")


def replay_versions() -> dict[str, str]:
    """What a replay must match: service and in-sandbox code, and the seed jobs run with (PYTHONHASHSEED)."""
    from sandboxes.backends.base import runner_digest
    from service import __version__

    return {"rewardbox": __version__, "runner": runner_digest(), "python_hash_seed": "0"}


def code_versions() -> dict[str, str]:
    """What a verdict depends on besides the item: the replay versions and the sandbox image content. Computed from
    the source tree, so API processes and workers of the same release agree without asking."""
    from sandboxes.image import image_tag

    return {**replay_versions(), "image": image_tag()}


@dataclass(frozen=True)
class EncodedTests:
    """An item's tests as canonical JSON, encoded once (an io item's cases are megabytes): hashed into the cache key
    and kept by the rollout store under their own sha256, without encoding them again."""

    data: bytes  # UTF-8
    sha256: str

    @cached_property
    def json(self) -> str:
        return self.data.decode()


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def canonical_bytes(value: Any) -> bytes:
    """value as canonical JSON, UTF-8: keys sorted, no whitespace. The same JSON value gives the same bytes whatever
    its key order or the whitespace it arrived with, and different values never the same bytes (the text parses
    back to its value). orjson does it ~30x faster than json.dumps (a 9 MB io item: 0.6 ms against 22 ms); what it
    refuses (integers beyond 64 bits, nesting past 255) goes through json.dumps, which is as canonical: which
    encoder a value takes depends on the value alone, and each one's text parses back to the value, so two texts
    can be equal only for equal values. Non-finite floats never get here (validation refuses them: orjson would
    write NaN as null)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # text as orjson writes it (UTF-8, not escaped); surrogates cannot be refused here
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
            "utf-8", "surrogatepass")


def encode_tests(tests: Any) -> EncodedTests:
    data = canonical_bytes(tests)
    return EncodedTests(data, hashlib.sha256(data).hexdigest())


def cache_key(item: RewardItem, versions: dict[str, str], dump: dict[str, Any] | None = None,
              tests: EncodedTests | None = None) -> str:
    """dump: the item's model_dump(mode="json"), tests: its tests encoded, when the caller has them already. The
    key is the sha256 of canonical({"item": <KEY_FIELDS of dump but tests>, "tests": <sha256 of the canonical
    tests>, "versions": versions}): the tests (megabytes for io items) are hashed once, and that digest is also
    their name in the rollout store."""
    dump = dump or item.model_dump(mode="json")
    # environment only when set: an item in the default image has the key it would have without the field
    content = {k: v for k, v in dump.items()
               if k in KEY_FIELDS and k != "tests" and (v is not None or k != "environment")}
    tests = tests or encode_tests(dump.get("tests"))
    return hashlib.sha256(canonical({"item": content, "tests": tests.sha256, "versions": versions}).encode()
                          ).hexdigest()


def keyed(item: RewardItem, versions: dict[str, str], dump: dict[str, Any],
          encoder: RequestEncoder | None = None) -> tuple[str, EncodedTests]:
    """The cache key and the encoded tests of a dumped item, the tests encoded once for both (encoder: the
    request's, which encodes tests it has seen in the request already only once)."""
    tests = (encoder or RequestEncoder()).encode(dump.get("tests"))
    return cache_key(item, versions, dump, tests), tests


class RequestEncoder:
    """encode_tests for the items of one request, remembering what it encoded: the samples of one problem that a
    trainer sends together carry the same tests (megabytes for an io item), which are then encoded and hashed once.
    Tests are the same when same_json says so (the same JSON value: what makes the same canonical text); comparing
    two io items' cases is a memcmp of their strings, several times cheaper than encoding and hashing them."""

    def __init__(self) -> None:
        self._seen: dict[tuple[Any, ...], list[tuple[Any, EncodedTests]]] = {}  # by sketch: few compares

    def encode(self, tests: Any) -> EncodedTests:
        seen = self._seen.setdefault(sketch(tests), [])
        for value, encoded in seen:
            if same_json(value, tests):
                return encoded
        encoded = encode_tests(tests)
        seen.append((tests, encoded))
        return encoded


def sketch(value: Any, leaves: int = 32) -> tuple[Any, ...]:
    """A few tokens of value's first leaves (sizes, the ends of strings), to look up the tests seen already: the same
    value sent again (its keys in the same order) has the same sketch, and a request with a thousand different
    tests compares each with few others, not all."""
    out: list[Any] = []
    stack = [value]
    while stack and len(out) < leaves:
        v = stack.pop()
        if isinstance(v, dict):
            out.append(("{", len(v)))
            stack.extend(reversed(v.values()))
        elif isinstance(v, list):
            out.append(("[", len(v)))
            stack.extend(reversed(v))
        elif isinstance(v, str):
            out.append((len(v), v[:16], v[-16:]))
        else:
            out.append(repr(v))
    return tuple(out)


def same_json(a: Any, b: Any) -> bool:
    """Whether two values parsed from JSON are the same JSON value, type for type: unlike ==, 1, 1.0 and true
    differ, and so do 0.0 and -0.0 (their canonical texts differ). Iterative: nesting costs no stack."""
    stack = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        if type(x) is not type(y):
            return False
        if isinstance(x, dict):
            if len(x) != len(y) or x.keys() != y.keys():
                return False
            stack.extend((v, y[k]) for k, v in x.items())
        elif isinstance(x, list):
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif isinstance(x, float):
            if x != y or math.copysign(1.0, x) != math.copysign(1.0, y):
                return False
        elif x != y:  # str, int, bool, None
            return False
    return True


def cacheable_status(status: str) -> bool:
    """Our own faults and bad input are never cached: asking again may give a verdict."""
    return status not in UNCACHEABLE


def cacheable(result: ItemResult) -> bool:
    return cacheable_status(result.status)


def as_hit(cached: dict[str, Any], item: RewardItem, rollout_id: str) -> ItemResult:
    """A cached result handed to another request: its own client id and rollout id, marked as a hit."""
    result = ItemResult.model_validate(cached)
    result.details = {**result.details, "cache_hit": True, "cached_from": result.rollout_id}
    result.id, result.rollout_id = item.id, rollout_id
    return result


class LocalResultCache:
    """LRU with a TTL, in this process (embedded mode)."""

    def __init__(self, size: int, ttl_s: float) -> None:
        self.size, self.ttl_s = size, ttl_s
        self._entries: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()

    def get(self, key: str) -> dict[str, Any] | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] < time.monotonic():
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def put(self, key: str, result: dict[str, Any]) -> None:
        if self.size <= 0:
            return
        self._entries[key] = (time.monotonic() + self.ttl_s, result)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
