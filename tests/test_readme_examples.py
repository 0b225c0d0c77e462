"""The README's examples, run as a user would copy them, against a real server: the Python quick start (its
printed output must be the one shown) and the first curl example."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
DEFAULT_URL = "http://127.0.0.1:8000"


def block_after(heading: str, language: str, start: int = 0) -> tuple[str, int]:
    """The first ```language block after `heading` (and after `start`), and where it ends."""
    at = max(README.index(heading), start)
    match = re.compile(rf"```{language}\n(.*?)```", re.S).search(README, at)
    assert match, f"no ```{language} block after {heading!r}"
    return match.group(1), match.end()


def test_the_python_quick_start_prints_what_the_readme_shows(server: str, tmp_path: Path):
    code, end = block_after("### From Python", "python")
    shown, _ = block_after("### From Python", "text", end)
    assert DEFAULT_URL in code
    script = tmp_path / "quick_start.py"
    script.write_text(code.replace(DEFAULT_URL, server))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == shown.strip()


def test_the_curl_example_answers_as_shown(server: str):
    command, end = block_after("## Example", "bash")
    shown = json.loads(re.sub(r", …|…", "", block_after("## Example", "json", end)[0]).replace('"5f0c"', '""'))
    out = subprocess.run(["bash", "-c", command.replace("localhost:8000", server)], capture_output=True, text=True,
                         timeout=300)
    got = json.loads(out.stdout)
    assert (got["id"], got["status"], got["profile"], got["weights"]) == (
        shown["id"], shown["status"], shown["profile"], shown["weights"])
    assert [t["name"] for t in got["tests"]][:1] == [t["name"] for t in shown["tests"]]
    assert got["components"]["executability"] == shown["components"]["executability"] == 1.0
