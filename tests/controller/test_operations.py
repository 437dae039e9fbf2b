"""The controller as an operator runs it: killed mid-work, two replicas with leader election,
its HTTP endpoints, and a user's whole round trip through the CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO
from tests.controller.jobs import create, job, pods, services, wait_for, wait_state
from trainctl.kube.client import EVENTS, LEASES, PODS

pytestmark = pytest.mark.k8s


def expected_children(names: list[str]) -> set[str]:
    return {f"{n}-{r}" for n in names for r in ("master-0", "worker-0", "worker-1", "worker-2")}


def test_sigkill_mid_reconcile_leaves_no_duplicate_and_nothing_missing(rest, start_controller, namespace):
    names = [f"k{i:02d}" for i in range(40)]
    for name in names:  # all there before the controller starts: its pace alone decides when the kill lands
        create(rest, job("PyTorchJob", name, namespace, {"Master": 1, "Worker": 3}))
    first = start_controller(namespace, "--concurrency", "4")
    wait_for(lambda: len(pods(rest, namespace)) >= 8, what="reconciling under way")
    first.stop(signal.SIGKILL)
    made_before = len(pods(rest, namespace))
    assert made_before < 4 * len(names), "the kill came too late to test anything"
    start_controller(namespace, "--concurrency", "4")
    expected = expected_children(names)
    wait_for(lambda: set(pods(rest, namespace)) == expected and set(services(rest, namespace)) == expected,
             timeout=60, what="every pod and service")
    # deterministic names make a duplicate impossible to store; check nothing else was made either
    assert len(rest.list(PODS, namespace)["items"]) == 4 * len(names)
    for name in names:
        created = [e for e in rest.list(EVENTS, namespace, field_selector=f"involvedObject.name={name}")["items"]]
        assert all(e["reason"] != "FailedCreatePod" for e in created)


def controller_state(process) -> tuple[float, float]:
    """(holds the lease, reconciles done)."""
    return process.metric("trainctl_leader"), process.metric("trainctl_reconcile_total")


LEASE_DURATION_S, RENEW_DEADLINE_S, RETRY_S = 6, 4, 1
LEASE_TIMING = ("--leader-elect-lease-duration", f"{LEASE_DURATION_S}s", "--leader-elect-renew-deadline",
                f"{RENEW_DEADLINE_S}s", "--leader-elect-retry-period", f"{RETRY_S}s")


def leader_and_standby(start_controller, namespace: str, lease: str, *timing: str):
    """Two controllers electing through the Lease ``lease``; (the one leading, the other) once one leads."""
    flags = ("--leader-elect", "--lease-namespace", namespace, "--lease-name", lease, *timing)
    one, two = start_controller(namespace, *flags), start_controller(namespace, *flags)
    return wait_for(lambda: (one, two) if controller_state(one)[0] == 1 else
                    (two, one) if controller_state(two)[0] == 1 else None, what="a leader")


def test_two_controllers_with_leader_election_never_both_act(rest, start_controller, managed_namespace):
    namespace = managed_namespace
    leader, standby = leader_and_standby(start_controller, namespace, "trainctl-test")
    for i in range(5):
        create(rest, job("PyTorchJob", f"le{i}", namespace, {"Master": 1, "Worker": 3}))
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # sampled throughout: never two leaders, the standby never acts
        states = [controller_state(p) for p in (leader, standby)]
        assert [s[0] for s in states] == [1, 0]
        assert states[1][1] == 0, "the standby reconciled"
        time.sleep(0.2)
    wait_for(lambda: set(pods(rest, namespace)) == expected_children([f"le{i}" for i in range(5)]), what="pods")
    for i in range(5):
        wait_state(rest, "PyTorchJob", namespace, f"le{i}", "Running")  # which records an event
    holder = rest.get(LEASES, "trainctl-test", namespace)["spec"]["holderIdentity"]
    events = rest.list(EVENTS, namespace)["items"]
    assert events and {e["reportingInstance"] for e in events} == {holder}

    # SIGTERM: the leader finishes, releases the lease, and the standby takes over at once
    assert leader.stop(signal.SIGTERM) == 0
    wait_for(lambda: controller_state(standby)[0] == 1, timeout=10, what="the standby to lead")
    create(rest, job("PyTorchJob", "after", namespace, {"Master": 1}))
    wait_state(rest, "PyTorchJob", namespace, "after", "Running")
    new_holder = rest.get(LEASES, "trainctl-test", namespace)["spec"]["holderIdentity"]
    assert new_holder != holder
    after = rest.list(EVENTS, namespace, field_selector="involvedObject.name=after")["items"]
    assert {e["reportingInstance"] for e in after} == {new_holder}


def test_a_killed_leader_is_replaced_only_once_its_lease_expires(rest, start_controller, managed_namespace):
    """SIGKILL leaves the Lease held: the standby must wait out leaseDurationSeconds, then act (a lease of 6 s
    instead of the default 15 s: the wait is the same rule, a third as long)."""
    namespace = managed_namespace
    leader, standby = leader_and_standby(start_controller, namespace, "trainctl-kill", *LEASE_TIMING)
    lease = rest.get(LEASES, "trainctl-kill", namespace)["spec"]
    renewed = lease["renewTime"]
    assert lease["leaseDurationSeconds"] == LEASE_DURATION_S  # what the standby waits out
    leader.stop(signal.SIGKILL)
    killed = time.monotonic()
    create(rest, job("PyTorchJob", "orphaned", namespace, {"Master": 1}))
    wait_for(lambda: controller_state(standby)[0] == 1, timeout=LEASE_DURATION_S + 3 * RETRY_S + 5,
             what="the standby to take the expired lease")
    waited = time.monotonic() - killed
    # it took over no sooner than the lease allowed (the last renewal was at most RETRY_S before the kill)
    assert waited >= LEASE_DURATION_S - RETRY_S - 1, (waited, renewed)
    wait_state(rest, "PyTorchJob", namespace, "orphaned", "Running")


def test_health_readiness_and_metrics(rest, start_controller, managed_namespace):
    process = start_controller(managed_namespace)
    assert process.get("/healthz", process.health_port) == (200, "ok")
    assert process.get("/readyz", process.health_port) == (200, "ok")
    create(rest, job("TFJob", "m", managed_namespace, {"Worker": 2}))
    wait_state(rest, "TFJob", managed_namespace, "m", "Running")
    _, text = process.get("/metrics", process.metrics_port)
    for name in ("trainctl_reconcile_total", "trainctl_reconcile_duration_seconds_bucket",
                 "trainctl_workqueue_depth", 'trainctl_jobs{kind="TFJob",state="Running"} 1',
                 "trainctl_pod_creation_failures_total", "training_operator_jobs_created_total"):
        assert name in text, name
    assert process.metric("trainctl_reconcile_total") > 0
    assert process.stop(signal.SIGTERM) == 0


def test_bad_flags_are_one_line_errors(k8s_cluster):
    env = {**os.environ, "PYTHONPATH": str(REPO), "KUBECONFIG": str(k8s_cluster.kubeconfig("admin"))}
    for flags, culprit in ((["--kinds", "pytorch,caffe"], "caffe"), (["--metrics-addr", "nowhere"], "--metrics-addr"),
                           (["--log-format", "xml"], "--log-format")):
        result = subprocess.run([sys.executable, "-m", "trainctl", "controller", "run", *flags], env=env,
                                capture_output=True, text=True, timeout=30, cwd=REPO)
        assert result.returncode == 2, result.stderr
        assert culprit in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_submit_to_status_and_logs_end_to_end(kube_node, start_controller, managed_namespace, trainctl):
    """A user's round trip: trainctl submit, the controller makes pods, the node runs them, trainctl reports."""
    ns = managed_namespace
    start_controller(ns)
    submitted = trainctl("submit", "pytorch", "--workers", "2", "--name", "e2e", "-n", ns, "--image", "busybox",
                         "--", "python", "train.py")
    assert submitted.returncode == 0, submitted.stderr
    wait_for(lambda: "Running" in trainctl("status", "e2e", "-n", ns).stdout, what="status to show Running")
    kube_node.write_log(ns, "e2e-master-0", "pytorch", "epoch 1 loss 0.5\n")
    kube_node.write_log(ns, "e2e-worker-0", "pytorch", "epoch 1 loss 0.6\n")
    kube_node.set_phase(ns, "e2e-worker-0", "Succeeded", exit_code=0)
    kube_node.set_phase(ns, "e2e-master-0", "Succeeded", exit_code=0)
    waited = trainctl("wait", "e2e", "-n", ns, "--timeout", "30")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    status = trainctl("status", "e2e", "-n", ns)
    assert "Succeeded" in status.stdout and "e2e-worker-0" in status.stdout, status.stdout
    logs = trainctl("logs", "e2e", "-n", ns)
    assert "master-0 | epoch 1 loss 0.5" in logs.stdout and "worker-0 | epoch 1 loss 0.6" in logs.stdout, logs.stdout


def test_kube_api_qps_and_burst_pace_the_controllers_requests(rest, start_controller, namespace):
    """upstream's --kube-api-qps/--kube-api-burst: after a burst, requests go at most QPS a second (client-go's
    token bucket), and the controller says how long they waited; nothing is lost, only paced."""
    qps, burst = 5, 2
    controller = start_controller(namespace, "--kube-api-qps", str(qps), "--kube-api-burst", str(burst))
    sent_before = controller.metric("trainctl_api_requests")
    started = time.monotonic()
    names = [f"q{i}" for i in range(3)]
    for name in names:
        create(rest, job("PyTorchJob", name, namespace, {"Master": 1, "Worker": 3}))
    expected = expected_children(names)
    wait_for(lambda: set(pods(rest, namespace)) == expected and set(services(rest, namespace)) == expected,
             timeout=60, what="every pod and service, paced")
    elapsed = time.monotonic() - started
    sent = controller.metric("trainctl_api_requests") - sent_before
    assert sent >= 3 * 8  # 4 pods and 4 services a job, at least
    assert sent <= burst + qps * elapsed + 1, (sent, elapsed)  # +1: the watch that was waiting when we began
    assert controller.metric("trainctl_api_throttled_seconds") > 1.0
