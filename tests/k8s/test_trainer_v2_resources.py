"""Kubeflow Trainer v2's resources on a real API server, under the CRDs trainctl generates (issue 41).

``trainctl crds install --api v2`` installs TrainJob, TrainingRuntime and ClusterTrainingRuntime; upstream's
default runtimes (../shared/kubeflow-trainer-v2/runtimes) and a TrainJob of each are stored whole (nothing
pruned), the SDK's TrainJob body with its float quantities is accepted, what upstream's schema rejects is
rejected, and ``trainctl runtimes install`` puts trainctl's own runtimes there, with an image given.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import time

import pytest
import yaml

from tests.conftest import REPO
from trainctl.core.trainer_crds import CLUSTER_RUNTIME, RUNTIME, TRAINER_KINDS, TRAINJOB
from trainctl.kube import trainer_resource
from trainctl.kube.client import ApiError

pytestmark = pytest.mark.k8s

RUNTIMES = REPO.parent / "shared" / "kubeflow-trainer-v2" / "runtimes"
TRAINJOBS = trainer_resource(TRAINJOB)
NAMESPACED_RUNTIMES = trainer_resource(RUNTIME)
CLUSTER_RUNTIMES = trainer_resource(CLUSTER_RUNTIME, namespaced=False)
# what the SDK (kubeflow 0.5.0) POSTs for train(runtime="torch-distributed", trainer=CustomTrainer(..., num_nodes=2,
# resources_per_node={"cpu": 2, "memory": "4Gi", "gpu": 1}, env={"FOO": "bar"})): integral numbers as floats
# (contract section 7.1)
SDK_RESOURCES = {"cpu": 2.0, "memory": "4Gi", "nvidia.com/gpu": 1.0}
SDK_BODY = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "v041e9dcb8fc"},
            "spec": {"runtimeRef": {"kind": "ClusterTrainingRuntime", "name": "torch-distributed"},
                     "trainer": {"command": ["bash", "-c", "python - <<'EOM'\nprint('hi')\nEOM"],
                                 "env": [{"name": "FOO", "value": "bar"}], "numNodes": 2,
                                 "resourcesPerNode": {"limits": SDK_RESOURCES, "requests": SDK_RESOURCES}}}}


def cli(k8s_cluster, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "KUBECONFIG": str(k8s_cluster.kubeconfig("admin")), "PYTHONPATH": str(REPO), "COLUMNS": "300"}
    env.pop("TRAINCTL_BACKEND", None)
    return subprocess.run([sys.executable, "-m", "trainctl", *args], env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def trainer_crds(k8s_cluster, rest_admin):
    """The three Trainer v2 CRDs, installed by the CLI and served."""
    result = cli(k8s_cluster, "crds", "install", "--api", "v2")
    assert result.returncode == 0, result.stderr
    assert "installed 3 CRDs" in result.stdout, result.stdout
    deadline = time.monotonic() + 30
    for kind in TRAINER_KINDS:  # a new CRD takes a moment to be served
        while True:
            try:
                rest_admin.list(trainer_resource(kind, namespaced=kind != CLUSTER_RUNTIME))
                break
            except ApiError:
                assert time.monotonic() < deadline, f"{kind} never served"
                time.sleep(0.2)


@pytest.fixture(scope="module")
def rest_admin(k8s_cluster):
    from trainctl.kube.client import connect

    return connect(kubeconfig=str(k8s_cluster.kubeconfig("admin")))


def upstream_runtimes() -> list[dict]:
    if not RUNTIMES.is_dir():
        pytest.skip(f"the upstream reference data is not beside the clone ({RUNTIMES})")
    return [yaml.safe_load(path.read_text()) for path in sorted(RUNTIMES.glob("*.yaml"))]


def missing(sent, stored, path="") -> list[str]:
    """What of ``sent`` the server did not keep (pruned as unknown, or changed): every leaf, by path."""
    if isinstance(sent, dict):
        if not isinstance(stored, dict):
            return [path]
        return [p for key, value in sent.items() for p in missing(value, stored.get(key), f"{path}.{key}")]
    if isinstance(sent, list):
        if not isinstance(stored, list) or len(stored) != len(sent):
            return [path]
        return [p for index, value in enumerate(sent) for p in missing(value, stored[index], f"{path}[{index}]")]
    return [] if sent == stored else [f"{path}: {sent!r} -> {stored!r}"]


def trainjob(name: str, runtime: dict, **trainer) -> dict:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
            "spec": {"runtimeRef": {"name": runtime["metadata"]["name"], "kind": runtime["kind"]},
                     "trainer": trainer}}


def test_upstream_runtimes_and_a_trainjob_of_each_are_stored_whole(rest_admin, trainer_crds, namespace):
    created = []
    try:
        for runtime in upstream_runtimes():
            # as a ClusterTrainingRuntime (named apart: the cluster is the session's) and as a TrainingRuntime
            cluster = copy.deepcopy(runtime)
            cluster["metadata"]["name"] += f"-{namespace}"
            stored = rest_admin.create(CLUSTER_RUNTIMES, cluster)
            created.append(cluster["metadata"]["name"])
            local = {**copy.deepcopy(runtime), "kind": RUNTIME}
            stored_local = rest_admin.create(NAMESPACED_RUNTIMES, local, namespace)
            for sent, kept in ((cluster, stored), (local, stored_local)):
                assert missing(sent, kept) == [], sent["metadata"]["name"]
            for reference in (cluster, local):
                name = f"{reference['kind'].lower()}-{runtime['metadata']['name']}"[:63]
                job = trainjob(name, reference, numNodes=2, command=["python", "train.py"], numProcPerNode=2)
                rest_admin.create(TRAINJOBS, job, namespace)
                read = rest_admin.get(TRAINJOBS, name, namespace)
                assert missing(job, read) == [], name
                assert read["spec"]["runtimeRef"]["apiGroup"] == "trainer.kubeflow.org"  # upstream's defaults
                assert (read["spec"]["suspend"], read["spec"]["managedBy"]) == (
                    False, "trainer.kubeflow.org/trainjob-controller")
    finally:
        for name in created:
            rest_admin.delete(CLUSTER_RUNTIMES, name)


def test_the_sdks_trainjob_body_with_float_quantities_is_accepted_and_has_a_status(rest_admin, trainer_crds, namespace):
    rest_admin.create(TRAINJOBS, SDK_BODY, namespace)
    stored = rest_admin.get(TRAINJOBS, SDK_BODY["metadata"]["name"], namespace)
    resources = stored["spec"]["trainer"]["resourcesPerNode"]
    assert resources["limits"] == resources["requests"] == {"cpu": 2, "memory": "4Gi", "nvidia.com/gpu": 1}
    assert stored["spec"]["trainer"]["env"] == [{"name": "FOO", "value": "bar"}]
    condition = {"type": "Complete", "status": "True", "reason": "AllJobsCompleted",
                 "message": "jobset completed successfully", "lastTransitionTime": "2026-11-29T00:00:00Z"}
    stored["status"] = {"conditions": [condition]}
    rest_admin.replace(TRAINJOBS, stored, namespace, subresource="status")
    assert rest_admin.get(TRAINJOBS, SDK_BODY["metadata"]["name"], namespace)["status"]["conditions"] == [condition]


def test_a_trainjob_with_every_spec_field_is_stored_whole(rest_admin, trainer_crds, namespace):
    """Runtime patches as the SDK's RuntimePatch and Kueue write them, initializers, a deadline."""
    pod = {"nodeSelector": {"pool": "gpu"}, "tolerations": [{"key": "gpu", "operator": "Exists"}],
           "serviceAccountName": "trainer", "terminationGracePeriodSeconds": 30, "schedulingGates": [{"name": "kueue"}],
           "imagePullSecrets": [{"name": "registry"}], "securityContext": {"fsGroup": 1000},
           "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
           "containers": [{"name": "node", "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                           "securityContext": {"runAsUser": 1000}}],
           "initContainers": [{"name": "warm", "env": [{"name": "CACHE", "value": "/data"}]}]}
    patch = {"manager": "trainer.kubeflow.org/kubeflow-sdk", "time": "2026-11-29T00:00:00Z", "trainingRuntimeSpec": {
        "template": {"metadata": {"labels": {"team": "ml"}}, "spec": {"replicatedJobs": [
            {"name": "node", "template": {"metadata": {"annotations": {"a": "b"}},
                                          "spec": {"template": {"metadata": {"labels": {"x": "y"}}, "spec": pod}}}}]}}}}
    source = {"storageUri": "hf://org/model", "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {
        "name": "hf", "key": "token"}}}], "secretRef": {"name": "hf"}}
    body = sdk_body("patched")
    body["spec"].update(runtimePatches=[patch], initializer={"dataset": source, "model": source}, suspend=True,
                        activeDeadlineSeconds=3600, managedBy="kueue.x-k8s.io/multikueue")
    body["spec"]["trainer"].update(image="registry.local/team/trainer:1.0", args=["--epochs", "3"], numProcPerNode=4)
    rest_admin.create(TRAINJOBS, body, namespace)
    assert missing(body, rest_admin.get(TRAINJOBS, "patched", namespace)) == []


