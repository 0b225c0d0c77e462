"""Pure logic of node:test repo items: the item's shape, the runner's check of the report stream, the verdicts,
and which Node files a change may not keep (no sandbox here; tests/test_repo_node.py runs them for real)."""

from __future__ import annotations

import json
import sys

import pytest
from pydantic import ValidationError

from sandboxes.backends.base import RUNNER_DIR
from service.models import RewardItem
from service.repos.models import RepoTests

sys.path.insert(0, str(RUNNER_DIR))  # the in-sandbox modules import each other by plain name
import repo_node  # noqa: E402
import repo_workspace  # noqa: E402

ROOT = "/scratch/c/repo"
TOKEN = "t0k"
ID = "test/a.test.js::math > adds"


def frames(*events: dict, token: str = TOKEN) -> repo_node.NodeFrames:
    f = repo_node.NodeFrames(TOKEN, ROOT)
    data = b"".join(json.dumps({**e, "t": token, "n": i}).encode() + b"\n" for i, e in enumerate(events, 1))
    f.feed(data)
    return f


def case(passed: bool = True, file: str = f"{ROOT}/test/a.test.js", path=("math", "adds"), **kw) -> dict:
    return {"event": "case", "file": file, "path": list(path), "passed": passed, "skip": False, "todo": False, **kw}


def test_a_passing_case_in_the_listed_file_passes():
    f = frames({"event": "start"}, case(), {"event": "finish"})
    assert f.cases[ID]["passed"] and f.finished and not f.tampered


def test_skip_and_todo_cases_are_not_passes():
    assert frames({"event": "start"}, case(skip=True)).cases[ID]["status"] == "skipped"
    assert not frames({"event": "start"}, case(todo=True)).cases[ID]["passed"]


def test_an_id_seen_twice_passes_only_if_every_case_passed():
    assert not frames({"event": "start"}, case(False), case(True)).cases[ID]["passed"]


def test_a_case_defined_outside_the_workspace_is_not_a_listed_test():
    assert frames({"event": "start"}, case(file="/opt/rewardbox/node_repo_preload.mjs")).cases == {}


def test_a_test_defined_by_another_file_gets_that_files_id():
    f = frames({"event": "start"}, case(file=f"{ROOT}/src/math.js"))
    assert list(f.cases) == ["src/math.js::math > adds"]


def test_file_urls_are_read_as_paths():
    assert repo_node.test_id(ROOT, f"file://{ROOT}/t.mjs", ["x"]) == "t.mjs::x"
    assert repo_node.test_id(ROOT, f"file://{ROOT}/my%20tests/t.mjs", ["x"]) == "my tests/t.mjs::x"


def test_a_frame_without_the_token_is_tampering():
    assert frames({"event": "start"}, case(), token="guess").tampered


def test_frames_out_of_order_are_tampering():
    f = repo_node.NodeFrames(TOKEN, ROOT)
    f.feed(json.dumps({"event": "start", "t": TOKEN, "n": 2}).encode() + b"\n")
    assert f.tampered


def test_a_line_that_is_not_json_is_tampering():
    f = repo_node.NodeFrames(TOKEN, ROOT)
    f.feed(b"ok 1 - adds\n")
    assert f.tampered


def test_the_reporters_integrity_frame_is_tampering():
    assert frames({"event": "start"}, {"event": "integrity", "problem": "twice"}).tampered == "twice"


def test_tampering_in_one_file_fails_every_listed_test():
    good = frames({"event": "start"}, case(), {"event": "finish"})
    bad = frames({"event": "start"}, token="x")
    out = repo_node.verdicts({"test/a.test.js": good, "test/b.test.js": bad}, [ID, "test/b.test.js::y"],
                             {"test/a.test.js", "test/b.test.js"}, {}, {"status": "ok"})
    assert [v["passed"] for v in out["verdicts"]] == [False, False] and out["tampered"]


def test_verdicts_for_missing_files_unknown_tests_and_early_exit():
    finished = frames({"event": "start"}, case(), {"event": "finish"})
    exited = frames({"event": "start"})
    listed = [ID, "test/a.test.js::nope", "test/b.test.js::x", "test/gone.test.js::x"]
    out = repo_node.verdicts({"test/a.test.js": finished, "test/b.test.js": exited}, listed,
                             {"test/a.test.js", "test/b.test.js"}, {}, {"status": "ok"})
    assert [(v["passed"], v["status"]) for v in out["verdicts"]] == [
        (True, "passed"), (False, "not_run"), (False, "not_run"), (False, "not_run")]
    assert not out["executable"]  # b's process ended before its reporter finished


def test_the_running_test_of_a_timed_out_file_is_the_timeout():
    f = frames({"event": "start"}, {"event": "started", "file": f"{ROOT}/test/a.test.js", "path": ["math", "adds"]})
    out = repo_node.verdicts({"test/a.test.js": f}, [ID, "test/a.test.js::later"], {"test/a.test.js"},
                             {"test/a.test.js": f.running or ""}, {"status": "ok"})
    assert [v["status"] for v in out["verdicts"]] == ["timeout", "not_run"]


PROTECTED = ["package.json", "sub/pkg/package.json", ".npmrc", "jest.config.js", "babel.config.json", ".babelrc",
             ".mocharc.yml", "node_modules/chai/index.js", "a/node_modules/x.js"]


@pytest.mark.parametrize("path", PROTECTED)
def test_node_config_and_vendored_packages_are_protected(path):
    assert repo_workspace.is_protected(path)


@pytest.mark.parametrize("path", ["src/index.js", "test/a.test.js", "lib/node_modules_helper.js"])
def test_package_sources_are_not_protected(path):
    assert not repo_workspace.is_protected(path)


def item(**over) -> dict:
    return {"language": "javascript", "repo": {"id": "0" * 64}, "patch": "",
            "tests": {"kind": "repo", "framework": "node:test", "fail_to_pass": [ID]}, **over}


def test_a_node_test_item_is_accepted():
    assert RewardItem(**item()).tests.framework == "node:test"


def test_the_framework_defaults_to_pytest():
    assert RepoTests(kind="repo", fail_to_pass=["t.py::x"]).framework == "pytest"


def test_node_test_needs_language_javascript():
    with pytest.raises(ValidationError, match="language"):
        RewardItem(**item(language="python"))


def test_pytest_repo_items_stay_python_only():
    with pytest.raises(ValidationError, match="language"):
        RewardItem(**item(tests={"kind": "repo", "fail_to_pass": ["t.py::x"]}))


def test_a_command_is_for_pytest_only():
    with pytest.raises(ValidationError, match="command"):
        RepoTests(kind="repo", framework="node:test", fail_to_pass=[ID], command="node --test")
