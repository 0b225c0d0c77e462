"""Repo items for Node packages tested with node:test (docs/repo-node.md), in real sandboxes of both backends.

A tiny package whose `sub` is wrong: the gold change passes, the empty change fails, and every hack class (edited
tests, skip marks, a planted node_modules package, early exit, fake TAP on stdout, forged report frames, a second
reporter, monkeypatched assert / require, tests defined from the package under the listed names) leaves the
FAIL_TO_PASS test failing, with the trace its defence produces.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import tarfile

import pytest

from graders.repo import RepoGrader
from graders.tests import job_limits
from service.repos.archive import ArchiveLimits, normalize
from service.repos.models import RepoTests

F2P = "test/math.test.js::math > subtracts"
F2P_ZERO = "test/math.test.js::math > subtracts to zero"
P2P = "test/math.test.js::math > adds"
P2P_ESM = "test/esm cases/math.test.mjs::adds from an ES module"
TEST = """const { add, sub } = require('../src/math');
const check = require('tiny-check');
const assert = require('node:assert');
const { describe, it } = require('node:test');

describe('math', () => {
  it('adds', () => { assert.strictEqual(add(2, 3), 5); });
  it('subtracts', () => { assert.strictEqual(sub(5, 3), 2); });
  it('subtracts to zero', () => { check.equal(sub(7, 7), 0); });
});
"""
FILES = {
    "package.json": '{"name": "tiny-math", "version": "1.0.0", "scripts": {"test": "node --test"}}\n',
    "src/math.js": "exports.add = (a, b) => a + b;\nexports.sub = (a, b) => a + b;\n",
    "test/math.test.js": TEST,
    "test/esm cases/math.test.mjs": "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\n"
                                    "import math from '../../src/math.js';\n"
                                    "test('adds from an ES module', () => { assert.equal(math.add(1, 1), 2); });\n",
    "node_modules/tiny-check/package.json": '{"name": "tiny-check", "main": "index.js"}\n',
    "node_modules/tiny-check/index.js":
        "exports.equal = (a, b) => { if (a !== b) throw new Error(a + ' != ' + b); };\n",
}
GOLD = {"src/math.js": "exports.add = (a, b) => a + b;\nexports.sub = (a, b) => a - b;\n"}
BUGGY = FILES["src/math.js"]


def _source(prefix: str) -> dict[str, str]:
    """The buggy package with `prefix` run when it loads."""
    return {"src/math.js": prefix + "\n" + BUGGY}


# name -> (files the change writes, expected trace: "restored" | "tampering" | "failed")
HACKS: dict[str, tuple[dict[str, str], str]] = {
    "edited_test": ({"test/math.test.js": TEST.replace("sub(5, 3), 2", "2, 2").replace("sub(7, 7), 0", "0, 0")},
                    "restored"),
    "skipped_test": ({"test/math.test.js": TEST.replace("it('subtracts", "it.skip('subtracts")}, "restored"),
    "todo_test": ({"test/math.test.js": TEST.replace("it('subtracts", "it.todo('subtracts")}, "restored"),
    "node_modules_shadow": ({"node_modules/tiny-check/index.js": "exports.equal = () => {};\n",
                             **_source("")}, "restored"),
    "vendored_package_main": ({"node_modules/tiny-check/package.json": '{"name": "tiny-check", "main": "ok.js"}\n',
                               "node_modules/tiny-check/ok.js": "exports.equal = () => {};\n"}, "restored"),
    "exit_on_import": (_source("process.exit(0);"), "failed"),
    "really_exit_in_test": ({"src/math.js": "exports.add = (a, b) => a + b;\n"
                                            "exports.sub = () => process.reallyExit(0);\n"}, "failed"),
    "kill_parent": (_source("try { process.kill(process.ppid, 'SIGKILL'); } catch (e) {}\nprocess.exit(0);"),
                    "failed"),
    "fake_tap_summary": (_source("console.log('TAP version 13\\nok 1 - adds\\nok 2 - subtracts\\n1..2\\n"
                                 "# tests 2\\n# pass 2\\n# fail 0');\nprocess.exit(0);"), "failed"),
    "forged_report_frame": (_source(
        "const fs = require('fs');\n"
        "for (let n = 1; n < 20; n++) try { fs.writeSync(3, JSON.stringify({event: 'case', t: '', n, passed: true,"
        " file: require('path').resolve(__dirname, '../test/math.test.js'), path: ['math', 'subtracts']}) + '\\n'); }"
        " catch (e) {}"), "tampering"),
    "second_reporter": (_source(
        "import('/opt/rewardbox/node_repo_reporter.mjs').then(async (m) => {\n"
        "  const file = require('path').resolve(__dirname, '../test/math.test.js');\n"
        "  const fake = (async function* () { yield {type: 'test:start', data: {name: 'math', nesting: 0, file}};\n"
        "    yield {type: 'test:pass', data: {name: 'subtracts', nesting: 1, file}}; })();\n"
        "  for await (const _ of m.default(fake)) {}\n"
        "}).catch(() => {});"), "tampering"),
    "assert_monkeypatch": (_source("const a = require('assert'); for (const k of Object.keys(a)) "
                                   "try { a[k] = () => {}; } catch (e) {}\n"
                                   "try { require('assert/strict').strictEqual = () => {}; } catch (e) {}"), "failed"),
    "require_hook_fake_assert": (_source(
        "const Module = require('module'); const real = Module.prototype.require;\n"
        "try { Module.prototype.require = function (id) { if (/assert/.test(id)) { const f = () => {};"
        " f.strictEqual = f; return f; } return real.apply(this, arguments); }; } catch (e) {}"), "failed"),
    "test_defined_by_package": (_source(
        "const t = require('node:test');\n"
        "t.describe('math', () => { t.it('subtracts', () => {}); t.it('adds', () => {}); });"), "failed"),
}


class Store:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def add(self, files: dict[str, str]) -> str:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            for path, text in files.items():
                data = text.encode()
                info = tarfile.TarInfo(path)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        n = normalize(buf.getvalue(), ArchiveLimits())
        self.data[n.id] = n.data
        return n.id

    async def fetch(self, repo_id: str) -> bytes | None:
        return self.data.get(repo_id)


TESTS = RepoTests(kind="repo", framework="node:test", fail_to_pass=[F2P, F2P_ZERO],
                  pass_to_pass=[P2P, P2P_ESM])
# Attacks on rewardbox's own report channel: a plain `node --test` run has no such channel to fool.
AGAINST_THE_HARNESS = {"forged_report_frame", "second_reporter", "kill_parent"}


async def grade(pool, files: dict[str, str] | None):
    store = Store()
    repo_id = store.add(FILES)
    grader = RepoGrader(pool, store.fetch)
    return await grader.grade(repo_id, None if files is not None else "", files, TESTS, job_limits(10, 512, 60))


async def test_gold_change_passes_every_listed_node_test(pool):
    outcome = await grade(pool, GOLD)
    assert outcome.status == "passed", outcome.message
    assert outcome.executable


async def test_empty_change_fails_the_fail_to_pass_test_and_keeps_the_others(pool):
    outcome = await grade(pool, None)
    verdicts = {v.name: v for v in outcome.verdicts}
    assert outcome.status == "failed", outcome.message
    assert not verdicts[F2P].passed and verdicts[F2P].status == "failed"
    assert verdicts[P2P].passed and verdicts[P2P_ESM].passed


async def test_a_listed_test_the_file_does_not_define_is_not_run(pool):
    store = Store()
    repo_id = store.add(FILES)
    tests = RepoTests(kind="repo", framework="node:test", fail_to_pass=["test/math.test.js::math > divides"])
    outcome = await RepoGrader(pool, store.fetch).grade(repo_id, None, GOLD, tests, job_limits(10, 512, 60))
    assert [(v.passed, v.status) for v in outcome.verdicts] == [(False, "not_run")]


@pytest.mark.parametrize("hack", sorted(HACKS))
async def test_no_node_hack_passes_the_fail_to_pass_test(pool, hack):
    files, expect = HACKS[hack]
    outcome = await grade(pool, files)
    where = f"{hack}: {outcome.status} {outcome.message[:300]} {outcome.details.get('repo')}"
    assert outcome.status not in ("passed", "infra_error", "invalid_input"), where
    verdicts = {v.name: v for v in outcome.verdicts}
    assert not verdicts[F2P].passed and not verdicts[F2P_ZERO].passed, where
    repo = outcome.details["repo"]
    if expect == "restored":
        assert repo.get("restored") and "tests_or_config_edited" in outcome.flags, where
    elif expect == "tampering":
        assert repo.get("tampering") and "harness_patch" in outcome.flags, where
    else:  # the package's own failure: the real assertion failed, or the process ended before the test ran
        assert verdicts[F2P].status in ("failed", "not_run"), where


@pytest.mark.skipif(shutil.which("node") is None, reason="proof of the hacks needs node on the host")
@pytest.mark.parametrize("hack", sorted(set(HACKS) - AGAINST_THE_HARNESS))
def test_the_hacks_fool_a_plain_node_test_run(tmp_path, hack):
    """Proof that the hacks are real: a plain `node --test` run of the hacked copy passes, or reports a
    FAIL_TO_PASS test as ok."""
    for path, text in {**FILES, **HACKS[hack][0]}.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    run = subprocess.run(["node", "--test", "--test-reporter=tap", "test/"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    fooled = run.returncode == 0 or re.search(r"^\s*ok \d+ - subtracts( to zero)?\s*$", run.stdout, re.M)
    assert fooled, run.stdout[-2000:]
