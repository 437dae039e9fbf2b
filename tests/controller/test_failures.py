"""Failures explain themselves on Kubernetes: the controller reconciles, the node fixture plays kubelet.

A worker pod that dies with a traceback must end ``wait``, ``status`` and ``Client.wait`` with
the summary naming it, its exit code and the traceback's last line, read through the real API
server from the (fake) kubelet's log endpoint, exactly as on the local backend.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.controller.jobs import wait_for
from trainctl.errors import JobFailed
from trainctl.sdk.client import Client

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
    assert "worker-0 raised ValueError: expected input of shape (8, 3), got (8, 4); exit code 1 (Error)" \
        in waited.stderr, waited.stderr
    assert "| ValueError: expected input of shape (8, 3), got (8, 4)" in waited.stderr
    assert f"trainctl logs tb -n {ns} --replica worker-0" in waited.stderr

    status = trainctl("status", "tb", "-n", ns).stdout
    assert "worker-0 raised ValueError: expected input" in status and "| ValueError: expected input" in status
    worker = next(line.split() for line in status.splitlines() if line.startswith("tb-worker-0"))
    assert worker[1:4] == ["Failed", "0", "1"]
    master = next(line.split() for line in status.splitlines() if line.startswith("tb-master-0"))
    # stopped by the controller when the job failed: still listed, as its kept record says once the pod is gone
    assert master[1] in ("Terminating", "Deleted", "Stopped")

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


def record(time_ns: int, exception: str) -> str:
    """What the function runner writes to /dev/termination-log when the function raises."""
    return f'trainctl-raised:v1 {{"time_ns": {time_ns}, "exception": "{exception}", "rank": null}}'


def test_the_pod_that_raised_first_is_named_in_the_condition_and_its_gloo_victim_is_a_consequence(
        kube_node, start_controller, managed_namespace, trainctl):
    """Both pods fail in the same second with exit code 1, the victim's status even first: the termination
    messages (nanosecond records) and the victim's gloo error tell which one caused it."""
    ns = managed_namespace
    start_controller(ns)
    submit_running(trainctl, ns, "gl", "--restart-policy", "Never")
    started = time.time_ns()
    kube_node.write_log(ns, "gl-worker-0", "pytorch", "trainctl: train() raised RuntimeError: deliberate failure\n")
    kube_node.write_log(ns, "gl-master-0", "pytorch", GLOO_LOST)
    kube_node.set_phase(ns, "gl-master-0", "Failed", exit_code=1,
                        message=record(started + 30_000_000, GLOO_LOST.strip().split("\n")[-1]))
    kube_node.set_phase(ns, "gl-worker-0", "Failed", exit_code=1,
                        message=record(started, "RuntimeError: deliberate failure"))

    waited = trainctl("wait", "gl", "-n", ns, "--timeout", "60s")
    assert waited.returncode == 1, waited.stderr
    summary = waited.stderr[waited.stderr.index("worker-0 raised"):].splitlines()
    assert summary[0] == "worker-0 raised RuntimeError: deliberate failure; exit code 1 (Error), restarted 0 times"
    assert "  master-0: stopped after its peer was lost (gloo)" in summary, summary
    condition = trainctl("status", "gl", "-n", ns, "-o", "json")
    assert condition.returncode == 0, condition.stderr
    message = json.loads(condition.stdout)["status"]["conditions"][-1]["message"]
    assert message.endswith(": worker-0 raised RuntimeError: deliberate failure."), message


GLOO_LOST = ("Traceback (most recent call last):\n  File \"/workspace/train.py\", line 9, in <module>\n"
             "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
             "[10.0.0.3]:28344\n")
