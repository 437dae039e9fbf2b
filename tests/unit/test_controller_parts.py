"""The controller's pure parts: work queue, expectations, gang PodGroups, metrics, service repair."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone

import pytest

from trainctl.controller import expectations as expectations_module
from trainctl.controller.expectations import Expectations
from trainctl.controller.gang import GangScheduler
from trainctl.controller.informer import Informer, newer
from trainctl.controller.leader import LeaderElector
from trainctl.controller.metrics import Metrics
from trainctl.controller.queue import WorkQueue
from trainctl.core.actions import CreateService, DeleteService
from trainctl.core.job import Job
from trainctl.core.network import ClusterNetwork
from trainctl.core.observed import ObservedReplica
from trainctl.core.reconcile import reconcile
from trainctl.kube.quantities import format_quantity, parse_quantity


def test_queue_dedups_and_never_hands_one_key_to_two_workers():
    queue = WorkQueue()
    for _ in range(3):
        queue.add("a")
    queue.add("b")
    assert len(queue) == 2
    key = queue.get()
    assert key == "a"
    queue.add("a")  # changed while being processed: queued again only after done()
    assert queue.get(timeout=0.05) == "b"
    assert queue.get(timeout=0.05) is None
    queue.done("a")
    assert queue.get(timeout=0.05) == "a"


def test_queue_timers_and_backoff():
    queue = WorkQueue()
    queue.add_after("late", 0.2)
    started = time.monotonic()
    assert queue.get(timeout=1) == "late"
    assert 0.15 <= time.monotonic() - started < 0.6
    queue.done("late")
    assert [queue.retry("k") for _ in range(3)] == [0.05, 0.1, 0.2]
    queue.forget("k")
    assert queue.retry("k") == 0.05


def test_queue_shutdown_wakes_waiting_workers():
    queue = WorkQueue()
    results = []
    worker = threading.Thread(target=lambda: results.append(queue.get()))
    worker.start()
    queue.shutdown()
    worker.join(2)
    assert results == [None]


def test_expectations_hold_a_job_until_seen_or_expired(monkeypatch):
    expectations = Expectations()
    expectations.expect("job", "create", "pods", "p0")
    assert expectations.wait_s("job") > 0
    expectations.observe("job", "create", "pods", "p0")
    assert expectations.wait_s("job") == 0
    expectations.expect("job", "delete", "pods", "p1")
    monkeypatch.setattr(expectations_module, "TTL_S", 0.0)
    assert expectations.wait_s("job") == 0  # a lost event delays a job, never forever


def test_resource_versions_compare_as_numbers():
    def obj(version):
        return {"metadata": {"resourceVersion": version}}
    assert newer(obj("10"), obj("9")) and not newer(obj("9"), obj("10")) and not newer(obj("5"), obj("5"))
    assert newer(obj("b"), obj("a"))  # opaque versions: different means newer


def test_a_late_copy_of_a_deleted_object_stays_out_of_the_cache():
    """A reconcile's own status write, answered just before the job was deleted, can reach the cache after
    the watch's DELETED: it must not bring the job back (the controller then recreated its pods and
    services forever, and CI's delete test timed out)."""
    informer = Informer(client=None, resource=None)
    events = []
    informer.handlers.append(lambda kind, obj: events.append((kind, obj["metadata"]["resourceVersion"])))

    def job(version, uid="a"):
        return {"metadata": {"namespace": "ns", "name": "race", "uid": uid, "resourceVersion": version}}

    informer.apply("ADDED", job("5"))
    informer.apply("DELETED", job("7"))
    informer.apply("MODIFIED", job("6"))  # the status write's answer, late
    assert informer.get("ns", "race") is None and events == [("ADDED", "5"), ("DELETED", "7")]
    informer.apply("ADDED", job("9", uid="b"))  # a new job of the same name
    assert informer.get("ns", "race")["metadata"]["uid"] == "b"


