"""The Job view applies the operator's in-memory defaults (contract 1.4) without touching the resource."""

import copy

import pytest

from trainctl.core.job import Job
from tests.unit.test_env_contract import job


def test_defaults_are_applied_in_memory_only():
    resource = job("PyTorchJob", "pt", {"Worker": 2, "Master": 1})
    del resource["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"]
    stored = copy.deepcopy(resource)
    view = Job(resource)
    assert view.replica_types == ["Master", "Worker"]  # framework order, not the map's
    assert view.replicas("Master") == 1 and view.total_replicas == 3
    assert view.restart_policy("Worker") == "OnFailure"
    assert view.template("Master")["spec"]["containers"][0]["ports"] == [
        {"name": "pytorchjob-port", "containerPort": 23456}]
    assert view.container_port("Worker") == 23456
    assert view.run_policy["cleanPodPolicy"] == "None"
    assert view.namespace == "default" and not view.suspended
    assert resource == stored


def test_replica_type_keys_are_recased_and_user_ports_kept():
    resource = job("TFJob", "tf", {"worker": 2, "ps": 1})
    container = resource["spec"]["tfReplicaSpecs"]["ps"]["template"]["spec"]["containers"][0]
    container["ports"] = [{"name": "tfjob-port", "containerPort": 3333}]
    view = Job(resource)
    assert view.replica_types == ["PS", "Worker"]
    assert view.container_port("PS") == 3333 and view.container_port("Worker") == 2222
    assert view.restart_policy("PS") == "Never"


@pytest.mark.parametrize("spec, expected", [
    ({}, "None"),
    ({"cleanPodPolicy": "All"}, "All"),
    ({"cleanPodPolicy": "All", "runPolicy": {"cleanPodPolicy": "Running"}}, "Running"),
])
def test_mpi_top_level_clean_pod_policy_yields_to_run_policy(spec, expected):
    assert Job(job("MPIJob", "m", {"Launcher": 1, "Worker": 1}, **spec)).run_policy["cleanPodPolicy"] == expected


def test_mpi_worker_defaults_to_zero_replicas():
    resource = job("MPIJob", "m", {"Launcher": 1, "Worker": 1})
    del resource["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    assert Job(resource).replicas("Worker") == 0


@pytest.mark.parametrize("kind, replicas, master", [
    ("PyTorchJob", {"Master": 1, "Worker": 2}, [("Master", 0)]),
    ("PyTorchJob", {"Worker": 2}, [("Worker", 0)]),
    ("TFJob", {"Chief": 1, "PS": 1, "Worker": 2}, [("Chief", 0)]),
    ("TFJob", {"PS": 1, "Worker": 2}, [("Worker", 0)]),
    ("XGBoostJob", {"Master": 1, "Worker": 2}, [("Master", 0)]),
    ("PaddleJob", {"Worker": 2}, []),
    ("JAXJob", {"Worker": 2}, [("Worker", 0)]),
    ("MPIJob", {"Launcher": 1, "Worker": 2}, [("Launcher", 0)]),
])
def test_master_role_per_kind(kind, replicas, master):
    view = Job(job(kind, "j", replicas))
    every = [(rtype, i) for rtype in view.replica_types for i in range(view.replicas(rtype))]
    assert [replica for replica in every if view.is_master_role(*replica)] == master


def test_names_and_labels():
    mpi = Job(job("MPIJob", "m", {"Launcher": 1, "Worker": 2}))
    assert mpi.pod_name("Launcher", 0) == "m-launcher" and mpi.pod_name("Worker", 1) == "m-worker-1"
    assert mpi.labels("Launcher", 0) == {
        "training.kubeflow.org/operator-name": "mpijob-controller", "training.kubeflow.org/job-name": "m",
        "training.kubeflow.org/replica-type": "launcher", "training.kubeflow.org/job-role": "master"}
    tf = Job(job("TFJob", "t", {"PS": 1, "Worker": 1}))
    assert tf.labels("PS", 0)["training.kubeflow.org/replica-index"] == "0"
    assert "training.kubeflow.org/job-role" not in tf.labels("PS", 0)


def test_managed_by_another_controller():
    resource = job("JAXJob", "j", {"Worker": 1}, runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"})
    assert Job(resource).managed_externally
    resource["spec"]["runPolicy"]["managedBy"] = "kubeflow.org/training-operator"
    assert not Job(resource).managed_externally
