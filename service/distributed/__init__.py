"""Distributed mode (REWARDBOX_REDIS_URL): API processes put items on a Redis stream and `rewardbox worker`
processes on any host score them on their own warm sandbox pools.

`executor` is the API side (the same `score_many` as the embedded executor: validate, cache, admit, then enqueue and
wait), `queue` and `scripts` the stream and the Lua scripts that change it atomically, `envelope` what one job
carries, `worker` the consumer, `store` the rollout store in Redis, and `sessions` agent sessions pinned to a worker
and reached through a Redis RPC. Nothing outside this package imports redis."""
