"""``trainctl convert | trainctl apply -f -`` on the real node: an MPIJob of 2 and one of 4 Workers become TrainJobs
whose one launcher runs the mpirun once (issue 55), reconciled by the in-cluster controller.

The tier's image serves no sshd, which v2's mpi policy starts the ranks through; so the launcher's mpirun keeps its
ranks in its own pod (``orte_default_hostfile none``) and the Workers idle as trainctl's MPIJob Workers do. What is
proved is what went wrong: one launcher pod, never restarted, one run of every rank, the N node pods beside it.
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.realnode.conftest import JOB_TIMEOUT_S

pytestmark = pytest.mark.realnode
JOBSET_NAME, REPLICATED_JOB = "jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/replicatedjob-name"
# one write a line: an unbuffered print writes each word apart, and mpirun forwards the ranks' pieces as they come
# ("RANKRANK 0 OF 4")
RANK = ("import os; os.write(1, f\"RANK {os.environ['OMPI_COMM_WORLD_RANK']} OF {os.environ['OMPI_COMM_WORLD_SIZE']}\\n\""
        ".encode())")


def mpijob(name: str, workers: int, image: str) -> dict:
    launcher = {"name": "launcher", "image": image, "command": [
        "mpirun", "--allow-run-as-root", "--mca", "orte_default_hostfile", "none", "--oversubscribe",
        "-np", str(workers), "python3", "-c", RANK]}
    worker = {"name": "worker", "image": image, "command": ["sleep", "365d"]}  # no sshd to serve here
    return {"apiVersion": "kubeflow.org/v1", "kind": "MPIJob", "metadata": {"name": name},
            "spec": {"mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "OnFailure",
                             "template": {"spec": {"containers": [launcher]}}},
                "Worker": {"replicas": workers, "restartPolicy": "OnFailure",
                           "template": {"spec": {"containers": [worker]}}}}}}


def test_converted_mpijobs_of_2_and_4_workers_run_their_mpirun_once(real_node, trainctl, namespace, python_image):
    jobs = {"mpi2": 2, "mpi4": 4}
    (trainctl.cwd / "mpijobs.yaml").write_text(yaml.safe_dump_all(
        [mpijob(name, workers, python_image) for name, workers in jobs.items()]))
    converted = trainctl("convert", "-f", "mpijobs.yaml", "--to", "v2")
    assert converted.returncode == 0, converted.stderr
    (trainctl.cwd / "trainjobs.yaml").write_text(converted.stdout)
    applied = trainctl("apply", "-f", "trainjobs.yaml", "-n", namespace)
    assert applied.returncode == 0, applied.stderr
    for name, workers in jobs.items():
        waited = trainctl("wait", name, "-n", namespace, "--timeout", str(JOB_TIMEOUT_S), timeout=JOB_TIMEOUT_S + 30)
        logs = trainctl("logs", name, "-n", namespace).stdout
        assert waited.returncode == 0, waited.stdout + waited.stderr + logs
        ranks = sorted(line.split(" | ", 1)[-1] for line in logs.splitlines() if "RANK " in line)
        assert ranks == [f"RANK {rank} OF {workers}" for rank in range(workers)], logs
        listed = real_node.kubectl("get", "pods", "-n", namespace, "-l", f"{JOBSET_NAME}={name}", "-o", "json")
        pods = json.loads(listed.stdout)["items"]
        launchers = [pod for pod in pods if pod["metadata"]["labels"][REPLICATED_JOB] == "launcher"]
        assert [pod["metadata"]["name"] for pod in launchers] == [f"{name}-launcher-0-0"], listed.stdout
        assert launchers[0]["status"]["containerStatuses"][0]["restartCount"] == 0
        status = trainctl("status", name, "-n", namespace).stdout
        assert all(f"{name}-node-0-{index}" in status for index in range(workers)), status
