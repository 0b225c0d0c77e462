"""rewardbox HTTP service: reward API, aggregation, (later) rollout store and dashboard."""

__version__ = "0.1.0"