def sdk_body(name: str = "bad", **trainer) -> dict:
    body = copy.deepcopy(SDK_BODY)
    body["metadata"]["name"] = name
    body["spec"]["trainer"].update(trainer)
    return body


def without_runtime_ref() -> dict:
    body = sdk_body()
    del body["spec"]["runtimeRef"]
    return body


@pytest.mark.parametrize("body, field", [
    (sdk_body("1st-job"), "metadata.name"),  # a DNS-1123 subdomain, but no DNS-1035 label
    (sdk_body("a" * 64), "metadata.name"),
    (sdk_body(numNodes=-1), "spec.trainer.numNodes"),
    (sdk_body(numProcPerNode=0), "spec.trainer.numProcPerNode"),
    (sdk_body(resourcesPerNode={"limits": {"cpu": 0.5}}), "spec.trainer.resourcesPerNode.limits.cpu"),
    (without_runtime_ref(), "spec.runtimeRef"),
    ({**sdk_body(), "spec": {**sdk_body()["spec"], "managedBy": "someone.example/else"}}, "spec.managedBy"),
], ids=["name-digit", "name-long", "numNodes", "numProcPerNode", "fractional-float", "no-runtimeRef", "managedBy"])
def test_what_upstreams_schema_rejects_is_rejected(rest_admin, trainer_crds, namespace, body, field):
    with pytest.raises(ApiError) as rejected:
        rest_admin.create(TRAINJOBS, body, namespace, dry_run=True)
    assert rejected.value.status == 422 and field in rejected.value.message, rejected.value.message


