"""Rollouts: every scored item kept with its request, result, image and versions, for listing, replay and the
dashboard.

`store` is the embedded SQLite store and the `Store` protocol the Redis store (`service.distributed.store`) also
meets, `summary` what the dashboard draws from either, `replay` scores a stored rollout again and says what changed,
and `routes` the HTTP routes (list, one, export, replay)."""
