"""SandboxFusion's dataset API in its own request shapes (plain HTTP; the SDK itself runs in test_frameworks.py)."""

from __future__ import annotations


def post(api, path, **body):
    return api.post(path, json={"config": {}, **body})


def test_prompts_page_and_freeform_wrapping(api, humaneval):
    page = post(api, "/get_prompts", dataset="humaneval_python", offset=160, limit=10).json()
    assert [p["id"] for p in page] == [f"HumanEval/{i}" for i in range(160, 164)]
    assert page[0]["labels"]["entry_point"] == humaneval[160]["entry_point"] and "prompt" not in page[0]["labels"]
    free = post(api, "/get_prompt_by_id", dataset="humaneval_python", id="HumanEval/3",
                config={"extra": {"is_freeform": True}}).json()
    assert free["prompt"].startswith("```python\n" + humaneval[3]["prompt"]) and "markdown" in free["prompt"]
    assert post(api, "/get_prompt_by_id", dataset="humaneval_python", id="HumanEval/999").status_code == 404


def test_a_continuation_is_cut_where_the_function_ends(api, humaneval):
    p = humaneval[2]
    tail = "\nprint('the completion rambles on')\nraise SystemExit(1)\n"
    result = post(api, "/submit", dataset="humaneval_python", id=2, completion=p["canonical_solution"] + tail).json()
    assert result["accepted"] and result["extracted_code"] == p["canonical_solution"]
    assert result["extra"]["rewardbox"]["status"] == "passed"


def test_an_exit_before_the_tests_is_not_accepted(api):
    """SandboxFusion accepts any program that exits 0; rewardbox's harness needs every assert to have run."""
    result = post(api, "/submit", dataset="humaneval_python", id=0,
                  completion="    import os\n    os._exit(0)\n").json()
    assert not result["accepted"]


def test_provided_data_stands_in_for_the_shipped_problems(api):
    row = {"task_id": "mine/0", "prompt": 'def inc(x):\n    """x + 1"""\n', "entry_point": "inc",
           "test": "def check(candidate):\n    assert candidate(1) == 2\n"}
    config = {"dataset_type": "HumanEvalDataset", "provided_data": row}
    submitted = post(api, "/submit", dataset="my_set", id=0, completion="    return x + 1\n", config=config)
    assert submitted.json()["accepted"]
    config = {"dataset_type": "HumanEvalDataset", "provided_data": [row]}
    assert post(api, "/list_ids", dataset="my_set", config=config).json() == ["mine/0"]
    broken = {**row, "prompt": "def inc(x):\n"}  # does not parse: the request's fault, said as such
    config = {"dataset_type": "HumanEvalDataset", "provided_data": broken}
    refused = post(api, "/submit", dataset="my_set", id=0, completion="    return x + 1\n", config=config)
    assert refused.status_code == 400 and "support_code" in refused.json()["detail"]
    unknown_class = post(api, "/get_prompts", dataset="my_set", config={"dataset_type": "NoSuchDataset"})
    assert unknown_class.status_code == 400 and "NoSuchDataset" in unknown_class.json()["detail"]


def test_metrics_function_and_jupyter(api):
    assert post(api, "/get_metrics_function", dataset="humaneval_python").json() == {"function": None}
    assert post(api, "/get_metrics", dataset="humaneval_python", results=[]).json() == {}
    jupyter = api.post("/run_jupyter", json={"cells": ["print(1)"]})
    assert jupyter.status_code == 501 and "/run_code" in jupyter.json()["detail"]
