"""The PATH a session command gets (sandboxes/inside/session_exec.py): the environment's interpreter first, then
the tools folder (the `python` wrapper), then the system's; the tools folder is outside the workspace."""

from __future__ import annotations

import importlib
import sys

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
