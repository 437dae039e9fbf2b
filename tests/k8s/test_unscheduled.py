"""A replica the scheduler cannot place says why, for how long, and keeps its job from reading as fully running
(issue 54, 6).

No scheduler runs here: the test plays it, writing a Pending pod's PodScheduled condition (False, Unschedulable,
the scheduler's message) through the API server's status subresource, as kube-scheduler does.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tests.k8s.test_kube_backend import kube, play_operator, set_job_condition  # noqa: F401 (kube: a fixture)

pytestmark = pytest.mark.k8s

SCHEDULER_SAYS = ("0/2 nodes are available: 1 node(s) didn't match pod topology spread constraints, 1 node(s) had "
                  "untolerated taint {node.kubernetes.io/unreachable: }. preemption: 0/2 nodes are available: "
                  "2 Preemption is not helpful for scheduling.")


def play_scheduler(k8s_cluster, namespace: str, pod: str, since: datetime) -> None:
    """What kube-scheduler writes of a pod it cannot place."""
    from kubernetes import client

    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": SCHEDULER_SAYS,
                 "lastProbeTime": None, "lastTransitionTime": since.strftime("%Y-%m-%dT%H:%M:%SZ")}
    client.CoreV1Api(k8s_cluster.api_client()).patch_namespaced_pod_status(
        pod, namespace, {"status": {"phase": "Pending", "conditions": [condition]}})


def test_unschedulable_replicas_say_why_and_for_how_long(k8s_cluster, kube_node, kube, capsys):
    assert kube("submit", "pytorch", "--name", "spread", "-n", kube.namespace, "--workers", "4", "--", "python",
                "t.py").returncode == 0
    pods = play_operator(k8s_cluster, kube, "spread", "pytorchjobs")
    assert pods == ["spread-master-0", "spread-worker-0", "spread-worker-1", "spread-worker-2"]
    set_job_condition(k8s_cluster, kube, "spread", "pytorchjobs", "Running")
    kube_node.bind(kube.namespace, pods[0])
    kube_node.set_phase(kube.namespace, pods[0], "Running")
    eight_minutes_ago = datetime.now(timezone.utc) - timedelta(minutes=8, seconds=5)
    for pod in pods[1:]:
        play_scheduler(k8s_cluster, kube.namespace, pod, eight_minutes_ago)

    result = kube("status", "spread", "-n", kube.namespace)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "Running (1/4 replicas running; 3 unschedulable for 8m)" in lines[0]
    rows = {line.split()[0]: line for line in lines if line.strip().startswith("spread-")}
    for pod in pods[1:]:
        assert "Pending" in rows[pod] and "Unschedulable for 8m" in rows[pod]
    assert "Unschedulable" not in rows[pods[0]]
    hint = next(line for line in lines if "cannot be scheduled" in line)
    assert "spread-worker-0, spread-worker-1, spread-worker-2" in hint and SCHEDULER_SAYS in " ".join(lines)

    from trainctl.sdk.client import Client

    job = Client("kubernetes", kubeconfig=str(k8s_cluster.kubeconfig("admin"))).job("spread", kube.namespace)
    assert job.status == "Running"  # the state, as scripts compare it; the summary says the rest
    assert job.summary == f"Running (1/4 replicas running; 3 unschedulable for 8m: Unschedulable: {SCHEDULER_SAYS})"
    assert all(row.reason == "Unschedulable" for row in job.replicas[1:])
    with pytest.raises(TimeoutError):  # stderr is no terminal here: the wait's plain lines
        job.wait(timeout=1)
    waited = capsys.readouterr().err
    assert f"pytorchjob/spread: 1/4 replicas running; 3 unschedulable for 8m: Unschedulable: {SCHEDULER_SAYS}" in waited
