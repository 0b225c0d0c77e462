"""Score one item: run its tests, grade each component that its profile needs, aggregate the reward.

Plain Python, no HTTP: the routes call Scorer.score(). Any fault of ours ends as infra_error with reward null.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid

from graders.efficiency import EfficiencyReport
from graders.efficiency_measure import EfficiencyGrader
from graders.executability import executability
from graders.outcome import Outcome
from graders.pass_rate import pass_rate
from graders.quality import QualityGrader, QualityReport, lint_roots
from graders.repo import RepoGrader
from graders.tests import job_limits, run_tests
from sandboxes import SandboxPool
from sandboxes.builds import Builder
from sandboxes.languages import LANGUAGES, linted_languages
from sandboxes.targets import DEFAULT_TARGET, SandboxTarget
from service.budget import ItemBudget
from service.cache import replay_versions
from service.config import Settings
from service.environments.pools import EnvironmentPools, EnvironmentProblem, resolver
from service.fair import FairPool
from service.models import Execution, ItemResult, RewardItem, TestVerdict
from service.repos.snapshots import repo_store
from service.reward import aggregate, components_needed, weights_for
from service.rollouts.store import RolloutStore

log = logging.getLogger("rewardbox.scoring")
OUTPUT_IN_RESPONSE = 8192
LINTED_LANGUAGES = linted_languages()  # the registry's languages with a linter: quality is null for the others


class Scorer:
    def __init__(self, pool: SandboxPool | FairPool, settings: Settings, store: RolloutStore | None = None,
                 target: SandboxTarget = DEFAULT_TARGET) -> None:
        # Every job of every grader goes through one FairPool: sandboxes are shared in turns by request and item.
        self.pool = pool if isinstance(pool, FairPool) else FairPool(pool)
        self.settings = settings
        self.store = store  # set where scoring itself stores the rollout (replay --local); executors store their own
        self.image_id = self.pool.backend.image_id()
        self.versions = replay_versions()
        self.quality = QualityGrader(self.pool, settings.lint_cache_size)
        self.efficiency = EfficiencyGrader(self.pool, settings.efficiency_rounds)
        self.builder = Builder(self.pool)  # compiled artefacts of the non-Python languages, by source hash
        self.repo = RepoGrader(self.pool, repo_store(settings).data, target)  # repo items: a repo's own tests
        # Items naming another environment are scored by a Scorer of that target's pool (started on first use).
        self.environments: EnvironmentPools[Scorer] | None = None
        if target.is_default:
            self.environments = EnvironmentPools(
                settings.backend, lambda p, t: Scorer(p, settings, target=t), size=settings.env_pool_size,
                max_pools=settings.env_pools_max, memory_mb=settings.env_pools_memory_mb,
                max_jobs=settings.sandbox_max_jobs)

    async def close(self) -> None:
        """Close the environments' pools (the default pool belongs to whoever made it)."""
        if self.environments is not None:
            await self.environments.close()

    async def score(self, item: RewardItem, rollout_id: str | None = None) -> ItemResult:
        rollout_id = rollout_id or uuid.uuid4().hex
        try:
            if item.environment is not None and self.environments is not None:
                result = await self._score_in_environment(item, rollout_id)
            else:
                result = await self._score(item, rollout_id)
        except Exception as e:  # noqa: BLE001 - never a verdict on the program
            log.exception("scoring failed")
            result = ItemResult(id=item.id, rollout_id=rollout_id, status="infra_error", reward=None,
                                profile=item.profile, message=f"internal error: {type(e).__name__}: {e}")
        if self.store is not None:
            self.store.add(item.model_dump(mode="json"), result.model_dump(mode="json"), self.image_id,
                           self.versions)
        return result

    async def _score_in_environment(self, item: RewardItem, rollout_id: str) -> ItemResult:
        assert self.environments is not None
        try:
            target = resolver(self.settings.backend).resolve(item.environment)
        except EnvironmentProblem as e:  # validated already; an environment can go away in between
            return ItemResult(id=item.id, rollout_id=rollout_id, status="invalid_input", reward=None,
                              profile=item.profile, message=f"{'.'.join(e.loc)}: {e.message}")
        if target.is_default:
            return await self._score(item, rollout_id)
        async with self.environments.use(target) as scorer:
            return await scorer._score(item, rollout_id)

    async def _score(self, item: RewardItem, rollout_id: str) -> ItemResult:
        started = time.perf_counter()
        weights = weights_for(item.profile, item.weights)
        needed = components_needed(item.profile, weights)
        limits = job_limits(item.limits.timeout_s, item.limits.memory_mb, self.settings.max_item_s)
        # All the item's test runs share one budget of sandbox time, however many cases it has.
        budget = ItemBudget(self.pool, self.settings.max_item_s)
        if item.repo is not None:  # a repo item: the repository's own tests; no lint, no efficiency
            needed -= {"quality", "efficiency"}
            assert item.repo.id is not None  # validation's check_repo stored an inline archive under its id
            tests_task = self.repo.grade(item.repo.id, item.patch, item.files, item.tests, limits)
        elif item.tests is not None and item.tests.kind == "repo":  # the repository in the environment's image
            needed -= {"quality", "efficiency"}
            tests_task = self.repo.grade(None, item.patch, item.files, item.tests, limits)
        else:
            # Efficiency without a reference reads the tests stage's own accounting (efficiency_measure.py).
            account = "efficiency" in needed and item.reference_code is None
            tests_task = run_tests(budget, item.code, item.tests, limits, item.language, self.builder,
                                   item.limits.compile_timeout_s, account)
        timings: dict[str, float] = {}
        if "quality" in needed and item.language in LINTED_LANGUAGES:
            outcome, quality = await asyncio.gather(
                _timed(tests_task, timings, "tests_only_ms"),
                _timed(self.quality.grade(item.code, item.language, lint_roots(item.tests)), timings, "lint_ms"))
        else:
            outcome, quality = await tests_task, None
        timings["tests_ms"] = (time.perf_counter() - started) * 1000  # tests and lint, which run alongside
        base = ItemResult(id=item.id, rollout_id=rollout_id, status=outcome.status, reward=None,
                          profile=item.profile, weights=weights, message=outcome.message,
                          tests=[TestVerdict(**v.__dict__) for v in outcome.verdicts],
                          execution=_execution(outcome), flags=outcome.flags)
        if outcome.ours:
            return base
        if quality is not None and quality.reason == "sandbox error":
            base.status, base.message = "infra_error", "the linter's sandbox failed"
            return base
        efficiency = None
        if "efficiency" in needed:
            t = time.perf_counter()
            efficiency = await self._efficiency(item, outcome, limits)
            timings["efficiency_ms"] = (time.perf_counter() - t) * 1000
            if efficiency.reason == "sandbox error":
                base.status, base.message = "infra_error", "the reference solution's sandbox failed"
                return base
        components = {
            "executability": executability(outcome),
            "pass_rate": pass_rate(outcome),
            "quality": quality.score if quality and "quality" in needed else None,
            "efficiency": efficiency.score if efficiency else None,
        }
        base.components = components
        base.reward = aggregate(item.profile, weights, components, outcome.status, outcome.all_passed,
                                bool(outcome.flags), item.flag_penalty)
        base.details = {**_details(quality, efficiency, timings), **outcome.details}
        return base

    async def _efficiency(self, item: RewardItem, outcome: Outcome, limits) -> EfficiencyReport:
        if not outcome.all_passed:
            return EfficiencyReport(None, reason="measured only for programs that pass every test")
        if not LANGUAGES[item.language].measurable:
            # The measuring job alternates in-process (Python) programs; compiled artefacts are not wired into it.
            return EfficiencyReport(None, reason=f"efficiency is not measured for {item.language} yet")
        # One measuring job: candidate and reference alternate in one sandbox (see graders/efficiency_measure.py).
        return await self.efficiency.grade(item.code, item.reference_code, item.tests, limits,
                                           item.limits.timeout_s, item.limits.memory_mb, outcome.usage,
                                           len(outcome.verdicts))


