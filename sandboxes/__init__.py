"""Isolation layer: run untrusted programs with hard limits in warm sandboxes (Docker or bubblewrap)."""

from .backends import NoSandboxAvailable, SandboxSpec, choose_backend
from .pool import SandboxPool
from .types import Job, Limits, Result, Status

__all__ = ["Job", "Limits", "NoSandboxAvailable", "Result", "SandboxPool", "SandboxSpec", "Status", "choose_backend"]