def test_a_handler_that_raises_does_not_end_the_informer_for_the_objects_after_it(caplog):
    """A handler's bug on one event (the fake kubelet's KeyError, once) ended the watch thread: every later object
    went unseen. The failure is logged and the next events still reach every handler."""
    from trainctl.kube.client import PODS

    informer = Informer(client=None, resource=PODS)
    seen = []

    def fragile(kind, obj):
        if obj["metadata"]["name"] == "bad":
            raise KeyError("bad")
        seen.append(obj["metadata"]["name"])

    informer.handlers.append(fragile)
    for name in ("bad", "good"):
        informer.apply("ADDED", {"metadata": {"namespace": "ns", "name": name, "uid": name, "resourceVersion": "1"}})
    assert seen == ["good"] and informer.get("ns", "bad") is not None
    assert "a handler failed on ADDED" in caplog.text


@pytest.mark.parametrize("text, value", [("500m", "0.5"), ("1Gi", "1073741824"), ("2", "2"), ("1.5k", "1500")])
def test_quantities(text, value):
    assert parse_quantity(text) == parse_quantity(value)


def test_format_quantity():
    assert format_quantity(parse_quantity("500m") * 3) == "1500m"
    assert format_quantity(parse_quantity("1Gi") * 2) == "2147483648"


