"""The Kubeflow SDK v2 (``kubeflow==0.5.0``: ``TrainerClient``, ``CustomTrainer``) against trainctl's Trainer v2
resources on the real API server (issue 41, point 4; contract sections 0, 6 and 7).

The notebook's calls run unchanged in .venv-upstream-sdk (tests/k8s/sdk_v2_e2e.py), on the Kubernetes backend,
against a cluster with trainctl's CRDs (``trainctl crds install --api v2``) and trainctl's own default runtimes
(``trainctl runtimes install``): the runtimes list and parse as upstream's do, ``train`` creates a TrainJob the
CRD stores, and ``get_job``, ``list_jobs``, ``wait_for_job_status``, ``get_job_logs`` and ``delete_job`` read what
trainctl writes for it. No controller reconciles TrainJobs here: the test creates the pods trainctl's plan gives
the stored TrainJob (trainctl/core/trainjob.py, what the controller is to create), the fake node runs them and
serves their logs, and the test writes the Complete or Failed condition as the controller is to write it. So this
proves the data contract between the SDK and trainctl's resources and pods, not the reconcile.
"""

from __future__ import annotations

import json
import select
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.k8s.test_trainer_v2_resources import (  # noqa: F401 (rest_admin, trainer_crds: fixtures)
    CLUSTER_RUNTIMES, NAMESPACED_RUNTIMES, TRAINJOBS, cli, rest_admin, trainer_crds, upstream_runtimes)
from trainctl.core.convert import convert
from trainctl.core.trainer_crds import CLUSTER_RUNTIME, TRAINJOB
from trainctl.core.trainer_crds import RUNTIME as RUNTIME_KIND
from trainctl.core.trainer_runtimes import default_runtimes, runtime_names
from trainctl.core.trainjob import TrainJob, plan
from trainctl.frameworks.base import LABEL_TRAINER_FRAMEWORK
from trainctl.kube.client import NAMESPACES, PODS, ApiError

pytestmark = pytest.mark.k8s
SDK_PYTHON = REPO / ".venv-upstream-sdk" / "bin" / "python"
DRIVER = REPO / "tests" / "k8s" / "sdk_v2_e2e.py"
TORCH = "torch-distributed"  # the SDK's default runtime


