"""The PATH a session command gets (sandboxes/inside/session_exec.py): the environment's interpreter first, then
the tools folder (the `python` wrapper), then the system's; the tools folder is outside the workspace."""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys

import pytest

from sandboxes.backends.base import RUNNER_DIR


def _session_exec():
    if str(RUNNER_DIR) not in sys.path:  # the runner's modules import each other by their bare names
        sys.path.insert(0, str(RUNNER_DIR))
    return importlib.import_module("session_exec")


def test_without_an_environment_the_tools_come_before_the_system():
    se = _session_exec()
    assert se.command_path(None) == f"{se.TOOLS}:/usr/local/bin:/usr/bin:/bin"


def test_the_environments_interpreter_comes_before_the_python_wrapper():
    se = _session_exec()
    assert se.command_path("/opt/env/bin").split(":")[:2] == ["/opt/env/bin", se.TOOLS]


def test_the_tools_folder_is_outside_the_workspace():
    se = _session_exec()
    assert not (se.TOOLS + "/").startswith(se.WORKSPACE.rstrip("/") + "/")


def test_the_python_wrapper_runs_the_first_python3_on_path():
    assert _session_exec().PYTHON_WRAPPER == b'#!/bin/sh\nexec python3 "$@"\n'


def test_pip_and_pip3_run_the_pip_of_the_first_python3_on_path_else_of_python():
    se = _session_exec()
    assert se.WRAPPERS["pip"] == se.WRAPPERS["pip3"]
    assert se.WRAPPERS["pip"].splitlines()[1:] == [b'command -v python3 >/dev/null && exec python3 -m pip "$@"',
                                                   b'exec python -m pip "$@"']


def test_pip_is_offline_from_the_wheel_folders_into_the_site_folder_first_on_pythonpath():
    se = _session_exec()
    env = se.command_env(None, ["/opt/rewardbox-env/wheels", se.IMAGE_WHEELS])
    assert env["PIP_NO_INDEX"] == "1" and env["PIP_TARGET"] == env["PYTHONPATH"] == se.SITE
    assert env["PIP_FIND_LINKS"].split(" ") == ["/opt/rewardbox-env/wheels", se.IMAGE_WHEELS]
    assert env["PIP_NO_CACHE_DIR"] == "1"  # a cache would land in HOME, the workspace


def test_git_global_config_is_git_state_not_a_file_in_home():
    se = _session_exec()
    env = se.command_env(None, [])
    assert env["HOME"] == se.WORKSPACE and env["GIT_CONFIG_GLOBAL"].startswith(se.WORKSPACE + "/.git/")


def test_the_site_folder_is_outside_the_workspace():
    se = _session_exec()
    assert not (se.SITE + "/").startswith(se.WORKSPACE.rstrip("/") + "/")


def test_git_paths_are_the_git_folder_and_what_is_below_it():
    sg = _session_exec().session_git
    assert sg.in_git(".git") and sg.in_git(".git/config")
    assert not sg.in_git(".gitignore") and not sg.in_git("pkg/.git") and not sg.in_git(".github/x")


def test_a_git_folder_in_the_snapshot_is_not_in_the_sessions_workspace():
    se = _session_exec()
    ws = se.ws
    snap = ws.Snapshot({".git": ws.Entry("d"), ".git/config": ws.Entry("f", b"[core]"),
                        ".gitignore": ws.Entry("f", b"*.log")}, {})
    assert list(se.workspace_entries(snap)) == [".gitignore"]


@pytest.mark.skipif(shutil.which("git") is None, reason="no git on this host")
def test_the_snapshot_commit_is_the_same_wherever_it_is_made(tmp_path):
    sg = _session_exec().session_git
    heads = []
    for name in ("one", "two"):
        root = tmp_path / name
        (root / "pkg").mkdir(parents=True)
        (root / "pkg" / "a.py").write_bytes(b"x = 1\n")
        (root / ".gitignore").write_bytes(b"*.log\n")
        (root / "run.log").write_bytes(b"ignored, yet committed\n")
        wire, why = sg.make(str(root))
        assert why is None and wire[".git"] == {"k": "d"}
        heads.append(subprocess.run(["git", "-C", str(root), "ls-tree", "-r", "--name-only", "HEAD"],
                                    capture_output=True, text=True, check=True).stdout)
        heads.append(subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                    check=True).stdout)
        assert not [p for p in wire if p.startswith(".git/objects/") and len(p.split("/")[2]) == 2]  # packed
    assert heads[0] == heads[2] == ".gitignore\npkg/a.py\nrun.log\n" and heads[1] == heads[3]


@pytest.mark.skipif(shutil.which("git") is None, reason="no git on this host")
def test_a_repository_over_the_cap_is_not_made(tmp_path, monkeypatch):
    sg = _session_exec().session_git
    monkeypatch.setattr(sg, "MAX_BYTES", 10)
    (tmp_path / "a.py").write_bytes(b"x = 1\n" * 100)
    wire, why = sg.make(str(tmp_path))
    assert wire == {} and why is not None and "over 10" in why
    assert not (tmp_path / ".git").exists()
