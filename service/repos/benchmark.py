"""An offline repo-task benchmark built from real PyPI sdists that ship their test suites (SWE-smith style).

Each task is one injected bug in a real library: a single token of its source changed (a comparison, an arithmetic
or boolean operator, a small constant), found by the builder below, which keeps a mutation only when pytest shows
it breaks between 1 and 15 tests and leaves at least 3 tests of the same classes passing. The buggy sdist is the
task's snapshot; FAIL_TO_PASS are the tests the bug breaks, PASS_TO_PASS the tests of the same test classes (or
modules) that pass either way (a sample of 60 at most), the gold patch is the diff that removes the bug, and the
trusted test files are the F2P tests' files as the sdist ships them.

The sdists are pinned by version and sha256 and fetched once with `pip download` into
$REWARDBOX_CACHE/sdists (PyPI is reachable where CI runs); the tasks themselves (a few KB) are committed in
service/data/repo_tasks.jsonl, so tests and benchmarks never run the builder. Regenerate (minutes):

    python -m service.repos.benchmark build [--per-repo 2] [--seed 0]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.util
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardbox.archive import repo_archive
from sandboxes.image import cache_dir
from service.repos.archive import archive_files

TASKS_FILE = Path(__file__).resolve().parent.parent / "data" / "repo_tasks.jsonl"
MAX_PASS_TO_PASS = 60


@dataclass(frozen=True)
class Sdist:
    name: str
    version: str
    filename: str
    sha256: str
    sources: tuple[str, ...]  # the library's own modules (relative to the sdist root), where bugs go


SDISTS = {
    "inflection": Sdist("inflection", "0.5.1", "inflection-0.5.1.tar.gz",
                        "1a29730d366e996aaacffb2f1f1cb9593dc38e2ddd30c91250c6dde09ea9b417",
                        ("inflection/__init__.py",)),
    "toolz": Sdist("toolz", "1.2.0", "toolz-1.2.0.tar.gz",
                   "9667a038e9d6ecba37995e26cb2f59ec6420b6ad8dd9677de59db9b956b08490",
                   ("toolz/itertoolz.py", "toolz/dicttoolz.py", "toolz/functoolz.py", "toolz/recipes.py")),
    "more-itertools": Sdist("more-itertools", "11.2.1", "more_itertools-11.2.1.tar.gz",
                            "cbf08fd0af284dc69718b9b76a8e6203df624d70209ea511e4219d350c856f63",
                            ("more_itertools/more.py", "more_itertools/recipes.py")),
}
# One token swapped for another: SWE-smith's procedural "change an operator / a constant" modifications.
SWAPS = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "+": "-", "-": "+", "and": "or",
         "or": "and", "True": "False", "False": "True", "0": "1", "1": "2", "is": "is not", "in": "not in"}


def sdist_path(sdist: Sdist) -> Path:
    """The pinned sdist, downloaded once; its sha256 is checked every time."""
    target = cache_dir() / "sdists"
    path = target / sdist.filename
    if not path.is_file():
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                        "-d", str(target), f"{sdist.name}=={sdist.version}"], check=True)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sdist.sha256:
        path.unlink()
        raise RuntimeError(f"{sdist.filename}: sha256 {digest}, expected {sdist.sha256}")
    return path


@functools.cache
def sdist_files(name: str) -> dict[str, bytes]:
    return archive_files(sdist_path(SDISTS[name]).read_bytes())


def apply_bug(source: bytes, bug: dict[str, Any]) -> bytes:
    """Replace the token `before` at (line, col) by `after`."""
    lines = source.decode().splitlines(keepends=True)
    line = lines[bug["line"] - 1]
    col = bug["col"]
    if line[col:col + len(bug["before"])] != bug["before"]:
        raise ValueError(f"{bug['path']}:{bug['line']}: {bug['before']!r} not found at column {col}")
    lines[bug["line"] - 1] = line[:col] + bug["after"] + line[col + len(bug["before"]):]
    return "".join(lines).encode()


def _diff(old: dict[str, bytes], new: dict[str, bytes]) -> str:
    """sandboxes/inside/repo_diff.py (stdlib, in-sandbox code; loaded by path: inside/ is not a package)."""
    from sandboxes.backends.base import RUNNER_DIR

    spec = importlib.util.spec_from_file_location("rewardbox_repo_diff", RUNNER_DIR / "repo_diff.py")
    assert spec is not None and spec.loader is not None  # a path ending in .py always has a source loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.unified_diff(old, new)


@functools.cache
def _tasks() -> tuple[dict[str, Any], ...]:
    tasks = []
    for line in TASKS_FILE.read_text().splitlines():
        if not line.strip():
            continue
        spec = json.loads(line)
        files = dict(sdist_files(spec["sdist"]))
        good = files[spec["bug"]["path"]]
        files[spec["bug"]["path"]] = apply_bug(good, spec["bug"])
        top = f"{spec['sdist']}-{SDISTS[spec['sdist']].version}"
        tasks.append({**spec, "archive": repo_archive(files, top),
                      "patch": _diff({spec["bug"]["path"]: files[spec["bug"]["path"]]}, {spec["bug"]["path"]: good}),
                      "test_files": {p: files[p].decode() for p in spec["test_files"]}})
    return tuple(tasks)


def tasks() -> list[dict[str, Any]]:
    """The committed tasks, SWE-bench-shaped (instance_id, patch, FAIL_TO_PASS, PASS_TO_PASS, test_files) plus
    `archive` (the buggy snapshot's .tar.gz) and `bug` (what was injected)."""
    return [dict(t) for t in _tasks()]


# ------------------------------------------------------------------------------------------------ the builder

OUTCOMES_PLUGIN = '''
import json, os
OUT = {}
def pytest_runtest_logreport(report):
    if report.failed:
        OUT[report.nodeid] = "failed"
    elif report.skipped:
        OUT.setdefault(report.nodeid, "skipped")
    elif report.when == "call" and not hasattr(report, "context"):
        OUT.setdefault(report.nodeid, "passed")
def pytest_collectreport(report):
    if report.failed:
        OUT["<collect>" + report.nodeid] = "failed"
def pytest_sessionfinish(session):
    with open(os.environ["RB_OUTCOMES"], "w") as f:
        json.dump(OUT, f)
'''


def run_pytest(root: Path, test_files: list[str]) -> dict[str, str]:
    """Node id -> passed | failed | skipped, from pytest run the plain way in root (the builder's own view)."""
    with tempfile.TemporaryDirectory(prefix="rewardbox-build-") as tmp:
        Path(tmp, "rb_outcomes.py").write_text(OUTCOMES_PLUGIN)
        out = Path(tmp, "outcomes.json")
        env = {**os.environ, "PYTHONPATH": tmp, "RB_OUTCOMES": str(out), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
               "PYTHONDONTWRITEBYTECODE": "1"}
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "rb_outcomes", "-p", "no:cacheprovider",
                        "--continue-on-collection-errors", *test_files], cwd=root, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
        return json.loads(out.read_text()) if out.exists() else {}


