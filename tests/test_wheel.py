"""rewardbox as users install it: the two distributions' wheels and sdists (`rewardbox`, the client, from client/;
`rewardbox-server` from the root), built from the files git tracks and installed into fresh venvs with no checkout
on the path. From there the server serves on each backend and scores one item per language family, the CLI runs,
and the client and every adapter import. Everything else in the suite runs from the checkout, where a file an
artefact leaves out is still found (issue 31)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .conftest import BACKENDS, _free_port

ROOT = Path(__file__).resolve().parents[1]
SERVER_PACKAGES = ("service", "graders", "sandboxes", "trainer")
ADAPTERS = sorted(p.stem for p in (ROOT / "trainer" / "adapters").glob("*.py") if p.stem != "__init__")
KINDS = ("wheel", "sdist")

# One item per language family: the forked interpreter (Python), a compiled binary (C++), a runtime host (Node),
# a JVM (Java).
ITEMS = [
    {"id": "python", "code": "print(int(input()) * 2)", "tests": {"kind": "io", "cases": [{"stdin": "2",
                                                                                             "stdout": "4"}]}},
    {"id": "cpp", "language": "cpp", "code": "#include <iostream>\nint main(){int x; std::cin >> x; "
     "std::cout << x * 2 << std::endl;}\n", "tests": {"kind": "io", "cases": [{"stdin": "3", "stdout": "6"}]}},
    {"id": "javascript", "language": "javascript", "code": "function add(a, b) { return a + b; }",
     "tests": {"kind": "function", "entry_point": "add", "cases": [{"args": [1, 2], "expected": 3}]}},
    {"id": "java", "language": "java", "code": "import java.util.Scanner;\npublic class Main { public static void "
     "main(String[] a) { System.out.println(new Scanner(System.in).nextInt() * 2); } }\n",
     "tests": {"kind": "io", "cases": [{"stdin": "5", "stdout": "10"}]}},
]


def tracked(*paths: str) -> list[str]:
    return subprocess.run(["git", "ls-files", "-co", "--exclude-standard", *paths], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.splitlines()


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`python -m build` of client/ and of the root, in a copy of the files git sees (a checkout's own build/ keeps
    files of earlier builds), links kept as links. No build isolation: the test venv's setuptools is the backend,
    so the test needs no index for the build itself."""
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("dist")
    for name in tracked():
        src, dst = ROOT / name, source / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        elif src.is_file():
            shutil.copy2(src, dst)
    for project in (source / "client", source):
        subprocess.run([sys.executable, "-m", "build", "--no-isolation", "-o", str(out), str(project)], check=True,
                       capture_output=True, timeout=300)
    found = {"client-wheel": "rewardbox-*.whl", "client-sdist": "rewardbox-*.tar.gz",
             "server-wheel": "rewardbox_server-*.whl", "server-sdist": "rewardbox_server-*.tar.gz"}
    return {key: next(out.glob(pattern)) for key, pattern in found.items()}


def names_in(artefact: Path) -> set[str]:
    if artefact.suffix == ".whl":
        return set(zipfile.ZipFile(artefact).namelist())
    with tarfile.open(artefact) as tar:  # without the sdist's top folder, name-version/
        return {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile() and "/" in m.name}


@pytest.mark.parametrize("kind", KINDS)
def test_the_artefacts_carry_every_file_the_checkout_tracks_under_their_packages(dists: dict[str, Path], kind: str):
    client = {f.replace("trainer/adapters/", "rewardbox/adapters/") for f in tracked("rewardbox", "trainer/adapters")}
    server = {f for f in tracked(*SERVER_PACKAGES) if not f.startswith("trainer/adapters/")}
    client_has, server_has = names_in(dists[f"client-{kind}"]), names_in(dists[f"server-{kind}"])
    client.discard("rewardbox/adapters")  # the link itself; its files are listed under trainer/adapters
    assert sorted(client - client_has) == [], "left out of the client (client/pyproject.toml package data)"
    assert sorted(server - server_has) == [], "left out of the server (pyproject.toml package data)"


def test_the_client_wheel_holds_the_rewardbox_package_alone(dists: dict[str, Path]):
    def tops(wheel: Path) -> set[str]:
        return {name.split("/")[0] for name in names_in(wheel) if ".dist-info/" not in name}

    assert tops(dists["client-wheel"]) == {"rewardbox"}
    assert tops(dists["server-wheel"]) == set(SERVER_PACKAGES)


def fresh_venv(path: Path, *artefacts: Path) -> Path:
    """A venv of its own (no system site-packages) holding the artefacts and what pip resolves for them (from the
    index or pip's cache); pip is the test venv's, pointed at it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    # No PYTHONPATH and away from the checkout: pip would take a checkout's *.egg-info for an installed project.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "pip", "-q", "--disable-pip-version-check", "--python",
                    str(path / "bin" / "python"), "install", *map(str, artefacts)], check=True, timeout=600,
                   env=env, cwd=path.parent)
    return path


def away(venv: Path, *args: str, cwd: Path, **kw) -> subprocess.CompletedProcess:
    """A command of the venv with no checkout on the path."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REWARDBOX_URL", "REWARDBOX_TOKEN")}
    return subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=cwd, env={**env, **kw})


