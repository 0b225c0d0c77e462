"""Agent sessions: stateful, forkable sandboxes for multi-turn coding agents.

`models` holds the request shapes, `workspace` a session's files as plain data (a snapshot plus the session's delta,
never files on the host), `manager` the sessions themselves (open, exec, fork, grade, close; one sandbox job per
command on a pool of their own), `routes` the HTTP skin over the manager. Distributed mode reaches the same manager on
a worker through `service.distributed.sessions`."""
