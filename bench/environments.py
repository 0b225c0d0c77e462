"""Benchmark: building a task environment (POST /environments) and answering a known one.

    .venv/bin/python bench/environments.py

Builds a small environment (jq from Debian, markupsafe's compiled cp311 wheel, one setup command salted so the
spec is new each run) into a temporary store, with the Docker image where an engine answers, and prints the time
of each step from the build log. Baselines in the same run: a bare hard-link copy of the base rootfs (the least a
rootfs build costs here) and re-posting the built spec (answered from the record). Needs root and the base image
(`make image`). Not a test.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sandboxes.image import rootfs_dir  # noqa: E402
from service.environments.build import docker_image, docker_ok  # noqa: E402
from service.environments.models import EnvironmentSpec  # noqa: E402
from service.environments.store import EnvironmentStore  # noqa: E402


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="rb-env-bench-"))
    try:
        t0 = time.monotonic()
        subprocess.run(["cp", "-al", f"{rootfs_dir()}/.", str(tmp / "copy")], check=True)
        copy_s = time.monotonic() - t0
        shutil.rmtree(tmp / "copy")

        store = EnvironmentStore(tmp / "envs")
        spec = EnvironmentSpec(debian=["jq"], python=["markupsafe==2.1.5"], setup=[f"true bench {time.time_ns()}"])
        t0 = time.monotonic()
        rec = store.wait(store.submit(spec).id, 900)
        build_s = time.monotonic() - t0
        t0 = time.monotonic()
        again = store.submit(spec)
        cached_ms = (time.monotonic() - t0) * 1000
        print(f"environment build ({'rootfs + docker image' if rec.docker_image else 'rootfs only'}): "
              f"{build_s:.1f} s, state {rec.state}, {(rec.size_bytes or 0) / 1e6:.1f} MB over the base")
        for line in store.log_tail(rec.id, 1_000_000).splitlines():
            if m := re.match(r"\[env \+([0-9.]+)s\] (.*)", line):
                print(f"  +{float(m[1]):6.1f} s  {m[2][:90]}")
        print(f"re-POST of the built spec: {cached_ms:.1f} ms (state {again.state}, not rebuilt)")
        print(f"baseline: bare hard-link copy of the base rootfs: {copy_s:.1f} s")
        if rec.docker_image and docker_ok():
            subprocess.run(["docker", "image", "rm", docker_image(rec.id)], capture_output=True, check=False)
        store.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
