"""Client package: `from rewardbox import Client, AsyncClient`. Every failure of a call is a `RewardboxError`
(`TransportError`, `HTTPStatusError`, `BadResponse`)."""

from .client import AsyncClient, BadResponse, Client, HTTPStatusError, RewardboxError, TransportError

__all__ = ["AsyncClient", "BadResponse", "Client", "HTTPStatusError", "RewardboxError", "TransportError"]
