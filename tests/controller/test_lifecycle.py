"""Job lifecycles under the controller: the node fixture starts pods and finishes them as a
kubelet would, and the job's conditions, pods and services follow the contract (1.3-1.10)."""

from __future__ import annotations

import time

import pytest

from tests.controller.jobs import (
    conditions,
    create,
    get_job,
    job,
    pods,
    services,
    state,
    wait_for,
    wait_state,
)
from trainctl.controller.gang import VOLCANO
from trainctl.core.restarts import SUCCESS_WAIT_ANNOTATION, Record
from trainctl.frameworks import by_kind
from trainctl.kube import job_resource
from trainctl.kube.client import CRDS, EVENTS, ApiError, Resource

pytestmark = pytest.mark.k8s
PYTORCH = job_resource(by_kind("PyTorchJob"))


@pytest.fixture
def ns(start_controller, managed_namespace):
    start_controller(managed_namespace)
    return managed_namespace


def running(rest, namespace, name, count):
    return wait_for(lambda: (found := pods(rest, namespace, name)) and len(found) == count and all(
        (p.get("status") or {}).get("phase") == "Running" for p in found.values()) and found,
        what=f"{count} running pods of {name}")


def events(rest, namespace, name):
    items = rest.list(EVENTS, namespace, field_selector=f"involvedObject.name={name}")["items"]
    return [(e["type"], e["reason"]) for e in sorted(items, key=lambda e: e["metadata"]["creationTimestamp"])]


def test_success_and_cleanup_running(rest, kube_node, ns):
    body = job("PyTorchJob", "ok", ns, {"Master": 1, "Worker": 2}, run_policy={"cleanPodPolicy": "Running"})
    # success at once, as upstream's, without trainctl's wait for workers still running (tests/unit/test_reconcile.py)
    body["metadata"]["annotations"] = {SUCCESS_WAIT_ANNOTATION: "0"}
    create(rest, body)
    running(rest, ns, "ok", 3)
    wait_state(rest, "PyTorchJob", ns, "ok", "Running")
    kube_node.set_phase(ns, "ok-worker-0", "Succeeded", exit_code=0)
    kube_node.set_phase(ns, "ok-master-0", "Succeeded", exit_code=0)
    wait_state(rest, "PyTorchJob", ns, "ok", "Succeeded")
    # cleanPodPolicy Running: the still-running worker goes (with its service); finished pods stay
    wait_for(lambda: set(pods(rest, ns, "ok")) == {"ok-master-0", "ok-worker-0"}, what="running pod cleaned up")
    assert set(services(rest, ns, "ok")) == {"ok-master-0", "ok-worker-0"}
    status = get_job(rest, "PyTorchJob", ns, "ok")["status"]
    assert status["completionTime"] and status["replicaStatuses"]["Master"]["succeeded"] == 1
    assert conditions(rest, "PyTorchJob", ns, "ok") == [("Created", "True"), ("Running", "False"),
                                                         ("Succeeded", "True")]
    assert ("Normal", "PyTorchJobSucceeded") in events(rest, ns, "ok")


@pytest.mark.parametrize("policy", ["All", "None"])
def test_clean_pod_policy_all_and_none(rest, kube_node, ns, policy):
    create(rest, job("JAXJob", "c", ns, {"Worker": 2}, run_policy={"cleanPodPolicy": policy}))
    running(rest, ns, "c", 2)
    for pod in ("c-worker-0", "c-worker-1"):
        kube_node.set_phase(ns, pod, "Succeeded", exit_code=0)
    wait_state(rest, "JAXJob", ns, "c", "Succeeded")
    expected = set() if policy == "All" else {"c-worker-0", "c-worker-1"}
    wait_for(lambda: set(pods(rest, ns, "c")) == expected and set(services(rest, ns, "c")) == expected,
             what=f"cleanPodPolicy {policy}")


def test_never_fails_the_job(rest, kube_node, ns):
    create(rest, job("TFJob", "nv", ns, {"Worker": 2}, restart_policy="Never"))
    running(rest, ns, "nv", 2)
    kube_node.set_phase(ns, "nv-worker-1", "Failed", exit_code=1)
    wait_state(rest, "TFJob", ns, "nv", "Failed")
    assert ("Warning", "TFJobFailed") in events(rest, ns, "nv")


