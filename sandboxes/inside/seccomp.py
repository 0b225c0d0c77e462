"""Per-job seccomp filter, installed by the runner in every job process before it runs untrusted code.

Docker 20.10's default profile predates io_uring's removal and bubblewrap has no profile at all, so the runner
adds its own deny-list on top of whatever the backend provides: the same filter under both backends. Denied
calls fail with EPERM (ENOSYS for clone3, so libc falls back to clone, whose namespace flags are denied).
Non-native syscall ABIs (32-bit int 0x80) kill the process: libseccomp's default for a foreign architecture.
"""

from __future__ import annotations

import ctypes
import errno

DENIED = (
    "io_uring_setup", "io_uring_enter", "io_uring_register", "bpf", "userfaultfd", "keyctl", "add_key",
    "request_key", "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "ptrace", "process_vm_readv",
    "process_vm_writev", "perf_event_open", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "swapon", "swapoff", "reboot", "acct", "quotactl", "syslog", "open_by_handle_at",
    "name_to_handle_at", "fanotify_init", "lookup_dcookie", "kcmp", "vhangup", "iopl", "ioperm", "clock_settime",
    "settimeofday", "clock_adjtime", "fsopen", "fsmount", "fsconfig", "fspick", "move_mount", "open_tree",
    "pidfd_getfd", "mount_setattr", "personality", "uselib", "nfsservctl", "move_pages", "migrate_pages",
    # System V IPC objects outlive the job that made them (the sandbox's IPC namespace lives as long as the
    # sandbox), so one job could leave data or pinned memory for the next: no job may create any.
    "shmget", "msgget", "semget",
)
NAMESPACE_FLAGS = (0x00020000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x02000000)

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_MASKED_EQ = 7


def _errno_action(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("a", ctypes.c_uint64), ("b", ctypes.c_uint64)]


_compiled: bytes | None = None
_loadable: tuple | None = None  # (prctl, the filter's sock_fprog, the buffer it points to), made by prepare()
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


def install() -> None:
    """Load the filter into the calling process (irreversible; inherited by its children).

    The BPF program is built once per process (libseccomp takes milliseconds), and so is everything prctl needs:
    a zygote that called prepare() hands every forked job a ready filter, which the job loads with two system
    calls (building the ctypes objects in each job copied ~50 of the zygote's memory pages into it)."""
    prepare()
    assert _loadable is not None
    prctl, prog, _buf = _loadable
    if prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(NO_NEW_PRIVS)")
    if prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(SECCOMP)")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def prepare() -> bytes:
    """Build (once) and return the filter as raw BPF."""
    global _compiled, _loadable
    if _compiled is None:
        _compiled = _build()
        buf = ctypes.create_string_buffer(_compiled, len(_compiled))
        prctl = ctypes.CDLL(None, use_errno=True).prctl
        _loadable = (prctl, _SockFprog(len(_compiled) // 8, ctypes.cast(buf, ctypes.c_void_p)), buf)
    return _compiled


def _build() -> bytes:
    import os

    lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise OSError("seccomp_init failed")
    try:
        deny = _errno_action(errno.EPERM)
        for name in DENIED:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr >= 0:
                _check(lib.seccomp_rule_add_array(ctx, deny, nr, 0, None), name)
        nr = lib.seccomp_syscall_resolve_name(b"clone3")
        if nr >= 0:
            _check(lib.seccomp_rule_add_array(ctx, _errno_action(errno.ENOSYS), nr, 0, None), "clone3")
        clone = lib.seccomp_syscall_resolve_name(b"clone")
        for flag in NAMESPACE_FLAGS:
            cmp = _ArgCmp(0, SCMP_CMP_MASKED_EQ, flag, flag)
            _check(lib.seccomp_rule_add_array(ctx, deny, clone, 1, ctypes.byref(cmp)), "clone")
        r, w = os.pipe()
        try:
            _check(lib.seccomp_export_bpf(ctx, w), "export")
            os.close(w)
            w = -1
            chunks = []
            while chunk := os.read(r, 65536):
                chunks.append(chunk)
            return b"".join(chunks)
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)
    finally:
        lib.seccomp_release(ctx)


def _check(rc: int, what: str) -> None:
    if rc < 0:
        raise OSError(-rc, f"seccomp {what}: {errno.errorcode.get(-rc, rc)}")
