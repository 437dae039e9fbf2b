"""Kueue, YuniKorn and Volcano as each drives a job, played by the test against the real API server
and trainctl's controller: Kueue admits a queued job by injecting a node selector and a toleration
and unsuspending it, evicts it by suspending it again; YuniKorn reads the task groups on the pods."""

from __future__ import annotations

import json
import time

import pytest

from tests.controller.jobs import create, get_job, job, pods, wait_for
from tests.controller.test_lifecycle import running, volcano_crd  # noqa: F401 (a fixture)
from trainctl import TRAINER_API_VERSION
from trainctl.controller.gang import (
    VOLCANO,
    VOLCANO_GROUP_ANNOTATION,
    YUNIKORN_APP_ID_LABEL,
    YUNIKORN_QUEUE_LABEL,
    YUNIKORN_TASK_GROUP_NAME,
    YUNIKORN_TASK_GROUPS,
)
from trainctl.core.job import KUEUE_QUEUE_LABEL
from trainctl.frameworks import by_kind
from trainctl.frameworks.base import ANCESTOR_TRAINER, LABEL_ANCESTOR_STEP
from trainctl.kube import job_resource, trainer_resource

pytestmark = pytest.mark.k8s
PYTORCH = job_resource(by_kind("PyTorchJob"))
EVICTION_S = 20
TRAINJOBS, RUNTIMES = trainer_resource("TrainJob"), trainer_resource("TrainingRuntime")


