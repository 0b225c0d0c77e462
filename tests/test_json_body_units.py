"""Request bodies read by pydantic's JSON parser (service/json_body.py): every body gets the value json.loads gives
it, or json.loads's own error, so the routes answer exactly as they did with FastAPI's json.loads."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

from service.json_body import JSONRequest, parse

from .test_http_units import ADD, ADD_TESTS, client_for, first_error

TRICKY = [
    b'"\\ud800"', b'"\\udc00x"', b'{"\\ud800": 1}', b'"\\ud83d\\ude00"', b'"\xed\xa0\x80"', b'"\xf4\x90\x80\x80"',
    b"NaN", b"[Infinity, -Infinity]", b"1e400", b"-1e400", b"1e-400", b'{"a": 1, "a": 2}', b'"a\x01b"', b'"a\nb"',
    b"123456789012345678901234567890", b"1" * 5000, b"-0", b"-0.0", b"1.0", b"1E5", b"9007199254740993",
    b"2.2250738585072011e-308", b"4.9406564584124654e-324", b"1.7976931348623157e308", b"12345678901234567890.5",
    b"\xef\xbb\xbf{}", b" {} ", b"{}x", b"\xff", b"", b"  ", b"\x00", b"01", b"1.", b".5", b"tru", b'"\\x"', b"[1,]",
    b'{"a": 1,}', b'"\\u00e9"', b'"\xc3\xa9"', b"[" * 300 + b"]" * 300, b'"\x7f"', b"true", b"null",
    '{"a": "é"}'.encode("utf-16"),
]


def as_json_loads(body: bytes) -> tuple[str, str]:
    """What json.loads makes of body: its value (repr, with types) or its error's type."""
    try:
        return "ok", repr(json.loads(body))
    except (ValueError, RecursionError) as e:
        return "error", type(e).__name__


def as_parse(body: bytes) -> tuple[str, str]:
    try:
        return "ok", repr(parse(body))
    except (ValueError, RecursionError) as e:
        return "error", type(e).__name__


@pytest.mark.parametrize("body", TRICKY)
def test_a_body_parses_to_what_json_loads_makes_of_it_or_fails_the_same_way(body):
    assert as_parse(body) == as_json_loads(body)


def test_floats_parse_to_the_same_double_as_json_loads():
    rng = random.Random(25)
    for _ in range(20_000):
        f = rng.uniform(-1, 1) * 10 ** rng.randint(-320, 308)
        for text in (repr(f), f"{f:.17g}", f"{f:.20e}"):
            assert as_parse(text.encode()) == as_json_loads(text.encode()), text


def test_a_malformed_json_error_keeps_its_position():
    with pytest.raises(json.JSONDecodeError) as e:
        parse(b'{"items": [1, 2,]}')
    assert e.value.pos == 16


def test_malformed_json_is_still_fastapis_422_json_invalid_at_its_position():
    with client_for() as (client, _):
        for path in ("/reward", "/reward/batch"):
            r = client.post(path, content=b'{"code": "x",}', headers={"content-type": "application/json"})
            assert first_error(r) == (422, ["body", 13], "json_invalid")


def test_a_lone_surrogate_in_a_body_is_still_422_naming_the_field():
    with client_for() as (client, executor):
        body = b'{"code": "print(1)", "tests": {"kind": "io", "cases": [{"stdin": "\\ud800", "stdout": ""}]}}'
        r = client.post("/reward", content=body, headers={"content-type": "application/json"})
        assert first_error(r) == (422, ["body", "tests", "cases", 0, "stdin"], "string_unicode")
        assert executor.scored == []


def test_an_io_batch_reaches_the_executor_with_its_text_whole():
    stdin = "3 é 日本\n" + "1 2 3\n" * 10_000
    with client_for() as (client, executor):
        items = [{"id": "a", "code": "print(1)", "tests": {"kind": "io", "cases": [{"stdin": stdin, "stdout": "6"}]}},
                 {"id": "b", "code": ADD, "tests": ADD_TESTS}]
        r = client.post("/reward/batch", content=json.dumps({"items": items}, ensure_ascii=True),
                        headers={"content-type": "application/json"})
        assert [x["status"] for x in r.json()["results"]] == ["passed", "passed"]
        assert executor.scored[0].tests.cases[0].stdin == stdin  # type: ignore[union-attr]


def test_the_body_a_route_reads_is_the_one_the_body_limit_received_not_a_copy():
    body = b'{"code": "x"}' * 1000
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict:
        return messages.pop(0)

    async def read() -> bytes:
        return await JSONRequest({"type": "http", "method": "POST", "headers": []}, receive).body()

    assert asyncio.run(read()) is body


def test_a_body_in_many_chunks_is_read_whole():
    messages = [{"type": "http.request", "body": b"ab", "more_body": True},
                {"type": "http.request", "body": b"", "more_body": True},
                {"type": "http.request", "body": b"cd", "more_body": False}]

    async def receive() -> dict:
        return messages.pop(0)

    async def read() -> bytes:
        return await JSONRequest({"type": "http", "method": "POST", "headers": []}, receive).body()

    assert asyncio.run(read()) == b"abcd"