def test_trainctls_own_runtimes_install_with_an_image_given(k8s_cluster, rest_admin, trainer_crds):
    image = "registry.local/team/pytorch:2.13"
    bad = cli(k8s_cluster, "runtimes", "install", "--image", "torch-distributed")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "RUNTIME=IMAGE" in bad.stderr, bad.stderr
    before = rest_admin.list(CLUSTER_RUNTIMES)["items"]
    dry = cli(k8s_cluster, "runtimes", "install", "--image", f"torch-distributed={image}", "--dry-run")
    assert dry.returncode == 0 and "would install 5 ClusterTrainingRuntimes" in dry.stdout, dry.stdout + dry.stderr
    assert rest_admin.list(CLUSTER_RUNTIMES)["items"] == before
    result = cli(k8s_cluster, "runtimes", "install", "--image", f"torch-distributed={image}")
    assert result.returncode == 0, result.stderr
    try:
        assert f"torch-distributed ({image})" in result.stdout, result.stdout
        torch = rest_admin.get(CLUSTER_RUNTIMES, "torch-distributed")
        assert [c["image"] for c in torch["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"][
            "template"]["spec"]["containers"]] == [image]
        deepspeed = rest_admin.get(CLUSTER_RUNTIMES, "deepspeed-distributed")
        assert deepspeed["spec"]["mlPolicy"]["mpi"]["sshAuthMountPath"] == "/home/mpiuser/.ssh"
        listed = cli(k8s_cluster, "runtimes", "list")
        assert listed.returncode == 0, listed.stderr
        rows = {line.split()[0]: line.split() for line in listed.stdout.splitlines()[1:]}
        assert rows["torch-distributed"][1:] == ["ClusterTrainingRuntime", "-", "torch", image], listed.stdout
        assert {"deepspeed-distributed", "mlx-distributed", "jax-distributed", "xgboost-distributed"} <= set(rows)
    finally:
        for name in ("torch-distributed", "deepspeed-distributed", "mlx-distributed", "jax-distributed",
                     "xgboost-distributed"):
            rest_admin.delete(CLUSTER_RUNTIMES, name)
