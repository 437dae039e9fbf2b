"""An upstream Kubeflow SDK v1 notebook's calls, with only the import changed, run locally.

The calls are the ones the v1 examples and notebooks make (create_job with train_func/parameters/
num_workers/resources_per_worker/env_vars, wait_for_job_conditions, get_job, list_jobs, is_job_*,
get_job_pod_names, get_job_logs, update_job to suspend, delete_job), with the return shapes upstream
gives: ({pod name: log text}, {}), the job as an object read by attribute (job.metadata.name),
RuntimeError on failure.
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.local import function_jobs
from trainctl import InvalidArgument, UserError
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
                               env_vars={"STAGE": "test"}, labels={"team": "ml"})
    polled = []
    job = training_client.wait_for_job_conditions("compat", wait_timeout=150, polling_interval=1,
                                                  callback=lambda job: polled.append(job.metadata.name))
    assert job.kind == "PyTorchJob" and job.metadata.labels["team"] == "ml"
    assert polled and set(polled) == {"compat"}
    master_logs, events = training_client.get_job_logs("compat")
    assert list(master_logs) == ["compat-master-0"] and events == {}
    assert "rank 0 local_rank 0 total 1.5" in master_logs["compat-master-0"]
    every_pod, _ = training_client.get_job_logs("compat", is_master=False)
    assert "rank 1 local_rank 0 total 1.5" in every_pod["compat-worker-0"]
    training_client.delete_job("compat")


def test_queue_name_is_refused_locally_as_submit_local_queue_is(training_client, cli):
    """queue_name= is --local-queue (Kueue's label and runPolicy.suspend: true): a job held for an admission no
    local run ever gets is refused, in the same words, and nothing is left behind."""
    with pytest.raises(UserError) as refused:
        training_client.create_job(name="queued", train_func=function_jobs.upstream_style, parameters={"lr": 0.5},
                                   queue_name="team-a")
    flag = cli("submit", "pytorch", "--name", "queued", "--local-queue", "team-a", "--", "python", "-c", "pass")
    assert flag.returncode == 2 and str(refused.value) in flag.stderr, (refused.value, flag.stderr)
    assert "kueue.x-k8s.io/queue-name=team-a, runPolicy.suspend: true" in str(refused.value)
    assert training_client.list_jobs() == [] and not list(cli.home.rglob("trainctl_function.py"))
    with pytest.raises(InvalidArgument, match="queue_name ' ': not a LocalQueue name"):
        training_client.create_job(name="queued", train_func=function_jobs.upstream_style, queue_name=" ")


def test_the_job_reads_as_upstreams_objects_and_every_reading_call_answers(training_client):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed here")
    training_client.create_job(name="read", train_func=function_jobs.upstream_style, parameters={"lr": 0.5},
                               num_workers=2)
    training_client.wait_for_job_conditions("read", wait_timeout=150, polling_interval=1)
    job = training_client.get_job("read")
    assert type(job).__name__ == "KubeflowOrgV1PyTorchJob" and job.metadata.name == "read"
    assert job.metadata.creation_timestamp.tzinfo is not None  # a datetime, as upstream deserializes it
    assert job.spec.pytorch_replica_specs["Worker"].replicas == 1 and job.spec.run_policy.backoff_limit == 3
    assert job.spec.elastic_policy is None  # declared by the kind, absent here: None, as in the generated models
    with pytest.raises(AttributeError, match="has no field 'metdata'"):
        job.metdata
    assert [c.type for c in training_client.get_job_conditions("read")][-1] == "Succeeded"
    assert training_client.get_job_conditions(job=job) == training_client.get_job_conditions("read")
    assert training_client.is_job_created("read") and training_client.is_job_succeeded("read")
    assert training_client.is_job_succeeded(job=job) and not training_client.is_job_failed("read")
    assert not training_client.is_job_running("read") and not training_client.is_job_restarting("read")
    assert [listed.metadata.name for listed in training_client.list_jobs()] == ["read"]
    assert training_client.list_jobs(job_kind="TFJob") == []
    assert training_client.get_job_pod_names("read") == ["read-master-0", "read-worker-0"]
    assert training_client.get_job_pod_names("read", is_master=True) == ["read-master-0"]
    assert training_client.get_job_pod_names("read", replica_type="worker", replica_index=0) == ["read-worker-0"]
    (master,) = training_client.get_job_pods("read", replica_type="Master")  # its success made the job's
    assert master.status.phase == "Succeeded" and master.metadata.labels["training.kubeflow.org/job-role"] == "master"
    logs, events = training_client.get_job_logs("read", is_master=False, verbose=True)
    lines = "".join(logs.values()).splitlines()
    assert any(line.text.startswith("trainctl-result:") for line in training_client.client.logs("read"))
    assert lines and not [line for line in lines if line.startswith("trainctl-result:")]  # only what the job printed
    assert list(events) == ["PyTorchJob read"] and events["PyTorchJob read"], events
    training_client.delete_job("read")


def test_update_job_suspends_and_resumes_as_upstream_patches_it(training_client):
    training_client.create_job(name="pause", train_func=function_jobs.raises, parameters={"boom": 1},
                               num_workers=1)  # rank 0 only: it sleeps 30 s
    training_client.wait_for_job_conditions("pause", expected_conditions={"Running"}, wait_timeout=60)
    job = training_client.get_job("pause")
    job.spec.run_policy.suspend = True
    training_client.update_job(job, "pause")
    training_client.wait_for_job_conditions("pause", expected_conditions={"Suspended"}, wait_timeout=60)
    assert training_client.get_job("pause").spec.run_policy.suspend is True
    job.metadata.labels = {"team": "ml"}
    with pytest.raises(InvalidArgument, match="applies a change of spec.run_policy.suspend only"):
        training_client.update_job(job, "pause")
    job = training_client.get_job("pause")
    job.spec.run_policy.suspend = False
    training_client.update_job(job, "pause")
    training_client.wait_for_job_conditions("pause", expected_conditions={"Running"}, wait_timeout=60)
    training_client.delete_job("pause")


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


def test_train_points_to_finetune(training_client):
    with pytest.raises(InvalidArgument, match=r"trainctl.Client\(\).finetune\(model, dataset"):
        training_client.train(name="llm", num_workers=2)
