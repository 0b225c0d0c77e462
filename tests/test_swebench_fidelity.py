"""SWE-bench fidelity: the same predictions graded by rewardbox (through the converter and the real service, on
both backends) and by SWE-bench's own procedure (the model patch applied, the test_patch's files restored,
`pytest -rA` on them, the log read by the `swebench` package's parse_log_pytest and get_eval_report) give the same
report: resolved, and the FAIL_TO_PASS / PASS_TO_PASS success and failure lists. rewardbox's verdicts rendered as a
pytest log (service.compat.swebench.pytest_log) read by SWE-bench's parser give it too."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from swebench.harness.constants import END_TEST_OUTPUT, START_TEST_OUTPUT
from swebench.harness.grading import get_eval_report
from swebench.types import TestSpec as EvalSpec

from rewardbox.archive import repo_archive
from service.compat import swebench

from .conftest import BACKENDS, start_server, stop_server
from .repo_hacks import repo_diff

IID = "calc__calc-1"
# A tiny repository at its base commit: add() is broken, mul() works; tests/test_calc.py tests mul only.
SNAPSHOT = {"calc/__init__.py": b"def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
            "tests/test_calc.py": b"import calc\n\n\ndef test_mul():\n    assert calc.mul(3, 4) == 12\n"}
FIXED = {"calc/__init__.py": SNAPSHOT["calc/__init__.py"].replace(b"a - b", b"a + b")}
# The test_patch: a test added to the existing file and a new test file.
TESTS_AFTER = {"tests/test_calc.py": SNAPSHOT["tests/test_calc.py"]
               + b"\n\ndef test_add():\n    assert calc.add(2, 3) == 5\n",
               "tests/test_add_more.py": b"import calc\n\n\ndef test_add_negative():\n"
                                         b"    assert calc.add(-2, -3) == -5\n"}
F2P = ["tests/test_calc.py::test_add", "tests/test_add_more.py::test_add_negative"]
P2P = ["tests/test_calc.py::test_mul"]


def diff(after: dict[str, bytes | None]) -> str:
    return repo_diff.unified_diff({k: SNAPSHOT.get(k) for k in after}, after)


INSTANCE = {"instance_id": IID, "repo": "calc/calc", "patch": diff(FIXED),
            "test_patch": repo_diff.unified_diff({k: SNAPSHOT.get(k) for k in TESTS_AFTER}, TESTS_AFTER),
            "FAIL_TO_PASS": json.dumps(F2P), "PASS_TO_PASS": json.dumps(P2P)}
# Edits the test_patch's file so that test_add passes without the fix (SWE-bench restores it: unresolved).
STUB_TEST = diff({"tests/test_calc.py": TESTS_AFTER["tests/test_calc.py"].replace(b"assert calc.add(2, 3) == 5",
                                                                                    b"pass")})
PREDICTIONS = {
    "gold": INSTANCE["patch"],
    "null": None,
    "empty": "",
    "edits_the_tests": STUB_TEST,
    "fix_and_edits_the_tests": diff({**FIXED, "tests/test_calc.py": SNAPSHOT["tests/test_calc.py"] + b"\n# hi\n"}),
    "breaks_pass_to_pass": diff({"calc/__init__.py": FIXED["calc/__init__.py"].replace(b"a * b", b"a ** b")}),
    "does_not_apply": "--- a/calc/nope.py\n+++ b/calc/nope.py\n@@ -1 +1 @@\n-x\n+y\n",
}
UNKNOWN = {**INSTANCE, "instance_id": IID + "-unknown",
           "FAIL_TO_PASS": json.dumps(F2P + ["tests/test_calc.py::test_nope", "tests/test_missing.py::test_x"])}


@pytest.fixture(scope="module", params=BACKENDS)
def service(request):
    proc, url = start_server({"REWARDBOX_BACKEND": request.param, "REWARDBOX_POOL_SIZE": "1"})
    try:
        yield url
    finally:
        stop_server(proc)


def rewardbox_items(url: str, instances: list[dict], predictions: list[dict], tmp: Path) -> tuple[list[dict], str]:
    (tmp / "archives").mkdir(exist_ok=True)
    for instance in instances:
        (tmp / "archives" / f"{instance['instance_id']}.tar.gz").write_bytes(repo_archive(SNAPSHOT))
    (tmp / "instances.jsonl").write_text("".join(json.dumps(i) + "\n" for i in instances))
    (tmp / "preds.jsonl").write_text("".join(json.dumps(p) + "\n" for p in predictions))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        swebench.main(["--instances", str(tmp / "instances.jsonl"), "--archives", str(tmp / "archives"),
                       "--predictions", str(tmp / "preds.jsonl"), "--url", url])
    return [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()


def swebench_log(instance: dict, model_patch: str | None, work: Path) -> str:
    """SWE-bench's evaluation for a pytest repository, on the host: apply the model patch, check the test_patch's
    files out at the base commit and apply the test_patch, run `pytest -rA` on those files between the markers."""
    shutil.rmtree(work, ignore_errors=True)
    for rel, data in SNAPSHOT.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_bytes(data)
    if model_patch:
        applied = subprocess.run(["patch", "-p1", "--force", "--quiet"], input=model_patch.encode(), cwd=work,
                                 capture_output=True)
        if applied.returncode:
            return ">>>>> Patch Apply Failed\n" + applied.stdout.decode()
    for rel in TESTS_AFTER:  # git checkout <base> -- <test files>
        if rel in SNAPSHOT:
            (work / rel).write_bytes(SNAPSHOT[rel])
        else:
            (work / rel).unlink(missing_ok=True)
    subprocess.run(["patch", "-p1", "--quiet"], input=instance["test_patch"].encode(), cwd=work, check=True)
    run = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", *TESTS_AFTER], cwd=work,
                         capture_output=True, text=True)
    return f"{START_TEST_OUTPUT}\n{run.stdout}\n{END_TEST_OUTPUT}\n"


def swebench_report(instance: dict, model_patch: str | None, log: str, tmp: Path) -> dict:
    spec = EvalSpec(instance_id=instance["instance_id"], image="", eval_script_list=[], repo=instance["repo"],
                    version="1", FAIL_TO_PASS=json.loads(instance["FAIL_TO_PASS"]),
                    PASS_TO_PASS=json.loads(instance["PASS_TO_PASS"]), log_parser="parse_log_pytest",
                    eval_type="pass_and_fail")
    log_path = tmp / f"{instance['instance_id']}.log"
    log_path.write_text(log)
    prediction = {"instance_id": instance["instance_id"], "model_patch": model_patch, "model_name_or_path": "m"}
    report = get_eval_report(spec, prediction, str(log_path), include_tests_status=True)
    for entry in report.values():
        entry.pop("infra_failure_reason", None)
        entry["tests_status"] = {k: v for k, v in entry.get("tests_status", {}).items()
                                 if k in ("FAIL_TO_PASS", "PASS_TO_PASS")} or None
        if entry["tests_status"] is None:
            del entry["tests_status"]
    return report


def graded(url: str, instances: list[dict], predictions: list[dict], tmp: Path) -> tuple[list, list, str]:
    items, warnings = rewardbox_items(url, instances, predictions, tmp)
    with httpx.Client(base_url=url, timeout=300) as client:
        results = client.post("/reward/batch", json={"items": items}).json()["results"]
    return items, results, warnings


def test_rewardbox_reports_what_swebench_reports_on_the_same_predictions(service, tmp_path):
    preds = [{"instance_id": IID, "model_patch": patch, "model_name_or_path": name}
             for name, patch in PREDICTIONS.items()]
    items, results, _ = graded(service, [INSTANCE], preds, tmp_path)
    by_name = {}
    for (name, patch), item, result in zip(PREDICTIONS.items(), items, results, strict=True):
        ours = swebench.report(item, result)
        theirs = swebench_report(INSTANCE, patch, swebench_log(INSTANCE, patch, tmp_path / "work"), tmp_path)
        assert ours == theirs, (name, result["status"], result["message"])
        # rewardbox's own verdicts as a pytest -rA log, read by SWE-bench's parser and grader: the same report.
        assert swebench_report(INSTANCE, patch, swebench.pytest_log(result), tmp_path) == theirs, name
        by_name[name] = (ours[IID], result)
    assert by_name["gold"][0]["resolved"] and by_name["fix_and_edits_the_tests"][0]["resolved"]
    assert [n for n, (r, _) in by_name.items() if r["resolved"]] == ["gold", "fix_and_edits_the_tests"]
    assert by_name["null"][0]["patch_is_None"] and by_name["null"][1]["reward"] == 0.0
    assert by_name["breaks_pass_to_pass"][0]["tests_status"]["PASS_TO_PASS"]["failure"] == P2P
    assert by_name["does_not_apply"][1]["status"] == "patch_error"


def test_restoring_the_test_patch_is_no_flag_and_editing_the_tests_is(service, tmp_path):
    preds = [{"instance_id": IID, "model_patch": PREDICTIONS[n]} for n in ("gold", "edits_the_tests", "null")]
    _, results, _ = graded(service, [INSTANCE], preds, tmp_path)
    gold, edits, null = results
    assert gold["status"] == "passed" and gold["reward"] == 1.0 and gold["flags"] == [], gold
    assert "tests_or_config_edited" in edits["flags"] and edits["status"] == "failed"
    assert null["status"] == "failed" and null["flags"] == []


def test_unknown_fail_to_pass_ids_count_as_failed_as_in_swebench(service, tmp_path):
    preds = [{"instance_id": UNKNOWN["instance_id"], "model_patch": INSTANCE["patch"]}]
    items, results, warnings = graded(service, [UNKNOWN], preds, tmp_path)
    ours = swebench.report(items[0], results[0])
    theirs = swebench_report(UNKNOWN, INSTANCE["patch"], swebench_log(UNKNOWN, INSTANCE["patch"], tmp_path / "w"),
                             tmp_path)
    assert ours == theirs
    assert ours[UNKNOWN["instance_id"]]["tests_status"]["FAIL_TO_PASS"]["failure"] == [
        "tests/test_calc.py::test_nope", "tests/test_missing.py::test_x"]
    assert results[0]["status"] == "failed" and results[0]["reward"] == 0.0
    why = {v["name"]: (v["status"], v["message"]) for v in results[0]["tests"]}
    assert why["tests/test_missing.py::test_x"] == ("not_run", "test file tests/test_missing.py not found")
    assert why["tests/test_calc.py::test_nope"][0] == "not_run"
    assert "tests/test_missing.py::test_x" in warnings and "test_nope" not in warnings
