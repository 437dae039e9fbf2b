"""What kubectl users type works: kind spellings, KIND/NAME, get, -o name|wide, plain tables when piped,
list -w, set-based selectors, submit -o, hints that fit and name only real options.

Everything runs the real CLI in a subprocess against real local jobs (tests/conftest.py ``cli``).
"""

import pytest

from tests.unit.test_bad_input import assert_one_line_error
from trainctl.frameworks import by_name


@pytest.mark.parametrize("spelling", ["pytorch", "PyTorchJob", "pytorchjob", "pytorchjobs", "pytorchjob.kubeflow.org",
                                      "PyTorchJobs.kubeflow.org"])
def test_every_kubectl_spelling_of_a_kind(spelling):
    assert by_name(spelling).kind == "PyTorchJob"


@pytest.mark.parametrize("typo, suggestion", [("pytorc", "pytorch"), ("tensorfow", "tensorflow"), ("xgbost", "xgboost"),
                                              ("paddel", "paddle"), ("tfjbo", "tensorflow")])
def test_a_mistyped_kind_gets_did_you_mean(cli, typo, suggestion):
    assert_one_line_error(cli("submit", typo, "--dry-run", "--", "x"), f"did you mean {suggestion}?")


def test_a_kind_far_from_any_has_no_guess(cli):
    result = cli("submit", "caffe", "--dry-run", "--", "x")
    assert_one_line_error(result, "unknown job kind 'caffe': use one of pytorch, tensorflow")
