"""Client package: `from rewardbox import Client, AsyncClient`."""

from trainer.client import AsyncClient, Client, RewardboxError

__all__ = ["AsyncClient", "Client", "RewardboxError"]