def test_on_failure_recreates_a_failed_pod(rest, kube_node, ns):
    """A pod that failed (evicted, say) is deleted and created again under the same name, with a fresh uid."""
    create(rest, job("PyTorchJob", "rs", ns, {"Master": 1}, restart_policy="OnFailure"))
    first = running(rest, ns, "rs", 1)["rs-master-0"]["metadata"]["uid"]
    kube_node.set_phase(ns, "rs-master-0", "Failed", exit_code=1)
    wait_for(lambda: (p := pods(rest, ns, "rs").get("rs-master-0")) and p["metadata"]["uid"] != first
             and p.get("status", {}).get("phase") == "Running", what="recreated pod")
    wait_state(rest, "PyTorchJob", ns, "rs", "Running")
    assert Record.of(get_job(rest, "PyTorchJob", ns, "rs")).counted == 1  # the record annotation, not status
    assert ("Warning", "PyTorchJobRestarting") in events(rest, ns, "rs")


def test_always_restarts_in_place_count_towards_backoff(rest, kube_node, ns):
    """Always: kubelet restarts the container in place; those restarts count against backoffLimit."""
    create(rest, job("PyTorchJob", "al", ns, {"Master": 1}, restart_policy="Always",
                     run_policy={"backoffLimit": 2}))
    pod = running(rest, ns, "al", 1)["al-master-0"]
    assert pod["spec"]["restartPolicy"] == "Always"
    for _ in range(2):  # two restarts are allowed
        kube_node.restart(ns, "al-master-0", exit_code=1)
    time.sleep(0.5)
    assert state(rest, "PyTorchJob", ns, "al") == "Running"
    kube_node.restart(ns, "al-master-0", exit_code=1)
    wait_state(rest, "PyTorchJob", ns, "al", "Failed")
    assert pods(rest, ns, "al") == {}  # a backoff failure stops what runs


def test_exit_code_policy(rest, kube_node, ns):
    """ExitCode: 137 (a signal) is retried, 1 (a bug) fails the job for good."""
    create(rest, job("XGBoostJob", "ec", ns, {"Master": 1}, restart_policy="ExitCode"))
    first = running(rest, ns, "ec", 1)["ec-master-0"]["metadata"]["uid"]
    kube_node.set_phase(ns, "ec-master-0", "Failed", exit_code=137, reason="OOMKilled")
    wait_for(lambda: (p := pods(rest, ns, "ec").get("ec-master-0")) and p["metadata"]["uid"] != first
             and p.get("status", {}).get("phase") == "Running", what="retried pod")
    kube_node.set_phase(ns, "ec-master-0", "Failed", exit_code=1)
    wait_state(rest, "XGBoostJob", ns, "ec", "Failed")
    assert ("Warning", "ExitedWithCode") in events(rest, ns, "ec")
    assert "ec-master-0" in pods(rest, ns, "ec")  # kept for inspection (cleanPodPolicy None)


def test_backoff_limit(rest, kube_node, ns):
    create(rest, job("PaddleJob", "bo", ns, {"Worker": 1}, restart_policy="OnFailure",
                     run_policy={"backoffLimit": 1}))
    first = running(rest, ns, "bo", 1)["bo-worker-0"]["metadata"]["uid"]
    kube_node.set_phase(ns, "bo-worker-0", "Failed", exit_code=1)  # restart 1 of 1 allowed
    wait_for(lambda: (p := pods(rest, ns, "bo").get("bo-worker-0")) and p["metadata"]["uid"] != first
             and p.get("status", {}).get("phase") == "Running", what="restarted pod")
    kube_node.set_phase(ns, "bo-worker-0", "Failed", exit_code=1)
    wait_state(rest, "PaddleJob", ns, "bo", "Failed")
    message = get_job(rest, "PaddleJob", ns, "bo")["status"]["conditions"][-1]["message"]
    # upstream's words, then the replica that caused it (docs/compatibility.md)
    assert message == "Job bo has failed because it has reached the specified backoff limit: worker-0 exited with code 1."


