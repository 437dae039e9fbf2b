"""The upstream SDK's side of tests/controller/test_upstream_sdk.py, run in .venv-upstream-sdk.

The Kubeflow SDK needs kubernetes<36 and trainctl's tests pin 37, so this script runs in a
virtualenv of its own and prints what the SDK saw as one JSON object; the test asserts on it.

    python upstream_sdk_e2e.py KUBECONFIG NAMESPACE create      # the three jobs, then list_jobs
    python upstream_sdk_e2e.py KUBECONFIG NAMESPACE conditions  # wait for Succeeded, read conditions

The jobs are the ones upstream's ``test_sdk_e2e_managed_by`` (sdk/python/test/e2e, release-1.9)
creates: Master 1 + Worker 1, OnFailure, cleanPodPolicy None, three values of managedBy.
"""

from __future__ import annotations

import json
import sys

from kubeflow.training import (
    KubeflowOrgV1PyTorchJob,
    KubeflowOrgV1PyTorchJobSpec,
    KubeflowOrgV1ReplicaSpec,
    KubeflowOrgV1RunPolicy,
    TrainingClient,
)
from kubernetes.client import V1Container, V1ObjectMeta, V1PodSpec, V1PodTemplateSpec

JOB = "pytorchjob-e2e"
OURS, THEIRS, INVALID = f"{JOB}-default-controller", f"{JOB}-multikueue-controller", f"{JOB}-invalid-controller"
MANAGED_BY = {OURS: "kubeflow.org/training-operator", THEIRS: "kueue.x-k8s.io/multikueue",
              INVALID: "kueue.x-k8s.io/other-controller"}


def pytorchjob(namespace: str, name: str, managed_by: str) -> KubeflowOrgV1PyTorchJob:
    def replica() -> KubeflowOrgV1ReplicaSpec:
        container = V1Container(name="pytorch", image="kubeflow/pytorch-dist-mnist:latest",
                                args=["--backend", "gloo", "--epochs", "1"])
        return KubeflowOrgV1ReplicaSpec(replicas=1, restart_policy="OnFailure",
                                        template=V1PodTemplateSpec(spec=V1PodSpec(containers=[container])))

    return KubeflowOrgV1PyTorchJob(
        api_version="kubeflow.org/v1", kind="PyTorchJob", metadata=V1ObjectMeta(name=name, namespace=namespace),
        spec=KubeflowOrgV1PyTorchJobSpec(
            run_policy=KubeflowOrgV1RunPolicy(clean_pod_policy="None", managed_by=managed_by),
            pytorch_replica_specs={"Master": replica(), "Worker": replica()}))


def create(sdk: TrainingClient, namespace: str) -> dict:
    errors = {}
    for name, managed_by in MANAGED_BY.items():
        try:
            sdk.create_job(job=pytorchjob(namespace, name, managed_by), namespace=namespace)
        except RuntimeError as error:
            errors[name] = str(error)
    return {"errors": errors, "listed": sorted(job.metadata.name for job in sdk.list_jobs(namespace))}


def conditions(sdk: TrainingClient, namespace: str) -> dict:
    def pairs(found) -> dict:
        return {condition.type: condition.status for condition in found}

    job = sdk.wait_for_job_conditions(OURS, namespace, wait_timeout=60, polling_interval=1)
    return {OURS: pairs(sdk.get_job_conditions(job=job)), THEIRS: pairs(sdk.get_job_conditions(THEIRS, namespace))}


def main(kubeconfig: str, namespace: str, step: str) -> None:
    sdk = TrainingClient(config_file=kubeconfig, namespace=namespace)
    print(json.dumps({"create": create, "conditions": conditions}[step](sdk, namespace)))


if __name__ == "__main__":
    main(*sys.argv[1:])
