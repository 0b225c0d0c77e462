"""The replay diff (service/rollouts/replay.py diff_results) on the fields test_replay_units.py leaves out: per-test
verdicts, the output streams and the status, exact and tolerant."""

from __future__ import annotations

from service.rollouts.replay import diff_results


def result(**fields) -> dict:
    base = {"status": "passed", "reward": 1.0, "weights": None, "components": {"executability": 1.0},
            "tests": [{"name": "t1", "passed": True, "status": "passed"},
                      {"name": "t2", "passed": True, "status": "passed"}],
            "execution": {"stdout": "ok\n", "stderr": ""}}
    return {**base, **fields}


def test_the_same_result_has_no_diff():
    assert diff_results(result(), result()) == {}
    assert diff_results(result(), result(), tolerant=True) == {}


def test_a_changed_or_missing_test_verdict_is_listed_by_name():
    changed = result(tests=[{"name": "t1", "passed": False, "status": "timeout"}])
    assert diff_results(result(), changed) == {"tests": {"t1": {"stored": "passed", "replayed": "timeout"},
                                                        "t2": {"stored": "passed", "replayed": None}}}


def test_streams_are_compared_exactly_and_shown_cut_to_500_characters():
    out = diff_results(result(), result(execution={"stdout": "x" * 600, "stderr": "warn"}), tolerant=True)
    assert out == {"stdout": {"stored": "ok\n", "replayed": "x" * 500}, "stderr": {"stored": "", "replayed": "warn"}}


def test_status_reward_and_components_are_listed_with_both_values():
    new = result(status="failed", reward=0.0, components={"executability": 1.0, "pass_rate": 0.5})
    out = diff_results(result(), new)
    assert out["status"] == {"stored": "passed", "replayed": "failed"}
    assert out["reward"] == {"stored": 1.0, "replayed": 0.0}
    assert out["components"] == {"pass_rate": {"stored": None, "replayed": 0.5}}


def test_without_weights_the_reward_tolerance_is_the_rounding_only():
    assert diff_results(result(reward=0.5), result(reward=0.5000009), tolerant=True) == {}
    assert "reward" in diff_results(result(reward=0.5), result(reward=0.500002), tolerant=True)
