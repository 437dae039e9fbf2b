"""Doing what the reconcile core asked, against the API server: creates and deletes, events, status writes.

The core (trainctl/core/reconcile.py) returns actions; :class:`Executor` turns each into API calls.
Every create and delete is first written down as an expectation (trainctl/controller/expectations.py)
and met when the informer shows it, so a reconcile that runs before the cache caught up waits
instead of creating a pod twice. Names are deterministic, so a create that lost a race with a
restarted controller answers 409, which is what was wanted; a delete of what is gone already
answers 404, which is what was wanted too. An event that cannot be written is a log line, never
a failed reconcile.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from trainctl.controller import pods as pod_objects
from trainctl.controller.expectations import Expectations
from trainctl.controller.metrics import Metrics
from trainctl.core import conditions as cond
from trainctl.core.actions import CreateReplica, CreateService, DeleteJob, DeleteReplica, DeleteService, RecordEvent
from trainctl.core.job import Job
from trainctl.core.reconcile import rfc3339
from trainctl.core.trainer_crds import TRAINJOB
from trainctl.core.trainjob import upstream_status
from trainctl.kube import job_api_version, job_resource, trainer_resource
from trainctl.kube.client import EVENTS, PODS, SERVICES, ApiError, Client, Resource

if TYPE_CHECKING:
    from trainctl.frameworks.base import Network

log = logging.getLogger("trainctl.controller")
TRAINJOBS = trainer_resource(TRAINJOB)

COMPONENT = "trainctl-controller"
JobKey = tuple[str, str, str]  # (kind, namespace, name)
#: a gang scheduler's mark on a pod before it is created; returns a warning for the job's events, or None
Decorate = Callable[[Job, str, dict], "str | None"]
#: whether a pod of the job may be deleted now (trainctl.controller.records: once its runs are kept)
MayDelete = Callable[[JobKey, Job, str], bool]


class Executor:
    def __init__(self, client: Client, network: Network, metrics: Metrics, identity: str,
                 decorate: Decorate | None = None) -> None:
        self.client, self.network, self.metrics, self.identity = client, network, metrics, identity
        self.decorate = decorate
        self.expectations = Expectations()
        self.may_delete: MayDelete = lambda key, job, name: True
        self.held_back: set[tuple[JobKey, str]] = set()  # pods whose delete waits: their services wait too

    def execute(self, key: JobKey, job: Job, action: object) -> None:
        if isinstance(action, CreateReplica):
            self.create_pod(key, job, action)
        elif isinstance(action, CreateService):
            self.create(key, SERVICES, pod_objects.service_body(job, action), job.namespace)
        elif isinstance(action, DeleteReplica):
            # a pod on a lost node is deleted at once: its log cannot be read (the kubelet that has it is gone), and
            # the record keeps what its last status said (trainctl.controller.records)
            if not action.force and not self.may_delete(key, job, action.name):
                self.held_back.add((key, action.name))
                return  # its record first: the job is reconciled again once it is kept
            self.held_back.discard((key, action.name))
            self.delete(key, PODS, action.name, job.namespace, grace_period=action.grace_period)
            if action.reason == "Restart":
                self.metrics.restarted.inc(job.namespace, job.framework.name)
        elif isinstance(action, DeleteService):
            if (key, action.name) not in self.held_back:  # a held pod's service goes with it, not before
                self.delete(key, SERVICES, action.name, job.namespace)
        elif isinstance(action, RecordEvent):
            self.record_event(job, action.type, action.reason, action.message)
        elif isinstance(action, DeleteJob):
            self.delete_job(job)

    def create_pod(self, key: JobKey, job: Job, action: CreateReplica) -> None:
        body = pod_objects.pod_body(job, action)
        job.framework.decorate_pod(job, action.rtype, body, self.network)
        if self.decorate and (warning := self.decorate(job, action.rtype, body)):
            self.record_event(job, "Warning", "SetPodTemplateSchedulerName", warning)
        try:
            self.create(key, PODS, body, job.namespace)
        except ApiError as error:
            self.metrics.pod_create_failures.inc(job.framework.kind)
            self.record_event(job, "Warning", "FailedCreatePod", f"Error creating pod {action.name}: {error.message}")
            raise

    def create(self, key: JobKey, resource: Resource, body: dict, namespace: str) -> None:
        name = body["metadata"]["name"]
        self.expectations.expect(key, "create", resource.plural, name)
        try:
            self.client.create(resource, body, namespace)
        except ApiError as error:
            self.expectations.observe(key, "create", resource.plural, name)
            if error.status != 409:  # already exists: what we wanted
                raise

    def delete(self, key: JobKey, resource: Resource, name: str, namespace: str, uid: str | None = None,
               grace_period: int | None = None) -> None:
        """``grace_period``: seconds to SIGKILL (None: the pod's own); 0 forces it (a pod on a lost node, whose kubelet
        would never confirm a graceful delete)."""
        self.expectations.expect(key, "delete", resource.plural, name)
        try:
            self.client.delete(resource, name, namespace, uid=uid, grace_period=grace_period)
        except ApiError as error:
            self.expectations.observe(key, "delete", resource.plural, name)
            if error.status not in (404, 409):  # gone already, or a newer object of that name
                raise

    def delete_job(self, job: Job) -> None:
        try:
            self.client.delete(job_resource(job.framework), job.name, job.namespace, propagation="Background",
                               uid=job.uid)
            self.metrics.deleted.inc(job.namespace, job.framework.name)
            log.info("deleted %s %s/%s: ttlSecondsAfterFinished expired", job.framework.kind, job.namespace, job.name)
        except ApiError as error:
            if error.status not in (404, 409):
                raise

    def write_status(self, job: Job, status: dict, cached: Callable[[dict], None]) -> None:
        """Replace the job's status; ``cached`` shows the written job in the informer's cache at once, so the next
        pass does not act on the old status."""
        if job.node_plan is not None:
            self.write_trainjob_status(job.resource, status, job.node_plan.counts, cached)
        else:
            updated = self.client.replace(job_resource(job.framework), {**job.resource, "status": status},
                                          job.namespace, subresource="status")
            cached(updated)
        self.count_transitions(job, status)

    def write_trainjob_status(self, resource: dict, status: dict, replicas: dict[str, int],
                              cached: Callable[[dict], None]) -> None:
        """A TrainJob's status: trainctl's in its annotation (conditions.STATUS_ANNOTATION), upstream's form of it in
        its status (``replicas``: the pods of each replicatedJob), each written only when it changed."""
        metadata = resource["metadata"]
        text = json.dumps(status, sort_keys=True, separators=(",", ":"))
        if (metadata.get("annotations") or {}).get(cond.STATUS_ANNOTATION) != text:
            patch = {"metadata": {"annotations": {cond.STATUS_ANNOTATION: text},
                                  "resourceVersion": metadata.get("resourceVersion")}}
            resource = self.client.patch(TRAINJOBS, metadata["name"], patch, metadata.get("namespace"))
        upstream = upstream_status(status, replicas)
        if (resource.get("status") or {}) != upstream:
            resource = self.client.replace(TRAINJOBS, {**resource, "status": upstream}, metadata.get("namespace"),
                                           subresource="status")
        cached(resource)

    def write_annotations(self, job: Job, annotations: dict[str, str], cached: Callable[[dict], None]) -> Job:
        """Set the job's annotations the core keeps (its restart record) before anything else of the pass is done,
        on the version of the job the pass read (a 409 when that is stale: the pass is retried on the new one), and
        return the job as written, whose version the status write then goes on."""
        patch = {"metadata": {"annotations": annotations,
                              "resourceVersion": job.resource["metadata"].get("resourceVersion")}}
        updated = self.client.patch(job_resource(job.framework), job.name, patch, job.namespace)
        cached(updated)
        return Job(updated)

    def count_transitions(self, job: Job, status: dict) -> None:
        before, after = cond.conditions_of(job.resource), status.get("conditions") or []
        for ctype, counter in (("Succeeded", self.metrics.successful), ("Failed", self.metrics.failed)):
            if cond.is_true(after, ctype) and not cond.is_true(before, ctype):
                counter.inc(job.namespace, job.framework.name)

    def record_event(self, job: Job, etype: str, reason: str, message: str) -> None:
        self.event_on(job.resource, job.framework.kind, job_api_version(job.framework), etype, reason, message)

    def event_on(self, resource: dict, kind: str, api_version: str, etype: str, reason: str, message: str) -> None:
        """An event about ``resource`` (a job, also one the core cannot read: a TrainJob without its runtime)."""
        now = rfc3339(datetime.now(timezone.utc))
        metadata = resource["metadata"]
        name, namespace = metadata["name"], metadata.get("namespace") or "default"
        event = {"apiVersion": "v1", "kind": "Event",
                 "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
                 "involvedObject": {"apiVersion": api_version, "kind": kind, "name": name,
                                    "namespace": namespace, "uid": metadata.get("uid", ""),
                                    "resourceVersion": metadata.get("resourceVersion", "")},
                 "type": etype, "reason": reason, "message": message, "count": 1,
                 "firstTimestamp": now, "lastTimestamp": now, "source": {"component": COMPONENT},
                 "reportingComponent": COMPONENT, "reportingInstance": self.identity}
        try:
            self.client.create(EVENTS, event, namespace)
        except (ApiError, OSError) as error:  # an event is worth a log line, not a failed reconcile
            log.warning("event %s for %s/%s not recorded: %s", reason, namespace, name, error)
