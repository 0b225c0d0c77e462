"""The suspicious-construct flags (graders/flags.py), computed from the source alone: one table per language."""

from __future__ import annotations

import base64

import pytest

from graders.flags import QUICK_SCAN_CHARS, flags_for, js_flags, python_flags, scans_quickly

B64_EXIT = base64.b64encode(b"import os; os._exit(0)").decode()


@pytest.mark.parametrize(("code", "flags"), [
    ("def f(x):\n    return x + 1\n", []),
    ("import sys\nsys.exit(0)\n", ["exit_call"]),
    ("raise SystemExit\n", ["exit_call"]),
    ("import os\nos._exit(1)\n", ["exit_call"]),
    ("class A:\n    def __eq__(self, other):\n        return True\n", ["eq_override"]),
    ("class A:\n    def __hash__(self):\n        return 0\n", ["eq_override"]),
    ("import builtins\nbuiltins.print = None\n", ["harness_import", "harness_patch"]),
    ("print = lambda *a: None\n", ["harness_patch"]),
    ("import sys\nsetattr(sys, 'stdout', None)\n", ["harness_patch"]),
    ("import unittest\n", ["harness_import"]),
    ("from _pytest import config\n", ["harness_import"]),
    ("import sys\nf = sys._getframe(1)\n", ["introspection"]),
    ("g = globals()\n", ["introspection"]),
    ("exec('x = 1')\n", ["dynamic_code"]),
    ("run = exec\n", ["dynamic_code"]),
    ("def f(s):\n    return eval(s)\n", []),  # eval of its input, not of data it carries
    ("P = '1 + 1'\nx = eval(P)\n", ["dynamic_code"]),
    (f"import base64\nexec(base64.b64decode('{B64_EXIT}'))\n", ["dynamic_code", "exit_call"]),  # decoded, scanned
    (f"exec(bytes.fromhex('{b'raise SystemExit'.hex()}'))\n", ["dynamic_code", "exit_call"]),
    ("exec(')0(tixe_.so ;so tropmi'[::-1])\n", ["dynamic_code", "exit_call"]),  # reversed text is folded
    ("m = __import__('ctypes')\n", ["harness_import"]),
    ("def f(name):\n    return __import__(name)\n", ["dynamic_code"]),
    ("import os\ndef f(n):\n    return getattr(os, n)\n", ["dynamic_code"]),
    ("import os\nos.getcwd()\n", []),
    ("def f(:\n", []),  # does not parse: nothing of it runs
])
def test_python_flags(code, flags):
    assert python_flags(code) == flags


@pytest.mark.parametrize(("code", "flags"), [
    ("console.log(1);", []),
    ("process.exit(0);", ["exit_call"]),
    ("process['exit'](0);", ["exit_call"]),
    ("// process.exit(0)\nconsole.log(1);", []),
    ("/* process.exit(0) */ console.log(1);", []),
    ("const s = 'process.exit(0)';", []),
    ("const r = /process\\.exit\\(/;", []),
    ("const t = `${process.exit(1)}`;", ["exit_call"]),  # template substitutions are code
    ("eval('1');", ["dynamic_code"]),
    ("const f = new Function('return 1');", ["dynamic_code"]),
    ("const vm = require('vm');", ["dynamic_code"]),
    ("const m = require(name);", ["dynamic_code"]),
    ("const fs = require('fs');", []),
    ("setTimeout('go()', 1);", ["dynamic_code"]),
    ("setTimeout(() => go(), 1);", []),
])
def test_javascript_flags(code, flags):
    assert js_flags(code) == flags


@pytest.mark.parametrize(("language", "code", "flags"), [
    ("python", "exit()", ["exit_call"]),
    ("javascript", "process.exit(1)", ["exit_call"]),
    ("typescript", "eval('x')", ["dynamic_code"]),
    ("rust", "fn main() { std::process::exit(1) }", []),  # Rust is refused elsewhere (graders/rust_tests.py)
    ("cpp", "int main() { exit(1); }", []),
])
def test_each_language_gets_its_own_scanner(language, code, flags):
    assert flags_for(language, code) == flags


@pytest.mark.parametrize(("language", "code", "quick"), [
    ("python", "def f(x):\n    return x + 1\n", True),
    ("rust", "fn main() {}", True),  # no scanner: nothing to do
    ("python", "import zlib\nexec(zlib.decompress(b'x'))\n", False),  # a payload is decoded and scanned
    ("python", "from marshal import loads as l\nl(b'')\n", False),  # an alias names its original too
    ("python", "getattr(x, 'ab' * 9)\n", False),  # folded
    ("python", "\uff45\uff58\uff45\uff43('x = 1')\n", False),  # full-width exec: exec once parsed
    ("python", "x = 1\n" * (QUICK_SCAN_CHARS // 6 + 1), False),
    ("javascript", "let x = 1;", False),  # its scanner walks the source in Python, character by character
])
def test_only_sources_whose_scan_is_bounded_and_short_are_scanned_in_place(language, code, quick):
    """Scanned in place, on the event loop (graders/tests.py): it must not be able to take long."""
    assert scans_quickly(language, code) is quick
