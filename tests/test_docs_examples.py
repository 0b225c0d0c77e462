"""Every ```bash and ```python block in docs/*.md, run as a user would copy it against a real server started with
defaults (the session `server` fixture: `rewardbox serve`, Docker backend), in a shell where the test's own
environment comes first on PATH (as for a user with the venv activated: `python`, `rewardbox`). A bash or python
block followed directly by a ```text block must print exactly that text. Blocks not meant to run are fenced
```text or ```json (docs/contributing.md)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"
BLOCK = re.compile(r"```(bash|python)\n(.*?)```(?:\n+```text\n(.*?)```)?", re.S)
DEFAULT_URLS = ("http://127.0.0.1:8000", "http://localhost:8000", "localhost:8000")


def examples() -> list:
    found = []
    for page in sorted(DOCS.glob("*.md")):
        for number, match in enumerate(BLOCK.finditer(page.read_text())):
            found.append(pytest.param(match.group(1), match.group(2), match.group(3), id=f"{page.name}-{number}"))
    return found


def with_server(code: str, server: str) -> str:
    for url in DEFAULT_URLS:
        code = code.replace(url, server)
    return code


@pytest.mark.parametrize(("language", "code", "shown"), examples())
def test_the_docs_example_runs_as_written(server: str, tmp_path: Path, language: str, code: str, shown: str | None):
    code = with_server(code, server)
    for tool in ("curl", "jq"):  # what the shell examples use besides the venv; a missing one fails, never skips
        if language == "bash" and re.search(rf"\b{tool}\b", code) and shutil.which(tool) is None:
            pytest.fail(f"this example needs {tool}: install it (Debian: apt-get install {tool})")
    command = ["bash", "-euo", "pipefail", "-c", code] if language == "bash" else [sys.executable, "-c", code]
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    out = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip(), "the example printed nothing"
    if shown is not None:
        assert out.stdout.strip() == shown.strip()
