"""Pods and services as the API server stores them, to and from the core's terms."""

from __future__ import annotations

from collections.abc import Callable

from trainctl.core.actions import CreateReplica, CreateService
from trainctl.core.job import Job
from trainctl.core.nodes import GONE, NOT_READY
from trainctl.core.observed import PHASES, ObservedReplica
from trainctl.core.restarts import ATTEMPT_LABEL
from trainctl.frameworks.base import LABEL_JOB_NAME, LABEL_OPERATOR, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE
from trainctl.kube import job_api_version
from trainctl.kube.pods import PodStatus, terminated


DISRUPTION_TARGET = "DisruptionTarget"  # the pod condition Kubernetes sets before it evicts or preempts a pod


def owner_reference(job: Job) -> dict:
    return {"apiVersion": job_api_version(job.framework), "kind": job.framework.kind, "name": job.name, "uid": job.uid,
            "controller": True, "blockOwnerDeletion": True}


def controller_uid(obj: dict) -> str | None:
    """The uid of the object's controlling owner, if any."""
    for reference in obj["metadata"].get("ownerReferences") or []:
        if reference.get("controller"):
            return reference.get("uid")
    return None


# What the controller reads of a cached pod (observe, the MPI hostfile, progress reads, gang scheduling, the
# reconcile's restarts and exit codes): of the spec, these and its containers' names; of the status, these and
# of each container's status the next, a DisruptionTarget condition and whether Ready is true. The rest (commands,
# env, volumes, tolerations, other conditions, IPs, image IDs ...) was two thirds of a pod's memory, and 5,000 jobs keep
# 20,000 pods (docs/benchmarks.md).
CACHED_POD_SPEC = ("nodeName", "schedulerName", "restartPolicy", "priority")
CACHED_POD_STATUS = ("phase", "reason", "message", "startTime")
CACHED_CONTAINER_STATUS = ("name", "state", "lastState", "restartCount", "ready", "started")
CACHED_SERVICE_SPEC = ("clusterIP", "selector")


def cached_pod(pod: dict) -> dict:
    """The pod as the controller's cache keeps it: metadata whole, of spec and status only what is read."""
    return {**pod, "spec": cached_pod_spec(pod.get("spec") or {}), "status": cached_pod_status(pod.get("status") or {})}


def cached_pod_spec(spec: dict) -> dict:
    kept = {key: spec[key] for key in CACHED_POD_SPEC if key in spec}
    for key in ("containers", "initContainers"):
        if key in spec:
            kept[key] = [{"name": container.get("name")} for container in spec[key] if isinstance(container, dict)]
    return kept


def cached_pod_status(status: dict) -> dict:
    kept = {key: status[key] for key in CACHED_POD_STATUS if key in status}
    conditions = [condition for condition in status.get("conditions") or [] if isinstance(condition, dict)]
    # of the conditions only these are read: DisruptionTarget (disruption) and whether Ready (pod_ready), no more
    read = [condition for condition in conditions if condition.get("type") == DISRUPTION_TARGET] + [
        {"type": "Ready", "status": condition.get("status")} for condition in conditions
        if condition.get("type") == "Ready"]
    if read:
        kept["conditions"] = read
    for key in ("containerStatuses", "initContainerStatuses"):
        if key in status:
            kept[key] = [{field: container[field] for field in CACHED_CONTAINER_STATUS if field in container}
                         for container in status[key] if isinstance(container, dict)]
    return kept


def cached_service(service: dict) -> dict:
    """The service as the controller's cache keeps it: the controller reads only its metadata."""
    spec = service.get("spec") or {}
    return {**service, "spec": {key: spec[key] for key in CACHED_SERVICE_SPEC if key in spec}}


