"""The layering of ARCHITECTURE.md, checked from the sources: each part imports only what it may.

Static (ast over every module), so a function-level import counts as much as one at the top of a file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = {"service", "graders", "sandboxes", "trainer", "rewardbox"}
# What each part may not import (first component of the module name). sandboxes/inside is stricter: see below.
FORBIDDEN = {
    "rewardbox": OURS - {"rewardbox"} | {"fastapi", "pydantic", "uvicorn", "docker", "redis", "torch"},
    "trainer": {"service", "graders", "sandboxes", "fastapi", "uvicorn", "docker", "redis"},
    "service": {"trainer", "torch"},
    "graders": {"service", "trainer", "rewardbox", "fastapi", "pydantic", "uvicorn", "redis", "torch"},
    "sandboxes": {"service", "graders", "trainer", "rewardbox", "fastapi", "pydantic", "uvicorn", "redis", "torch"},
}
# The in-sandbox side runs on the image's python3 with only the stdlib, its sibling files and the image's tools.
INSIDE = ROOT / "sandboxes" / "inside"
IMAGE_PACKAGES = {"pylint", "astroid", "radon", "pytest", "_pytest", "pluggy"}


def imports_of(path: Path) -> set[str]:
    """First components of every absolute module a file imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def sources(part: str) -> list[Path]:
    return [p for p in sorted((ROOT / part).rglob("*.py")) if INSIDE not in p.parents]


@pytest.mark.parametrize("part", sorted(FORBIDDEN))
def test_part_imports_only_what_it_may(part: str) -> None:
    wrong = {f"{p.relative_to(ROOT)}: {sorted(imports_of(p) & FORBIDDEN[part])}"
             for p in sources(part) if imports_of(p) & FORBIDDEN[part]}
    assert not wrong, f"{part} may not import {sorted(FORBIDDEN[part])}: {sorted(wrong)}"


def test_inside_the_sandbox_only_stdlib_siblings_and_image_tools() -> None:
    import sys

    siblings = {p.stem for p in INSIDE.glob("*.py")}
    allowed = set(sys.stdlib_module_names) | siblings | IMAGE_PACKAGES | {"__future__"}
    wrong = {f"{p.name}: {sorted(imports_of(p) - allowed)}" for p in sorted(INSIDE.glob("*.py"))
             if imports_of(p) - allowed}
    assert not wrong, sorted(wrong)


def test_the_rules_see_real_imports() -> None:
    """A rule that parses nothing passes everything: the parser must find what a known file imports."""
    assert {"sandboxes", "graders"} <= imports_of(ROOT / "service" / "scoring.py")
    assert "codec" in imports_of(INSIDE / "judge.py")


# service/'s sub-packages (ARCHITECTURE.md, "Inside service/"): who may import each. The core (service/*.py) and
# the feature packages use one another's shapes; what sits on top, the peers' protocols and the Redis mode, is
# wired in by the app and the command line alone, and sessions are reached only through their routes.
SERVICE = ROOT / "service"
IMPORTED_ONLY_BY = {
    "compat": {"app", "cli", "compat"},
    "distributed": {"app", "cli", "distributed"},
    "sessions": {"app", "distributed", "sessions"},
}


def service_modules_imported(path: Path) -> set[str]:
    """The service sub-packages (or core modules) a file imports, as their second name component."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith("service."):
                names.add(node.module.split(".")[1])
            elif node.module == "service":
                names.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".")[1] for a in node.names if a.name.startswith("service."))
    return names


def owner(path: Path) -> str:
    """A service file's sub-package, or its own module name at the core level."""
    rel = path.relative_to(SERVICE).parts
    return rel[0] if len(rel) > 1 else path.stem


def test_service_sub_packages_are_imported_only_where_the_layout_says() -> None:
    wrong = sorted(f"{p.relative_to(ROOT)} imports service.{name}"
                   for p in sorted(SERVICE.rglob("*.py"))
                   for name in service_modules_imported(p)
                   if name in IMPORTED_ONLY_BY and owner(p) not in IMPORTED_ONLY_BY[name])
    assert not wrong, wrong


def test_service_has_no_relative_imports() -> None:
    """Absolute imports only, so that a module reads the same wherever it sits and moves without edits."""
    relative = sorted(str(p.relative_to(ROOT)) for p in SERVICE.rglob("*.py")
                      if any(isinstance(n, ast.ImportFrom) and n.level > 0 for n in ast.walk(ast.parse(p.read_text()))))
    assert not relative, relative


def test_the_service_rules_see_real_imports() -> None:
    assert {"compat", "distributed", "sessions"} <= service_modules_imported(SERVICE / "app.py")
    assert owner(SERVICE / "distributed" / "worker.py") == "distributed" and owner(SERVICE / "app.py") == "app"