def pytorch_job(**run_policy) -> Job:
    def replica(count, priority=None, cpu="1"):
        spec = {"containers": [{"name": "pytorch", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
        if priority:
            spec["priorityClassName"] = priority
        return {"replicas": count, "template": {"spec": spec}}
    return Job({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                "metadata": {"name": "g", "namespace": "ns", "annotations": {"team": "a"}},
                "spec": {"runPolicy": run_policy,
                         "pytorchReplicaSpecs": {"Master": replica(1, cpu="4"), "Worker": replica(3, "high")}}})


def test_volcano_pod_group_counts_the_highest_priority_pods_first():
    job = pytorch_job(schedulingPolicy={"minAvailable": 2, "queue": "q1", "priorityClass": "pc"})
    group = GangScheduler("Volcano").pod_group(job, {"high": 100}, existing=None)
    # two workers (priority 100) fill minMember 2 before the master (cpu 4) is counted
    assert group["spec"] == {"minMember": 2, "queue": "q1", "minResources": {"cpu": "2"}, "priorityClassName": "pc"}
    assert group["metadata"]["annotations"] == {"team": "a"}
    kept = GangScheduler("volcano").pod_group(job, {}, existing={"spec": {"queue": "old"}})
    assert kept["spec"]["queue"] == "old"


def test_scheduler_plugins_pod_group_and_decoration():
    job = pytorch_job(schedulingPolicy={"scheduleTimeoutSeconds": 30})
    gang = GangScheduler("scheduler-plugins-scheduler")
    group = gang.pod_group(job, {}, existing=None)
    assert group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1"
    assert group["spec"] == {"minMember": 4, "minResources": {"cpu": "7"}, "scheduleTimeoutSeconds": 30}
    pod = {"metadata": {"labels": {}}, "spec": {"schedulerName": "other"}}
    assert "will not be overwritten" in gang.decorate(job, "Worker", pod)
    assert pod["spec"]["schedulerName"] == "other"
    assert pod["metadata"]["labels"] == {"scheduling.x-k8s.io/pod-group": "g"}
    assert gang.admitted(None)  # scheduler-plugins never holds pods back
    assert not GangScheduler("volcano").admitted({"status": {"phase": "Pending"}})
    assert GangScheduler("volcano").admitted({"status": {"phase": "Inqueue"}})


def test_lease_expiry():
    now = datetime(2026, 1, 1, 12, 0, 30, tzinfo=timezone.utc)
    assert LeaderElector.expired({"renewTime": "2026-01-01T12:00:00.000000Z", "leaseDurationSeconds": 15}, now)
    assert not LeaderElector.expired({"renewTime": "2026-01-01T12:00:20.000000Z", "leaseDurationSeconds": 15}, now)
    assert LeaderElector.expired({}, now)


def test_metrics_text_format():
    metrics = Metrics()
    metrics.latency.observe(0.02, "TFJob")
    metrics.reconciles.inc("TFJob", "success")
    metrics.jobs.replace({("TFJob", 'Run"ning'): 2})
    text = metrics.render()
    assert 'trainctl_reconcile_duration_seconds_bucket{kind="TFJob",le="0.025"} 1' in text
    assert 'trainctl_reconcile_duration_seconds_bucket{kind="TFJob",le="+Inf"} 1' in text
    assert 'trainctl_reconcile_total{kind="TFJob",result="success"} 1' in text
    assert 'trainctl_jobs{kind="TFJob",state="Run\\"ning"} 2' in text
    assert "# TYPE trainctl_reconcile_duration_seconds histogram" in text


def test_a_missing_service_is_created_even_when_its_pod_exists():
    resource = pytorch_job().resource | {"metadata": {"name": "g", "namespace": "ns", "uid": "u"}}
    observed = [ObservedReplica("Master", 0, "g-master-0", "Running")] + [
        ObservedReplica("Worker", i, f"g-worker-{i}", "Running") for i in range(3)]
    now = datetime.now(timezone.utc)
    plan = reconcile(resource, observed, now, ClusterNetwork(), services={"g-master-0", "g-worker-0", "g-worker-9"})
    assert [(type(a).__name__, a.name) for a in plan.actions if isinstance(a, (CreateService, DeleteService))] == [
        ("CreateService", "g-worker-1"), ("CreateService", "g-worker-2"), ("DeleteService", "g-worker-9")]
    created = next(a for a in plan.actions if isinstance(a, CreateService))
    assert "training.kubeflow.org/job-role" not in created.labels


def test_token_bucket_lets_a_burst_through_then_paces_waiters_in_their_order():
    """client-go's client-side limit: `burst` requests at once, then one every 1/qps seconds, first come first served."""
    from trainctl.kube.client import TokenBucket

    now, slept = [100.0], []
    bucket = TokenBucket(4, 2, clock=lambda: now[0], sleep=slept.append)
    for _ in range(5):  # nobody sleeps here, so all five arrive at t=100: the 3rd waits 1/4 s, the 4th 2/4 ...
        bucket.take()
    assert slept == [0.25, 0.5, 0.75] and bucket.waited_s == 1.5
    now[0] += 10  # a quiet spell refills the bucket, never beyond its burst
    slept.clear()
    for _ in range(3):
        bucket.take()
    assert slept == [0.25]


def test_rate_limits_read_as_client_go_reads_them():
    from trainctl.kube.client import rate_limit

    assert rate_limit(-1, 30) is None  # negative: no limit
    default = rate_limit(0, 0)
    assert (default.qps, default.burst) == (5, 10)  # client-go's DefaultQPS/DefaultBurst
    upstream = rate_limit(20, 30)
    assert (upstream.qps, upstream.burst) == (20, 30)


def test_a_cached_pod_reads_as_the_whole_pod_reads():
    """The controller's cache keeps of a pod only what it reads (controller/pods.py cached_pod): whatever state a
    pod is in, the core's view of it and the job's index are those of the pod as the API server sent it."""
    from trainctl.controller.pods import cached_pod, job_index, observe
    from trainctl.kube.pods import failed_init

    resource = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                "metadata": {"name": "j", "namespace": "ns", "uid": "u1"},
                "spec": {"pytorchReplicaSpecs": {rtype: {"replicas": 1, "template": {"spec": {"containers": [
                    {"name": "pytorch", "image": "img"}]}}} for rtype in ("Master", "Worker")}}}
    job = Job(resource)
    labels = {"training.kubeflow.org/operator-name": "pytorchjob-controller", "training.kubeflow.org/job-name": "j",
              "training.kubeflow.org/replica-type": "worker", "training.kubeflow.org/replica-index": "0"}
    spec = {"containers": [{"name": "sidecar", "image": "s", "env": [{"name": "A", "value": "1"}]},
                           {"name": "pytorch", "image": "img", "command": ["python"], "env": [{"name": "RANK",
                                                                                               "value": "1"}]}],
            "initContainers": [{"name": "init-pytorch", "image": "alpine", "command": ["sh"]}],
            "nodeName": "n1", "restartPolicy": "OnFailure", "tolerations": [{"key": "x"}], "dnsPolicy": "ClusterFirst"}
    ended = {"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2026-01-01T00:00:09Z",
                            "message": "raised"}}
    statuses = [
        {},
        {"phase": "Pending", "initContainerStatuses": [{"name": "init-pytorch", "restartCount": 2, "state": {
            "waiting": {"reason": "CrashLoopBackOff"}}, "lastState": {"terminated": {"exitCode": 1}}}]},
        {"phase": "Running", "startTime": "2026-01-01T00:00:01Z", "podIP": "10.0.0.1", "conditions": [{"type": "Ready"}],
         "containerStatuses": [{"name": "pytorch", "restartCount": 1, "image": "img", "imageID": "sha", "state": {
             "running": {"startedAt": "2026-01-01T00:00:10Z"}}, "lastState": ended}]},
        {"phase": "Failed", "reason": "Evicted", "message": "low on memory", "containerStatuses": [
            {"name": "sidecar", "state": {"terminated": {"exitCode": 0}}}, {"name": "pytorch", "state": ended}]},
        {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}, {
            "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]},  # issue 34
    ]
    for status in statuses:
        for deleting in ({}, {"deletionTimestamp": "2026-01-01T00:00:20Z"}):
            pod = {"metadata": {"name": "j-worker-0", "namespace": "ns", "labels": labels, **deleting,
                                "ownerReferences": [{"uid": "u1", "controller": True}]}, "spec": spec, "status": status}
            cached = cached_pod(pod)
            assert observe(job, cached) == observe(job, pod)
            assert job_index(cached) == job_index(pod) and failed_init(cached["status"]) == failed_init(pod["status"])
            assert "env" not in str(cached)
            # of the Ready condition only whether it is true (pod_ready, dependsOn Ready): no times, no reason
            assert all(set(c) == {"type", "status"} for c in cached["status"].get("conditions") or []
                       if c["type"] == "Ready")


def test_a_cached_node_keeps_its_ready_condition_alone_and_tells_the_core_what_befell_it():
    """Nodes (issue 42): the controller caches each Node's Ready condition and name (not its images, capacity,
    heartbeats: a heartbeat changes nothing), and tells the core of each pod's node: Ready, NotReady since when,
    or gone."""
    from trainctl.controller.pods import cached_node, node_down, observe

    def node(status, heartbeat="2026-01-01T00:00:30Z"):
        return {"metadata": {"name": "n2", "uid": "u", "resourceVersion": "7", "labels": {"a": "b"}},
                "status": {"images": [{"names": ["x" * 100]}], "capacity": {"cpu": "8"}, "conditions": [
                    {"type": "MemoryPressure", "status": "False"},
                    {"type": "Ready", "status": status, "reason": "NodeStatusUnknown", "lastHeartbeatTime": heartbeat,
                     "lastTransitionTime": "2026-01-01T00:00:05Z"}]}}

    cached = cached_node(node("Unknown"))
    assert cached == {"metadata": {"name": "n2", "uid": "u", "resourceVersion": "7"}, "status": {"conditions": [
        {"type": "Ready", "status": "Unknown", "lastTransitionTime": "2026-01-01T00:00:05Z"}]}}
    assert cached_node(node("Unknown", heartbeat="2026-01-01T00:09:00Z")) == cached  # a heartbeat is no change
    assert node_down(cached) == ("NotReady", "2026-01-01T00:00:05Z")
    assert node_down(cached_node(node("False")))[0] == "NotReady"
    assert node_down(cached_node(node("True"))) == ("", None)
    assert node_down(cached_node({"metadata": {"name": "new"}})) == ("", None)  # says nothing yet: Ready
    assert node_down(None) == ("gone", None)

    resource = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "j", "namespace": "ns"},
                "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": {"spec": {"containers": [
                    {"name": "pytorch", "image": "img"}]}}}}}}
    pod = {"metadata": {"name": "j-master-0", "labels": {"training.kubeflow.org/replica-type": "master",
                                                         "training.kubeflow.org/replica-index": "0"}},
           "spec": {"nodeName": "n2", "containers": [{"name": "pytorch"}]}, "status": {"phase": "Running"}}
    nodes = {"n2": cached}
    seen = observe(Job(resource), pod, nodes.get)
    assert (seen.node, seen.node_down, seen.node_down_since) == ("n2", "NotReady", "2026-01-01T00:00:05Z")
    assert observe(Job(resource), {**pod, "spec": {**pod["spec"], "nodeName": "n3"}}, nodes.get).node_down == "gone"
    assert observe(Job(resource), pod).node_down == ""  # no nodes watched: nothing known
