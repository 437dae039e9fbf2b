"""A TrainJob runtime's steps as the reconcile core runs them, on both runtimes (trainctl/core/trainjob.py): JobSet's
``dependsOn`` (a replicatedJob's pods are created once those it names are Ready or Complete), a step whose container
is not named ``node``, and a pod template's ``restartPolicy: Never`` (a Job's new pods, up to its backoffLimit)."""

from __future__ import annotations

import copy
from datetime import datetime, timezone

import pytest
import yaml

from tests.conftest import REPO
from trainctl.core.actions import CreateReplica, DeleteReplica
from trainctl.core.job import Job
from trainctl.core.network import ClusterNetwork, LocalNetwork
from trainctl.core.observed import ObservedReplica
from trainctl.core.reconcile import reconcile
from trainctl.core.trainjob import with_runtime_snapshot
from trainctl.errors import UserError

RUNTIMES = REPO.parent / "shared" / "kubeflow-trainer-v2" / "runtimes"
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


def step(name: str, ancestor: str, container: str, depends_on: list | None = None, **pod) -> dict:
    replicated_job = {"name": name, "template": {"metadata": {"labels": {ANCESTOR: ancestor}}, "spec": {"template": {
        "spec": {"containers": [{"name": container, "image": "busybox", "command": ["python3", "-c", "pass"]}],
                 **pod}}}}}
    if depends_on is not None:
        replicated_job["dependsOn"] = depends_on
    return replicated_job


def two_steps(depends_on: list | None = None, trainer_container: str = "node", **pod) -> dict:
    """A runtime of a dataset initializer and a trainer step, as upstream's 05-multi-step example has them."""
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime", "metadata": {"name": "steps"},
            "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [
                step("dataset-initializer", "dataset-initializer", "dataset-initializer"),
                step("node", "trainer", trainer_container, depends_on, **pod)]}}}}


def stored(runtime: dict, **trainer) -> dict:
    resource = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                "metadata": {"name": "tj", "namespace": "ns", "uid": "u-1"},
                "spec": {"runtimeRef": {"kind": runtime["kind"], "name": runtime["metadata"]["name"]},
                         "initializer": {"dataset": {"storageUri": "hf://x/y"}}, **({"trainer": trainer} if trainer
                                                                                     else {})}}
    with_runtime_snapshot(resource, runtime)
    return resource


def replica(rtype: str, phase: str, index: int = 0, **seen) -> ObservedReplica:
    return ObservedReplica(rtype, index, f"tj-{rtype}-0-{index}", phase, **seen)


def created(resource: dict, observed: list[ObservedReplica], network=None) -> list[tuple[str, int]]:
    plan = reconcile(resource, observed, NOW, network or LocalNetwork({}))
    return [(action.rtype, action.index) for action in plan.actions if isinstance(action, CreateReplica)]


@pytest.mark.parametrize("network", [LocalNetwork({}), ClusterNetwork()], ids=["local", "cluster"])
def test_a_step_that_depends_on_another_complete_starts_once_every_pod_of_it_succeeded(network):
    resource = stored(two_steps([{"name": "dataset-initializer", "status": "Complete"}]))
    assert created(resource, [], network) == [("dataset-initializer", 0)]
    running = replica("dataset-initializer", "Running")
    assert created(resource, [running], network) == []  # running, ready: not Complete
    restarted = created(resource, [replica("dataset-initializer", "Failed", exit_code=1)], network)
    assert ("node", 0) not in restarted  # failed (and restarted, on a local pass at once): not Complete
    assert created(resource, [replica("dataset-initializer", "Succeeded", exit_code=0)], network) == [("node", 0)]


def test_without_depends_on_every_step_starts_at_once():
    assert created(stored(two_steps()), []) == [("dataset-initializer", 0), ("node", 0)]


