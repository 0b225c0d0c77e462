"""Run SandboxFusion's own per-language runner tests (`sandbox/tests/runners/` of a bytedance/SandboxFusion
checkout) against a running rewardbox, unchanged: its `sandbox.server.server.app` is replaced by an ASGI app that
forwards every request to rewardbox over HTTP, and its request/response models are taken from its own source.

    python scripts/sandbox_fusion_runner_tests.py SANDBOXFUSION_CHECKOUT http://127.0.0.1:8000 [pytest args...]

Prints pytest's summary (SandboxFusion's jupyter, isolation-with-network, GPU and not-served-language tests fail by
design: see the README's SandboxFusion section).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PROXY_APP = '''"""SandboxFusion's test `app`, forwarding to rewardbox."""
import os

import httpx

_client = httpx.Client(base_url=os.environ["REWARDBOX_URL"], timeout=120)  # sync: each TestClient has its own loop


async def app(scope, receive, send):
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    r = _client.request(scope["method"], scope["path"], content=body, headers={"content-type": "application/json"})
    await send({"type": "http.response.start", "status": r.status_code,
                "headers": [(b"content-type", r.headers.get("content-type", "application/json").encode())]})
    await send({"type": "http.response.body", "body": r.content})
'''
CONFTEST = '''def pytest_configure(config):
    for marker in ("minor", "cuda"):
        config.addinivalue_line("markers", marker)
'''


def build_shim(checkout: Path, dest: Path) -> None:
    pkg = dest / "sandbox"
    (pkg / "runners").mkdir(parents=True)
    (pkg / "server").mkdir()
    shutil.copytree(checkout / "sandbox/tests/runners", pkg / "tests/runners")
    for init in (pkg, pkg / "server", pkg / "tests", pkg / "tests/runners"):
        (init / "__init__.py").touch()
    shutil.copyfile(checkout / "sandbox/runners/types.py", pkg / "runners/types.py")
    (pkg / "runners/__init__.py").write_text("from sandbox.runners.types import *  # noqa: F403\n")
    api = (checkout / "sandbox/server/sandbox_api.py").read_text()
    models = re.search(r"^class RunCodeRequest.*?(?=^def )", api, re.S | re.M)
    if not models:
        raise SystemExit("RunCodeRequest not found in sandbox/server/sandbox_api.py")
    (pkg / "server/sandbox_api.py").write_text(
        "from enum import Enum\nfrom typing import Dict, List, Optional, Tuple\n\nfrom pydantic import BaseModel, "
        "Field\n\nfrom sandbox.runners.types import *  # noqa: F403\n\n" + models.group(0))
    (pkg / "server/server.py").write_text(PROXY_APP)
    (dest / "conftest.py").write_text(CONFTEST)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        raise SystemExit(__doc__)
    checkout, url, *pytest_args = argv
    with tempfile.TemporaryDirectory(prefix="sf-runner-tests-") as tmp:
        build_shim(Path(checkout), Path(tmp))
        env = {**os.environ, "REWARDBOX_URL": url}
        return subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
                                "sandbox/tests/runners", *pytest_args], cwd=tmp, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
