"""Pods and services as the API server stores them, to and from the core's terms."""

from __future__ import annotations

from trainctl import API_GROUP
from trainctl.core.actions import CreateReplica, CreateService
from trainctl.core.job import Job
from trainctl.core.observed import PHASES, ObservedReplica
from trainctl.core.restarts import ATTEMPT_LABEL
from trainctl.frameworks.base import LABEL_JOB_NAME, LABEL_OPERATOR, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE
from trainctl.kube.pods import PodStatus, terminated


DISRUPTION_TARGET = "DisruptionTarget"  # the pod condition Kubernetes sets before it evicts or preempts a pod


def owner_reference(job: Job) -> dict:
    return {"apiVersion": f"{API_GROUP}/v1", "kind": job.framework.kind, "name": job.name, "uid": job.uid,
            "controller": True, "blockOwnerDeletion": True}


def controller_uid(obj: dict) -> str | None:
    """The uid of the object's controlling owner, if any."""
    for reference in obj["metadata"].get("ownerReferences") or []:
        if reference.get("controller"):
            return reference.get("uid")
    return None


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


def observe(job: Job, pod: dict) -> ObservedReplica | None:
    """The pod in the core's terms; None when its labels do not name one of the job's replicas."""
    metadata, status = pod["metadata"], PodStatus.of(pod)
    labels = metadata.get("labels") or {}
    rtype = job.framework.canonical_replica_type(labels.get(LABEL_REPLICA_TYPE, ""))
    index_text = labels.get(LABEL_REPLICA_INDEX, "0")
    if rtype is None or not index_text.isdigit():
        return None
    main = status.container((job.main_container(pod["spec"].get("containers") or []) or {}).get("name"))
    ended, last = terminated(main), terminated(main, previous=True)
    return ObservedReplica(rtype=rtype, index=int(index_text), name=metadata["name"],
                           phase=status.phase if status.phase in PHASES else "Pending",
                           exit_code=ended.get("exitCode"), deleting=status.deleting,
                           restart_count=status.restarts(with_init=True), reason=ended.get("reason") or "",
                           started_at=status.raw.get("startTime"), finished_at=ended.get("finishedAt"),
                           message=ended.get("message") or "", last_exit_code=last.get("exitCode"),
                           last_reason=last.get("reason") or "", last_finished_at=last.get("finishedAt"),
                           last_message=last.get("message") or "", disruption=disruption(pod),
                           attempt=int(attempt) if (attempt := labels.get(ATTEMPT_LABEL, "0")).isdigit() else 0)
