"""The Kubeflow SDK v2 notebook on the real node (issue 41, the first "Done when"): ``TrainerClient`` (kubeflow,
pinned in requirements/upstream-sdk.txt, in .venv-upstream-sdk) trains a 2-node ``CustomTrainer`` function against
trainctl's in-cluster controller, the only training operator there, on trainctl's ``torch-distributed`` runtime
with the node's torch image. The notebook's cells are tests/k8s/sdk_v2_e2e.py's, run unchanged in real pods: the
SDK's own bash + torchrun command, torchrun reading the PET_* variables, gloo on CPU across the two pods.
"""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from tests.cluster import realnode
from tests.controller.jobs import wait_for
from tests.k8s.test_sdk_v2 import Notebook

pytestmark = pytest.mark.realnode
TORCH = "torch-distributed"
FAIL_FAST = "torch-fail-fast"  # TORCH in the test's namespace: its Job's backoffLimit 0, its pods never restarted
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
SDK_WAIT_S = 180  # the SDK's wait_for_job_status timeout: a 2-pod job here takes 10 to 30 s
GONE_S = 90  # a pod still running when its TrainJob goes gets its 30 s grace period (bash as PID 1 ignores SIGTERM)


@pytest.fixture(scope="module")
def torch_runtime(real_node, cli, in_cluster_controller, python_image):
    """trainctl's torch-distributed runtime with the node's torch image, installed as a user installs it."""
    with realnode.entered():  # set up before the test's own move into the node's network
        installed = cli("runtimes", "install", TORCH, "--image", f"{TORCH}={python_image}")
    assert installed.returncode == 0, installed.stderr
    printed = cli("runtimes", "print", TORCH, "--image", f"{TORCH}={python_image}")
    assert printed.returncode == 0, printed.stderr
    yield yaml.safe_load(printed.stdout)
    real_node.kubectl("delete", "clustertrainingruntime", TORCH, "--wait=false")


@pytest.fixture
def notebook(real_node, namespace, tmp_path):
    kernel = Notebook(real_node.kubeconfig, namespace, tmp_path / "sdk.log")
    try:
        yield kernel
    finally:
        kernel.close()


def job_pods(real_node, namespace: str, name: str) -> list[str]:
    listed = real_node.kubectl("get", "pods", "-n", namespace, "-l", f"{JOBSET_NAME}={name}", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    return [pod["metadata"]["name"] for pod in json.loads(listed.stdout)["items"]]


def test_a_notebooks_two_node_allreduce_completes_and_delete_job_removes_its_pods(real_node, torch_runtime,
                                                                                   namespace, notebook):
    name = notebook("run", "allreduce_ranks", TORCH)["name"]
    finished = notebook("finish", name, SDK_WAIT_S, timeout=SDK_WAIT_S + 60)
    assert finished["status"] == "Complete", finished
    assert sorted(finished["steps"]) == ["node-0", "node-1"], finished
    for rank in (0, 1):  # node-1's rank 1 too: the pods found each other at <job>-node-0-0.<job>:29500
        assert f"rank {rank} of 2 total 3.0" in finished["steps"][f"node-{rank}"], finished
    assert finished["logs"] == finished["steps"]["node-0"]  # get_job_logs' default step
    # delete_job (in "finish") removed the TrainJob; its pods follow it
    wait_for(lambda: not job_pods(real_node, namespace, name), GONE_S, f"the pods of TrainJob {name} gone")


def test_a_function_raising_on_one_rank_fails_and_trainctl_status_names_the_rank_and_exception(
        real_node, torch_runtime, trainctl, namespace, notebook, tmp_path):
    fail_fast = {**copy.deepcopy(torch_runtime), "kind": "TrainingRuntime",
                 "metadata": {**torch_runtime["metadata"], "name": FAIL_FAST, "namespace": namespace}}
    # upstream's Job fails at a pod's first failure too; the ranks are not restarted in place, so no pod is left
    # running (its bash, PID 1, ignoring SIGTERM for 30 s) when the job fails
    job_template = fail_fast["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]
    job_template["spec"]["backoffLimit"] = 0
    job_template["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    (tmp_path / "runtime.yaml").write_text(yaml.safe_dump(fail_fast))
    applied = real_node.kubectl("apply", "-f", str(tmp_path / "runtime.yaml"))
    assert applied.returncode == 0, applied.stderr

    name = notebook("run", "raise_on_rank_1", FAIL_FAST)["name"]
    failed = notebook("wait", name, "Failed", SDK_WAIT_S, timeout=SDK_WAIT_S + 60)
    assert failed["status"] == "Failed", failed
    shown = trainctl("status", name, "-n", namespace)
    assert "node-0-1 raised ValueError: rank 1 found no shard to train on" in shown.stdout, shown.stdout + shown.stderr
    notebook("delete", name)
    wait_for(lambda: not job_pods(real_node, namespace, name), GONE_S, f"the pods of TrainJob {name} gone")
