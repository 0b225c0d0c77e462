"""A batch larger than the service's queue bound comes back whole and in order through every documented path: the
client package and the trainer adapters cut it into parts (rewardbox/batching.py), and the routes of clients that
cannot (OpenRLHF) cut it on the server (service/infra_retry.py). Real service, real sandboxes."""

from __future__ import annotations

import json

import httpx
import pytest

from rewardbox import AsyncClient, Client
from rewardbox.adapters.trl import reward_functions

from .conftest import start_server, stop_server

BOUND = 4  # REWARDBOX_MAX_QUEUED: test cases queued at once
ITEMS = 20  # of 2 cases each: 10 times the bound


@pytest.fixture(scope="module")
def small_queue():
    proc, url = start_server({"REWARDBOX_MAX_QUEUED": str(BOUND), "REWARDBOX_RESULT_CACHE_SIZE": "0"})
    try:
        yield url
    finally:
        stop_server(proc)


def program(i: int) -> str:
    """Right for item i unless i is a multiple of 3: a result out of place shows as a wrong verdict."""
    return f"def f(x):\n    return x + {i if i % 3 else i + 100}\n"


def case_tests(i: int) -> dict:
    return {"kind": "function", "entry_point": "f", "cases": [{"args": [0], "expected": i},
                                                              {"args": [1], "expected": i + 1}]}


def items() -> list[dict]:
    return [{"id": f"item{i}", "code": program(i), "tests": case_tests(i), "profile": "binary"} for i in range(ITEMS)]


EXPECTED = [0.0 if i % 3 == 0 else 1.0 for i in range(ITEMS)]


def test_a_batch_over_the_bound_sent_raw_is_refused_naming_the_split(small_queue):
    r = httpx.post(small_queue + "/reward/batch", json={"items": items()}, timeout=60)
    assert r.status_code == 422 and "smaller requests" in r.text


def test_the_client_splits_a_batch_over_the_bound_and_keeps_its_order(small_queue):
    with Client(small_queue) as client:
        results = client.reward_batch(items())
    assert [r["id"] for r in results] == [f"item{i}" for i in range(ITEMS)]
    assert [r["reward"] for r in results] == EXPECTED


async def test_the_async_client_splits_a_batch_over_the_bound_and_keeps_its_order(small_queue):
    async with AsyncClient(small_queue) as client:
        results = await client.reward_batch(items())
    assert [r["id"] for r in results] == [f"item{i}" for i in range(ITEMS)]
    assert [r["reward"] for r in results] == EXPECTED


def test_trl_rewards_of_a_batch_over_the_bound_line_up_with_their_completions(small_queue):
    (reward,) = reward_functions(Client(small_queue), profile="binary")
    completions = [f"```python\n{program(i)}```" for i in range(ITEMS)]
    values = reward(prompts=["write f"] * ITEMS, completions=completions,
                    tests=[json.dumps(case_tests(i)) for i in range(ITEMS)])
    assert values == EXPECTED


def test_openrlhf_rewards_of_a_request_over_the_bound_line_up_with_their_queries(small_queue):
    queries = [f"write f\n```python\n{program(i)}```" for i in range(ITEMS)]
    labels = [json.dumps({"tests": case_tests(i), "profile": "binary"}) for i in range(ITEMS)]
    r = httpx.post(small_queue + "/openrlhf/get_reward",
                   json={"query": queries, "prompts": ["write f"] * ITEMS, "labels": labels}, timeout=300)
    assert r.status_code == 200 and r.json()["rewards"] == EXPECTED


SHARED = {"kind": "function", "entry_point": "f", "cases": [{"args": [0], "expected": 1}, {"args": [1], "expected": 2}]}


def shared_items() -> list[dict]:
    """A group of samples of one problem (f(x) = x + 1): right unless i is a multiple of 3."""
    return [{"id": f"s{i}", "code": f"def f(x):\n    return x + {1 if i % 3 else 2}\n# {i}\n"} for i in range(ITEMS)]


def test_the_clients_send_a_groups_defaults_with_every_part_and_keep_its_order(small_queue):
    defaults = {"tests": SHARED, "profile": "binary"}
    with Client(small_queue) as client:
        results = client.reward_batch(shared_items(), defaults=defaults)
    assert [r["id"] for r in results] == [f"s{i}" for i in range(ITEMS)]
    assert [r["reward"] for r in results] == EXPECTED and {r["profile"] for r in results} == {"binary"}

    async def scored() -> list[dict]:
        async with AsyncClient(small_queue) as client:
            return await client.reward_batch(shared_items(), defaults=defaults)

    import asyncio

    assert [r["reward"] for r in asyncio.run(scored())] == EXPECTED