class Notebook:
    """The SDK's side (tests/k8s/sdk_v2_e2e.py) as a kernel: one TrainerClient for ``namespace`` with the admin
    ``kubeconfig``, then cells (also the real node's, tests/realnode/test_sdk_v2.py)."""

    def __init__(self, kubeconfig: Path, namespace: str, log: Path) -> None:
        assert SDK_PYTHON.exists(), "no .venv-upstream-sdk: run bash scripts/test.sh (see requirements/upstream-sdk.txt)"
        self.log, self.stderr = log, log.open("w")
        self.process = subprocess.Popen([str(SDK_PYTHON), str(DRIVER), str(kubeconfig), namespace],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True)

    def __call__(self, step: str, *args: str | int, timeout: float = 60) -> dict | list:
        """One cell: the SDK's calls of ``step``, and what they returned."""
        self.process.stdin.write(json.dumps([step, *args]) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        assert line, f"the SDK answered nothing to {step} {args}: {self.log.read_text()[-3000:]}"
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        code = self.process.wait(30)
        self.stderr.close()
        assert code == 0, self.log.read_text()[-3000:]


@pytest.fixture
def notebook(k8s_cluster, namespace, tmp_path):
    kernel = Notebook(k8s_cluster.kubeconfig("admin"), namespace, tmp_path / "sdk.log")
    try:
        yield kernel
    finally:
        kernel.close()


@pytest.fixture(scope="module")
def trainctl_runtimes(k8s_cluster, rest_admin, trainer_crds):  # noqa: F811
    """trainctl's default runtimes, installed as a user installs them (cluster-wide: removed after the module)."""
    result = cli(k8s_cluster, "runtimes", "install")
    assert result.returncode == 0, result.stderr
    yield
    for runtime in runtime_names():
        rest_admin.delete(CLUSTER_RUNTIMES, runtime)


def test_the_sdk_lists_and_gets_trainctls_runtimes_as_upstreams(k8s_cluster, rest_admin, trainctl_runtimes,  # noqa: F811
                                                                namespace, notebook, tmp_path):
    # upstream's own runtimes as TrainingRuntimes of another namespace (a namespaced one wins over the cluster's of
    # its name), read by a second notebook there
    upstream = f"{namespace}-upstream"
    rest_admin.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": upstream}})
    upstream_notebook = Notebook(k8s_cluster.kubeconfig("admin"), upstream, tmp_path / "upstream-sdk.log")
    try:
        for runtime in upstream_runtimes():
            rest_admin.create(NAMESPACED_RUNTIMES, {**runtime, "kind": RUNTIME_KIND}, upstream)
        theirs = upstream_notebook("runtimes", TORCH)
    finally:
        upstream_notebook.close()
        rest_admin.delete(NAMESPACES, upstream)

    seen = notebook("runtimes", TORCH)
    expected = {runtime["metadata"]["name"]: runtime["metadata"]["labels"][LABEL_TRAINER_FRAMEWORK]
                for runtime in default_runtimes()}
    assert {runtime["name"]: runtime["framework"] for runtime in seen["listed"]} == expected
    assert {runtime["kind"] for runtime in seen["listed"]} == {CLUSTER_RUNTIME}
    torch = next(runtime for runtime in seen["listed"] if runtime["name"] == TORCH)
    # no namespaced torch-distributed: the namespaced GET answered 404 and the SDK fell through to the cluster's
    assert seen["got"] == torch
    assert (torch["framework"], torch["type"], torch["command"][:2]) == ("torch", "CustomTrainer", ["bash", "-c"])
    assert torch["command"][2].endswith('\ntorchrun "{func_file}"')
    # the SDK derives from trainctl's runtimes what it derives from upstream's, field by field
    assert {runtime["kind"] for runtime in theirs["listed"]} == {RUNTIME_KIND}
    assert [{**runtime, "kind": CLUSTER_RUNTIME} for runtime in theirs["listed"]] == seen["listed"]


def planned_pods(rest_admin, namespace: str, name: str) -> list[dict]:  # noqa: F811
    """The pods trainctl's plan gives the stored TrainJob on its runtime, created as its controller is to create them."""
    stored = rest_admin.get(TRAINJOBS, name, namespace)
    runtime = rest_admin.get(CLUSTER_RUNTIMES, stored["spec"]["runtimeRef"]["name"])
    pods = [{"apiVersion": "v1", "kind": "Pod", "spec": pod.spec,
             "metadata": {"name": pod.name, "labels": pod.labels, "annotations": pod.annotations}}
            for pod in plan(TrainJob(stored), runtime).pods]
    for pod in pods:
        rest_admin.create(PODS, pod, namespace)
    return pods


def run(kube_node, namespace: str, pod: dict) -> None:
    kube_node.bind(namespace, pod["metadata"]["name"])
    kube_node.set_phase(namespace, pod["metadata"]["name"], "Running")


def finish(rest_admin, namespace: str, name: str, outcome: str) -> None:  # noqa: F811
    """The condition trainctl's controller is to write when the job ends: a whole metav1.Condition (contract §0.5)."""
    stored = rest_admin.get(TRAINJOBS, name, namespace)
    stored["status"] = {"conditions": [
        {"type": outcome, "status": "True", "reason": f"Jobs{outcome}", "message": f"the job is {outcome}",
         "lastTransitionTime": "2026-11-29T00:00:00Z", "observedGeneration": stored["metadata"]["generation"]}]}
    rest_admin.replace(TRAINJOBS, stored, namespace, subresource="status")


def test_a_notebooks_trainjob_from_train_to_delete(rest_admin, trainctl_runtimes, namespace, notebook,  # noqa: F811
                                                   kube_node):
    trained = notebook("train", TORCH)
    name = trained["names"][TORCH]
    stored = rest_admin.get(TRAINJOBS, name, namespace)
    trainer = stored["spec"]["trainer"]
    assert stored["spec"]["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": CLUSTER_RUNTIME, "name": TORCH}
    assert trainer["numNodes"] == 2
    assert trainer["resourcesPerNode"] == {"limits": {"cpu": 2}, "requests": {"cpu": 2}}  # sent as 2.0
    assert trainer["command"][:2] == ["bash", "-c"] and 'torchrun "sdk_v2_e2e.py"' in trainer["command"][2]
    assert "train_mnist(**{'lr': 0.01, 'epochs': 2})" in trainer["command"][2]
    assert not stored.get("status", {}).get("conditions")  # none until it finishes (contract §0.5)
    assert trained["got"] == [{"name": name, "status": "Created", "num_nodes": 2, "runtime": TORCH, "steps": []}]
    assert trained["listed"] == trained["got"]

    pods = planned_pods(rest_admin, namespace, name)
    assert [pod["metadata"]["name"] for pod in pods] == [f"{name}-node-0-0", f"{name}-node-0-1"]
    pending = notebook("job", name)
    assert pending["status"] == "Created"
    # one step per node, the device from the node container's limits: cpu, 2 per node (the SDK sent 2.0)
    assert sorted((step["name"], step["status"], step["pod"], step["device"], step["device_count"])
                  for step in pending["steps"]) == [("node-0", "Pending", f"{name}-node-0-0", "cpu", "2"),
                                                    ("node-1", "Pending", f"{name}-node-0-1", "cpu", "2")]
    run(kube_node, namespace, pods[0])
    assert notebook("job", name)["status"] == "Created"  # one node of two runs
    run(kube_node, namespace, pods[1])
    running = notebook("job", name)
    assert running["status"] == "Running"
    assert sorted((step["name"], step["status"]) for step in running["steps"]) == [
        ("node-0", "Running"), ("node-1", "Running")]

    for rank, pod in enumerate(pods):
        kube_node.write_log(namespace, pod["metadata"]["name"], "node", f"rank {rank} lr 0.01\nrank {rank} done\n")
        kube_node.set_phase(namespace, pod["metadata"]["name"], "Succeeded", exit_code=0)
    finish(rest_admin, namespace, name, "Complete")
    finished = notebook("finish", name)
    assert finished == {"status": "Complete", "logs": ["rank 0 lr 0.01", "rank 0 done"],  # node-0's log
                        "steps": {f"node-{rank}": [f"rank {rank} lr 0.01", f"rank {rank} done"] for rank in (0, 1)}}
    with pytest.raises(ApiError) as gone:
        rest_admin.get(TRAINJOBS, name, namespace)
    assert gone.value.status == 404


def test_trainjobs_on_every_default_runtime_run_and_fail_as_the_sdk_reads_them(rest_admin, trainctl_runtimes,  # noqa: F811
                                                                              namespace, notebook, kube_node):
    """MPI runtimes run a launcher that the SDK counts as node-0 and their nodes from node-1 (runLauncherAsNode)."""
    others = [name for name in runtime_names() if name != TORCH]
    names = notebook("train", *others)["names"]
    for pod in [pod for runtime in others for pod in planned_pods(rest_admin, namespace, names[runtime])]:
        run(kube_node, namespace, pod)
    failed = others[-1]
    finish(rest_admin, namespace, names[failed], "Failed")
    listed = notebook("jobs")
    assert [(job["runtime"], job["status"]) for job in listed] == [
        (runtime, "Failed" if runtime == failed else "Running") for runtime in sorted(others)]
    assert {job["runtime"]: sorted(step["name"] for step in job["steps"]) for job in listed} == dict.fromkeys(
        others, ["node-0", "node-1"])


def test_jobs_migrated_with_trainctl_convert_show_in_the_notebook(rest_admin, trainctl_runtimes, namespace,  # noqa: F811
                                                                   notebook, upstream):
    """Upstream's v1 examples as ``trainctl convert --allow-lossy`` writes them (a TrainingRuntime and a TrainJob
    each), applied: the SDK lists the runtimes with their framework and parses every job (one it cannot parse would
    make list_jobs fail for the whole namespace, contract §7.3)."""
    expected_jobs, expected_runtimes = {}, {}
    for path in sorted((upstream / "examples").glob("*.yaml")):
        for document in convert(list(yaml.safe_load_all(path.read_text())), "v2", allow_lossy=True).documents:
            document["metadata"]["namespace"] = namespace
            if document["kind"] == TRAINJOB:
                rest_admin.create(TRAINJOBS, document, namespace)
                expected_jobs[document["metadata"]["name"]] = (document["spec"]["runtimeRef"]["name"],
                                                               document["spec"]["trainer"]["numNodes"])
            else:
                rest_admin.create(NAMESPACED_RUNTIMES, document, namespace)
                expected_runtimes[document["metadata"]["name"]] = document["metadata"]["labels"][
                    LABEL_TRAINER_FRAMEWORK]
    assert len(expected_jobs) == 8
    listed = notebook("jobs")
    assert {job["name"]: (job["runtime"], job["num_nodes"]) for job in listed} == expected_jobs
    assert {job["status"] for job in listed} == {"Created"}
    runtimes = {runtime["name"]: (runtime["kind"], runtime["framework"])
                for runtime in notebook("runtimes", TORCH)["listed"]}
    assert {name: runtimes.get(name) for name in expected_runtimes} == {
        name: (RUNTIME_KIND, framework) for name, framework in expected_runtimes.items()}
