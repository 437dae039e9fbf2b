"""An upstream Kubeflow SDK v1 notebook's calls, with only the import changed, run locally.

The calls are the ones the v1 examples make (create_job with train_func/parameters/num_workers/
resources_per_worker/env_vars, wait_for_job_conditions, get_job_logs, delete_job), with the
return shapes upstream gives: ({pod name: log text}, {}), the job as a dict, RuntimeError on failure.
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.local import function_jobs
from trainctl import InvalidArgument
from trainctl.compat import TrainingClient

pytestmark = [pytest.mark.framework, pytest.mark.timeout(180)]


@pytest.fixture
def training_client(cli, monkeypatch) -> TrainingClient:
    monkeypatch.setenv("TRAINCTL_HOME", str(cli.home))
    monkeypatch.chdir(cli.cwd)
    return TrainingClient(backend="local")


def test_an_upstream_notebook_runs_with_one_changed_import(training_client):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here")
    training_client.create_job(name="compat", train_func=function_jobs.upstream_style, parameters={"lr": 0.5},
                               num_workers=2, resources_per_worker={"cpu": "1", "memory": "1Gi"},
                               env_vars={"STAGE": "test"}, queue_name="team-a")
    job = training_client.wait_for_job_conditions("compat", wait_timeout=150, polling_interval=1)
    assert job["kind"] == "PyTorchJob" and job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    master_logs, events = training_client.get_job_logs("compat")
    assert list(master_logs) == ["compat-master-0"] and events == {}
    assert "rank 0 local_rank 0 total 1.5" in master_logs["compat-master-0"]
    every_pod, _ = training_client.get_job_logs("compat", is_master=False)
    assert "rank 1 local_rank 0 total 1.5" in every_pod["compat-worker-0"]
    training_client.delete_job("compat")


def test_a_failed_job_raises_runtime_error_with_the_summary(training_client):
    training_client.create_job(name="compat-fail", train_func=function_jobs.raises, parameters={"boom": 1},
                               num_workers=2)
    with pytest.raises(RuntimeError) as failed:
        training_client.wait_for_job_conditions("compat-fail", wait_timeout=90)
    assert str(failed.value).startswith("worker-0 raised ValueError: {'boom': 1}; exit code 1"), failed.value
    training_client.delete_job("compat-fail")


@pytest.mark.parametrize(("keywords", "expected"), [
    ({"name": "x", "train_func": function_jobs.upstream_style, "job_kind": "XGBoostJob"}, "PyTorchJob or TFJob"),
    ({"name": "x", "base_image": "img"}, "needs name= and train_func="),
    ({"train_func": function_jobs.upstream_style}, "needs name= and train_func="),
    ({"name": "x", "train_func": function_jobs.upstream_style, "resources_per_worker": "2"}, "give a dict"),
    ({"name": "x", "train_func": function_jobs.upstream_style, "parameters": {}, "num_workers": 0},
     "workers 0: must be at least 1"),
    ({"name": "x", "train_func": function_jobs.upstream_style}, "missing a required argument: .parameters."),
    ({"job": object()}, "give the resource as a dict"),
])
def test_bad_calls_are_refused(training_client, keywords, expected):
    with pytest.raises(InvalidArgument, match=expected):
        training_client.create_job(**keywords)
