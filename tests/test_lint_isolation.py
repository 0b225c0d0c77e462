"""A lint's result depends only on the program linted: no program can change how the warm linters read the next.

astroid records an assignment to an attribute of anything it infers (`math.X = 0` lands in the locals of its warm
`math` module), and a persistent linter would carry that into every later program's lint. Each test runs in one
fresh sandbox per backend (one warm pylint server, one warm eslint): the victims are linted first, alone, then
again after every poisoning program, and must get the very same result (messages and score).
"""

from __future__ import annotations

import json

import pytest
import pytest_asyncio

from graders.quality import LINT_LIMITS
from sandboxes import Limits, LintJob, RunJob, SandboxPool, choose_backend
from tests.conftest import BACKENDS

# Every attribute read here is missing (an E1101 each) unless some program planted it; the wildcard import and
# the undefined name depend on what astroid believes collections exports.
PY_VICTIMS = {
    "attributes": (
        '"""A program reading attributes other programs might plant."""\n'
        "import builtins\nimport collections\nimport functools\nimport math\nimport os\nimport os.path\n"
        "import sys\nimport typing\n"
        "from collections import OrderedDict\nfrom typing import List\n\n\n"
        "def probe(x):\n"
        '    """Reads attributes."""\n'
        "    counter = collections.Counter()\n"
        "    error = ValueError()\n"
        "    return [math.X, math.pi, math.floor, os.Y, os.path.Y, collections.Z, typing.W, builtins.FOO, sys.X,\n"
        "            OrderedDict.Q, counter.U, int.T, len.R, List.X, ValueError.X, error.X, str.join, x,\n"
        "            counter.most_common(1), os.environ.V, functools.reduce.X]\n"
    ),
    "wildcard": "from collections import *\n\n\ndef probe():\n    return Counter(), Z, OrderedDict\n",
}
PY_POISONS = {
    "module_attribute": "import math\nmath.X = 0\n",
    "os_attribute": "import os\nos.Y = 0\n",
    "submodule_attribute": "import os.path\nos.path.Y = 0\n",
    "collections_attribute": "import collections\ncollections.Z = 0\n",
    "typing_attribute": "import typing\ntyping.W = 0\n",
    "builtins_attribute": "import builtins\nbuiltins.FOO = 0\n",
    "sys_attribute": "import sys\nsys.X = 0\n",
    "alias": "import math as m\nm.X = 0\n",
    "class_of_a_warm_module": "from collections import OrderedDict\nOrderedDict.Q = 0\n",
    "instance_of_a_warm_class": "import collections\nc = collections.Counter()\nc.U = 1\n",
    "builtin_class": "int.T = 0\nValueError.X = 0\nstr.join = 0\n",
    "builtin_function": "len.R = 0\n",
    "exception_instance": "e = ValueError()\ne.X = 1\n",
    "typing_alias": "from typing import List\nList.X = 0\n",
    "augmented_assignment": "import math\nmath.X += 1\nmath.pi += 1\n",
    "annotated_assignment": "import math\nmath.X: int = 0\n",
    "tuple_target": "import math, os\n(math.X, os.Y) = (1, 2)\n",
    "for_target": "import math\nfor math.X in range(3):\n    pass\n",
    "with_target": "import os\nwith open('f') as os.Y:\n    pass\n",
    "inside_a_function": "import math\n\n\ndef f():\n    math.X = 0\n",
    "inside_a_class": "import math\n\n\nclass K:\n    math.X = 0\n",
    "all_assigned": "import collections\ncollections.__all__ = ['Z']\ncollections.Z = 1\n",
    "all_extended": "import collections\ncollections.__all__ += ['Z']\ncollections.Z = 1\n",
    "all_appended": "import collections\ncollections.__all__.append('Z')\n",
    "attribute_deleted": "import math\ndel math.floor\ndel math.pi\n",
    "module_level_del": "import collections\ndel collections.OrderedDict\ndel collections\n",
    "setattr": "import math\nsetattr(math, 'X', 0)\nmath.__dict__['X'] = 0\nvars(math)['X'] = 0\n",
    "planted_module": "import math\nmath.X = __import__('os')\n",
    "method_replaced": "import collections\ncollections.Counter.most_common = 0\n",
    "instance_of_a_warm_module_object": "import os\nos.environ.V = 1\n",
    "function_of_a_warm_module": "import functools\nfunctools.reduce.X = 1\n",
    "conditional_and_guarded": "import math\nif math:\n    try:\n        math.X = 0\n    except Exception:\n"
                               "        math.Y = 0\n",
}
JS_VICTIMS = {
    "javascript": ("var unused = 1;\nfunction probe(a) {\n  let t = 0;\n  if (a == window) { return undefinedName; }\n"
                   "  return [Object.prototype.x, a.x, process, require];\n}\n"),
    "typescript": ("function probe(x: any): number {\n  let t = 0;\n  return x + undefinedName + window.length;\n}\n"),
}
JS_POISONS = {
    "javascript": {
        "global_comment": "/* global window, undefinedName */\nwindow.x = 1;\n",
        "globals_comment": "/* globals undefinedName: writable */\n",
        "eslint_env": "/* eslint-env browser */\n",
        "eslint_disable": "/* eslint-disable */\nvar a = b;\n",
        "rule_comment": "/* eslint no-undef: 0, no-unused-vars: 0 */\n",
        "exported": "/* exported unused, probe */\n",
        "prototype_assignment": "Object.prototype.x = 1;\nObject.prototype.__proto__ = null;\n",
        "proto_literal": "var o = { __proto__: { ruleId: null }, constructor: { prototype: { x: 1 } } };\n",
        "global_object": "globalThis.undefinedName = 1;\nvar window = 2;\n",
        "module_syntax": "import x from 'y';\nexport default x;\n",
    },
    "typescript": {
        "declare_global": "declare global {\n  var undefinedName: number;\n  var window: { length: number };\n}\n"
                          "export {};\n",
        "declare_var": "declare var undefinedName: number;\n",
        "interface_merge": "interface Object { x: number }\ninterface Window { length: number }\n",
        "reference_lib": '/// <reference lib="dom" />\nwindow.length;\n',
        "ts_nocheck": "// @ts-nocheck\n/* eslint-disable */\nlet a: any = b;\n",
        "namespace": "namespace globalThis { export var undefinedName = 1; }\n",
    },
}


