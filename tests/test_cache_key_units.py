"""The tests' canonical encoding behind the result-cache key (service/cache.py canonical_bytes, encode_tests): the same
tests get the same key whatever key order or whitespace they arrived in, and different tests never the same key,
for text in any script, floats and integers beyond 64 bits (which orjson refuses and json.dumps encodes); and the
samples of one request that share their tests have them encoded once (RequestEncoder), with the keys they get alone."""

from __future__ import annotations

import asyncio
import hashlib
import json
from typing import Any

import pytest

from service.cache import RequestEncoder, cache_key, canonical_bytes, encode_tests, same_json
from service.config import Settings
from service.executor import checked
from service.models import RewardItem

VERSIONS = {"rewardbox": "1.0", "runner": "abc", "python_hash_seed": "0", "image": "img1"}


def function_item(expected: Any, kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"code": "def f(**k): pass", "tests": {"kind": "function", "entry_point": "f",
                                                   "cases": [{"kwargs": kwargs or {}, "expected": expected}]}}


def key_of_body(body: str) -> str:
    """The key of an item as the server gets it: JSON text, parsed, validated."""
    return cache_key(RewardItem.model_validate(json.loads(body)), VERSIONS)


def test_the_same_tests_in_another_key_order_and_whitespace_get_the_same_key():
    a = ('{"code": "def f(**k): pass", "tests": {"kind": "function", "entry_point": "f", "cases": '
         '[{"kwargs": {"b": 1, "a": [2, {"y": "é", "x": 1.5}]}, "expected": {"q": 3, "p": 1}}]}}')
    b = ('{ "tests" : { "cases" : [ { "expected" : { "p" : 1 , "q" : 3 } , "kwargs" : { "a" : [ 2 , { "x" : 1.5 ,'
         ' "y" : "\\u00e9" } ] , "b" : 1 } } ] , "entry_point" : "f" , "kind" : "function" } ,\n'
         '  "code" : "def f(**k): pass" }')
    assert key_of_body(a) == key_of_body(b)


def test_an_io_item_sent_twice_with_its_fields_reordered_gets_the_same_key():
    cases = [{"stdin": f"{i} ü\n" * 100, "stdout": f"{i}\n"} for i in range(5)]
    a = json.dumps({"code": "print(1)", "tests": {"kind": "io", "cases": cases, "compare": "tokens"}})
    b = json.dumps({"tests": {"compare": "tokens", "cases": [{"stdout": c["stdout"], "stdin": c["stdin"]}
                                                            for c in cases], "kind": "io"}, "code": "print(1)"},
                   indent=3, ensure_ascii=False)
    assert key_of_body(a) == key_of_body(b)


@pytest.mark.parametrize("one, other", [
    ("é", "e\u0301"),  # composed and decomposed: different text
    ("日本", "日本 "),
    ("\U0001f600", "\\ud83d\\ude00"),  # the character against the escape's text
    (1, 1.0),
    (0.1, 0.1000000000000001),
    (1e16, 1e16 + 2),
    (-0.0, 0.0),
    (2**64, 2**64 + 1),  # beyond 64 bits: json.dumps, not orjson
    (2**64, float(2**64)),
    (-(2**63) - 1, -(2**63)),
    (10**40, str(10**40)),
    (True, 1),
    (None, "null"),
    ([1, 2], [2, 1]),
])
def test_different_tests_never_get_the_same_key(one, other):
    assert key_of_body(json.dumps(function_item(one))) != key_of_body(json.dumps(function_item(other)))


@pytest.mark.parametrize("value", [
    {"b": "日本語 é \U0001f600 \u2028 \x00\x1f\x7f", "a": [1, -0.0, 1.5e-7, 1e16, 2**63 - 1, -(2**63)]},
    {"big": 2**64, "z": {"y": 1.25, "x": "é"}, "neg": -(10**30)},  # the json.dumps path
    [0.1 + 0.2, 1e308, 5e-324, 123456789.123456789],
])
def test_the_canonical_text_is_compact_sorted_utf8_json_that_reads_back_as_its_value(value):
    data = canonical_bytes(value)
    assert json.loads(data.decode()) == value
    assert data == canonical_bytes(json.loads(json.dumps(value, indent=2)))  # reparsed: the same bytes
    assert b"\\u00e9" not in data and b": " not in data and b", " not in data


