"""OpenRLHF's remote reward protocol, with the payload shape its client sends (query = prompt + response)."""

from __future__ import annotations

import json
import math

PROMPT = "<|im_start|>user\nWrite add(a, b).<|im_end|>\n<|im_start|>assistant\n"
GOOD = "Here you go:\n```python\ndef add(a, b):\n    return a + b\n```<|im_end|>"
BAD = ("```python\ndef add(a, b):\n    return a - b\n```\nand a second try:\n"
       "```py\ndef add(a, b):\n    return a * b\n```")
LABEL = json.dumps({"tests": {"kind": "assert", "test_code": "assert add(1, 2) == 3\nassert add(2, 2) == 4\n"},
                    "profile": "binary"})


def test_rewards_scores_and_logs_come_back_per_query(api):
    r = api.post("/openrlhf/get_reward", json={"query": [PROMPT + GOOD, PROMPT + BAD, PROMPT + "no code here"],
                                               "prompts": [PROMPT] * 3, "labels": [LABEL] * 3})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["rewards"] == [1.0, 0.0, 0.0]
    assert body["scores"] == [1.0, 0.5, 0.0]  # the last block of BAD (a * b) passes add(2, 2) == 4
    assert body["extra_logs"]["no_code"] == [0.0, 0.0, 1.0]
    assert len(body["extra_logs"]["pass_rate"]) == 3


def test_open_r1_verification_info_labels(api):
    info = json.dumps({"language": "python", "test_cases": [
        {"input": "1 2\n", "output": "3\n", "type": "stdin_stdout"},
        {"input": "5 5\n", "output": "10\n", "type": "stdin_stdout"}]})
    response = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    body = api.post("/openrlhf/get_reward", json={"query": [response], "prompts": [""], "labels": [info]}).json()
    assert body["scores"] == [1.0]


def test_humaneval_problem_id_labels(api, humaneval):
    p = humaneval[0]
    response = "```python\n" + p["prompt"] + p["canonical_solution"] + "```"
    body = api.post("/openrlhf/get_reward", json={"query": [response], "labels": [p["task_id"]]}).json()
    assert body["scores"] == [1.0]


def test_unreadable_label_is_422_naming_the_item(api):
    r = api.post("/openrlhf/get_reward", json={"query": [GOOD, GOOD], "labels": [LABEL, "not json"]})
    assert r.status_code == 422
    assert r.json()["detail"][0]["loc"] == ["body", "labels", 1]


def test_json_object_labels_as_openrlhf_passes_them(api):
    label = json.loads(LABEL)
    verl_gt = {"assert_case": ["assert add(1, 2) == 3"]}
    r = api.post("/openrlhf/get_reward", json={"query": [PROMPT + GOOD, PROMPT + BAD], "prompts": [PROMPT] * 2,
                                               "labels": [label, verl_gt]})
    assert r.status_code == 200, r.text
    assert r.json()["scores"] == [1.0, 0.0]  # a * b: add(1, 2) == 2


def test_components_not_computed_are_nan_never_zero(api):
    r = api.post("/openrlhf/get_reward", json={"query": [GOOD, BAD, "no code"], "labels": [LABEL] * 3})
    logs = json.loads(r.text)["extra_logs"]  # JSON NaN, as OpenRLHF's aiohttp client reads it
    assert set(logs) == {"executability", "pass_rate", "quality", "efficiency", "no_code"}
    assert all(math.isnan(v) for v in logs["efficiency"] + logs["quality"])  # binary computes neither
    assert logs["executability"] == [1.0, 1.0, 0.0] and logs["no_code"] == [0.0, 0.0, 1.0]
