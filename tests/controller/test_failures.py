"""Failures explain themselves on Kubernetes: the controller reconciles, the node fixture plays kubelet.

A worker pod that dies with a traceback must end ``wait``, ``status`` and ``Client.wait`` with
the summary naming it, its exit code and the traceback's last line, read through the real API
server from the (fake) kubelet's log endpoint, exactly as on the local backend.
"""

from __future__ import annotations

import pytest

from tests.controller.jobs import wait_for
from trainctl.api import Client
from trainctl.errors import JobFailed

pytestmark = pytest.mark.k8s

TRACEBACK = ("Traceback (most recent call last):\n"
             '  File "/workspace/train.py", line 12, in <module>\n'
             "    loss = model(batch)\n"
             "ValueError: expected input of shape (8, 3), got (8, 4)\n")


def submit_running(trainctl, ns: str, name: str, *options: str) -> None:
    submitted = trainctl("submit", "pytorch", "--workers", "2", "--name", name, "-n", ns, "--image", "busybox",
                         *options, "--", "python", "train.py")
    assert submitted.returncode == 0, submitted.stderr
    wait_for(lambda: "Running" in trainctl("status", name, "-n", ns).stdout.split("\n")[0], what="Running")


def test_a_worker_that_raises_is_named_with_its_exit_code_and_traceback(k8s_cluster, kube_node, start_controller,
                                                                        managed_namespace, trainctl):
    ns = managed_namespace
    start_controller(ns)
    submit_running(trainctl, ns, "tb", "--restart-policy", "Never")
    kube_node.write_log(ns, "tb-master-0", "pytorch", "waiting for the worker\n")
    kube_node.write_log(ns, "tb-worker-0", "pytorch", "epoch 1\n" + TRACEBACK)
    kube_node.set_phase(ns, "tb-worker-0", "Failed", exit_code=1)

    waited = trainctl("wait", "tb", "-n", ns, "--timeout", "60s")
    assert waited.returncode == 1, waited.stderr
    assert "tb: Failed" in waited.stderr
    assert "worker-0 failed first: exit code 1 (Error)" in waited.stderr, waited.stderr
    assert "| ValueError: expected input of shape (8, 3), got (8, 4)" in waited.stderr
    assert f"trainctl logs tb -n {ns} --replica worker-0" in waited.stderr

    status = trainctl("status", "tb", "-n", ns).stdout
    assert "worker-0 failed first: exit code 1 (Error)" in status and "| ValueError: expected input" in status
    worker = next(line.split() for line in status.splitlines() if line.startswith("tb-worker-0"))
    assert worker[1:4] == ["Failed", "0", "1"]
    master = next(line.split() for line in status.splitlines() if line.startswith("tb-master-0"))
    assert master[1] in ("Terminating", "Deleted")  # stopped by the controller when the job failed: still listed

    client = Client("kubernetes", kubeconfig=str(k8s_cluster.kubeconfig("admin")))
    with pytest.raises(JobFailed) as failed:
        client.wait("tb", ns, timeout=30, raise_on_failure=True)
    assert failed.value.summary.first.replica == "worker-0"
    assert failed.value.summary.log_tail[-1] == "ValueError: expected input of shape (8, 3), got (8, 4)"


def test_a_crash_looping_worker_shows_crash_loop_back_off_and_its_last_exit_code(kube_node, start_controller,
                                                                                managed_namespace, trainctl):
    ns = managed_namespace
    start_controller(ns)
    submit_running(trainctl, ns, "cl", "--restart-policy", "OnFailure", "--backoff-limit", "10")
    kube_node.restart(ns, "cl-worker-0", exit_code=137, reason="OOMKilled")
    waiting = {"name": "pytorch", "image": "busybox", "imageID": "", "ready": False, "restartCount": 1,
               "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s restarting"}},
               "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                                            "startedAt": "2026-01-01T00:00:00Z", "finishedAt": "2026-01-01T00:00:05Z"}}}
    kube_node.core.patch_namespaced_pod_status("cl-worker-0", ns, {"status": {"containerStatuses": [waiting]}})

    status = trainctl("status", "cl", "-n", ns).stdout
    worker = next(line.split() for line in status.splitlines() if line.startswith("cl-worker-0"))
    assert worker[1:6] == ["CrashLoopBackOff", "1", "137", "(last", "run)"], status
    assert "last: OOMKilled" in status