@pytest.fixture(scope="module", params=KINDS)
def client_venv(request: pytest.FixtureRequest, dists: dict[str, Path], tmp_path_factory) -> Path:
    return fresh_venv(tmp_path_factory.mktemp(f"client-{request.param}") / "venv", dists[f"client-{request.param}"])


@pytest.fixture(scope="module", params=KINDS)
def server_venv(request: pytest.FixtureRequest, dists: dict[str, Path], tmp_path_factory) -> Path:
    kind = request.param
    return fresh_venv(tmp_path_factory.mktemp(f"server-{kind}") / "venv", dists[f"client-{kind}"],
                      dists[f"server-{kind}"])


IMPORT_ALL = ("import importlib, json, sys, rewardbox\nfrom rewardbox import AsyncClient, Client\n"
              f"files = [importlib.import_module('rewardbox.adapters.' + n).__file__ for n in {ADAPTERS!r}]\n"
              "tops = sorted({m.split('.')[0] for m in sys.modules} & {'service', 'graders', 'sandboxes', 'trainer'})\n"
              "print(json.dumps({'files': [rewardbox.__file__, *files], 'server': tops}))\n")


def test_the_installed_client_imports_with_every_adapter_and_nothing_of_the_server(client_venv: Path, tmp_path):
    proc = away(client_venv, str(client_venv / "bin" / "python"), "-c", IMPORT_ALL, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert all(f.startswith(str(client_venv)) for f in out["files"]), out["files"]
    assert out["server"] == []
    probe = f"import importlib.util; print([m for m in {SERVER_PACKAGES!r} if importlib.util.find_spec(m)])"
    assert away(client_venv, str(client_venv / "bin" / "python"), "-c", probe, cwd=tmp_path).stdout.strip() == "[]"


def test_a_user_project_with_its_own_trainer_package_keeps_the_adapters(client_venv: Path, tmp_path: Path):
    (tmp_path / "trainer").mkdir()
    (tmp_path / "trainer" / "__init__.py").write_text("MINE = True\n")  # the user's, first on the path (cwd)
    code = "import trainer, rewardbox.adapters.verl, rewardbox.adapters.trl; assert trainer.MINE; print('ok')"
    proc = away(client_venv, str(client_venv / "bin" / "python"), "-c", code, cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_the_installed_verl_tools_yaml_names_the_installed_tool_class(client_venv: Path, tmp_path: Path):
    code = ("import importlib, pathlib, re, rewardbox.adapters as a\n"
            "text = (pathlib.Path(a.__file__).parent / 'verl_tools.yaml').read_text()\n"
            "names = set(re.findall(r'class_name: (\\S+)', text))\n"
            "for n in names:\n"
            "    m, _, c = n.rpartition('.'); getattr(importlib.import_module(m), c)\n"
            "print(sorted(names))\n")
    proc = away(client_venv, str(client_venv / "bin" / "python"), "-c", code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['rewardbox.adapters.verl_tool.RewardboxSessionTool']"


@pytest.fixture(params=BACKENDS)
def installed_server(request: pytest.FixtureRequest, server_venv: Path, tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env |= {"REWARDBOX_BACKEND": request.param, "REWARDBOX_POOL_SIZE": "1",
            "REWARDBOX_DB": str(tmp_path / "rollouts.sqlite3")}
    proc = subprocess.Popen([str(server_venv / "bin" / "rewardbox"), "serve", "--host", "127.0.0.1", "--port",
                             str(port), "--log-level", "warning"], env=env, cwd=tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, f"the installed server exited with {proc.returncode}"
            assert time.monotonic() < deadline, "the installed server did not become ready"
            try:
                if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_an_installed_server_scores_each_language_family(installed_server: str, server_venv: Path, tmp_path):
    # The installed client scores the batch, as a user's code would.
    code = ("import json, sys, rewardbox\n"
            "with rewardbox.Client(sys.argv[1]) as c:\n"
            f"    print(json.dumps([[r['id'], r['status'], r['reward']] for r in c.reward_batch({ITEMS!r})]))\n")
    proc = away(server_venv, str(server_venv / "bin" / "python"), "-c", code, installed_server, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    got = {i: (status, reward) for i, status, reward in json.loads(proc.stdout)}
    assert set(got) == {item["id"] for item in ITEMS}
    assert all(status == "passed" and reward is not None and reward > 0.5 for status, reward in got.values()), got
    cli = away(server_venv, str(server_venv / "bin" / "rewardbox"), "rollouts", "list", "--url", installed_server,
               "--limit", "1", cwd=tmp_path)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.splitlines()[0].split()[:3] == ["rollout", "created", "status"]


def test_the_installed_server_brings_the_client_and_every_adapter(server_venv: Path, tmp_path: Path):
    proc = away(server_venv, str(server_venv / "bin" / "python"), "-c", IMPORT_ALL, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert all(f.startswith(str(server_venv)) for f in json.loads(proc.stdout)["files"])
    cli = away(server_venv, str(server_venv / "bin" / "rewardbox"), "--help", cwd=tmp_path)
    assert cli.returncode == 0 and "serve" in cli.stdout, cli.stderr
