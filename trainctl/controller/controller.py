"""The job controller: informers feed a work queue; workers run the shared reconcile core.

Level-triggered: a worker reads one job and its pods from the caches, asks the core
(:func:`trainctl.core.reconcile.reconcile`) what should be true, and makes it so. This module
is the wiring and the worker loop; what the core asks is done by the executor
(trainctl/controller/executor.py: creates and deletes with expectations, events, status writes),
what a framework needs besides pods and services by :mod:`trainctl.controller.owned`, and a gang
scheduler's PodGroups by :mod:`trainctl.controller.gang`. Names are deterministic, so a create that
races a restarted controller fails with 409 instead of making a duplicate, and expectations stop a
lagging cache from causing one.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import threading
import time
import uuid
from datetime import datetime, timezone

from trainctl.controller import pods as pod_objects
from trainctl.controller.executor import TRAINJOBS, Executor, JobKey
from trainctl.controller.gang import Gangs, GangScheduler
from trainctl.controller.informer import Informer
from trainctl.controller.leases import NodeLeases
from trainctl.controller.metrics import Metrics
from trainctl.controller.owned import OwnedObjects
from trainctl.controller.progress import ProgressWatcher
from trainctl.controller.queue import WorkQueue
from trainctl.controller.records import RecordKeeper
from trainctl.controller.snapshots import RuntimeSnapshots
from trainctl.core import checkpoint_volume
from trainctl.core import conditions as cond
from trainctl.core.job import Job
from trainctl.core.nodes import suspect
from trainctl.core.restarts import annotations_of
from trainctl.core.trainer_crds import CLUSTER_RUNTIME, RUNTIME, TRAINJOB
from trainctl.core.trainjob import (
    DEFAULT_MANAGER,
    RUNTIME_NOT_FOUND,
    SNAPSHOT_ANNOTATION,
    TRAINJOB_OPERATOR,
    TrainerFramework,
    TrainJob,
    is_trainjob,
    with_runtime_snapshot,
)
from trainctl.errors import UserError
from trainctl.core.network import ClusterNetwork
from trainctl.core.reconcile import reconcile, rfc3339
from trainctl.frameworks import ALL
from trainctl.frameworks.base import LABEL_JOB_NAME, LABEL_OPERATOR
from trainctl import TRAINER_API_VERSION
from trainctl.frameworks import by_kind
from trainctl.kube import job_resource, trainer_resource
from trainctl.kube.client import NODES, PODS, SERVICES, ApiError, Client, Resource
from trainctl.kube.pods import PodStatus

log = logging.getLogger("trainctl.controller")

#: pod status changes of one job are reconciled together when they come this close (several pods start
#: at once): one status write instead of one per pod, as Kubernetes' Job controller batches them
POD_UPDATE_BATCH_S = 0.5
INVALID = 422  # the API server's answer to an object it will never accept as it is
RUNTIME_RETRY_S = 30  # how often a TrainJob whose runtime is missing looks for it again
SNAPSHOT_REPLACED = "RuntimeSnapshotReplaced"  # the event of a runtime-snapshot annotation not the controller's
RUNTIMES, CLUSTER_RUNTIMES = trainer_resource(RUNTIME), trainer_resource(CLUSTER_RUNTIME, namespaced=False)


class Controller:
    def __init__(self, client: Client, *, frameworks=ALL, namespaces: list[str] | None = None,
                 gang: GangScheduler | None = None, trainjob_gangs: dict[str, GangScheduler] | None = None,
                 cluster_domain: str | None = None,
                 helper_images: dict[str, str] | None = None, metrics: Metrics | None = None,
                 identity: str | None = None, keep_records: bool = True, trainjobs: bool = False) -> None:
        self.client, self.frameworks = client, list(frameworks)
        # the kind of job each operator name labels the children of; TrainJobs' with ``trainjobs``
        self.by_operator = {fw.operator_name: fw.kind for fw in self.frameworks}
        if trainjobs:
            self.by_operator[TRAINJOB_OPERATOR] = TRAINJOB
        network = ClusterNetwork(cluster_domain, helper_images=dict(helper_images or {}))
        self.metrics = metrics or Metrics()
        self.queue = WorkQueue()
        self.identity = identity or f"{os.uname().nodename}-{uuid.uuid4().hex[:6]}"  # events, the leader's Lease
        self.executor = Executor(client, network, self.metrics, self.identity,
                                 lambda job, rtype, pod: self.gangs.decorate(job, rtype, pod))
        self.owned = OwnedObjects(client, self.executor)
        self.snapshots = RuntimeSnapshots(client)  # the runtime each TrainJob runs on
        scopes = namespaces or [None]
        children = f"{LABEL_JOB_NAME},{LABEL_OPERATOR} in ({','.join(sorted(self.by_operator))})"
        self.jobs = {fw.kind: [Informer(client, job_resource(fw), ns) for ns in scopes] for fw in self.frameworks}
        if trainjobs:
            self.jobs[TRAINJOB] = [Informer(client, TRAINJOBS, ns) for ns in scopes]
        self.pods = [Informer(client, PODS, ns, children, pod_objects.job_index, pod_objects.cached_pod)
                     for ns in scopes]
        self.services = [Informer(client, SERVICES, ns, children, pod_objects.job_index, pod_objects.cached_service)
                         for ns in scopes]
        # the nodes' readiness (trainctl/core/nodes.py): a cluster-scoped cache of each Node's Ready condition alone
        self.nodes = Informer(client, NODES, None, transform=pod_objects.cached_node)
        self.node_states: dict[str, tuple[str, str | None]] = {}  # node -> what the core was last told of it
        # when each node's kubelet was last heard (trainctl/controller/leases.py): started by the manager, and never
        # waited for (an install without the permission to read Leases works as before)
        self.leases = NodeLeases(client, self.reconcile_jobs_on)
        # v1 jobs' gang scheduler (--gang-scheduler-name) and TrainJobs' (their runtime's podGroupPolicy)
        self.gangs = Gangs(gang, trainjob_gangs or {}, client, self.executor, scopes)
        self.progress = ProgressWatcher(self)  # started by the manager: its log reads are no reconcile's
        self.records = RecordKeeper(self, enabled=keep_records)  # likewise
        self.executor.may_delete = self.records.ready_to_delete
        self.wire()

    # ---- wiring ----------------------------------------------------------------------------
    @property
    def informers(self) -> list[Informer]:
        every = [i for group in self.jobs.values() for i in group]
        return every + self.pods + self.services + [self.nodes] + self.gangs.informers

    @property
    def hpa(self) -> Resource:
        """The HorizontalPodAutoscaler version the cluster serves (the manager sets it at start-up)."""
        return self.owned.hpa

    @hpa.setter
    def hpa(self, resource: Resource) -> None:
        self.owned.hpa = resource

    def wire(self) -> None:
        for kind, informers in self.jobs.items():
            for informer in informers:
                informer.handlers.append(lambda event, obj, kind=kind: self.on_job(kind, event, obj))
        for informer in self.pods:
            informer.handlers.append(lambda event, obj: self.on_child(PODS, event, obj))
            informer.handlers.append(self.records.on_pod)
        for informer in self.services:
            informer.handlers.append(lambda event, obj: self.on_child(SERVICES, event, obj))
        for informer in self.gangs.informers:
            informer.handlers.append(lambda event, obj, kind=informer.resource: self.on_pod_group(kind, event, obj))
        self.nodes.handlers.append(self.on_node)

    def on_job(self, kind: str, event: str, obj: dict) -> None:
        if event == "ADDED" and not cond.conditions_of(obj):
            self.metrics.created.inc(obj["metadata"].get("namespace", ""), self.kind_name(kind))
        self.queue.add((kind, obj["metadata"].get("namespace", ""), obj["metadata"]["name"]))

    def on_child(self, resource: Resource, event: str, obj: dict) -> None:
        index = pod_objects.job_index(obj)
        kind = self.by_operator.get(index[0]) if index else None
        if kind is None:
            return
        self.wake((kind, index[1], index[2]), resource, event, obj,
                  delay=POD_UPDATE_BATCH_S if event == "MODIFIED" else 0)

    def on_node(self, event: str, node: dict) -> None:
        """A node's readiness changed, or the node is gone: reconcile every job with a pod bound to it (the core
        decides whether its replicas there are lost now, or when they would be). A heartbeat changes nothing."""
        name = node["metadata"]["name"]
        state = pod_objects.node_down(None if event == "DELETED" else node)
        if self.node_states.get(name, ("", None)) == state:
            return
        if event == "DELETED":
            self.node_states.pop(name, None)
        else:
            self.node_states[name] = state
        self.reconcile_jobs_on(name)

    def reconcile_jobs_on(self, node: str) -> None:
        """Reconcile every job with a pod bound to ``node``."""
        for informer in self.pods:
            for pod in informer.items():
                index = pod_objects.job_index(pod) if (pod.get("spec") or {}).get("nodeName") == node else None
                if index and (kind := self.by_operator.get(index[0])):
                    self.queue.add((kind, index[1], index[2]))

    def node_of(self, name: str) -> dict | None:
        """The cached Node of that name (None: there is none); one that is Ready while the nodes are not listed yet."""
        if not self.nodes.synced.is_set():
            return {"metadata": {"name": name}, "status": {"conditions": []}}
        return self.nodes.get("", name)

    def node_down(self, pod: dict) -> str:
        """'' while the pod's node is Ready (or it is bound to none); else NotReady or gone (trainctl/core/nodes.py):
        its kubelet does not answer, so its log is not asked for."""
        node = (pod.get("spec") or {}).get("nodeName")
        return pod_objects.node_down(self.node_of(node))[0] if node else ""

    def unreachable(self, pod: dict) -> bool:
        """Whether the pod's node is NotReady, gone, or its kubelet silent: a read of its log would wait for nothing."""
        node = (pod.get("spec") or {}).get("nodeName")
        return bool(self.node_down(pod)) or (bool(node) and node in self.leases.silent)

    def on_pod_group(self, resource: Resource, event: str, obj: dict) -> None:
        for reference in obj["metadata"].get("ownerReferences") or []:
            if reference.get("controller") and reference.get("kind") in self.jobs:
                key = (reference["kind"], obj["metadata"].get("namespace", ""), reference["name"])
                self.wake(key, resource, event, obj)

    def wake(self, key: JobKey, resource: Resource, event: str, obj: dict, delay: float = 0) -> None:
        """A child of job ``key`` changed: meet the expectations it answers, and reconcile the job."""
        name, expectations = obj["metadata"]["name"], self.executor.expectations
        if event == "DELETED" or obj["metadata"].get("deletionTimestamp"):
            expectations.observe(key, "delete", resource.plural, name)
        if event != "DELETED":
            expectations.observe(key, "create", resource.plural, name)
        self.queue.add_after(key, delay)

    @staticmethod
    def kind_name(kind: str) -> str:
        """The kind's short name, as metrics label it (pytorch, trainjob)."""
        return TrainerFramework.name if kind == TRAINJOB else by_kind(kind).name

    def operator(self, kind: str) -> str:
        """The operator name that labels the children of a job of ``kind``."""
        return next(operator for operator, labelled in self.by_operator.items() if labelled == kind)

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
        index = (self.operator(kind), namespace, name)
        pods, services = self.children(self.pods, index), self.children(self.services, index)
        live_uid = resource["metadata"].get("uid") if resource else None
        for kind_of, objects in ((PODS, pods), (SERVICES, services)):
            self.delete_orphans(key, kind_of, [o for o in objects if pod_objects.controller_uid(o) != live_uid])
        if resource is None or resource["metadata"].get("deletionTimestamp"):
            self.executor.expectations.forget(key)
            self.owned.forget(key)
            self.records.forget(key)
            self.snapshots.forget(key)
            return
        wait = self.executor.expectations.wait_s(key)
        if wait:
            self.queue.add_after(key, wait)  # the informer event normally comes first
            return
        if is_trainjob(resource):
            resource = self.with_runtime(key, resource)
            if resource is None:
                return
        job = Job(resource)
        if not job.managed_externally:
            self.sync(key, job, [p for p in pods if pod_objects.controller_uid(p) == live_uid],
                      {s["metadata"]["name"] for s in services if pod_objects.controller_uid(s) == live_uid
                       and not s["metadata"].get("deletionTimestamp")})

    # ---- a TrainJob's runtime -------------------------------------------------------------------------
    def with_runtime(self, key: JobKey, resource: dict) -> dict | None:
        """The TrainJob with the runtime it runs on in its annotation: the one its runtimeRef named at the first
        reconcile (upstream snapshots it then too: a runtime edited later changes no job), kept in a ConfigMap of the
        controller's (trainctl/controller/snapshots.py); an annotation written by anyone else is put back, with a
        Warning event. Returns None where it cannot run (see :meth:`snapshot`)."""
        spec = resource.get("spec") or {}
        if spec.get("managedBy") not in (None, DEFAULT_MANAGER):
            return None  # Kueue's MultiKueue runs it elsewhere
        kept = self.snapshots.kept(key, resource) or self.snapshot(key, resource)
        given = annotations_of(resource).get(SNAPSHOT_ANNOTATION)
        if kept is None:
            return None
        if given == kept:
            return resource
        if given is not None:
            ref = TrainJob(resource).runtime_ref
            self.executor.event_on(resource, TRAINJOB, TRAINER_API_VERSION, "Warning", SNAPSHOT_REPLACED,
                                   f"the {SNAPSHOT_ANNOTATION} annotation is the controller's: the one written was "
                                   f"ignored, the TrainJob runs on {ref['kind']} {ref['name']!r} as first found")
        status = cond.status_of(resource)  # a Failed condition for a runtime that was missing goes (upstream's too)
        status["conditions"] = [c for c in status.get("conditions") or []
                                if (c.get("type"), c.get("reason")) != ("Failed", RUNTIME_NOT_FOUND)]
        annotations = {SNAPSHOT_ANNOTATION: kept,
                       cond.STATUS_ANNOTATION: json.dumps(status, sort_keys=True, separators=(",", ":"))}
        patch = {"metadata": {"annotations": annotations, "resourceVersion": resource["metadata"].get("resourceVersion")}}
        updated = self.client.patch(TRAINJOBS, key[2], patch, key[1])
        self.cache(key, updated)
        return updated

    def snapshot(self, key: JobKey, resource: dict) -> str | None:
        """Keep the runtime the TrainJob names, as the cluster holds it now; its JSON, or None where the TrainJob
        cannot run: no such runtime (Failed, upstream's reason, until the runtime appears: the job is looked at again
        every RUNTIME_RETRY_S), or the TrainJob cannot run on it (Failed for good)."""
        try:
            ref = TrainJob(resource).runtime_ref
            runtime = self.runtime(ref, key[1])
            if runtime is None:
                where = f" in namespace {key[1]}" if ref["kind"] == RUNTIME else ""
                self.fail_trainjob(key, resource, RUNTIME_NOT_FOUND,
                                   f"{ref['kind']} {ref['name']!r} not found{where}: create it (trainctl runtimes "
                                   "install gives trainctl's defaults) or fix spec.runtimeRef")
                self.queue.add_after(key, RUNTIME_RETRY_S)
                return None
            snapshotted = copy.deepcopy(resource)
            with_runtime_snapshot(snapshotted, runtime)  # checked: the TrainJob must plan on it
        except UserError as problem:
            self.fail_trainjob(key, resource, f"{TRAINJOB}FailedValidation", problem.message)
            return None
        kept = annotations_of(snapshotted)[SNAPSHOT_ANNOTATION]
        self.snapshots.keep(key, resource, kept)
        return kept

    def runtime(self, ref: dict, namespace: str) -> dict | None:
        """The runtime ``ref`` names, as the TrainJob keeps it (its name, labels and spec); None if there is none."""
        try:
            found = self.client.get(RUNTIMES if ref["kind"] == RUNTIME else CLUSTER_RUNTIMES, ref["name"],
                                    namespace if ref["kind"] == RUNTIME else None)
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        metadata = {"name": found["metadata"]["name"], **({"labels": found["metadata"]["labels"]}
                                                           if found["metadata"].get("labels") else {})}
        return {"apiVersion": TRAINER_API_VERSION, "kind": ref["kind"], "metadata": metadata,
                "spec": found.get("spec") or {}}

    def fail_trainjob(self, key: JobKey, resource: dict, reason: str, message: str) -> None:
        """A TrainJob the core cannot read (no runtime to run it on): Failed, with a Warning event the first time."""
        conditions = cond.conditions_of(resource)
        updated = cond.set_condition(conditions, "Failed", "True", reason, message, rfc3339(datetime.now(timezone.utc)))
        if updated is conditions:
            return  # said already
        self.executor.write_trainjob_status(resource, {**cond.status_of(resource), "conditions": updated}, {},
                                            lambda written: self.cache(key, written))
        self.executor.event_on(resource, TRAINJOB, TRAINER_API_VERSION, "Warning", reason, message)

    def sync(self, key: JobKey, job: Job, pods: list[dict], services: set[str]) -> None:
        """One pass over a job of ours: its PodGroup, its framework's objects, then what the core says of its pods
        (``pods``, ``services``: the ones it owns)."""
        try:
            pod_groups = self.gangs.pod_groups_of(job)
        except UserError as problem:  # a TrainJob's runtime asks for a gang scheduler this controller cannot run
            self.fail_trainjob(key, job.resource, f"{TRAINJOB}FailedValidation", problem.message)
            return
        if pod_groups and not pod_groups.sync(key, job, self.lookup(pod_groups.informers, job.namespace, job.name)):
            return
        claim = checkpoint_volume.claim(job.resource)  # the job's checkpoint storage, when it owns one
        self.owned.sync(key, job, [*job.framework.cluster_objects(job, pods), *([claim] if claim else [])],
                        job.framework.pruned_kinds)
        observed = [o for o in (pod_objects.observe(job, p, self.node_of, self.leases.heard_at) for p in pods)
                    if o is not None]
        now = datetime.now(timezone.utc)
        evidence = self.progress.evidence(key, job) if any(suspect(o, now) for o in observed) else None
        plan = reconcile(job.resource, observed, now, self.executor.network, services,
                         last_activity=self.progress.activity.get(key), evidence=evidence)
        if plan.annotations is not None:  # the restart record, before the pods it decides about are touched
            job = self.executor.write_annotations(job, plan.annotations, lambda updated: self.cache(key, updated))
        for action in plan.actions:
            self.executor.execute(key, job, action)
        if plan.status != job.status:
            self.write_status(key, job, plan.status)
        if plan.requeue_after is not None:
            self.queue.add_after(key, plan.requeue_after)

    def write_status(self, key: JobKey, job: Job, status: dict) -> None:
        self.executor.write_status(job, status, lambda updated: self.cache(key, updated))

    def cache(self, key: JobKey, updated: dict) -> None:
        """Show the job as just written in the informer's cache, so the next pass does not act on the old one."""
        for informer in self.jobs[key[0]]:
            if informer.namespace in (None, key[1]):
                informer.apply("MODIFIED", updated)

    def delete_orphans(self, key: JobKey, resource: Resource, orphans: list[dict]) -> None:
        """Children of a job that is gone (or of an older job of the same name): garbage-collect them.

        A cluster's garbage collector does the same through ownerReferences; doing it here
        too makes TTL and deletion work where none runs, and is harmless where one does.
        """
        for obj in orphans:
            if obj["metadata"].get("deletionTimestamp") or pod_objects.controller_uid(obj) is None:
                continue  # already going, or adopted by nobody: not ours to delete
            self.executor.delete(key, resource, obj["metadata"]["name"], obj["metadata"]["namespace"],
                                 obj["metadata"].get("uid"))

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
        if resource is None or cond.reached(resource, "Failed"):
            log.debug("reconcile %s %s/%s: %s (failed already)", *key, problem)
            self.queue.forget(key)
            return
        log.error("reconcile %s %s/%s: cannot reconcile the job, failing it: %s", *key, problem, exc_info=True)
        reason, message = f"{kind}FailedValidation", f"{kind} {name} cannot be reconciled: {problem}"
        job = Job(resource)
        try:
            self.stop_active_pods(key, resource)
            stamp = rfc3339(datetime.now(timezone.utc))
            status = {**cond.status_of(resource), "conditions": cond.set_condition(
                cond.conditions_of(resource), "Failed", "True", reason, message, stamp)}
            status.setdefault("completionTime", stamp)
            self.write_status(key, job, status)
            self.queue.forget(key)
        except (ApiError, OSError) as error:
            log.warning("reconcile %s %s/%s: failing it: %s; retrying in %.2fs", *key, error, self.queue.retry(key))
            return
        self.executor.record_event(job, "Warning", reason, message)

    def stop_active_pods(self, key: JobKey, resource: dict) -> None:
        """A failed job keeps no running replica (its finished pods stay for their logs)."""
        index = (self.operator(key[0]), key[1], key[2])
        for pod in self.children(self.pods, index):
            ours = pod_objects.controller_uid(pod) == resource["metadata"].get("uid")
            if ours and not PodStatus.of(pod).finished:
                self.records.ready_to_delete(key, Job(resource), pod["metadata"]["name"])  # its log is open first
                self.executor.delete(key, PODS, pod["metadata"]["name"], key[1])

    def refresh_gauges(self) -> None:
        self.metrics.queue_depth.set(len(self.queue))
        self.metrics.api_requests.replace({(verb,): count for verb, count in self.client.requests.items()})
        self.metrics.api_throttled.set(self.client.limiter.waited_s if self.client.limiter else 0.0)
        counts: dict[tuple[str, str], float] = {}
        for kind, informers in self.jobs.items():
            for informer in informers:
                for job in informer.items():
                    state = cond.state_of(job)
                    counts[(kind, state)] = counts.get((kind, state), 0) + 1
        self.metrics.jobs.replace(counts)
