"""Progress reports on Kubernetes (issue 25): pods write ``trainctl.report()`` lines to their logs; ``status`` and
the Python API read them there (so they work under any operator), trainctl's controller keeps ``list``'s
summary in the job's annotation at a bounded rate, and fails a job at its stall timeout.

The node fixture plays kubelet: what the pods "write" is appended to its logs, stamped as kubelet stamps.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.controller.jobs import get_job, pods, wait_for
from tests.controller.test_failures import submit_running
from trainctl import reporting
from trainctl.backends.reported import PROGRESS_ANNOTATION
from trainctl.sdk.client import Client

WRITES = "trainctl_progress_writes_total"
# The controllers here read logs every second and write a job's annotation at most every 15 s (their defaults:
# 10 s and 30 s), so the tests wait out the write bound in seconds and still assert it: a new report comes a few
# seconds after a write, and the next write must still wait for the bound.
WRITE_INTERVAL_S = 15
PACING = ("--progress-interval", "1s", "--progress-write-interval", f"{WRITE_INTERVAL_S}s")

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(180)]


def report_lines(steps: range, total: int) -> str:
    points = [(time.time(), step, total, {"loss": 1 / step}) for step in steps]
    return "".join(line.decode() for line in reporting.encoded_lines(points))


def submit_reporting(trainctl, kube_node, rest, ns: str, name: str, logs: dict[str, str]) -> None:
    """Submit a job whose pods start with ``logs`` (pod -> text) already written. With the watcher's round of a
    second, a round between the pods' start and a later write of their reports would store the start alone."""
    kube_node.manage(ns, run=False)  # the node binds the pods and starts none
    submitted = trainctl("submit", "pytorch", "--workers", "2", "--name", name, "-n", ns, "--image", "busybox",
                         "--", "python", "train.py")
    assert submitted.returncode == 0, submitted.stderr
    replicas = [f"{name}-master-0", f"{name}-worker-0"]

    def bound() -> bool:
        found = pods(rest, ns, name)
        return all(found.get(pod, {}).get("spec", {}).get("nodeName") for pod in replicas)

    wait_for(bound, what="the pods bound to the node")
    for pod, text in logs.items():
        kube_node.write_log(ns, pod, "pytorch", text)
    for pod in replicas:
        kube_node.set_phase(ns, pod, "Running")
    wait_for(lambda: "Running" in trainctl("status", name, "-n", ns).stdout.split("\n")[0], what="Running")


def assert_writes(controller, count: int) -> None:
    """The controller counted ``count`` writes of the annotation, no more: it counts one once the API server has
    answered, a moment after a reader may already see what it wrote."""
    wait_for(lambda: controller.metric(WRITES) >= count, timeout=10, what=f"{count} progress writes counted")
    assert controller.metric(WRITES) == count


