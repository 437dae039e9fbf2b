"""Issue 42 on two real nodes (the ``second_node`` fixture, tests/cluster/second_node.py): collectives sent from
one node to the other, and a job that loses a node mid-run and comes back on the survivor from its last checkpoint.

The replicas are spread over the nodes by a topologySpreadConstraints rule the test sets in the job
(``--set``; topologyKey kubernetes.io/hostname, maxSkew 1). Both nodes are on this machine, so a ``host:``
directory is storage every replica reaches from either node, as shared storage (an NFS volume, a bucket) would
be on a real cluster.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from tests.checkpointed import saved
from tests.cluster import realnode
from tests.cluster.images import EXAMPLES_IN_IMAGE
from tests.cluster.second_node import NODE_NAME as SECOND
from tests.cluster.second_node import spread
from tests.realnode.conftest import JOB_TIMEOUT_S
from tests.realnode.test_restarts import assert_resumed_from_the_last_complete_checkpoint, events, finished, wait_until
from tests.realnode.test_training import results
from trainctl.core.restarts import Record

pytestmark = pytest.mark.realnode

def pods(real_node, namespace: str) -> list[dict]:
    return json.loads(real_node.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]


def nodes_of(listed: list[dict], prefix: str = "") -> Counter:
    return Counter(pod["spec"].get("nodeName") for pod in listed if pod["metadata"]["name"].startswith(prefix))


def both_nodes(node_counts: Counter, each: int) -> bool:
    return node_counts == Counter({realnode.NODE_NAME: each, SECOND: each})


def test_pytorch_job_of_four_replicas_on_two_nodes_all_reduces_across_them(real_node, second_node, trainctl,
                                                                           namespace, python_image):
    script = EXAMPLES_IN_IMAGE / "pytorch" / "train_ddp.py"
    submitted = trainctl("submit", "pytorch", "--name", "ddp", "-n", namespace, "--workers", "4",
                         "--image", python_image, *spread("ddp", {"Master": "master", "Worker": "worker"},
                                                          "DoNotSchedule"),
                         "--", "python3", str(script), "--epochs", "1", "--samples", "512")
    assert submitted.returncode == 0, submitted.stderr
    waited = trainctl("wait", "ddp", "-n", namespace, "--timeout", str(JOB_TIMEOUT_S), timeout=JOB_TIMEOUT_S + 30)
    logs = trainctl("logs", "ddp", "-n", namespace)
    assert waited.returncode == 0, waited.stdout + waited.stderr + logs.stdout
    found = results(logs.stdout)
    assert sorted(record["rank"] for record in found) == [0, 1, 2, 3], logs.stdout
    assert [record["allreduce_sum"] for record in found] == [10.0] * 4  # 1 + 2 + 3 + 4, over both nodes
    assert len({record["model_hash"] for record in found}) == 1  # DDP kept the four replicas in step
    assert both_nodes(nodes_of(pods(real_node, namespace)), 2)


def test_mpijob_with_a_worker_on_each_node_all_reduces_across_them(real_node, second_node, trainctl, namespace,
                                                                   python_image):
    script = EXAMPLES_IN_IMAGE / "mpi" / "allreduce.py"
    submitted = trainctl("submit", "mpi", "--name", "mpi", "-n", namespace, "--workers", "2", "--image", python_image,
                         *spread("mpi", {"Worker": "worker"}, "DoNotSchedule"), "--", "python3", str(script))
    assert submitted.returncode == 0, submitted.stderr
    waited = trainctl("wait", "mpi", "-n", namespace, "--timeout", str(JOB_TIMEOUT_S), timeout=JOB_TIMEOUT_S + 30)
    logs = trainctl("logs", "mpi", "-n", namespace)
    assert waited.returncode == 0, waited.stdout + waited.stderr + logs.stdout
    found = results(logs.stdout)  # every rank's line, back through mpirun on the launcher
    assert sorted(record["rank"] for record in found) == [0, 1], logs.stdout
    assert [record["allreduce_sum"] for record in found] == [3.0, 3.0]
    assert len({record["model_hash"] for record in found}) == 1
    assert both_nodes(nodes_of(pods(real_node, namespace), "mpi-worker-"), 1)


def test_a_node_lost_mid_run_restarts_the_job_on_the_survivor_from_its_last_complete_checkpoint(
        real_node, second_node, trainctl, namespace, python_image, project, tmp_path):
    """--restart-scope job, --backoff-limit 0 and node-lost-after 10 s: the second node's kubelet, containerd and
    pods are killed (its link cut first, as a dead machine sends nothing) once a checkpoint exists; the job comes
    back on the first node as its next attempt, from the last checkpoint every rank completed. ScheduleAnyway: a
    NotReady node still counts as a topology domain (Kubernetes 1.20), so DoNotSchedule would keep the restarted
    pods Pending; the 2/2 spread before the loss is asserted instead."""
    storage = tmp_path / "ckpt"
    submitted = trainctl("submit", "pytorch", "--name", "lost", "-n", namespace, "--workers", "4",
                         "--image", python_image, "--workdir", str(project), "--restart-scope", "job",
                         "--backoff-limit", "0", "--checkpoints", f"host:{storage}", "-e", "STEP_SECONDS=0.4",
                         "--cpu", "250m", "--annotation", "trainctl.io/node-lost-after=10",
                         *spread("lost", {"Master": "master", "Worker": "worker"}, "ScheduleAnyway"),
                         "--", "python3", "ddp.py")
    assert submitted.returncode == 0, submitted.stderr
    directory = storage / namespace / "lost"
    wait_until(lambda: saved(events(directory), 0).count(20) == 4, "checkpoint of step 20 by all four ranks")
    before = pods(real_node, namespace)
    assert both_nodes(nodes_of(before), 2), [(pod["metadata"]["name"], pod["spec"].get("nodeName")) for pod in before]
    first_uids = {pod["metadata"]["uid"] for pod in before}

    lost = second_node.lose()

    def running_again() -> list[dict]:
        listed = [pod for pod in pods(real_node, namespace) if pod["metadata"]["uid"] not in first_uids]
        # Succeeded too: the restarted attempt (tests/checkpointed.py) may finish between two looks
        back = len(listed) == 4 and all(pod["status"].get("phase") in ("Running", "Succeeded") for pod in listed)
        return listed if back else []

    placed = wait_until(running_again, "four replicas running again")
    back_running = time.time() - lost
    wait_until(lambda: all(f"rank {rank} attempt 1 start step" in events(directory) for rank in range(4)),
               "every rank training again")
    back_training = time.time() - lost
    print(f"\nnode lost -> every replica Running again: {back_running:.1f} s; "
          f"-> every rank past init_process_group: {back_training:.1f} s")
    assert set(nodes_of(placed)) == {realnode.NODE_NAME}  # the survivor took them all

    resource = finished(trainctl, namespace, "lost", directory)
    step = assert_resumed_from_the_last_complete_checkpoint(directory, ranks=4)
    assert step >= 20
    record = Record.of(resource)
    assert (record.attempt, record.counted, record.disruptions) == (1, 0, 1), record
    status = trainctl("status", "lost", "-n", namespace).stdout
    assert "attempt 2 (restarted after " in status and SECOND in status, status
    assert "restarts: 0 counted (backoffLimit 0), 1 after disruptions" in status, status
