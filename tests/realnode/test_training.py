"""Distributed training in real pods, reconciled by the in-cluster controller."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.cluster.images import EXAMPLES_IN_IMAGE
from tests.controller.jobs import wait_for
from tests.realnode.conftest import JOB_TIMEOUT_S

pytestmark = pytest.mark.realnode


def results(log_text: str) -> list[dict]:
    """The examples' result lines (examples/result.py) in ``trainctl logs`` output."""
    found = []
    for line in log_text.splitlines():
        _, _, payload = line.partition("{")
        if payload:
            try:
                record = json.loads("{" + payload)
            except json.JSONDecodeError:
                continue
            if record.get("event") == "result":
                found.append(record)
    return found


def test_controller_runs_as_its_deployment(real_node, in_cluster_controller):
    def live_pods() -> list[dict]:  # a rollout's old pod may linger for a moment
        listed = json.loads(real_node.kubectl("get", "pods", "-n", "trainctl-system", "-l",
                                              "app.kubernetes.io/name=trainctl-controller", "-o", "json").stdout)
        live = [pod for pod in listed["items"] if not pod["metadata"].get("deletionTimestamp")]
        return live if len(live) == 1 else []

    [pod] = wait_for(live_pods, 60, "one controller pod")
    assert pod["spec"]["containers"][0]["image"] == in_cluster_controller
    assert pod["spec"]["serviceAccountName"] == "trainctl-controller"
    assert pod["status"]["phase"] == "Running"
    assert all(status["ready"] for status in pod["status"]["containerStatuses"])
    lease = real_node.kubectl("get", "lease", "-n", "trainctl-system", "-o", "json")
    holders = [item["spec"].get("holderIdentity") for item in json.loads(lease.stdout)["items"]]
    assert pod["metadata"]["name"] in " ".join(filter(None, holders)), holders  # it leads
    # its metrics through its Service's cluster IP: kube-proxy's rules, then the pod on the bridge
    services = json.loads(real_node.kubectl("get", "services", "-n", "trainctl-system", "-o", "json").stdout)["items"]
    metrics = next(s for s in services if any(port["port"] == 8080 for port in s["spec"]["ports"]))
    with urllib.request.urlopen(f"http://{metrics['spec']['clusterIP']}:8080/metrics", timeout=10) as response:
        assert "trainctl_" in response.read().decode()


def test_pytorch_job_of_three_replicas_trains_in_pods(real_node, trainctl, namespace, python_image):
    script = EXAMPLES_IN_IMAGE / "pytorch" / "train_ddp.py"
    submitted = trainctl("submit", "pytorch", "--name", "ddp", "-n", namespace, "--workers", "3",
                         "--image", python_image, "--", "python3", str(script), "--epochs", "2")
    assert submitted.returncode == 0, submitted.stderr
    waited = trainctl("wait", "ddp", "-n", namespace, "--timeout", str(JOB_TIMEOUT_S), timeout=JOB_TIMEOUT_S + 30)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    logs = trainctl("logs", "ddp", "-n", namespace)
    assert logs.returncode == 0, logs.stderr
    found = results(logs.stdout)
    assert sorted(record["rank"] for record in found) == [0, 1, 2], logs.stdout
    assert {record["allreduce_sum"] for record in found} == {6.0}  # 1 + 2 + 3: gloo across three pods
    assert len({record["model_hash"] for record in found}) == 1  # DDP kept the replicas in step
    pods = json.loads(real_node.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
    assert len(pods) == 3 and {pod["status"]["phase"] for pod in pods} == {"Succeeded"}
    master_addr = {env["value"] for pod in pods for env in pod["spec"]["containers"][0]["env"]
                   if env["name"] == "MASTER_ADDR"}
    assert master_addr == {"ddp-master-0"}  # a Service name: the pods found each other through DNS


def test_tfjob_of_two_workers_trains_with_multi_worker_mirrored_strategy(real_node, trainctl, namespace,
                                                                         python_image):
    script = EXAMPLES_IN_IMAGE / "tensorflow" / "train_mwms.py"
    submitted = trainctl("submit", "tf", "--name", "mwms", "-n", namespace, "--workers", "2",
                         "--image", python_image, "--", "python3", str(script))
    assert submitted.returncode == 0, submitted.stderr
    waited = trainctl("wait", "mwms", "-n", namespace, "--timeout", str(JOB_TIMEOUT_S), timeout=JOB_TIMEOUT_S + 30)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    found = results(trainctl("logs", "mwms", "-n", namespace).stdout)
    assert sorted(record["rank"] for record in found) == [0, 1], found
    assert {record["allreduce_sum"] for record in found} == {3.0}
    assert len({record["model_hash"] for record in found}) == 1
    pods = json.loads(real_node.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
    tf_config = json.loads(next(env["value"] for env in pods[0]["spec"]["containers"][0]["env"]
                                if env["name"] == "TF_CONFIG"))
    # Service names, resolved by the cluster's DNS in every pod
    assert tf_config["cluster"]["worker"] == [f"mwms-worker-{i}.{namespace}.svc:2222" for i in range(2)], tf_config


def test_mpijob_runs_mpirun_on_two_workers_through_kubectl_exec(real_node, trainctl, namespace, python_image):
    script = EXAMPLES_IN_IMAGE / "mpi" / "allreduce.py"
    submitted = trainctl("submit", "mpi", "--name", "mpi", "-n", namespace, "--workers", "2",
                         "--image", python_image, "--", "python3", str(script))
    assert submitted.returncode == 0, submitted.stderr
    waited = trainctl("wait", "mpi", "-n", namespace, "--timeout", str(JOB_TIMEOUT_S), timeout=JOB_TIMEOUT_S + 30)
    logs = trainctl("logs", "mpi", "-n", namespace)
    assert waited.returncode == 0, waited.stdout + waited.stderr + logs.stdout
    found = results(logs.stdout)  # every rank's output comes back through mpirun on the launcher
    assert sorted(record["rank"] for record in found) == [0, 1], logs.stdout
    assert {record["allreduce_sum"] for record in found} == {3.0}
    assert len({record["model_hash"] for record in found}) == 1  # averaged gradients kept the ranks equal
    # kubexec.sh traces each daemon start (set -x): Open MPI's rsh agent reached both workers by kubectl exec.
    # The two starts run at once and bash writes a trace word by word, so their lines may interleave
    # ("POD_NAME=mpi-worker-0+ "): each word is looked for, not a whole line.
    traced = logs.stdout + logs.stderr
    for worker in ("mpi-worker-0", "mpi-worker-1"):
        assert f"POD_NAME={worker}" in traced, logs.stdout
    assert traced.count("/opt/kube/kubectl") >= 2 and traced.count("/bin/sh") >= 2, logs.stdout
    launcher = json.loads(real_node.kubectl("get", "pod", "mpi-launcher", "-n", namespace, "-o", "json").stdout)
    [delivery] = launcher["status"]["initContainerStatuses"][-1:]
    assert delivery["name"] == "kubectl-delivery" and delivery["state"]["terminated"]["exitCode"] == 0
