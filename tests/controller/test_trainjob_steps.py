"""A TrainJob runtime's steps under trainctl's controller as JobSet runs them: the trainer's pods are created only once
the dataset initializer it ``dependsOn`` (status Complete) has succeeded, as upstream's 05-multi-step example has it.
The node fixture plays kubelet."""

from __future__ import annotations

import pytest

from tests.controller.jobs import wait_for
from tests.controller.test_trainjobs import TRAINJOBS, job_pods, ns, status  # noqa: F401 - ns: the fixture
from trainctl.kube import trainer_resource

pytestmark = pytest.mark.k8s
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


def step(name: str, container: str, **extra) -> dict:
    return {"name": name, **extra, "template": {"metadata": {"labels": {ANCESTOR: name if name != "node" else "trainer"}},
                                                "spec": {"template": {"spec": {"containers": [
                                                    {"name": container, "image": "python:3.11"}]}}}}}


def jobs_status(rest, namespace: str, name: str) -> dict[str, dict]:
    return {entry["name"]: entry for entry in status(rest, namespace, name).get("jobsStatus") or []}


def test_the_trainer_pods_are_created_once_the_initializer_they_depend_on_is_complete(rest, kube_node, ns):
    runtime = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
               "metadata": {"name": "with-dataset", "namespace": ns},
               "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [
                   step("dataset-initializer", "dataset-initializer"),
                   step("node", "node", dependsOn=[{"name": "dataset-initializer", "status": "Complete"}])]}}}}
    rest.create(trainer_resource("TrainingRuntime"), runtime, ns)
    rest.create(TRAINJOBS, {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                            "metadata": {"name": "steps", "namespace": ns},
                            "spec": {"runtimeRef": {"kind": "TrainingRuntime", "name": "with-dataset"},
                                     "initializer": {"dataset": {"storageUri": "hf://tatsu-lab/alpaca"}},
                                     "trainer": {"command": ["python3", "train.py"]}}}, ns)
    initializer = "steps-dataset-initializer-0-0"
    # the pass that saw the initializer running wrote its status after what it created: still no trainer pod
    wait_for(lambda: jobs_status(rest, ns, "steps").get("dataset-initializer", {}).get("active") == 1,
             what="the initializer running, in the TrainJob's status")
    assert set(job_pods(rest, ns, "steps")) == {initializer}
    pod = job_pods(rest, ns, "steps")[initializer]
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["STORAGE_URI"] == "hf://tatsu-lab/alpaca"

    kube_node.set_phase(ns, initializer, "Succeeded", exit_code=0)
    wait_for(lambda: "steps-node-0-0" in job_pods(rest, ns, "steps"), what="the trainer pod, once the initializer is "
                                                                            "Complete")
    trainer = job_pods(rest, ns, "steps")["steps-node-0-0"]
    assert trainer["spec"]["containers"][0]["command"] == ["python3", "train.py"]
    wait_for(lambda: (trainer := job_pods(rest, ns, "steps").get("steps-node-0-0")) and
             (trainer.get("status") or {}).get("phase") == "Running", what="the trainer pod running")
    kube_node.set_phase(ns, "steps-node-0-0", "Succeeded", exit_code=0)
    wait_for(lambda: any(c["type"] == "Complete" for c in status(rest, ns, "steps").get("conditions") or []),
             what="TrainJob steps Complete")
