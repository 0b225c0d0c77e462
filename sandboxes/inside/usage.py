"""What a job holds in the sandbox's files (stdlib only): tmpfs pages are memory, whoever's address space they
are not in. Efficiency counts them with the job's peak memory, so that a program keeping its data in /tmp files
instead of its heap is not measured as lean (measure.py; sampled during judge jobs by runner.judge_job)."""

from __future__ import annotations

import os

WRITABLE_ROOTS = ("/tmp", "/mnt", "/scratch")  # the sandbox's tmpfs mounts (runner.WRITABLE_ROOTS)


def files_written_kb() -> int:
    """KiB in use on the writable tmpfs mounts now."""
    total = 0
    for root in WRITABLE_ROOTS:
        try:
            st = os.statvfs(root)
        except OSError:
            continue
        total += (st.f_blocks - st.f_bfree) * st.f_frsize
    return total >> 10