def mpi_runtime() -> dict:
    """Upstream's deepspeed-distributed, its launcher no node: the launcher dependsOn node Ready."""
    runtime = yaml.safe_load((RUNTIMES / "deepspeed_distributed.yaml").read_text())
    runtime["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = False
    return runtime


def test_the_mpi_launcher_waits_until_every_node_is_ready():
    resource = stored(mpi_runtime(), numNodes=2)
    assert created(resource, [], ClusterNetwork()) == [("node", 0), ("node", 1)]
    one = [replica("node", "Running", 0, pod_ready=True), replica("node", "Pending", 1)]
    assert created(resource, one, ClusterNetwork()) == []
    probing = [replica("node", "Running", 0, pod_ready=True), replica("node", "Running", 1, pod_ready=False)]
    assert created(resource, probing, ClusterNetwork()) == []  # running, its sshd's readiness probe not passed yet
    ready = [replica("node", "Running", 0, pod_ready=True), replica("node", "Running", 1, pod_ready=True)]
    assert created(resource, ready, ClusterNetwork()) == [("launcher", 0)]
    local = [replica("node", "Running", 0), replica("node", "Running", 1)]  # a process has no probe: running is ready
    assert created(resource, local) == [("launcher", 0)]


def test_a_step_once_created_is_restarted_whatever_became_of_what_it_depends_on():
    """JobSet gates the creation of a replicatedJob's Jobs; a Job that exists replaces its pods on its own."""
    resource = stored(mpi_runtime(), numNodes=2)
    observed = [replica("node", "Running", 0), replica("node", "Pending", 1),
                replica("launcher", "Failed", exit_code=1)]
    plan = reconcile(resource, observed, NOW, LocalNetwork({}))
    assert [(a.rtype, a.reason) for a in plan.actions if isinstance(a, DeleteReplica)] == [("launcher", "Restart")]
    assert ("launcher", 0) in [(a.rtype, a.index) for a in plan.actions if isinstance(a, CreateReplica)]


@pytest.mark.parametrize("depends_on, said", [
    ([{"name": "node", "status": "Complete"}], "{'name': 'node', 'status': 'Complete'}"),  # itself: not before it
    ([{"name": "model-initializer", "status": "Complete"}], "'model-initializer'"),  # no such step
    ([{"name": "dataset-initializer", "status": "Running"}], "'Running'"),
    ({"name": "dataset-initializer", "status": "Ready"}, "give a list of {name, status}"),
])
def test_a_depends_on_jobset_refuses_is_named_in_one_line(depends_on, said):
    with pytest.raises(UserError) as refused:
        stored(two_steps(depends_on))
    message = str(refused.value)
    assert "\n" not in message and message.startswith("runtime 'steps': replicatedJob 'node' has dependsOn ")
    assert said in message


def test_a_step_whose_container_is_not_named_node_gets_its_env_and_runs_as_written():
    """The initializer's container (named like its step) and a trainer step's container named ``trainer``: the
    step's process is that container's, with the env the plan gives it (here: STORAGE_URI, the completion index)."""
    resource = stored(two_steps(trainer_container="trainer"), command=["python3", "train.py"])
    plan = reconcile(resource, [], NOW, LocalNetwork({}))
    actions = {action.rtype: action for action in plan.actions if isinstance(action, CreateReplica)}
    assert sorted(actions) == ["dataset-initializer", "node"]
    assert actions["dataset-initializer"].env["STORAGE_URI"] == "hf://x/y"
    assert actions["node"].env["JOB_COMPLETION_INDEX"] == "0"
    # upstream's jobset builder gives the TrainJob's command only to a container named node: this one runs its own
    assert actions["node"].pod["spec"]["containers"][0]["command"] == ["python3", "-c", "pass"]


def test_restart_policy_never_makes_new_pods_up_to_the_backoff_limit():
    """A Job whose pods say restartPolicy Never replaces a failed pod with a new one, up to backoffLimit; the pod
    keeps Never (kubelet restarts nothing in place)."""
    runtime = two_steps(restartPolicy="Never")
    runtime["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["backoffLimit"] = 1
    resource = stored(runtime)
    job = Job(resource)
    assert job.restart_policy("node") == "OnFailure" and job.run_policy["backoffLimit"] == 1
    pods = {a.rtype: a.pod for a in reconcile(resource, [], NOW, ClusterNetwork()).actions
            if isinstance(a, CreateReplica)}
    assert pods["node"]["spec"]["restartPolicy"] == "Never"
    assert pods["dataset-initializer"]["spec"]["restartPolicy"] == "OnFailure"  # JobSet's default, kept
    failed = [replica("dataset-initializer", "Succeeded", exit_code=0), replica("node", "Failed", exit_code=1)]
    plan = reconcile(resource, failed, NOW, ClusterNetwork())
    assert [(a.rtype, a.reason) for a in plan.actions if isinstance(a, DeleteReplica)] == [("node", "Restart")]
    assert not any(c["type"] == "Failed" for c in plan.status["conditions"])
    spent = copy.deepcopy(resource)
    spent["metadata"]["annotations"].update(plan.annotations)  # the one restart recorded
    plan = reconcile(spent, failed, NOW, ClusterNetwork())
    failure = next(c for c in plan.status["conditions"] if c["type"] == "Failed")
    assert "backoff limit" in failure["message"]