def test_kueue_queued_job_waits_is_admitted_with_injected_placement_and_evicted(
        rest, start_controller, managed_namespace, trainctl):
    ns = managed_namespace
    start_controller(ns)
    submitted = trainctl("submit", "pytorch", "--workers", "2", "--name", "queued", "-n", ns, "--image", "busybox",
                         "--no-workdir", "--local-queue", "team-a", "--", "python", "train.py")
    assert submitted.returncode == 0, submitted.stderr
    stored = get_job(rest, "PyTorchJob", ns, "queued")
    assert stored["metadata"]["labels"][KUEUE_QUEUE_LABEL] == "team-a"
    assert stored["spec"]["runPolicy"]["suspend"] is True
    time.sleep(2)
    assert pods(rest, ns, "queued") == {}  # not admitted: no pods
    status = trainctl("status", "queued", "-n", ns)  # no Kueue CRD here: the line, and nothing breaks
    assert status.returncode == 0 and "waiting for admission by Kueue (LocalQueue team-a)" in status.stdout, \
        status.stdout + status.stderr

    # Kueue admits: it injects the flavor's node selector and toleration into every template, then unsuspends
    placement = {"nodeSelector": {"cloud.example.com/flavor": "spot"},
                 "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]}
    specs = {rtype: {"template": {"spec": placement}} for rtype in ("Master", "Worker")}
    rest.patch(PYTORCH, "queued", {"spec": {"pytorchReplicaSpecs": specs}}, ns)
    rest.patch(PYTORCH, "queued", {"spec": {"runPolicy": {"suspend": False}}}, ns)
    for pod in running(rest, ns, "queued", 2).values():
        assert pod["spec"]["nodeSelector"]["cloud.example.com/flavor"] == "spot"
        assert {"key": "spot", "operator": "Exists", "effect": "NoSchedule"} in pod["spec"]["tolerations"]
    assert "waiting for admission" not in trainctl("status", "queued", "-n", ns).stdout

    # Kueue evicts (preemption): it suspends the job; the pods go and no replica counts as active
    rest.patch(PYTORCH, "queued", {"spec": {"runPolicy": {"suspend": True}}}, ns)
    started = time.monotonic()
    wait_for(lambda: not pods(rest, ns, "queued") and all(
        replica.get("active", 0) == 0
        for replica in ((get_job(rest, "PyTorchJob", ns, "queued").get("status") or {})
                        .get("replicaStatuses") or {}).values()),
        timeout=EVICTION_S, what="pods gone and active 0 after eviction")
    assert time.monotonic() - started < EVICTION_S


def test_multikueue_job_is_left_to_its_manager(rest, start_controller, managed_namespace):
    ns = managed_namespace
    start_controller(ns)
    create(rest, job("PyTorchJob", "remote", ns, {"Master": 1, "Worker": 1},
                     run_policy={"managedBy": "kueue.x-k8s.io/multikueue"}))
    time.sleep(2)
    assert pods(rest, ns, "remote") == {}
    assert not get_job(rest, "PyTorchJob", ns, "remote").get("status")


def test_yunikorn_pods_carry_scheduler_labels_and_task_groups(rest, start_controller, managed_namespace):
    ns = managed_namespace
    start_controller(ns, "--gang-scheduler-name", "yunikorn")
    body = job("PyTorchJob", "yk", ns, {"Master": 1, "Worker": 3},
               run_policy={"schedulingPolicy": {"queue": "root.ml"}})
    requests = {"Master": {"cpu": "1", "memory": "2Gi"}, "Worker": {"cpu": "500m", "memory": "1Gi"}}
    for rtype, amounts in requests.items():
        spec = body["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]
        spec["containers"][0]["resources"] = {"requests": amounts}
    body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"] = {"gpu": "a100"}
    create(rest, body)
    found = running(rest, ns, "yk", 4)
    for name, pod in found.items():
        labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
        assert pod["spec"]["schedulerName"] == "yunikorn"
        assert labels[YUNIKORN_APP_ID_LABEL] == "yk" and labels[YUNIKORN_QUEUE_LABEL] == "root.ml"
        assert annotations[YUNIKORN_TASK_GROUP_NAME] == name.split("-")[1]
        groups = json.loads(annotations[YUNIKORN_TASK_GROUPS])
        assert sum(group["minMember"] for group in groups) == 4
        assert groups == [
            {"name": "master", "minMember": 1, "minResource": {"cpu": "1", "memory": str(2 << 30)}},
            {"name": "worker", "minMember": 3, "minResource": {"cpu": "500m", "memory": str(1 << 30)},
             "nodeSelector": {"gpu": "a100"}}]


def test_queued_elastic_job_gets_no_hpa(rest, start_controller, managed_namespace):
    """An HPA would change the Worker count, and Kueue stops an admitted job whose counts change: none is made.
    A scale by hand is not refused (docs/schedulers.md says why and what Kueue then does)."""
    from trainctl.kube.client import Resource

    ns = managed_namespace
    start_controller(ns)
    metrics = [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                         "averageUtilization": 80}}}]
    for name, labels in (("free", {}), ("queued", {KUEUE_QUEUE_LABEL: "team-a"})):
        body = job("PyTorchJob", name, ns, {"Worker": 2},
                   elasticPolicy={"minReplicas": 1, "maxReplicas": 3, "metrics": metrics})
        body["metadata"]["labels"] = labels
        create(rest, body)
    hpa = Resource("autoscaling", "v2beta2", "horizontalpodautoscalers")  # what the test's API server serves
    wait_for(lambda: any(h["metadata"]["name"] == "free" for h in rest.list(hpa, ns)["items"]), what="HPA of free")
    running(rest, ns, "queued", 2)
    assert [h["metadata"]["name"] for h in rest.list(hpa, ns)["items"]] == ["free"]
    # nothing short of a webhook can refuse a person's scale of it (docs/schedulers.md): the Scale the API server
    # admits for a custom resource carries no label to tell a queued job by, and the count changes
    scale = rest.get(PYTORCH, "queued", ns, subresource="scale")
    assert scale["kind"] == "Scale" and set(scale["metadata"]) <= {"name", "namespace", "uid", "resourceVersion",
                                                                   "creationTimestamp"}, scale
    rest.patch(PYTORCH, "queued", {"spec": {"replicas": 3}}, ns, subresource="scale")
    assert get_job(rest, "PyTorchJob", ns, "queued")["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3


WORKLOAD_CRD = {  # the test's own minimal stand-in for Kueue's Workload CRD: only what status reads
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "workloads.kueue.x-k8s.io"},
    "spec": {"group": "kueue.x-k8s.io", "scope": "Namespaced",
             "names": {"plural": "workloads", "singular": "workload", "kind": "Workload"},
             "versions": [{"name": "v1beta1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object",
                                                          "x-kubernetes-preserve-unknown-fields": True}}}]}}


