"""Why the service did not take a request on: each maps to one HTTP answer with `Retry-After` (service/app.py)."""

from __future__ import annotations


class Overloaded(Exception):
    """More work queued than the bound allows (429; 504 on /run_code, the only status SandboxFusion clients retry):
    the client should come back after `retry_after_s`."""

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Unavailable(Exception):
    """The queue (Redis) cannot be reached: nothing was accepted (503)."""

    def __init__(self, message: str, retry_after_s: int = 2) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class NotStarted(Exception):
    """A /run_code job that did not get a sandbox within the request's deadline (504: nothing ran)."""

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