async def _timed(task, timings: dict[str, float], name: str):
    """Await task, noting its duration under name (the per-stage split bench/humaneval.py prints)."""
    t = time.perf_counter()
    try:
        return await task
    finally:
        timings[name] = (time.perf_counter() - t) * 1000


def _execution(outcome: Outcome) -> Execution:
    return Execution(wall_ms=round(outcome.wall_ms, 3), cpu_ms=round(outcome.cpu_ms, 3),
                     peak_memory_kb=outcome.peak_memory_kb,
                     stdout=outcome.stdout[:OUTPUT_IN_RESPONSE], stderr=outcome.stderr[:OUTPUT_IN_RESPONSE],
                     truncated=outcome.truncated or len(outcome.stdout) > OUTPUT_IN_RESPONSE
                     or len(outcome.stderr) > OUTPUT_IN_RESPONSE)


def _details(quality: QualityReport | None, efficiency: EfficiencyReport | None, timings: dict) -> dict:
    details: dict = {"timings": {k: round(v, 3) for k, v in timings.items()}}
    if quality is not None:
        details["quality"] = quality.details()
    if efficiency is not None:
        details["efficiency"] = {"time_score": efficiency.time_score, "memory_score": efficiency.memory_score,
                                 "complexity_factor": efficiency.complexity_factor,
                                 "inputs": efficiency.inputs, "reason": efficiency.reason}
    return details