def test_pods_progress_shows_in_status_the_api_and_list_and_the_controller_writes_it_rarely(
        k8s_cluster, kube_node, start_controller, managed_namespace, trainctl, rest):
    ns = managed_namespace
    controller = start_controller(ns, *PACING)
    submit_reporting(trainctl, kube_node, rest, ns, "pr", {
        "pr-master-0": "epoch 1\n" + report_lines(range(1, 31), 40) + "more output\n",
        "pr-worker-0": report_lines(range(1, 29), 40)})
    submitted = get_job(rest, "PyTorchJob", ns, "pr")
    env = {item["name"]: item.get("value") for item in
           submitted["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"]}
    assert env[reporting.ENV] == "/dev/stdout" and env["PYTHONPATH"].endswith("/.trainctl/lib")  # how pods report

    status = trainctl("status", "pr", "-n", ns).stdout
    assert re.search(r"progress: 30/40 \(75%\), .*loss 0\.03333, \d+s ago", status), status
    assert re.search(r"master-0: 30/40 .*\n\s+worker-0: 28/40", status), status  # the replicas differ
    client = Client("kubernetes", kubeconfig=str(k8s_cluster.kubeconfig("admin")))
    assert client.progress("pr", ns).step == 30
    assert [point.step for point in client.metrics("pr", ns)] == list(range(1, 31))
    assert [point.step for point in client.metrics("pr", ns, replica="worker-0")] == list(range(1, 29))
    assert [line.text for line in client.job("pr", ns).logs(replica="master-0")] == ["epoch 1", "more output"]

    listed = wait_for(lambda: re.search(r"pr +PyTorchJob +Running .* 30/40 75%", trainctl("list", "-n", ns).stdout),
                      timeout=40, what="list to show the controller's summary")
    assert listed
    stored = json.loads(get_job(rest, "PyTorchJob", ns, "pr")["metadata"]["annotations"][PROGRESS_ANNOTATION])
    assert (stored["step"], stored["total"], stored["metrics"]) == (30, 40, {"loss": 1 / 30})
    assert_writes(controller, 1)

    # new progress seconds after the first write: the watcher sees it at its next round, and must not write it
    # before the interval since the first write has passed
    kube_node.write_log(ns, "pr-master-0", "pytorch", report_lines(range(31, 36), 40))
    wait_for(lambda: "35/40" in trainctl("list", "-n", ns).stdout, timeout=40,
             what=f"the next write, {WRITE_INTERVAL_S} s after the first")
    second = json.loads(get_job(rest, "PyTorchJob", ns, "pr")["metadata"]["annotations"][PROGRESS_ANNOTATION])
    assert second["written"] - stored["written"] >= WRITE_INTERVAL_S, (stored, second)
    assert_writes(controller, 2)


def test_a_silent_job_is_called_stalled_and_the_controller_fails_it_at_its_stall_timeout(
        kube_node, start_controller, managed_namespace, trainctl):
    ns = managed_namespace
    start_controller(ns)
    submit_running(trainctl, ns, "quiet", "--stall-after", "3s", "--stall-timeout", "12s", "--restart-policy", "Never")
    kube_node.write_log(ns, "quiet-master-0", "pytorch", report_lines(range(1, 6), 100))  # five reports, then nothing
    stalled = wait_for(lambda: re.search(r"stalled: no output or progress for \d+s",
                                         trainctl("status", "quiet", "-n", ns).stdout), timeout=20, what="stalled")
    assert stalled
    waited = trainctl("wait", "quiet", "-n", ns, "--timeout", "60s")
    assert waited.returncode == 1, waited.stderr
    assert waited.stderr.count("stalled: no output or progress for") == 1, waited.stderr
    status = trainctl("status", "quiet", "-n", ns).stdout
    assert re.search(r"Failed +True .*it stalled: no replica wrote output or progress for \d+s \(stall timeout 12s\)",
                     status), status


def test_a_restarted_controller_keeps_the_write_bound_by_the_time_the_annotation_carries(
        kube_node, start_controller, managed_namespace, trainctl, rest):
    """The bound is one write per job per interval whoever writes: a restart (or a new leader) remembers nothing
    of the last write but what the stored annotation says of it."""
    ns = managed_namespace
    first_controller = start_controller(ns, *PACING)
    submit_reporting(trainctl, kube_node, rest, ns, "rs", {"rs-master-0": report_lines(range(1, 11), 40)})

    def stored(step: int) -> dict | None:
        text = (get_job(rest, "PyTorchJob", ns, "rs")["metadata"].get("annotations") or {}).get(PROGRESS_ANNOTATION)
        data = json.loads(text) if text else None
        return data if data and data["step"] == step else None

    first = wait_for(lambda: stored(10), timeout=40, what="the first controller's write")
    assert_writes(first_controller, 1)
    assert first_controller.stop() == 0
    kube_node.write_log(ns, "rs-master-0", "pytorch", report_lines(range(11, 16), 40))
    restarted = start_controller(ns, *PACING)  # its first round sees new progress at once, seconds after the write
    second = wait_for(lambda: stored(15), timeout=60, what="the restarted controller's write")
    assert second["written"] - first["written"] >= WRITE_INTERVAL_S, (first, second)
    assert_writes(restarted, 1)
