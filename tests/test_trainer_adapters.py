"""Client, trainer adapters and bearer auth, against the real service over HTTP."""

from __future__ import annotations

import json
import socket
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


async def test_an_outage_never_crashes_trl_and_stops_verl_with_a_clear_error(monkeypatch):
    """TRL masks a None reward, so an outage gives None per row; verl cannot skip a sample, so it stops with
    RewardboxUnavailable (after its retry budget, here 0) instead of a raw transport error or a made-up score."""
    url = _closed_port()
    gt = {"assert_case": ["assert add(1, 2) == 3"]}
    with pytest.raises(verl.RewardboxUnavailable, match="could not score"):
        verl.compute_score("mbpp", GOOD, gt, url=url, retry_budget_s=0)
    with pytest.raises(verl.RewardboxUnavailable):
        await verl.compute_score_async("mbpp", GOOD, gt, url=url, retry_budget_s=0)
    funcs = reward_functions(Client(url, retries=0), profile="seed", components=True, retry_budget_s=0)
    values = [f(prompts=["p"], completions=[GOOD], tests=[ADD_TESTS]) for f in funcs]
    assert values == [[None]] * 5


VERL_KEYS = {"score", "acc", "status", "executability", "pass_rate", "quality", "efficiency"}
ADD_GT = {"assert_case": ["assert add(1, 2) == 3", "assert add(2, 2) == 4"]}


def test_verl_results_share_one_key_set_and_take_config_from_reward_kwargs(server, monkeypatch):
    monkeypatch.delenv("REWARDBOX_URL", raising=False)  # reward_kwargs reach every Ray worker; the environment may not
    results = [verl.compute_score("mbpp", r, json.dumps(ADD_GT), url=server, profile=profile)
               for r, profile in ((GOOD, "seed"), (HALF, "seed"), ("no code here", "seed"), (HALF, "pass_rate"),
                                  ("def add(a, b): return a + b", "coderl"))]
    assert all(set(r) == VERL_KEYS for r in results)
    good, half, no_code, half_pass_rate, unfenced_coderl = results
    assert good["score"] > 0.9 and good["acc"] == 1.0 and good["efficiency"] is not None
    assert half["efficiency"] is None and half["acc"] == 0.0  # null, not dropped
    assert no_code == {"score": 0.0, "acc": 0.0, "status": "no_code", "executability": 0.0, "pass_rate": 0.0,
                       "quality": None, "efficiency": None}
    assert half_pass_rate["score"] == 0.5  # verl's sandbox_fusion scorer: the pass fraction
    assert unfenced_coderl["score"] == -1.0 and unfenced_coderl["status"] == "no_code"


async def test_verl_async_compute_score(server):
    gt = {"inputs": ["1\n2\n", "[1]\n[2, 3]\n"], "outputs": ["3", "[1, 2, 3]"], "fn_name": "add"}
    res = await verl.compute_score_async("taco", GOOD, gt, url=server, profile="binary")
    assert res["score"] == 1.0 and res["pass_rate"] == 1.0 and set(res) == VERL_KEYS


def test_verl_options_are_checked_up_front(server):
    with pytest.raises(TypeError, match="unknown reward_kwargs"):
        verl.compute_score("mbpp", GOOD, ADD_GT, url=server, profle="binary")
    with pytest.raises(ValueError, match="needs fallback_score"):
        verl.compute_score("mbpp", GOOD, ADD_GT, url=server, on_infra_error="fallback")
    with pytest.raises(ValueError, match="rejected this sample"):
        verl.compute_score("mbpp", GOOD, ADD_GT, url=server, language="cobol")


def test_trl_one_total_function_by_default_and_components_on_request(server):
    calls = []

    class CountingClient(Client):
        def reward_batch(self, items):
            calls.append(len(items))
            return super().reward_batch(items)

    assert [f.__name__ for f in reward_functions(CountingClient(server))] == ["rewardbox_reward"]
    funcs = reward_functions(CountingClient(server), profile="seed", components=True)
    completions = [[{"role": "assistant", "content": GOOD}], [{"role": "assistant", "content": HALF}]]
    kwargs = {"tests": [ADD_TESTS, json.dumps(ADD_TESTS)]}
    prompts = [[{"role": "user", "content": "add"}]] * 2
    values = {f.__name__: f(prompts=prompts, completions=completions, **kwargs) for f in funcs}
    assert calls == [2]
    assert values["rewardbox_pass_rate"] == [1.0, 0.5]
    assert values["rewardbox_executability"] == [1.0, 1.0]
    assert values["rewardbox_efficiency"][1] is None  # measured only when every test passes
    assert values["rewardbox_reward"][0] > values["rewardbox_reward"][1]


def test_trl_weights_go_to_the_service_and_components_to_log_metric(server):
    metrics, extra = {}, {}
    (reward,) = reward_functions(Client(server), weights={"executability": 0.0, "pass_rate": 1.0, "quality": 0.0,
                                                          "efficiency": 0.0})
    rewards = reward(prompts=["p", "p", "p"], completions=[GOOD, HALF, GOOD], tests=[ADD_TESTS, ADD_TESTS, None],
                     log_metric=metrics.__setitem__, log_extra=extra.__setitem__)
    assert rewards == [1.0, pytest.approx(0.5 * 0.99), None]  # no tests: not applicable; failing: below E + P
    assert metrics["rewardbox/pass_rate"] == 0.75 and metrics["rewardbox/infra_errors"] == 0.0
    assert "rewardbox/quality" not in metrics  # weight 0: never computed, never logged as 0
    assert extra["rewardbox_status"] == ["passed", "failed", "no_tests"]


def test_trl_continuation_prompts_run_as_prompt_plus_completion(server):
    tests = {"kind": "function", "entry_point": "f", "cases": [{"args": [2], "expected": 4}]}
    (reward,) = reward_functions(Client(server), profile="binary")
    prompt = "def f(x):\n    # double\n    return"
    assert reward(prompts=[prompt, prompt], completions=[" x * 2\n", " x + 1\n"],
                  tests=[json.dumps(tests)] * 2) == [1.0, 0.0]
    (completion_only,) = reward_functions(Client(server), profile="binary", program="completion")
    assert completion_only(prompts=[prompt], completions=[" x * 2\n"], tests=[json.dumps(tests)]) == [0.0]


def test_trl_dataset_mistakes_are_clear_errors(server):
    (reward,) = reward_functions(Client(server))
    with pytest.raises(KeyError, match="no 'tests' column"):
        reward(prompts=["p"], completions=[GOOD], solution=["x"], trainer_state=None)
    with pytest.raises(ValueError, match="row 1 of the tests column"):
        reward(prompts=["p", "p"], completions=[GOOD, GOOD], tests=[json.dumps(ADD_TESTS), "{broken"])


def test_trl_outage_gives_none_never_zero():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
    metrics = {}
    (reward,) = reward_functions(Client(url, retries=0), retry_budget_s=0.2)
    assert reward(prompts=["p"], completions=[GOOD], tests=[ADD_TESTS], log_metric=metrics.__setitem__) == [None]
    assert metrics["rewardbox/infra_errors"] == 1.0


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
