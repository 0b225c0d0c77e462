"""Per-job Landlock domain (stdlib only): a job may change files only below its writable roots.

The root filesystem is read-only already; what Landlock adds is /proc. A job process whose binary it exec'd is
dumpable again, so it owns its own /proc files and could write /proc/self/oom_score_adj down to the runner's value
(nobody here holds CAP_SYS_RESOURCE, which alone could pin it higher): the kernel's OOM killer would then pick the
larger zygote instead of the job. Under this domain such writes fail with EACCES, whatever the job execs.

From ABI 6 the domain also scopes abstract unix sockets and signals: a job reaches neither a socket nor a process
that some other job (or the machinery) created. Reads and execs are not restricted. Best effort: on a kernel
without Landlock the job runs without it (rlimits, seccomp and uids still apply).
"""

from __future__ import annotations

import ctypes
import os
import struct

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446  # same numbers on every architecture
RULE_PATH_BENEATH = 1
CREATE_RULESET_VERSION = 1

WRITE_FILE, REMOVE_DIR, REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
MAKE = sum(1 << b for b in range(6, 13))  # char, dir, reg, sock, fifo, block, sym
REFER, TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def abi() -> int:
    """The kernel's Landlock ABI version, 0 when it has none (or a filter above us refuses the call)."""
    version = _libc.syscall(ctypes.c_long(CREATE_RULESET), None, ctypes.c_size_t(0),
                            ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(0, int(version))


_prepared: int | None = None  # a ruleset built ahead (prepare), the fd a forked child will restrict itself with


def prepare(writable: tuple[str, ...], devices: str = "/dev") -> int | None:
    """Build the ruleset once (a zygote, before forking): children then enter it with one system call, as they
    take the prepared seccomp filter. Returns its fd (close-on-exec), None without Landlock."""
    global _prepared
    if _prepared is None:
        _prepared = _ruleset(writable, devices)
    return _prepared


def adopt(fd: int) -> None:
    """In a forked child whose descriptors were renumbered: the prepared ruleset is now fd."""
    global _prepared
    _prepared = fd


def restrict(writable: tuple[str, ...], devices: str = "/dev") -> None:
    """Enter a new domain in which only `writable` (and writing to existing files under `devices`) is allowed: the
    prepared ruleset if there is one (which is then closed), else one built now. Needs no_new_privs (seccomp.install
    sets it). Does nothing where the kernel has no Landlock."""
    global _prepared
    ruleset, _prepared = (_prepared, None) if _prepared is not None else (_ruleset(writable, devices), None)
    if ruleset is None:
        return
    try:
        _call(RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)


def _ruleset(writable: tuple[str, ...], devices: str) -> int | None:
    version = abi()
    if version <= 0:
        return None
    handled = WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE
    if version >= 2:
        handled |= REFER
    if version >= 3:
        handled |= TRUNCATE
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0
    # struct landlock_ruleset_attr: handled_access_fs, handled_access_net (ABI 4), scoped (ABI 6)
    attr = struct.pack("=QQQ", handled, 0, scoped)[: 24 if version >= 6 else 16 if version >= 4 else 8]
    ruleset = _call(CREATE_RULESET, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))
    try:
        for path, allowed in [(p, handled) for p in writable] + [(devices, handled & (WRITE_FILE | TRUNCATE))]:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = struct.pack("=Qi", allowed, fd)  # struct landlock_path_beneath_attr (packed)
                _call(ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), ctypes.c_char_p(rule),
                      ctypes.c_uint32(0))
            finally:
                os.close(fd)
    except BaseException:
        os.close(ruleset)
        raise
    os.set_inheritable(ruleset, False)
    return ruleset


def _call(nr: int, *args) -> int:
    rc = _libc.syscall(ctypes.c_long(nr), *args)
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"landlock syscall {nr}: {os.strerror(err)}")
    return int(rc)
