"""rewardbox's HTTP service. The core sits at this level: the app and its routes (`app`), settings (`config`), request
shapes (`models`) and their validation (`validation`, `spec_checks`), the embedded executor (`executor`) with
admission (`admission`, `wait_line`, `fair`, `budget`), the result cache (`cache`), scoring (`scoring`) and reward
aggregation (`reward`), metrics and the dashboard. Sub-packages hold the rest, each importing the core and never each
other's insides: `distributed/` (Redis workers), `rollouts/` (store, replay), `repos/`, `sessions/`, `environments/`
and `compat/` (SandboxFusion, OpenRLHF, SWE-bench)."""

__version__ = "0.1.0"
