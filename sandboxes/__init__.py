"""Isolation layer: run untrusted programs with hard limits in warm sandboxes (Docker or bubblewrap)."""

from .backends import NoSandboxAvailable, SandboxSpec, choose_backend
from .pool import SandboxPool
from .types import CasesJob, Job, JudgeJob, Limits, LintJob, MeasureJob, RepoJob, Result, RunJob, SessionJob, Status

__all__ = ["CasesJob", "Job", "JudgeJob", "Limits", "LintJob", "MeasureJob", "NoSandboxAvailable", "RepoJob", "Result",
           "RunJob", "SandboxPool", "SandboxSpec", "SessionJob", "Status", "choose_backend"]
