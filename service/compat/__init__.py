"""Other tools' protocols and datasets, spoken on top of the core API: SandboxFusion's `/run_code` and dataset
routes, OpenRLHF's remote reward, the SWE-bench converter, and the HumanEval-Rust dataset. Each module translates to
and from `RewardItem`s and goes through the same executor, so nothing here scores anything itself."""