def test_status_shows_what_kueue_workload_says(rest, start_controller, managed_namespace, trainctl):
    from trainctl.backends.kube.backend import KUEUE_JOB_UID_LABEL, KUEUE_WORKLOADS
    from trainctl.kube.client import CRDS, ApiError

    ns = managed_namespace
    start_controller(ns)
    assert trainctl("submit", "tf", "--workers", "2", "--name", "waiting", "-n", ns, "--image", "busybox",
                    "--no-workdir", "--local-queue", "team-b", "--", "python", "train.py").returncode == 0
    uid = get_job(rest, "TFJob", ns, "waiting")["metadata"]["uid"]
    rest.create(CRDS, WORKLOAD_CRD)
    try:
        def served() -> bool:
            try:
                return rest.list(KUEUE_WORKLOADS, ns) is not None
            except ApiError:
                return False
        wait_for(served, what="Workload CRD served")
        message = "couldn't assign flavors to pod set worker: insufficient quota for cpu in flavor default"
        rest.create(KUEUE_WORKLOADS, {
            "apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
            "metadata": {"name": "tfjob-waiting-1a2b3", "namespace": ns, "labels": {KUEUE_JOB_UID_LABEL: uid}},
            "spec": {"queueName": "team-b"},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                       "message": message}]}}, ns)
        status = trainctl("status", "waiting", "-n", ns)
        assert status.returncode == 0, status.stderr
        assert "waiting for admission by Kueue (LocalQueue team-b)" in status.stdout
        assert f"Kueue Workload tfjob-waiting-1a2b3: QuotaReserved Pending: {message}" in status.stdout, status.stdout
    finally:
        rest.delete(CRDS, WORKLOAD_CRD["metadata"]["name"])
    assert pods(rest, ns, "waiting") == {}


def gang_runtime(name: str, namespace: str, pod_group_policy: dict) -> dict:
    """A TrainingRuntime of ours with ``podGroupPolicy``: torch, one ``node`` replicatedJob (the trainer step)."""
    container = {"name": "node", "image": "python:3.12", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
    replicated = {"name": "node", "template": {"metadata": {"labels": {LABEL_ANCESTOR_STEP: ANCESTOR_TRAINER}},
                                               "spec": {"template": {"spec": {"containers": [container]}}}}}
    return {"apiVersion": TRAINER_API_VERSION, "kind": "TrainingRuntime",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "podGroupPolicy": pod_group_policy,
                     "template": {"spec": {"replicatedJobs": [replicated]}}}}


def gang_trainjob(name: str, namespace: str, runtime: str) -> dict:
    return {"apiVersion": TRAINER_API_VERSION, "kind": "TrainJob", "metadata": {"name": name, "namespace": namespace},
            "spec": {"runtimeRef": {"kind": "TrainingRuntime", "name": runtime},
                     "trainer": {"numNodes": 2, "command": ["python3", "-c", "print(1)"]}}}


def test_a_trainjob_is_gang_scheduled_by_its_runtimes_pod_group_policy(rest, start_controller, managed_namespace,
                                                                       volcano_crd):
    """Upstream's Volcano plugin, without --gang-scheduler-name: the runtime's podGroupPolicy.volcano makes the
    PodGroup (every pod, their requests), and no pod is made before Volcano admits it. podGroupPolicy.coscheduling
    needs the scheduler-plugins scheduler's name: without it the TrainJob fails in one line saying so."""
    ns = managed_namespace
    for name, policy in (("volcano-rt", {"volcano": {}}), ("cosched-rt", {"coscheduling": {}})):
        rest.create(RUNTIMES, gang_runtime(name, ns, policy), ns)
    start_controller(ns)
    rest.create(TRAINJOBS, gang_trainjob("vg", ns, "volcano-rt"), ns)
    rest.create(TRAINJOBS, gang_trainjob("cg", ns, "cosched-rt"), ns)
    group = wait_for(lambda: next(iter(rest.list(VOLCANO, ns)["items"]), None), what="the TrainJob's PodGroup")
    assert group["metadata"]["name"] == "vg"
    assert group["spec"] == {"minMember": 2, "queue": "default", "minResources": {"cpu": "2", "memory": str(2 << 30)}}
    assert group["metadata"]["ownerReferences"][0]["kind"] == "TrainJob"
    failed = wait_for(lambda: next((c for c in (rest.get(TRAINJOBS, "cg", ns).get("status") or {}).get(
        "conditions") or [] if c["type"] == "Failed"), None), what="the coscheduling TrainJob's Failed condition")
    assert "podGroupPolicy.coscheduling" in failed["message"] and "--gang-scheduler-name" in failed["message"]
    assert "\n" not in failed["message"]
    assert pods(rest, ns, "vg") == {}  # Volcano has not admitted the group: no pods (the cg failure came after vg's)
    rest.patch(VOLCANO, "vg", {"status": {"phase": "Inqueue"}}, ns)
    found = wait_for(lambda: (p := pods(rest, ns, "vg")) and len(p) == 2 and p, what="the admitted TrainJob's pods")
    for pod in found.values():
        assert pod["spec"]["schedulerName"] == "volcano"
        assert pod["metadata"]["annotations"][VOLCANO_GROUP_ANNOTATION] == "vg"
