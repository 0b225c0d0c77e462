"""Client, trainer adapters and bearer auth, against the real service over HTTP."""

from __future__ import annotations

import functools
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import httpx
import pytest

from rewardbox import AsyncClient, BadResponse, Client, HTTPStatusError, RewardboxError, TransportError
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


class FakeService:
    """An HTTP server that answers each request with the next of `answers`: (status, headers, body bytes). Stands
    for a proxy or a broken deployment, the boundary a client must survive."""

    def __init__(self, answers: list[tuple[int, dict[str, str], bytes]]) -> None:
        self.answers, self.seen = list(answers), []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):  # noqa: N802 - http.server's naming
                outer.seen.append(self.path)
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, headers, body = outer.answers.pop(0)
                self.send_response(status)
                for k, v in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_GET = _answer

            def log_message(self, *args):
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"

    def __enter__(self) -> FakeService:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def ok(body: object) -> tuple[int, dict[str, str], bytes]:
    return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()


RESULT = {"status": "passed", "reward": 1.0, "components": {}}


def test_client_retries_429_502_503_504_with_backoff_then_succeeds():
    busy = [(code, {"Retry-After": "0"}, b"{}") for code in (503, 429, 502, 504)]
    with FakeService([*busy, ok(RESULT)]) as fake, Client(fake.url, backoff=0.01) as client:
        assert client.reward({"code": "pass"}) == RESULT
        assert len(fake.seen) == 5
    with FakeService([(400, {}, b'{"detail": "no"}')]) as fake, Client(fake.url, backoff=0.01) as client:
        with pytest.raises(HTTPStatusError) as raised:
            client.reward({"code": "pass"})
        assert raised.value.status == 400 and isinstance(raised.value, RewardboxError)


def test_retry_after_is_honoured_up_to_a_cap():
    with FakeService([(429, {"Retry-After": "86400"}, b"{}"), ok(RESULT)]) as fake, \
            Client(fake.url, max_retry_after_s=0.05) as client:
        assert client.reward({"code": "pass"}) == RESULT  # a day asked, 50 ms waited
    policy = Client("http://127.0.0.1:1")
    answer = httpx.Response(429, headers={"Retry-After": "86400"})
    assert policy.delay(answer, 0) == 60.0 and policy.delay(httpx.Response(429), 20) == 30.0
    policy.close()


@pytest.mark.parametrize(("answer", "call"), [
    ((200, {}, b"<html>a proxy page</html>"), "reward"),
    (ok({"status": "passed"}), "reward"),  # no reward
    (ok({"results": [RESULT]}), "batch"),  # fewer results than items: rewards would be misaligned
    (ok({"no": "results"}), "batch"),
    (ok([1, 2]), "info"),
], ids=["not-json", "not-a-result", "fewer-results", "no-results", "info-not-an-object"])
def test_a_malformed_answer_is_a_bad_response_never_a_raw_exception(answer, call):
    with FakeService([answer]) as fake, Client(fake.url, retries=0) as client, pytest.raises(BadResponse):
        if call == "reward":
            client.reward({"code": "pass"})
        elif call == "batch":
            client.reward_batch([{"code": "pass"}, {"code": "pass"}])
        else:
            client.info()


def _closed_port() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


async def test_an_unreachable_service_is_a_transport_error_for_both_clients():
    url = _closed_port()
    with Client(url, retries=1, backoff=0.01) as client, pytest.raises(TransportError):
        client.reward({"code": "pass"})
    async with AsyncClient(url, retries=1, backoff=0.01) as client:
        with pytest.raises(TransportError):
            await client.reward_batch([{"code": "pass"}])


async def test_adapters_give_none_during_an_outage_instead_of_crashing_the_trainer(monkeypatch):
    monkeypatch.setenv("REWARDBOX_URL", _closed_port())
    monkeypatch.setattr(verl, "_client", Client(retries=0))
    monkeypatch.setattr(verl, "AsyncClient", functools.partial(AsyncClient, retries=0))  # no 15 s of back-off
    gt = {"assert_case": ["assert add(1, 2) == 3"]}
    assert verl.compute_score("mbpp", GOOD, gt) is None
    assert verl.compute_score_batch(["mbpp"] * 2, [GOOD, HALF], [gt, gt]) == [None, None]
    assert await verl.compute_score_async("mbpp", GOOD, gt) is None
    funcs = reward_functions(Client(retries=0), profile="seed")
    values = [f(prompts=["p"], completions=[GOOD], tests=[ADD_TESTS]) for f in funcs]
    assert values == [[None]] * 5
    monkeypatch.setattr(verl, "_client", None)


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
