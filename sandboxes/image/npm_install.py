"""Install the npm packages of node/package-lock.json without npm (stdlib only): what `npm ci --ignore-scripts`
does for a lockfile whose packages have no install scripts (checked), so that build.sh needs no npm on the host.

Every tarball comes from the npm registry, is checked against the lockfile's sha512 integrity and cached in
CACHE; the tree is laid out exactly as the lockfile's `packages` paths say.

Usage: npm_install.py LOCKFILE CACHE_DIR DEST_DIR     (DEST_DIR/node_modules/... is created)
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import urllib.request

REGISTRY = os.environ.get("REWARDBOX_NPM_REGISTRY", "https://registry.npmjs.org").rstrip("/")


def tarball_url(name: str, version: str) -> str:
    return f"{REGISTRY}/{name}/-/{name.rsplit('/', 1)[-1]}-{version}.tgz"


def fetch(name: str, version: str, integrity: str, cache: str) -> bytes:
    algo, _, want = integrity.partition("-")
    if algo != "sha512":
        raise SystemExit(f"{name}@{version}: unsupported integrity {algo}")
    path = os.path.join(cache, f"{name.replace('/', '+')}-{version}.tgz")
    if os.path.exists(path):
        with open(path, "rb") as f:
            data = f.read()
        if base64.b64encode(hashlib.sha512(data).digest()).decode() == want:
            return data
    with urllib.request.urlopen(tarball_url(name, version), timeout=60) as r:  # noqa: S310 - fixed https registry
        data = r.read()
    if base64.b64encode(hashlib.sha512(data).digest()).decode() != want:
        raise SystemExit(f"{name}@{version}: integrity mismatch")
    with open(path + ".part", "wb") as f:
        f.write(data)
    os.replace(path + ".part", path)
    return data


def extract(data: bytes, dest: str) -> None:
    """npm tarballs hold one top directory (usually `package/`): its contents go to dest. No links, no escapes."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            parts = member.name.split("/", 1)
            if len(parts) < 2 or not parts[1] or member.issym() or member.islnk():
                continue
            rel = os.path.normpath(parts[1])
            if rel.startswith("..") or os.path.isabs(rel):
                raise SystemExit(f"unsafe path in tarball: {member.name}")
            target = os.path.join(dest, rel)
            if member.isdir():
                os.makedirs(target, exist_ok=True)
            elif member.isfile():
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with tar.extractfile(member) as src, open(target, "wb") as out:  # type: ignore[union-attr]
                    shutil.copyfileobj(src, out)
                os.chmod(target, 0o755 if member.mode & 0o111 else 0o644)


def main(lockfile: str, cache: str, dest: str) -> None:
    with open(lockfile) as f:
        lock = json.load(f)
    if lock.get("lockfileVersion") != 3:
        raise SystemExit("need a lockfileVersion 3 package-lock.json")
    os.makedirs(cache, exist_ok=True)
    count = 0
    for path, meta in lock["packages"].items():
        if not path:
            continue
        if meta.get("hasInstallScript"):
            raise SystemExit(f"{path} has an install script: not supported")
        name = path.rsplit("node_modules/", 1)[-1]
        data = fetch(name, meta["version"], meta["integrity"], cache)
        extract(data, os.path.join(dest, path))
        count += 1
    print(f"[image] installed {count} npm packages into {dest}/node_modules", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
