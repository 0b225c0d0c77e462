"""service.compat.swebench without a sandbox: predictions to items (null is no patch), report() and pytest_log() read by
the `swebench` package's own parser and grader."""

from __future__ import annotations

import contextlib
import io
import json

from swebench.harness.grading import get_eval_report
from swebench.types import TestSpec as EvalSpec

from service.compat import swebench

INSTANCE = {"instance_id": "x__x-1", "patch": "GOLD", "FAIL_TO_PASS": json.dumps(["t.py::a", "t.py::b[1-2]"]),
            "PASS_TO_PASS": ["t.py::c", "t.py::d"]}


def swebench_report(item: dict, model_patch: str | None, log: str, tmp_path) -> dict:
    spec = EvalSpec(instance_id="x__x-1", image="", eval_script_list=[], repo="x/x", version="1",
                    FAIL_TO_PASS=item["tests"]["fail_to_pass"], PASS_TO_PASS=item["tests"]["pass_to_pass"],
                    log_parser="parse_log_pytest", eval_type="pass_and_fail")
    (tmp_path / "log").write_text(log)
    report = get_eval_report(spec, {"instance_id": "x__x-1", "model_patch": model_patch}, str(tmp_path / "log"), True)
    for entry in report.values():
        entry.pop("infra_failure_reason", None)
        if "tests_status" in entry:
            entry["tests_status"] = {k: entry["tests_status"][k] for k in ("FAIL_TO_PASS", "PASS_TO_PASS")}
    return report


def test_a_null_model_patch_is_no_patch_and_never_the_gold_one():
    null = swebench.prediction_item(INSTANCE, {"instance_id": "x__x-1", "model_patch": None}, "r")
    assert null["patch"] == "" and null["metadata"]["patch_is_None"]
    missing = swebench.prediction_item(INSTANCE, {"instance_id": "x__x-1"}, "r")
    assert missing["patch"] == "" and missing["metadata"]["patch_is_None"]
    empty = swebench.prediction_item(INSTANCE, {"instance_id": "x__x-1", "model_patch": ""}, "r")
    assert empty["patch"] == "" and not empty["metadata"]["patch_is_None"]
    assert swebench.to_item(INSTANCE, "r")["patch"] == "GOLD"


def verdicts(**passed: bool) -> list[dict]:
    names = {"a": "t.py::a", "b": "t.py::b[1-2]", "c": "t.py::c", "d": "t.py::d"}
    return [{"name": names[k], "passed": ok, "status": "passed" if ok else "skipped", "message": "why\nnot"}
            for k, ok in passed.items()]


def test_report_and_pytest_log_agree_with_swebench_on_each_list(tmp_path):
    item = swebench.prediction_item(INSTANCE, {"instance_id": "x__x-1", "model_patch": "P"}, "r")
    for result in ({"status": "passed", "tests": verdicts(a=True, b=True, c=True, d=True)},
                   {"status": "failed", "tests": verdicts(a=True, b=False, c=True, d=False)},
                   {"status": "failed", "tests": verdicts(a=True, c=True, d=True)},  # b never reported
                   {"status": "patch_error", "message": "the patch does not apply", "tests": []}):
        ours = swebench.report(item, result)
        theirs = swebench_report(item, "P", swebench.pytest_log(result), tmp_path)
        assert ours == theirs, result
    assert swebench.report(item, {"status": "passed", "tests": verdicts(a=True, b=True, c=True, d=True)}
                           )["x__x-1"]["resolved"]


def test_a_null_prediction_reports_patch_is_none_like_swebench(tmp_path):
    item = swebench.prediction_item(INSTANCE, {"instance_id": "x__x-1", "model_patch": None}, "r")
    result = {"status": "failed", "tests": verdicts(a=False, b=False, c=True, d=True)}
    assert swebench.report(item, result) == swebench_report(item, None, swebench.pytest_log(result), tmp_path)
    assert swebench.report(item, result)["x__x-1"] == {"patch_is_None": True, "patch_exists": False,
                                                       "patch_successfully_applied": False, "resolved": False,
                                                       "infra_failure": False}


def test_unknown_ids_are_those_whose_file_exists_nowhere():
    item = swebench.to_item({**INSTANCE, "FAIL_TO_PASS": ["t.py::zz", "u.py::a", "new.py::a"],
                             "test_files": {"new.py": ""}}, "r")
    assert swebench.unknown_ids(item, {"t.py": b""}) == ["u.py::a"]


def test_the_report_command_writes_reports_and_logs(tmp_path):
    item = swebench.prediction_item(INSTANCE, {"instance_id": "x__x-1", "model_patch": "P"}, "r")
    result = {"status": "failed", "tests": verdicts(a=True, b=False, c=True, d=True)}
    (tmp_path / "items.jsonl").write_text(json.dumps(item) + "\n")
    (tmp_path / "results.jsonl").write_text(json.dumps(result) + "\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        swebench.main(["report", "--items", str(tmp_path / "items.jsonl"), "--results", str(tmp_path / "results.jsonl"),
                       "--logs", str(tmp_path / "logs")])
    assert json.loads(out.getvalue()) == swebench.report(item, result)
    log = (tmp_path / "logs" / "x__x-1" / "test_output.txt").read_text()
    assert swebench_report(item, "P", log, tmp_path) == swebench.report(item, result)