def _group(nodeid: str) -> str:
    """The test class of a node id (or its module for a module-level test)."""
    parts = nodeid.split("::")
    return "::".join(parts[:-1]) if len(parts) > 2 else parts[0]


def _candidates(source: str, path: str) -> list[dict[str, Any]]:
    found = []
    in_def = False
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NAME and tok.string == "def":
            in_def = True
        if in_def and tok.string in SWAPS and tok.type in (tokenize.OP, tokenize.NAME, tokenize.NUMBER):
            found.append({"path": path, "line": tok.start[0], "col": tok.start[1], "before": tok.string,
                          "after": SWAPS[tok.string]})
    return found


def _test_files_for(files: dict[str, bytes], source_path: str) -> list[str]:
    module = Path(source_path).stem
    tests = sorted(p for p in files if Path(p).name.startswith("test_") and p.endswith(".py"))
    own = [p for p in tests if Path(p).name == f"test_{module}.py"]
    return own or tests


def build(per_repo: int, seed: int, tries: int = 40) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    specs = []
    for name, sdist in SDISTS.items():
        files = sdist_files(name)
        candidates = [c for path in sdist.sources for c in _candidates(files[path].decode(), path)]
        rng.shuffle(candidates)
        found: list[dict[str, Any]] = []
        seen_lines, baselines = set(), {}
        for cand in candidates[:tries]:
            if len(found) >= per_repo or (cand["path"], cand["line"]) in seen_lines:
                continue
            test_files = _test_files_for(files, cand["path"])
            with tempfile.TemporaryDirectory(prefix="rewardbox-build-") as tmp:
                root = Path(tmp)
                for path, data in files.items():
                    (root / path).parent.mkdir(parents=True, exist_ok=True)
                    (root / path).write_bytes(data)
                key = tuple(test_files)
                if key not in baselines:
                    baselines[key] = run_pytest(root, test_files)
                (root / cand["path"]).write_bytes(apply_bug(files[cand["path"]], cand))
                after = run_pytest(root, test_files)
            before = baselines[key]
            if any(k.startswith("<collect>") for k in after) or not after:
                continue
            f2p = sorted(n for n, o in before.items() if o == "passed" and after.get(n) != "passed")
            if not 1 <= len(f2p) <= 15:
                continue
            groups = {_group(n) for n in f2p}
            p2p = sorted(n for n, o in before.items() if o == "passed" and after.get(n) == "passed"
                         and _group(n) in groups)
            if len(p2p) < 3:  # a task should also show what a fix must not break
                continue
            if len(p2p) > MAX_PASS_TO_PASS:  # a sample keeps every item (and CI) fast
                p2p = sorted(random.Random(f"{seed}:{cand['path']}:{cand['line']}").sample(p2p, MAX_PASS_TO_PASS))
            seen_lines.add((cand["path"], cand["line"]))
            index = len(found)
            found.append({"instance_id": f"{name}-{sdist.version}-bug{index}", "sdist": name, "bug": cand,
                          "FAIL_TO_PASS": f2p, "PASS_TO_PASS": p2p,
                          "test_files": sorted({n.split("::", 1)[0] for n in f2p})})
            print(f"{name}: {cand['path']}:{cand['line']} {cand['before']!r} -> {cand['after']!r}: "
                  f"{len(f2p)} fail-to-pass, {len(p2p)} pass-to-pass", file=sys.stderr)
        specs += found
    return specs


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Build the repo-task benchmark from pinned PyPI sdists")
    p.add_argument("command", choices=["build", "list"])
    p.add_argument("--per-repo", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    if a.command == "list":
        for t in tasks():
            print(t["instance_id"], len(t["FAIL_TO_PASS"]), len(t["PASS_TO_PASS"]), len(t["archive"]))
        return
    specs = build(a.per_repo, a.seed)
    TASKS_FILE.parent.mkdir(parents=True, exist_ok=True)
    TASKS_FILE.write_text("".join(json.dumps(s, sort_keys=True) + "\n" for s in specs))
    print(f"{len(specs)} tasks written to {TASKS_FILE}", file=sys.stderr)


if __name__ == "__main__":
    main()
