"""SWE-bench rows carry their environment (issue 28 part 6): the converter keeps the row's provenance, names the
instance image as SWE-bench's harness does, and maps repo@version to a built environment."""

from __future__ import annotations

import pytest
from swebench.task.checks import expected_image

from service.compat.swebench import PROVENANCE, TESTBED, TESTBED_PYTHON, environment_for, instance_image, to_item
from service.environments.models import EnvironmentRef

ROW = {"instance_id": "astropy__astropy-12907", "repo": "astropy/astropy", "version": "4.3",
       "base_commit": "d16bfe05a744909de4b27f5875fe0d4ed41ce607",
       "environment_setup_commit": "298ccb478e6bf092953bca67a3d29dc6c35f6752",
       "FAIL_TO_PASS": '["a.py::t"]', "PASS_TO_PASS": "[]", "patch": "", "test_files": {}}
ENVS = {"astropy/astropy@4.3": "a" * 64, "astropy/astropy@4.3@298ccb478e6bf092953bca67a3d29dc6c35f6752": "b" * 64}


@pytest.mark.parametrize("iid", ["astropy__astropy-12907", "django__django-11099", "Foo__Bar-1"])
def test_instance_image_is_the_harness_name(iid):
    assert instance_image(iid) == expected_image(iid)


@pytest.mark.parametrize(("row", "envs", "namespace", "expected"), [
    ({**ROW, "image": "my/img:1"}, ENVS, None, {"image": "my/img:1", "python": TESTBED_PYTHON, "repo_path": TESTBED}),
    ({**ROW, "image": "my/img:1"}, None, "swebench", {"image": "my/img:1", "python": TESTBED_PYTHON,
                                                     "repo_path": TESTBED}),
    (ROW, None, "", {"image": "sweb.eval.x86_64.astropy_1776_astropy-12907:latest", "python": TESTBED_PYTHON,
                     "repo_path": TESTBED}),
    (ROW, ENVS, None, {"id": "b" * 64}),  # the setup commit's own environment first
    ({**ROW, "environment_setup_commit": None}, ENVS, None, {"id": "a" * 64}),
    ({**ROW, "version": "9.9"}, ENVS, None, None),
    (ROW, None, None, None),
])
def test_environment_for(row, envs, namespace, expected):
    env = environment_for(row, envs, namespace)
    assert env == expected
    if env is not None:
        EnvironmentRef(**env)  # a shape the service accepts


def test_the_item_keeps_the_rows_provenance():
    item = to_item({**ROW, "image": "my/img:1"}, "c" * 64)
    assert {k: item["metadata"][k] for k in PROVENANCE} == {**{k: ROW[k] for k in PROVENANCE if k in ROW},
                                                           "image": "my/img:1"}


def test_an_image_holding_the_repository_needs_no_snapshot():
    env = environment_for({**ROW, "image": "my/img:1"})
    item = to_item(ROW, None, environment=env)
    assert "repo" not in item and item["environment"] == env


def test_no_snapshot_and_no_image_is_refused():
    with pytest.raises(ValueError, match="no snapshot"):
        to_item(ROW, None)