def cached_node(node: dict) -> dict:
    """The node as the controller's cache keeps it: its name, uid and version, and its Ready condition's status and
    last transition (the heartbeat times that change every few seconds, images, capacity ... are never read)."""
    metadata = node.get("metadata") or {}
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = [{"type": "Ready", "status": c.get("status"), "lastTransitionTime": c.get("lastTransitionTime")}
             for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"]
    return {"metadata": {key: metadata[key] for key in ("name", "uid", "resourceVersion") if key in metadata},
            "status": {"conditions": ready[:1]}}


def node_down(node: dict | None) -> tuple[str, str | None]:
    """What the core is told of a pod's node (trainctl/core/nodes.py): ('', None) while it is Ready or says nothing
    yet, (NotReady, since when) once its Ready condition is False or Unknown, (gone, None) when there is no such
    Node."""
    if node is None:
        return GONE, None
    ready = next(iter(node["status"]["conditions"]), None)
    if ready is None or ready.get("status") == "True":
        return "", None
    return NOT_READY, ready.get("lastTransitionTime")


def job_index(obj: dict) -> tuple[str, str, str] | None:
    """(operator name, namespace, job name) of a pod or service trainctl's operator labels name."""
    labels = obj["metadata"].get("labels") or {}
    if LABEL_JOB_NAME not in labels or LABEL_OPERATOR not in labels:
        return None
    return labels[LABEL_OPERATOR], obj["metadata"].get("namespace", ""), labels[LABEL_JOB_NAME]


def pod_body(job: Job, action: CreateReplica) -> dict:
    pod = action.pod
    metadata = {**pod.get("metadata", {}), "name": action.name, "namespace": job.namespace,
                "labels": action.labels, "ownerReferences": [owner_reference(job)]}
    metadata.pop("generateName", None)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod["spec"]}


def service_body(job: Job, action: CreateService) -> dict:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": action.name, "namespace": job.namespace, "labels": action.labels,
                         "ownerReferences": [owner_reference(job)]},
            "spec": {"clusterIP": "None", "selector": action.labels, "ports": action.ports}}


def disruption(pod: dict) -> str:
    """What befell the pod rather than its program: a ``DisruptionTarget`` condition (preemption, eviction, a
    taint, the node's shutdown), or a failed pod's own reason (Evicted, NodeLost, Shutdown ...); '' for none."""
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == DISRUPTION_TARGET and condition.get("status") == "True":
            return f"{DISRUPTION_TARGET} ({condition.get('reason') or 'no reason'})"
    if status.get("phase") == "Failed" and status.get("reason"):
        return f"{status['reason']}: {status.get('message') or 'no message'}"[:200]
    return ""


def pod_ready(pod: dict) -> bool | None:
    """Whether the pod's Ready condition is true (its containers' readiness probes passed); None without one."""
    ready = [condition.get("status") for condition in (pod.get("status") or {}).get("conditions") or []
             if condition.get("type") == "Ready"]
    return ready[0] == "True" if ready else None


def observe(job: Job, pod: dict, nodes: Callable[[str], dict | None] | None = None,
            heard: Callable[[str], tuple[str | None, int | None]] | None = None) -> ObservedReplica | None:
    """The pod in the core's terms; None when its labels do not name one of the job's replicas. ``nodes``: the
    cached Node of a name (:func:`cached_node`; None for none), when the controller watches nodes; ``heard``: when
    a node's kubelet last renewed its Lease, and the lease's duration (trainctl/controller/leases.py)."""
    metadata, status = pod["metadata"], PodStatus.of(pod)
    labels = metadata.get("labels") or {}
    rtype = job.framework.canonical_replica_type(labels.get(LABEL_REPLICA_TYPE, ""))
    index_text = labels.get(LABEL_REPLICA_INDEX, "0")
    if rtype is None or not index_text.isdigit():
        return None
    main = status.container((job.main_container(pod["spec"].get("containers") or []) or {}).get("name"))
    ended, last = terminated(main), terminated(main, previous=True)
    node = pod["spec"].get("nodeName") or ""
    down, since = node_down(nodes(node)) if node and nodes is not None else ("", None)
    heard_at, lease_s = heard(node) if node and heard is not None else (None, None)
    return ObservedReplica(rtype=rtype, index=int(index_text), name=metadata["name"],
                           phase=status.phase if status.phase in PHASES else "Pending",
                           exit_code=ended.get("exitCode"), deleting=status.deleting,
                           restart_count=status.restarts(with_init=True), reason=ended.get("reason") or "",
                           started_at=status.raw.get("startTime"), finished_at=ended.get("finishedAt"),
                           message=ended.get("message") or "", last_exit_code=last.get("exitCode"),
                           last_reason=last.get("reason") or "", last_finished_at=last.get("finishedAt"),
                           last_message=last.get("message") or "", disruption=disruption(pod),
                           node=node, node_down=down, node_down_since=since, node_heard_at=heard_at,
                           node_lease_s=lease_s, pod_ready=pod_ready(pod),
                           attempt=int(attempt) if (attempt := labels.get(ATTEMPT_LABEL, "0")).isdigit() else 0)
