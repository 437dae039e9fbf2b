"""``trainctl logs`` through the real API server, the node fixture serving pod logs as kubelet does."""

from __future__ import annotations

import re
import time

import pytest

from tests.k8s.test_kube_backend import kube, play_operator, set_job_condition  # noqa: F401 (kube: a fixture)

pytestmark = pytest.mark.k8s


def start_pods(kube_node, kube, pods):
    for pod in pods:
        kube_node.bind(kube.namespace, pod)
        kube_node.set_phase(kube.namespace, pod, "Running")


def test_follow_ends_when_the_job_succeeds_though_a_parameter_server_still_runs(k8s_cluster, kube_node, kube):
    assert kube("submit", "tf", "--name", "ps", "-n", kube.namespace, "--workers", "2", "--ps", "1", "--",
                "python", "t.py").returncode == 0
    pods = play_operator(k8s_cluster, kube, "ps", "tfjobs")
    assert "ps-ps-0" in pods
    start_pods(kube_node, kube, pods)
    follower = kube.popen("logs", "-f", "ps", "-n", kube.namespace)
    for pod in pods:
        kube_node.write_log(kube.namespace, pod, "tensorflow", f"hello from {pod}\n")
    time.sleep(2)
    for pod in pods:
        if pod != "ps-ps-0":  # the parameter server runs on, as under cleanPodPolicy None
            kube_node.set_phase(kube.namespace, pod, "Succeeded", exit_code=0)
    set_job_condition(k8s_cluster, kube, "ps", "tfjobs", "Succeeded")
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    for pod in pods:
        assert f"| hello from {pod}" in out


def test_logs_merge_pods_in_time_order_with_timestamps_and_pod_names(k8s_cluster, kube_node, kube):
    assert kube("submit", "jax", "--name", "order", "-n", kube.namespace, "--workers", "2", "--",
                "python", "t.py").returncode == 0
    pods = play_operator(k8s_cluster, kube, "order", "jaxjobs")
    start_pods(kube_node, kube, pods)
    for pod, text in [("order-worker-1", "one"), ("order-worker-0", "two"), ("order-worker-1", "three")]:
        kube_node.write_log(kube.namespace, pod, "jax", f"{text}\n")
        time.sleep(0.05)
    out = kube("logs", "order", "-n", kube.namespace).stdout
    assert out.splitlines() == ["worker-1 | one", "worker-0 | two", "worker-1 | three"]
    stamped = kube("logs", "order", "-n", kube.namespace, "--timestamps").stdout.splitlines()
    assert [re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z ", "", line) for line in stamped] == out.splitlines()
    assert kube("logs", "order", "-n", kube.namespace, "--replica", "order-worker-0").stdout == "worker-0 | two\n"
