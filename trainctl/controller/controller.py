"""The job controller: informers feed a work queue; workers run the shared reconcile core.

Level-triggered: a worker reads one job and its pods from the caches, asks the core
(:func:`trainctl.core.reconcile.reconcile`) what should be true, and makes it so. Names
are deterministic, so a create that races a restarted controller fails with 409
instead of making a duplicate, and expectations stop a lagging cache from causing one.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from datetime import datetime, timezone

from trainctl import API_GROUP
from trainctl.controller import pods as pod_objects
from trainctl.controller.expectations import Expectations
from trainctl.controller.gang import GangScheduler
from trainctl.controller.informer import Informer
from trainctl.controller.metrics import Metrics
from trainctl.controller.progress import ProgressWatcher
from trainctl.controller.queue import WorkQueue
from trainctl.core import conditions as cond
from trainctl.core.actions import CreateReplica, CreateService, DeleteJob, DeleteReplica, DeleteService, RecordEvent
from trainctl.core.network import MPI_KUBECTL_DELIVERY_IMAGE, PYTORCH_INIT_IMAGE, ClusterNetwork
from trainctl.core.reconcile import reconcile, rfc3339
from trainctl.frameworks import ALL
from trainctl.frameworks.base import LABEL_JOB_NAME
from trainctl.job import Job
from trainctl.kube import job_resource
from trainctl.kube.client import (
    CONFIGMAPS,
    EVENTS,
    PODS,
    PRIORITY_CLASSES,
    ROLE_BINDINGS,
    ROLES,
    SERVICE_ACCOUNTS,
    SERVICES,
    ApiError,
    Client,
    Resource,
)

log = logging.getLogger("trainctl.controller")

COMPONENT = "trainctl-controller"
#: pod status changes of one job are reconciled together when they come this close (several pods start
#: at once): one status write instead of one per pod, as Kubernetes' Job controller batches them
POD_UPDATE_BATCH_S = 0.5
JobKey = tuple[str, str, str]  # (kind, namespace, name)
INVALID = 422  # the API server's answer to an object it will never accept as it is
HPA_V2 = Resource("autoscaling", "v2", "horizontalpodautoscalers", kind="HorizontalPodAutoscaler")
HPA_V2BETA2 = Resource("autoscaling", "v2beta2", "horizontalpodautoscalers", kind="HorizontalPodAutoscaler")
OBJECT_RESOURCES = {"ServiceAccount": SERVICE_ACCOUNTS, "ConfigMap": CONFIGMAPS, "Role": ROLES,
                    "RoleBinding": ROLE_BINDINGS}
#: the fields of an object that the controller owns; the rest (e.g. secrets of a ServiceAccount) is left alone
OWNED_FIELDS = ("data", "rules", "subjects", "roleRef", "spec")


class Controller:
    def __init__(self, client: Client, *, frameworks=ALL, namespaces: list[str] | None = None,
                 gang: GangScheduler | None = None, cluster_domain: str | None = None,
                 pytorch_init_image: str = PYTORCH_INIT_IMAGE,
                 mpi_kubectl_delivery_image: str = MPI_KUBECTL_DELIVERY_IMAGE, metrics: Metrics | None = None,
                 identity: str | None = None) -> None:
        self.client, self.frameworks = client, list(frameworks)
        self.by_operator = {fw.operator_name: fw for fw in self.frameworks}
        self.network = ClusterNetwork(cluster_domain, pytorch_init_image=pytorch_init_image,
                                      mpi_kubectl_delivery_image=mpi_kubectl_delivery_image)
        self.metrics = metrics or Metrics()
        self.identity = identity or f"{os.uname().nodename}-{uuid.uuid4().hex[:6]}"
        self.queue = WorkQueue()
        self.expectations = Expectations()
        self.applied: dict[tuple, dict] = {}  # (job key, kind, name) -> the body last applied
        self.priorities: dict[str, int] = {}
        scopes = namespaces or [None]
        operators = ",".join(sorted(self.by_operator))
        children = f"{LABEL_JOB_NAME},training.kubeflow.org/operator-name in ({operators})"
        self.jobs = {fw.kind: [Informer(client, job_resource(fw), ns) for ns in scopes] for fw in self.frameworks}
        self.pods = [Informer(client, PODS, ns, children, pod_objects.job_index) for ns in scopes]
        self.services = [Informer(client, SERVICES, ns, children, pod_objects.job_index) for ns in scopes]
        self.gang = gang
        self.pod_groups = [Informer(client, gang.resource, ns) for ns in scopes] if gang and gang.resource else []
        self.hpa = HPA_V2
        self.progress = ProgressWatcher(self)  # started by the manager: its log reads are no reconcile's
        self.wire()

    # ---- wiring ----------------------------------------------------------------------------
    @property
    def informers(self) -> list[Informer]:
        every = [i for group in self.jobs.values() for i in group]
        return every + self.pods + self.services + self.pod_groups

    def wire(self) -> None:
        for kind, informers in self.jobs.items():
            for informer in informers:
                informer.handlers.append(lambda event, obj, kind=kind: self.on_job(kind, event, obj))
        for informer in self.pods:
            informer.handlers.append(lambda event, obj: self.on_child(PODS, event, obj))
        for informer in self.services:
            informer.handlers.append(lambda event, obj: self.on_child(SERVICES, event, obj))
        for informer in self.pod_groups:
            informer.handlers.append(self.on_pod_group)

    def on_job(self, kind: str, event: str, obj: dict) -> None:
        if event == "ADDED" and not (obj.get("status") or {}).get("conditions"):
            self.metrics.created.inc(obj["metadata"].get("namespace", ""), self.framework(kind).name)
        self.queue.add((kind, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]))

    def on_child(self, resource: Resource, event: str, obj: dict) -> None:
        index = pod_objects.job_index(obj)
        framework = self.by_operator.get(index[0]) if index else None
        if framework is None:
            return
        self.wake((framework.kind, index[1], index[2]), resource, event, obj,
                  delay=POD_UPDATE_BATCH_S if event == "MODIFIED" else 0)

    def on_pod_group(self, event: str, obj: dict) -> None:
        for reference in obj["metadata"].get("ownerReferences") or []:
            if reference.get("controller") and reference.get("kind") in self.jobs:
                key = (reference["kind"], obj["metadata"].get("namespace", ""), reference["name"])
                self.wake(key, self.gang.resource, event, obj)

    def wake(self, key: JobKey, resource: Resource, event: str, obj: dict, delay: float = 0) -> None:
        """A child of job ``key`` changed: meet the expectations it answers, and reconcile the job."""
        name = obj["metadata"]["name"]
        if event == "DELETED" or obj["metadata"].get("deletionTimestamp"):
            self.expectations.observe(key, "delete", resource.plural, name)
        if event != "DELETED":
            self.expectations.observe(key, "create", resource.plural, name)
        self.queue.add_after(key, delay)

    def framework(self, kind: str):
        return next(fw for fw in self.frameworks if fw.kind == kind)

    # ---- cache reads ------------------------------------------------------------------------
    @staticmethod
    def lookup(informers: list[Informer], namespace: str, name: str) -> dict | None:
        for informer in informers:
            if informer.namespace in (None, namespace):
                found = informer.get(namespace, name)
                if found is not None:
                    return found
        return None

    @staticmethod
    def children(informers: list[Informer], index: tuple) -> list[dict]:
        return [obj for informer in informers for obj in informer.by_index(index)]

    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers)

    # ---- one reconcile ----------------------------------------------------------------------------
    def reconcile(self, key: JobKey) -> None:
        kind, namespace, name = key
        resource = self.lookup(self.jobs[kind], namespace, name)
        framework = self.framework(kind)
        index = (framework.operator_name, namespace, name)
        pods = self.children(self.pods, index)
        services = self.children(self.services, index)
        live_uid = resource["metadata"].get("uid") if resource else None
        for kind_of, objects in ((PODS, pods), (SERVICES, services)):
            self.delete_orphans(key, kind_of, [o for o in objects if pod_objects.controller_uid(o) != live_uid])
        if resource is None or resource["metadata"].get("deletionTimestamp"):
            self.expectations.forget(key)
            self.applied = {memo: body for memo, body in self.applied.items() if memo[0] != key}
            return
        wait = self.expectations.wait_s(key)
        if wait:
            self.queue.add_after(key, wait)  # the informer event normally comes first
            return
        job = Job(resource)
        if job.managed_externally:
            return
        owned = [p for p in pods if pod_objects.controller_uid(p) == live_uid]
        finished = cond.finished((job.status or {}).get("conditions") or [])
        if self.gang and self.gang.resource and not self.sync_pod_group(key, job, finished):
            return
        self.apply_objects(key, job, framework.cluster_objects(job, owned), framework.pruned_kinds)
        observed = [o for o in (pod_objects.observe(job, p) for p in owned) if o is not None]
        existing = {s["metadata"]["name"] for s in services if pod_objects.controller_uid(s) == live_uid
                    and not s["metadata"].get("deletionTimestamp")}
        plan = reconcile(resource, observed, datetime.now(timezone.utc), self.network, existing,
                         last_activity=self.progress.activity.get(key))
        for action in plan.actions:
            self.execute(key, job, action)
        if plan.status != job.status:
            self.write_status(key, resource, plan.status)
        if plan.requeue_after is not None:
            self.queue.add_after(key, plan.requeue_after)

    def delete_orphans(self, key: JobKey, resource: Resource, orphans: list[dict]) -> None:
        """Children of a job that is gone (or of an older job of the same name): garbage-collect them.

        A cluster's garbage collector does the same through ownerReferences; doing it here
        too makes TTL and deletion work where none runs, and is harmless where one does.
        """
        for obj in orphans:
            if obj["metadata"].get("deletionTimestamp") or pod_objects.controller_uid(obj) is None:
                continue  # already going, or adopted by nobody: not ours to delete
            self.delete(key, resource, obj["metadata"]["name"], obj["metadata"]["namespace"],
                        obj["metadata"].get("uid"))

    # ---- actions -----------------------------------------------------------------------------------
    def execute(self, key: JobKey, job: Job, action) -> None:
        if isinstance(action, CreateReplica):
            self.create_pod(key, job, action)
        elif isinstance(action, CreateService):
            self.create(key, SERVICES, pod_objects.service_body(job, action), job)
        elif isinstance(action, DeleteReplica):
            self.delete(key, PODS, action.name, job.namespace)
            if action.reason == "Restart":
                self.metrics.restarted.inc(job.namespace, job.framework.name)
        elif isinstance(action, DeleteService):
            self.delete(key, SERVICES, action.name, job.namespace)
        elif isinstance(action, RecordEvent):
            self.record_event(job, action.type, action.reason, action.message)
        elif isinstance(action, DeleteJob):
            self.delete_job(key, job)

    def create_pod(self, key: JobKey, job: Job, action: CreateReplica) -> None:
        body = pod_objects.pod_body(job, action)
        job.framework.decorate_pod(job, action.rtype, body, self.network)
        if self.gang:
            warning = self.gang.decorate(job, action.rtype, body)
            if warning:
                self.record_event(job, "Warning", "SetPodTemplateSchedulerName", warning)
        try:
            self.create(key, PODS, body, job)
        except ApiError as error:
            self.metrics.pod_create_failures.inc(job.framework.kind)
            self.record_event(job, "Warning", "FailedCreatePod", f"Error creating pod {action.name}: {error.message}")
            raise

    def create(self, key: JobKey, resource: Resource, body: dict, job: Job) -> None:
        name = body["metadata"]["name"]
        self.expectations.expect(key, "create", resource.plural, name)
        try:
            self.client.create(resource, body, job.namespace)
        except ApiError as error:
            self.expectations.observe(key, "create", resource.plural, name)
            if error.status != 409:  # already exists: what we wanted
                raise

    def delete(self, key: JobKey, resource: Resource, name: str, namespace: str, uid: str | None = None) -> None:
        self.expectations.expect(key, "delete", resource.plural, name)
        try:
            self.client.delete(resource, name, namespace, uid=uid)
        except ApiError as error:
            self.expectations.observe(key, "delete", resource.plural, name)
            if error.status not in (404, 409):  # gone already, or a newer object of that name
                raise

    def delete_job(self, key: JobKey, job: Job) -> None:
        try:
            self.client.delete(job_resource(job.framework), job.name, job.namespace, propagation="Background",
                               uid=job.uid)
            self.metrics.deleted.inc(job.namespace, job.framework.name)
            log.info("deleted %s %s/%s: ttlSecondsAfterFinished expired", job.framework.kind, job.namespace, job.name)
        except ApiError as error:
            if error.status not in (404, 409):
                raise

    def write_status(self, key: JobKey, resource: dict, status: dict) -> None:
        body = {**resource, "status": status}
        updated = self.client.replace(job_resource(self.framework(key[0])), body, key[1], subresource="status")
        # the cache shows our own write at once, so the next pass does not act on the old status
        for informer in self.jobs[key[0]]:
            if informer.namespace in (None, key[1]):
                informer.apply("MODIFIED", updated)
        self.count_transitions(resource, status)

    def count_transitions(self, resource: dict, status: dict) -> None:
        before = (resource.get("status") or {}).get("conditions") or []
        after = status.get("conditions") or []
        namespace, framework = resource["metadata"].get("namespace", ""), self.framework(resource["kind"]).name
        if cond.is_true(after, "Succeeded") and not cond.is_true(before, "Succeeded"):
            self.metrics.successful.inc(namespace, framework)
        if cond.is_true(after, "Failed") and not cond.is_true(before, "Failed"):
            self.metrics.failed.inc(namespace, framework)

    def record_event(self, job: Job, etype: str, reason: str, message: str) -> None:
        now = rfc3339(datetime.now(timezone.utc))
        metadata = job.resource["metadata"]
        event = {"apiVersion": "v1", "kind": "Event",
                 "metadata": {"name": f"{job.name}.{uuid.uuid4().hex[:16]}", "namespace": job.namespace},
                 "involvedObject": {"apiVersion": f"{API_GROUP}/v1", "kind": job.framework.kind, "name": job.name,
                                    "namespace": job.namespace, "uid": job.uid,
                                    "resourceVersion": metadata.get("resourceVersion", "")},
                 "type": etype, "reason": reason, "message": message, "count": 1,
                 "firstTimestamp": now, "lastTimestamp": now, "source": {"component": COMPONENT},
                 "reportingComponent": COMPONENT, "reportingInstance": self.identity}
        try:
            self.client.create(EVENTS, event, job.namespace)
        except (ApiError, OSError) as error:  # an event is worth a log line, not a failed reconcile
            log.warning("event %s for %s/%s not recorded: %s", reason, job.namespace, job.name, error)

    # ---- objects besides pods and services -------------------------------------------------------------
    def apply_objects(self, key: JobKey, job: Job, desired: list[dict], pruned_kinds: tuple[str, ...]) -> None:
        """Create or update what the framework asks for; delete what it stopped asking for (pruned kinds)."""
        wanted = set()
        for obj in desired:
            wanted.add((key, obj["kind"], obj["metadata"]["name"]))
            self.apply(key, job, obj)
        for memo in [m for m in self.applied if m[0] == key and m[1] in pruned_kinds and m not in wanted]:
            kind, name = memo[1], memo[2]
            try:
                self.client.delete(self.object_resource(kind), name, job.namespace)
            except ApiError as error:
                if error.status != 404:
                    raise
            del self.applied[memo]

    def object_resource(self, kind: str) -> Resource:
        return self.hpa if kind == "HorizontalPodAutoscaler" else OBJECT_RESOURCES[kind]

    def apply(self, key: JobKey, job: Job, obj: dict) -> None:
        memo = (key, obj["kind"], obj["metadata"]["name"])
        if self.applied.get(memo) == obj:
            return  # applied already: the steady state sends nothing
        resource = self.object_resource(obj["kind"])
        body = {**obj, "apiVersion": resource.api_version,
                "metadata": {**obj["metadata"], "ownerReferences": [pod_objects.owner_reference(job)]}}
        try:
            self.client.create(resource, body, job.namespace)
        except ApiError as error:
            if error.status != 409:
                raise
            self.update_existing(job, resource, body)
        self.applied[memo] = obj

    def update_existing(self, job: Job, resource: Resource, body: dict) -> None:
        name = body["metadata"]["name"]
        current = self.client.get(resource, name, job.namespace)
        if pod_objects.controller_uid(current) != job.uid and not (resource is SERVICE_ACCOUNTS):
            message = (f'Resource "{name}" of {resource.kind} already exists and is not managed by '
                       f"{job.framework.kind}")
            self.record_event(job, "Warning", "ErrResourceExists", message)
            raise ApiError(409, "AlreadyExists", message)
        if all(current.get(f) == body.get(f) for f in OWNED_FIELDS if f in body):
            return
        merged = {**current, **{f: body[f] for f in OWNED_FIELDS if f in body}}
        self.client.replace(resource, merged, job.namespace)

    # ---- gang scheduling ------------------------------------------------------------------------------
    def sync_pod_group(self, key: JobKey, job: Job, finished: bool) -> bool:
        """Keep the job's PodGroup; False while Volcano has not admitted it (create no pods yet)."""
        existing = self.lookup(self.pod_groups, job.namespace, job.name)
        if finished or job.suspended:
            if existing is not None:
                self.delete(key, self.gang.resource, job.name, job.namespace)
            return True
        desired = self.gang.pod_group(job, self.priority_values(job), existing)
        desired["metadata"]["ownerReferences"] = [pod_objects.owner_reference(job)]
        if existing is None:
            self.create(key, self.gang.resource, desired, job)
        elif existing.get("spec") != desired["spec"]:
            self.client.replace(self.gang.resource, {**existing, "spec": desired["spec"]}, job.namespace)
        return self.gang.admitted(existing)

    def priority_values(self, job: Job) -> dict[str, int]:
        for rtype in job.replica_types:
            name = job.template(rtype)["spec"].get("priorityClassName")
            if name and name not in self.priorities:
                try:
                    self.priorities[name] = self.client.get(PRIORITY_CLASSES, name).get("value", 0)
                except ApiError:
                    self.priorities[name] = 0
        return self.priorities

    # ---- workers -----------------------------------------------------------------------------------
    def work(self, acting: threading.Event) -> None:
        """One worker: reconcile keys until the queue shuts down."""
        while True:
            key = self.queue.get()
            if key is None:
                return
            if not acting.is_set():  # a standby: the new leader requeues every job
                self.queue.done(key)
                continue
            started = time.monotonic()
            result = "success"
            try:
                self.reconcile(key)
                self.queue.forget(key)
            except ApiError as error:
                if error.status == INVALID:  # the API server rejected what the job's spec asks for
                    result = "invalid"
                    self.give_up(key, f"the API server rejected it: {error.message or error}")
                else:
                    result = "conflict" if error.status == 409 else "error"
                    delay = self.queue.retry(key)
                    log.log(logging.DEBUG if error.status == 409 else logging.WARNING,
                            "reconcile %s %s/%s: %s; retrying in %.2fs", *key, error, delay)
            except OSError as error:
                result = "error"
                delay = self.queue.retry(key)
                log.warning("reconcile %s %s/%s: %s; retrying in %.2fs", *key, error, delay)
            except Exception as error:  # not the API: something in the job that every pass would meet again
                result = "invalid"
                self.give_up(key, f"{type(error).__name__}: {error}")
            finally:
                self.queue.done(key)
                self.metrics.reconciles.inc(key[0], result)
                self.metrics.latency.observe(time.monotonic() - started, key[0])

    def give_up(self, key: JobKey, problem: str) -> None:
        """Fail a job the controller cannot reconcile, once, instead of retrying forever.

        The same spec meets the same problem on every pass, so a retry loop would only repeat a
        traceback nobody sees. Instead the job gets a Warning event and a Failed condition
        (reason ``<Kind>FailedValidation``, upstream's reason for a spec it rejects in reconcile),
        its active pods are stopped, and the key is dropped; the log has the traceback once.
        """
        kind, namespace, name = key
        resource = self.lookup(self.jobs[kind], namespace, name)
        conditions = ((resource or {}).get("status") or {}).get("conditions") or []
        if resource is None or cond.is_true(conditions, "Failed"):
            log.debug("reconcile %s %s/%s: %s (failed already)", *key, problem)
            self.queue.forget(key)
            return
        log.error("reconcile %s %s/%s: cannot reconcile the job, failing it: %s", *key, problem, exc_info=True)
        reason, message = f"{kind}FailedValidation", f"{kind} {name} cannot be reconciled: {problem}"
        try:
            self.stop_active_pods(key, resource)
            stamp = rfc3339(datetime.now(timezone.utc))
            status = {**(resource.get("status") or {}), "conditions": cond.set_condition(
                conditions, "Failed", "True", reason, message, stamp)}
            status.setdefault("completionTime", stamp)
            self.write_status(key, resource, status)
            self.queue.forget(key)
        except (ApiError, OSError) as error:
            log.warning("reconcile %s %s/%s: failing it: %s; retrying in %.2fs", *key, error, self.queue.retry(key))
            return
        self.record_event(Job(resource), "Warning", reason, message)

    def stop_active_pods(self, key: JobKey, resource: dict) -> None:
        """A failed job keeps no running replica (its finished pods stay for their logs)."""
        framework = self.framework(key[0])
        index = (framework.operator_name, key[1], key[2])
        for pod in self.children(self.pods, index):
            ours = pod_objects.controller_uid(pod) == resource["metadata"].get("uid")
            if ours and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                self.delete(key, PODS, pod["metadata"]["name"], key[1])

    def refresh_gauges(self) -> None:
        self.metrics.queue_depth.set(len(self.queue))
        self.metrics.api_requests.replace({(verb,): count for verb, count in self.client.requests.items()})
        counts: dict[tuple[str, str], float] = {}
        for kind, informers in self.jobs.items():
            for informer in informers:
                for job in informer.items():
                    conditions = (job.get("status") or {}).get("conditions") or []
                    state = next((c["type"] for c in reversed(conditions) if c.get("status") == "True"), "Pending")
                    counts[(kind, state)] = counts.get((kind, state), 0) + 1
        self.metrics.jobs.replace(counts)