@pytest_asyncio.fixture(scope="module", params=BACKENDS)
async def sandbox(request: pytest.FixtureRequest):
    """One new sandbox per backend (a fresh pylint server and eslint); the victims are linted first, alone."""
    pool = SandboxPool(choose_backend(request.param), size=1, acquire_timeout_s=120)
    await pool.start()
    alone = {("python", name): await lint(pool, code, "python") for name, code in PY_VICTIMS.items()}
    alone |= {(language, language): await lint(pool, code, language) for language, code in JS_VICTIMS.items()}
    yield pool, alone
    await pool.close()


async def lint(pool: SandboxPool, code: str, language: str) -> dict:
    result = await pool.run(LintJob(code=code, language=language, roots=["probe"], limits=LINT_LIMITS))
    assert result.status == "ok", (result.status, result.error)
    return json.loads(result.stdout)


@pytest.mark.parametrize("poison", sorted(PY_POISONS))
async def test_a_python_program_cannot_change_the_next_programs_lint(sandbox, poison):
    pool, alone = sandbox
    await lint(pool, PY_POISONS[poison], "python")
    for name, code in PY_VICTIMS.items():
        assert await lint(pool, code, "python") == alone["python", name], name


@pytest.mark.parametrize("language,poison", sorted((lang, p) for lang, ps in JS_POISONS.items() for p in ps))
async def test_a_javascript_or_typescript_program_cannot_change_the_next_programs_lint(sandbox, language, poison):
    pool, alone = sandbox
    await lint(pool, JS_POISONS[language][poison], language)
    for victim, code in JS_VICTIMS.items():
        assert await lint(pool, code, victim) == alone[victim, victim], victim


async def test_the_victims_are_linted_with_their_missing_attributes_reported(sandbox):
    """The probe is meaningful: alone, the victim gets an E1101 for each planted-looking attribute."""
    _, alone = sandbox
    no_member = [m for m in alone["python", "attributes"]["messages"] if m["id"] == "E1101"]
    assert len(no_member) >= 10, alone["python", "attributes"]["messages"]


LINT_PROCESSES = r"""
import os
found = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"lint_server.py" in f.read():
                found.append(pid)
    except OSError:
        pass
print(len(found))
"""


async def test_a_lint_that_overruns_leaves_no_lint_process_behind(sandbox):
    """The server is killed at the lint's time limit, and the fork linting the program with it."""
    pool, _ = sandbox
    slow = "".join(f"def f{i}(a, b):\n    c = a + b * {i}\n    return [c for _ in range(b)]\n\n\n" for i in range(4000))
    result = await pool.run(LintJob(code=slow, language="python", limits=Limits(wall_s=0.5, total_s=30, cpu_s=30)))
    assert result.status == "timeout", (result.status, result.error)
    left = await pool.run(RunJob(program={"code": LINT_PROCESSES}, limits=Limits(wall_s=5, total_s=5, cpu_s=5)))
    assert left.stdout.strip() == "0", left
    assert (await lint(pool, PY_VICTIMS["attributes"], "python")) == sandbox[1]["python", "attributes"]
