"""What travels on distributed mode's job stream (service/distributed/queue.py): one envelope per job, the `data` field
of its stream entry, as JSON.

  {"kind": "score", "item": <validated RewardItem, JSON>, "deadline", "enqueued", "request"}   ScoreEnvelope
  {"kind": "run", "job": <Job.to_dict()>, "deadline", "enqueued", "request"}                   RunEnvelope

deadline and enqueued are epoch seconds (a job not started by its deadline answers infra_error); request names the
API request it belongs to (workers share their sandboxes in turns by request, service/fair.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

from sandboxes.types import Job, job_from_dict
from service.validation import item_work


class MalformedEnvelope(ValueError):
    """A stream entry this version cannot run (written by hand, or by another version)."""


@dataclass(frozen=True, kw_only=True)
class ScoreEnvelope:
    """A reward item to score."""

    kind: ClassVar[str] = "score"
    item: dict[str, Any]
    deadline: float
    enqueued: float
    request: str | None = None

    @property
    def work(self) -> int:
        """Its weight in admission: the item's test cases."""
        return item_work(self.item)

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind, "item": self.item, "deadline": self.deadline,
                           "enqueued": self.enqueued, "request": self.request})


@dataclass(frozen=True, kw_only=True)
class RunEnvelope:
    """A raw sandbox job (/run_code, or a compile for it)."""

    kind: ClassVar[str] = "run"
    job: Job
    deadline: float
    enqueued: float
    request: str | None = None

    @property
    def work(self) -> int:
        return 1

    def to_json(self) -> str:
        return json.dumps({"kind": self.kind, "job": self.job.to_dict(), "deadline": self.deadline,
                           "enqueued": self.enqueued, "request": self.request})


Envelope = ScoreEnvelope | RunEnvelope


def envelope_from_json(text: str) -> Envelope:
    """The envelope a to_json() wrote; MalformedEnvelope for anything else."""
    try:
        raw = json.loads(text)
        times = {"deadline": float(raw["deadline"]), "enqueued": float(raw["enqueued"]),
                 "request": raw.get("request")}
        if raw["kind"] == "score" and isinstance(raw["item"], dict):
            return ScoreEnvelope(item=raw["item"], **times)
        if raw["kind"] == "run":
            return RunEnvelope(job=job_from_dict(raw["job"]), **times)
    except (KeyError, TypeError, ValueError) as e:
        raise MalformedEnvelope(f"{type(e).__name__}: {e}") from None
    raise MalformedEnvelope(f"unknown kind {raw.get('kind')!r}")