def test_key_order_does_not_change_the_canonical_text_on_either_path():
    for extra in (1, 2**64):  # orjson's path, then json.dumps's
        a = {"b": 1, "a": {"d": extra, "c": "é"}}
        b = {"a": {"c": "é", "d": extra}, "b": 1}
        assert canonical_bytes(a) == canonical_bytes(b)
        assert canonical_bytes(a).startswith(b'{"a":{"c":"\xc3\xa9","d":')


def test_encoded_tests_carry_their_text_and_its_sha256():
    tests = {"kind": "io", "cases": [{"stdin": "1 é\n", "stdout": "1\n"}]}
    encoded = encode_tests(tests)
    assert encoded.sha256 == hashlib.sha256(encoded.data).hexdigest()
    assert json.loads(encoded.json) == tests and encoded.json.encode() == encoded.data


@pytest.mark.parametrize("one, other", [
    (1, 1.0), (1, True), (0, False), (None, False), (0.0, -0.0), ("1", 1), ([1], [1, 1]), ({"a": 1}, {"a": 1, "b": 1}),
    ({"a": 1}, {"b": 1}), ("é", "e\u0301"), (2**64, 2**64 + 1), ([[1, [2.5]]], [[1, [2.25]]]),
])
def test_same_json_tells_apart_what_has_another_canonical_text(one, other):
    assert not same_json(one, other) and not same_json(other, one)
    assert canonical_bytes(one) != canonical_bytes(other)


def test_same_json_holds_for_equal_values_in_another_key_order_and_deep_nesting():
    a = {"a": [1, 2.5, "é", None, True], "b": {"c": -0.0}}
    assert same_json(a, {"b": {"c": -0.0}, "a": [1, 2.5, "é", None, True]})
    deep: list[Any] = []
    other: list[Any] = []
    for _ in range(50_000):
        deep, other = [deep], [other]
    assert same_json(deep, other)


def io_tests(n: int, tag: str = "") -> dict[str, Any]:
    return {"kind": "io", "compare": "lines",
            "cases": [{"stdin": f"{i}{tag}\n" + "5 " * 1000, "stdout": f"{i}\n"} for i in range(n)]}


def test_a_request_encodes_tests_it_has_seen_once_and_gets_what_encoding_them_gives():
    encoder = RequestEncoder()
    first = encoder.encode(io_tests(40))
    again = encoder.encode(json.loads(json.dumps(io_tests(40))))  # equal, not the same objects
    other = encoder.encode(io_tests(40, "x"))
    assert again is first and first == encode_tests(io_tests(40))
    assert other.sha256 != first.sha256 and other == encode_tests(io_tests(40, "x"))


def test_tests_that_differ_only_in_a_type_are_not_taken_for_each_other_within_a_request():
    encoder = RequestEncoder()
    a = {"kind": "function", "entry_point": "f", "cases": [{"args": [1], "expected": 1}]}
    b = {"kind": "function", "entry_point": "f", "cases": [{"args": [1], "expected": 1.0}]}
    c = {"kind": "function", "entry_point": "f", "cases": [{"args": [True], "expected": 1}]}
    assert len({encoder.encode(t).sha256 for t in (a, b, c, a)}) == 3


def test_items_of_one_batch_get_the_keys_they_get_alone():
    settings = Settings()
    raws = [{"code": f"print({i % 3})", "tests": io_tests(5, str(i % 2))} for i in range(6)]
    together = asyncio.run(checked(raws, settings, VERSIONS))
    alone = [asyncio.run(checked([raw], settings, VERSIONS))[0] for raw in raws]
    assert [c.key for c in together] == [c.key for c in alone]
    assert len({c.key for c in together}) == 6 and len({c.tests.sha256 for c in together if c.tests}) == 2
