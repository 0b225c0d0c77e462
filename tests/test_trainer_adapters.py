"""Client, trainer adapters and bearer auth, against the real service over HTTP."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import httpx
import pytest

from rewardbox import AsyncClient, Client, RewardboxError
from rewardbox.ground_truth import from_verification_info, from_verl
from trainer.adapters import verl
from trainer.adapters.trl import reward_functions

from .conftest import start_server, stop_server

ADD_TESTS = {"kind": "assert", "test_code": "assert add(1, 2) == 3\nassert add(2, 2) == 4\n"}
GOOD = "```python\ndef add(a, b):\n    return a + b\n```"
HALF = "```python\ndef add(a, b):\n    return 2 * b\n```"


def test_client_scores_one_item_and_a_batch(server):
    with Client(server) as client:
        assert client.reward({"code": GOOD[10:-3], "tests": ADD_TESTS, "profile": "binary"})["reward"] == 1.0
        results = client.reward_batch([{"code": "x", "profile": "nonsense"}, {"code": "pass"}])
        assert [r["status"] for r in results] == ["invalid_input", "passed"]
        assert results[0]["reward"] is None
        assert "python" in client.info()["languages"]


async def test_async_client_has_the_same_surface(server):
    async with AsyncClient(server) as client:
        res = await client.reward({"code": "def add(a, b):\n    return a + b\n", "tests": ADD_TESTS})
        assert res["status"] == "passed"
        assert (await client.run_code(code="print(1)"))["run_result"]["stdout"] == "1\n"


def test_client_retries_429_503_504_with_backoff_then_succeeds():
    answers = [503, 429, 504, 200]
    seen = []

    class Flaky(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's naming
            seen.append(self.path)
            self.rfile.read(int(self.headers["Content-Length"]))
            status = answers.pop(0)
            body = json.dumps({"reward": 1.0}).encode()
            self.send_response(status)
            self.send_header("Retry-After", "0")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with Client(f"http://127.0.0.1:{httpd.server_port}", backoff=0.01) as client:
            assert client.reward({"code": "pass"}) == {"reward": 1.0}
        assert len(seen) == 4
        answers.extend([400])
        with Client(f"http://127.0.0.1:{httpd.server_port}", backoff=0.01) as client, pytest.raises(RewardboxError):
            client.reward({"code": "pass"})
    finally:
        httpd.shutdown()


def test_verl_compute_score_single_batch_and_async(server, monkeypatch):
    monkeypatch.setenv("REWARDBOX_URL", server)
    monkeypatch.setattr(verl, "_client", None)
    gt = {"assert_case": ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]}
    single = verl.compute_score("mbpp", GOOD, gt)
    assert single["score"] > 0.9 and single["pass_rate"] == 1.0
    batch = verl.compute_score_batch(["mbpp"] * 2, [GOOD, HALF], [json.dumps(gt)] * 2)
    assert [b["pass_rate"] for b in batch] == [1.0, 0.5]


async def test_verl_async_compute_score(server, monkeypatch):
    monkeypatch.setenv("REWARDBOX_URL", server)
    gt = {"inputs": ["1\n2\n", "[1]\n[2, 3]\n"], "outputs": ["3", "[1, 2, 3]"], "fn_name": "add"}
    res = await verl.compute_score_async("taco", GOOD, gt)
    assert res["pass_rate"] == 1.0


def test_trl_reward_functions_share_one_scoring_per_batch(server):
    calls = []

    class CountingClient(Client):
        def reward_batch(self, items):
            calls.append(len(items))
            return super().reward_batch(items)

    funcs = reward_functions(CountingClient(server), profile="seed")
    completions = [[{"role": "assistant", "content": GOOD}], [{"role": "assistant", "content": HALF}]]
    kwargs = {"tests": [ADD_TESTS, json.dumps(ADD_TESTS)]}
    values = {f.__name__: f(prompts=["p", "p"], completions=completions, **kwargs) for f in funcs}
    assert calls == [2]
    assert values["rewardbox_pass_rate"] == [1.0, 0.5]
    assert values["rewardbox_executability"] == [1.0, 1.0]
    assert values["rewardbox_efficiency"][1] is None  # measured only when every test passes
    assert values["rewardbox_reward"][0] > values["rewardbox_reward"][1]


def test_dataset_formats_convert_to_tests():
    info = {"language": "python", "test_cases": [{"input": "1", "output": "2", "type": "stdin_stdout"}]}
    assert from_verification_info(json.dumps(info)) == {"kind": "io", "cases": [{"stdin": "1", "stdout": "2"}]}
    assert from_verl({"inputs": ["a"], "outputs": ["b"]}) == {"kind": "io", "cases": [{"stdin": "a", "stdout": "b"}]}
    fn = from_verl({"inputs": [[1, 2]], "outputs": ["3"], "fn_name": "f"})
    assert fn == {"kind": "function", "entry_point": "f", "cases": [{"args": [1, 2], "expected": 3}]}


def test_bearer_token_guards_every_endpoint():
    proc, url = start_server({"REWARDBOX_TOKEN": "s3cret"})
    try:
        for method, path in (("GET", "/healthz"), ("GET", "/v1/info"), ("POST", "/reward"), ("POST", "/run_code"),
                             ("POST", "/reward/batch"), ("POST", "/openrlhf/get_reward")):
            assert httpx.request(method, url + path, json={}).status_code == 401
            assert httpx.request(method, url + path, json={},
                                 headers={"Authorization": "Bearer wrong"}).status_code == 401
        with Client(url, token="s3cret") as client:
            assert client.reward({"code": "pass"})["status"] == "passed"
    finally:
        stop_server(proc)