def test_active_deadline_fails_on_time_without_any_event(rest, ns):
    """Nothing happens after the pods run; the deadline alone must fail the job, within 2 s."""
    create(rest, job("PyTorchJob", "dl", ns, {"Master": 1, "Worker": 1}, run_policy={"activeDeadlineSeconds": 3}))
    running(rest, ns, "dl", 2)
    start = get_job(rest, "PyTorchJob", ns, "dl")["status"]["startTime"]
    wait_state(rest, "PyTorchJob", ns, "dl", "Failed", timeout=15)
    status = get_job(rest, "PyTorchJob", ns, "dl")["status"]
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["message"] == "Job dl has failed because it was active longer than specified deadline"
    late = seconds(failed["lastTransitionTime"]) - (seconds(start) + 3)
    assert 0 <= late <= 2, f"failed {late}s after the deadline"
    wait_for(lambda: not pods(rest, ns, "dl"), what="running pods stopped")


def seconds(stamp: str) -> float:
    return time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


def test_ttl_deletes_the_job_and_its_children(rest, kube_node, ns):
    create(rest, job("JAXJob", "ttl", ns, {"Worker": 1}, run_policy={"ttlSecondsAfterFinished": 1}))
    running(rest, ns, "ttl", 1)
    kube_node.set_phase(ns, "ttl-worker-0", "Succeeded", exit_code=0)

    def gone() -> bool:
        try:
            get_job(rest, "JAXJob", ns, "ttl")
            return False
        except ApiError as error:
            return error.status == 404

    wait_for(gone, timeout=15, what="job deleted by TTL")
    wait_for(lambda: not pods(rest, ns, "ttl") and not services(rest, ns, "ttl"), what="children deleted")


def test_suspend_and_resume(rest, ns):
    create(rest, job("PyTorchJob", "sp", ns, {"Master": 1, "Worker": 1}))
    running(rest, ns, "sp", 2)
    wait_state(rest, "PyTorchJob", ns, "sp", "Running")
    rest.patch(PYTORCH, "sp", {"spec": {"runPolicy": {"suspend": True}}}, ns)
    wait_state(rest, "PyTorchJob", ns, "sp", "Suspended")
    wait_for(lambda: not pods(rest, ns, "sp") and not services(rest, ns, "sp"), what="suspended job emptied")
    status = get_job(rest, "PyTorchJob", ns, "sp")["status"]
    assert status["replicaStatuses"]["Master"]["active"] == 0
    rest.patch(PYTORCH, "sp", {"spec": {"runPolicy": {"suspend": False}}}, ns)
    running(rest, ns, "sp", 2)
    wait_state(rest, "PyTorchJob", ns, "sp", "Running")
    assert conditions(rest, "PyTorchJob", ns, "sp") == [("Created", "True"), ("Suspended", "False"),
                                                         ("Running", "True")]


def test_created_suspended_never_creates_pods(rest, ns):
    create(rest, job("TFJob", "cs", ns, {"Worker": 2}, run_policy={"suspend": True}))
    wait_state(rest, "TFJob", ns, "cs", "Suspended")
    time.sleep(1)
    assert pods(rest, ns, "cs") == {}


def test_scale_subresource_scales_workers(rest, ns):
    create(rest, job("PyTorchJob", "sc", ns, {"Master": 1, "Worker": 1}))
    running(rest, ns, "sc", 2)
    scale = rest.get(PYTORCH, "sc", ns, subresource="scale")
    assert scale["spec"]["replicas"] == 1
    rest.patch(PYTORCH, "sc", {"spec": {"replicas": 3}}, ns, subresource="scale")
    running(rest, ns, "sc", 4)
    assert set(services(rest, ns, "sc")) == {"sc-master-0", "sc-worker-0", "sc-worker-1", "sc-worker-2"}
    rest.patch(PYTORCH, "sc", {"spec": {"replicas": 1}}, ns, subresource="scale")
    running(rest, ns, "sc", 2)


