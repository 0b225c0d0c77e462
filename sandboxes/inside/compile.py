"""Compile step of a compiled-language job (stdlib only; runs as the candidate uid under the job's rlimits and
seccomp filter, like any job process: the compiler never runs outside the sandbox nor with more rights).

    python3 -S compile.py OUT_DIR MAX_BYTES -- COMPILER ARGV...

Runs the compiler with stdout and stderr merged into one capped pipe, then prints one JSON object:
{"ok": true, "files": {relative path: base64}} with every regular file the compiler left in OUT_DIR, or
{"ok": false, "exit_code", "signal", "diagnostics"} with the compiler's message (capped). A compiler killed at
the wall limit or by the memory limit is reported by the runner (timeout / memory_limit), not here.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

DIAGNOSTICS_CAP = 8192


def pack(out_dir: str, max_bytes: int) -> dict:
    files, total = {}, 0
    for root, _dirs, names in os.walk(out_dir):
        for name in sorted(names):
            path = os.path.join(root, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            total += os.path.getsize(path)  # before reading: a 500 MB static array must not exhaust this process
            if total > max_bytes:
                return {"ok": False, "exit_code": None, "signal": None,
                        "diagnostics": f"compiled artefacts exceed {max_bytes} bytes"}
            with open(path, "rb") as f:
                data = f.read()
            files[os.path.relpath(path, out_dir)] = base64.b64encode(data).decode()
    return {"ok": True, "files": files}


def main(argv: list[str]) -> None:
    out_dir, max_bytes, sep, *cmd = argv
    if sep != "--" or not cmd:
        raise SystemExit(__doc__)
    os.makedirs(out_dir, exist_ok=True)
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    diagnostics = bytearray()
    assert proc.stdout is not None
    while chunk := proc.stdout.read(65536):
        if len(diagnostics) < DIAGNOSTICS_CAP:
            diagnostics += chunk[: DIAGNOSTICS_CAP - len(diagnostics)]
    code = proc.wait()
    if code == 0:
        result = pack(out_dir, int(max_bytes))
    else:
        result = {"ok": False, "exit_code": code if code >= 0 else None, "signal": -code if code < 0 else None}
    result["diagnostics"] = result.get("diagnostics") or diagnostics.decode(errors="replace")
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
