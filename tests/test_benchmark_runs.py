"""`rewardbox bench`: pass@k over real scored samples, recorded as a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from service.benchmark import pass_at_k


@pytest.mark.parametrize(("n", "c", "k", "want"), [(10, 0, 1, 0.0), (10, 10, 5, 1.0), (10, 5, 1, 0.5),
                                                   (2, 1, 2, 1.0), (4, 1, 2, 0.5)])
def test_pass_at_k_is_the_unbiased_estimator(n, c, k, want):
    assert pass_at_k(n, c, k) == pytest.approx(want)


def test_bench_scores_samples_prints_pass_at_k_and_records_the_run(api, server, humaneval, tmp_path):
    samples = tmp_path / "samples.jsonl"
    with samples.open("w") as f:
        for p in humaneval[:4]:
            f.write(json.dumps({"task_id": p["task_id"], "completion": p["canonical_solution"]}) + "\n")
            f.write(json.dumps({"task_id": p["task_id"], "completion": "    return None\n"}) + "\n")
    out = subprocess.run([sys.executable, "-m", "service.cli", "bench", "--dataset", "humaneval", "--samples",
                          str(samples)], env={**os.environ, "REWARDBOX_URL": server}, capture_output=True, text=True,
                         check=True)
    assert "pass@1" in out.stdout and "0.5000" in out.stdout  # one of two samples right on every task
    runs = api.get("/runs").json()["runs"]
    assert runs[0]["name"] == "humaneval:samples.jsonl"
    assert runs[0]["summary"]["pass@1"] == pytest.approx(0.5) and runs[0]["summary"]["samples"] == 8