def test_elastic_job_gets_an_hpa(rest, ns):
    metrics = [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                         "averageUtilization": 80}}}]
    create(rest, job("PyTorchJob", "el", ns, {"Worker": 2},
                     elasticPolicy={"minReplicas": 1, "maxReplicas": 3, "metrics": metrics}))
    hpa = Resource("autoscaling", "v2beta2", "horizontalpodautoscalers")  # what Kubernetes 1.20 serves
    found = wait_for(lambda: next((h for h in rest.list(hpa, ns)["items"] if h["metadata"]["name"] == "el"), None),
                     what="HPA")
    assert found["spec"]["scaleTargetRef"] == {"kind": "PyTorchJob", "name": "el", "apiVersion": "kubeflow.org/v1"}
    assert (found["spec"]["minReplicas"], found["spec"]["maxReplicas"]) == (1, 3)
    rest.patch(PYTORCH, "el", {"spec": {"runPolicy": {"suspend": True}}}, ns)
    wait_for(lambda: not rest.list(hpa, ns)["items"], what="HPA deleted on suspend")


VOLCANO_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.volcano.sh"},
    "spec": {"group": "scheduling.volcano.sh", "scope": "Namespaced",
             "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup", "shortNames": ["pg"]},
             "versions": [{"name": "v1beta1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]}}


@pytest.fixture(scope="session")
def volcano_crd(k8s_cluster):
    from trainctl.kube.client import connect

    rest = connect(kubeconfig=str(k8s_cluster.kubeconfig("admin")))
    try:
        rest.create(CRDS, VOLCANO_CRD)
    except ApiError as error:
        assert error.status == 409
    wait_for(lambda: _served(rest), what="Volcano PodGroup CRD served")


def _served(rest) -> bool:
    try:
        rest.list(VOLCANO)
        return True
    except ApiError:
        return False


def test_volcano_pod_group_gates_pods(rest, start_controller, managed_namespace, volcano_crd):
    ns = managed_namespace
    start_controller(ns, "--gang-scheduler-name", "volcano")
    body = job("PyTorchJob", "gang", ns, {"Master": 1, "Worker": 2})
    body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "500m", "memory": "1Gi"}}
    create(rest, body)
    group = wait_for(lambda: next(iter(rest.list(VOLCANO, ns)["items"]), None), what="PodGroup")
    assert group["spec"] == {"minMember": 3, "queue": "default", "minResources": {"cpu": "1", "memory": "2147483648"}}
    assert group["metadata"]["ownerReferences"][0]["kind"] == "PyTorchJob"
    time.sleep(1)
    assert pods(rest, ns, "gang") == {}  # not admitted yet: no pods
    rest.patch(VOLCANO, "gang", {"status": {"phase": "Inqueue"}}, ns)
    found = running(rest, ns, "gang", 3)
    worker = found["gang-worker-1"]
    assert worker["spec"]["schedulerName"] == "volcano"
    assert worker["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "gang",
                                                 "volcano.sh/task-spec": "worker"}


def test_deleting_running_jobs_never_trips_over_children_the_controller_deletes(rest, ns, k8s_cluster):
    """The controller deletes a deleted job's pods and services at the same moment as trainctl does:
    a child already gone is not an error (it failed 4 times in 5 before)."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    names = [f"race-{n}" for n in range(5)]
    for name in names:
        create(rest, job("PyTorchJob", name, ns, {"Master": 1, "Worker": 3}))
    for name in names:
        running(rest, ns, name, 4)
        wait_for(lambda: len(services(rest, ns, name)) == 4, what=f"services of {name}")
    env = {**os.environ, "KUBECONFIG": str(k8s_cluster.kubeconfig("admin")), "PYTHONPATH": str(REPO)}
    for name in names:
        result = subprocess.run([sys.executable, "-m", "trainctl", "delete", name, "-n", ns], env=env,
                                capture_output=True, text=True, timeout=60, cwd=REPO)
        assert result.returncode == 0, result.stderr
    wait_for(lambda: not pods(rest, ns) and not services(rest, ns), what="every pod and service gone")
