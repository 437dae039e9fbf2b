"""The Kubernetes implementation of :class:`trainctl.backends.base.Backend`.

It speaks REST through :mod:`trainctl.kube.client` (plain dicts, no 1.7 s import of the
official client), so ``trainctl list`` and ``status`` answer in about 0.15 s (docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from trainctl import API_GROUP
from trainctl.backends.base import (REPORT_TAIL_LINES, Backend, JobDetails, LogChunk, ReplicaReports, ReplicaRow,
                                    lines_of, pick_replica, reports_in)
from trainctl.backends.kube import logs as pod_logs
from trainctl.backends.kube.resources import collection_of
from trainctl.core import conditions as cond
from trainctl.core.job import Job
from trainctl.core.trainer_crds import TRAINJOB
from trainctl.core.trainjob import SNAPSHOT_ANNOTATION, TrainJob, is_trainjob
from trainctl.errors import NotFound, UserError, setting
from trainctl.frameworks import ALL, by_kind
from trainctl.frameworks.base import LABEL_JOB_NAME, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE
from trainctl.kube import selectors
from trainctl.kube import client as kube
from trainctl.kube import job_resource, trainer_resource
from trainctl.kube.errors import api_errors
from trainctl.kube.pods import PodStatus, failed_init

if TYPE_CHECKING:
    from trainctl.code.snapshot import Snapshot

POLL_S = 0.5
VOLCANO_QUEUES = kube.Resource("scheduling.volcano.sh", "v1beta1", "queues", namespaced=False, kind="Queue")
# Kueue's record of a queued job: found by the job's uid, which Kueue puts in a label
KUEUE_WORKLOADS = kube.Resource("kueue.x-k8s.io", "v1beta1", "workloads", kind="Workload")
KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
RECENT_EVENTS = 20
# every collection of jobs: the kubeflow.org/v1 kinds' (the first, where most jobs are), then Trainer v2's TrainJobs
# (as trainctl's controller runs them: trainctl's status in their annotation)
JOB_COLLECTIONS = [*(job_resource(framework) for framework in ALL), trainer_resource(TRAINJOB)]


class KubeBackend(Backend):
    def __init__(self, *, context: str | None = None, kubeconfig: str | None = None) -> None:
        self.client = kube.connect(context, kubeconfig)
        self.description = f"kubernetes (context {self.client.config.context})"

    def default_namespace(self) -> str:
        return self.client.config.namespace

    def errors(self, what: str):
        return api_errors(what, self.client)

    # ---- create ------------------------------------------------------------------------
    def create(self, resource: dict, replace: bool = False, preflight: bool = True,
               snapshot: Snapshot | None = None, dry_run: bool = False) -> dict:
        kind, collection = resource["kind"].lower(), collection_of(resource["kind"])
        namespace, name = resource["metadata"]["namespace"], resource["metadata"]["name"]
        if preflight:
            self.preflight(resource)
        exists = self._exists(collection, namespace, name)
        if exists and not replace:
            raise UserError(f'{kind} "{name}" already exists in namespace "{namespace}": '
                            f"delete it first, pick another name, or use {setting('replace')}")
        if dry_run:  # the server's own validation (schema, admission), nothing stored
            if not exists:
                with self.errors(f"check {kind} {name} in namespace {namespace}"):
                    self.client.create(collection, resource, namespace, dry_run=True)
            return resource
        if exists:
            self.delete(name, namespace, resource["kind"])
        if snapshot is None:
            with self.errors(f"create {kind} {name} in namespace {namespace}"):
                return self.client.create(collection, resource, namespace)
        return self.create_with_code(collection, resource, snapshot)

    def create_with_code(self, collection: kube.Resource, resource: dict, snapshot: Snapshot) -> dict:
        """The job and its snapshot's ConfigMaps, all or nothing (see trainctl.backends.kube.code)."""
        from trainctl.backends.kube import code

        namespace, name, kind = resource["metadata"]["namespace"], resource["metadata"]["name"], collection.kind.lower()
        created, stored = [], None
        try:
            with self.errors(f"upload the code snapshot of {name} to namespace {namespace} (ConfigMaps)"):
                created = code.upload(self.client, snapshot, namespace)
            with self.errors(f"create {kind} {name} in namespace {namespace}"):
                stored = self.client.create(collection, resource, namespace)
            with self.errors(f"make {kind} {name} an owner of its code snapshot's ConfigMaps"):
                code.own(self.client, snapshot, namespace, stored)
            return stored
        except BaseException:
            # the first failure is the one to report; what cannot be undone then stays, as it would anyway
            with contextlib.suppress(UserError), self.errors(f"undo the submit of {name}"):
                if stored is not None:
                    self.delete_if_present(collection, name, namespace, uid=stored["metadata"]["uid"])
                code.undo(self.client, created, namespace)
            raise

    def _exists(self, collection: kube.Resource, namespace: str, name: str) -> bool:
        try:
            self.client.get(collection, name, namespace)
            return True
        except kube.ApiError:
            return False

    def preflight(self, resource: dict) -> None:
        """Fail fast with the fix instead of leaving a job that can never run."""
        namespace = resource["metadata"]["namespace"]
        crd, *needed = trainjob_checks(resource) if is_trainjob(resource) else v1_checks(resource)
        missing_namespace = (f'namespace "{namespace}" does not exist: create it (kubectl create namespace '
                             f"{namespace}) or pick -n")
        checks = [crd, (kube.NAMESPACES, namespace, None, missing_namespace), *needed]
        queue = None if is_trainjob(resource) else (Job(resource).run_policy.get("schedulingPolicy") or {}).get("queue")
        with self.errors("preflight"):
            if queue and self._volcano_installed():
                checks.append((VOLCANO_QUEUES, queue, None,
                               f'Volcano queue "{queue}" does not exist: create it or pick another --queue'))
            for kind_of, name, in_namespace, problem in checks:
                try:
                    self.client.get(kind_of, name, in_namespace)
                except kube.ApiError as error:
                    if error.status == 404:
                        raise UserError(problem) from None
                    if error.status != 403:  # a CLI user may not be allowed to read CRDs: let create decide
                        raise

    def _volcano_installed(self) -> bool:
        try:
            self.client.get(kube.CRDS, f"{VOLCANO_QUEUES.plural}.{VOLCANO_QUEUES.group}")
            return True
        except kube.ApiError:
            return False

    # ---- read ------------------------------------------------------------------------------
    def get(self, name: str, namespace: str, kind: str | None = None) -> JobDetails:
        resource, listed = self.find_with(name, namespace, kind, [
            (kube.PODS, pods_query(name)),
            (kube.EVENTS, {"fieldSelector": f"involvedObject.name={name}"})])
        with self.errors(f"read pods of {name}"):
            pods, events = (answered(answer)["items"] for answer in listed)
        job = cluster_job(resource)
        order = job.replica_types
        kept = self.kept_runs(job, pods)
        rows = [replica_row(pod, order) for pod in pods] + podless_rows(job, pods, kept)
        rows.sort(key=lambda r: (order.index(r.replica_type) if r.replica_type in order else len(order), r.index or 0))
        recent = sorted(events, key=event_time)[-RECENT_EVENTS:]
        return JobDetails(resource=resource, replicas=rows, events=[
            {"type": e.get("type"), "reason": e.get("reason"), "message": e.get("message"), "time": event_time(e)}
            for e in recent], pods=by_name(listed[0]), kept=kept)

    def resource(self, name: str, namespace: str, kind: str | None = None) -> dict:
        """The job alone: one GET, where :meth:`get` also lists its pods and events."""
        return self.find(name, namespace, kind)

    def kept_runs(self, job: Job, pods: list[dict]) -> dict[str, tuple]:
        """The runs kept of the job's replicas, by replica id, when some replica has no pod (one metadata-only
        list of its records: trainctl.backends.kube.records); {} when every replica has one."""
        present = {pod["metadata"]["name"] for pod in pods}
        if all(job.pod_name(t, i) in present for t in job.replica_types for i in range(job.replicas(t))):
            return {}
        if not ever_ran(job.resource):
            return {}  # its pods are still to come: no run of it has ended, so none was kept
        from trainctl.backends.kube import records  # only now: reading pods that exist loads none of it

        return records.listed(self.client, job.namespace, job.name, job.uid)

    def kueue_workload(self, resource: dict) -> dict | None:
        metadata = resource["metadata"]
        try:
            found = self.client.list(KUEUE_WORKLOADS, metadata.get("namespace"),
                                     selector=f"{KUEUE_JOB_UID_LABEL}={metadata.get('uid')}")["items"]
        except (kube.ApiError, OSError):  # Kueue not installed (404), or not ours to read (403)
            return None
        return found[0] if found else None

    def find(self, name: str, namespace: str, kind: str | None = None) -> dict:
        """The job named ``name`` of the given kind, or of whichever kind has it."""
        return self.find_with(name, namespace, kind, [])[0]

    def find_with(self, name: str, namespace: str, kind: str | None,
                  lists: list[tuple[kube.Resource, dict]]) -> tuple[dict, list[dict | kube.ApiError]]:
        """:meth:`find`, and the answer (or ApiError) of each (resource, query) list of the namespace, asked for in
        the same round trip as the job's GET (of its kind, or of the first kind, where most jobs are: the others'
        GETs follow on a 404)."""
        with self.errors(f"read job {name}"):
            first, *listed = self.client.get_each(
                [("get", (collection_of(kind) if kind else JOB_COLLECTIONS[0]).path(namespace, name), None)]
                + [("list", resource.path(namespace), query) for resource, query in lists])
            return self._found(name, namespace, kind, first), listed

    def _found(self, name: str, namespace: str, kind: str | None, first: dict | kube.ApiError) -> dict:
        """The job: ``first``, the answer of the GET of its kind (or of the first kind), or, on its 404, of the next
        kinds' GETs."""
        if not (isinstance(first, kube.ApiError) and first.status == 404):
            return answered(first)
        for resource in [] if kind else JOB_COLLECTIONS[1:]:
            try:
                return self.client.get(resource, name, namespace)
            except kube.ApiError as error:
                if error.status != 404:
                    raise
        raise NotFound.job(name, namespace, "kubernetes", self.namespaces_with(name, kind))

    def namespaces_with(self, name: str, kind: str | None) -> list[str]:
        """The namespaces that hold a job ``name``, as far as this user may list jobs across namespaces."""
        found = []
        for resource in [collection_of(kind)] if kind else JOB_COLLECTIONS:
            try:
                items = self.client.list(resource, None, field_selector=f"metadata.name={name}")
            except (kube.ApiError, OSError):  # listing every namespace may well be forbidden: no hint then
                return found
            found += [item["metadata"].get("namespace", "") for item in items.get("items") or []]
        return found

    def list(self, namespace: str | None, selector: str | None = None) -> list[dict]:
        label_selector = selectors.parse(selector).text() or None  # a bad one fails here, as locally
        jobs = []
        with self.errors("list jobs"):  # the six kinds' lists and the TrainJobs' in one round trip
            query = {"labelSelector": label_selector} if label_selector else {}
            for answer in self.client.list_each([(resource, query) for resource in JOB_COLLECTIONS], namespace):
                if isinstance(answer, kube.ApiError) and answer.status != 404:
                    raise answer  # 404: that CRD is not installed, so no jobs of that kind
                jobs += [] if isinstance(answer, kube.ApiError) else answer["items"]
        return sorted(jobs, key=lambda j: (j["metadata"].get("namespace", ""), j["metadata"]["name"]))

    def log_chunks(self, name: str, namespace: str, replica: str | None = None, follow: bool = False,
                   tail: int | None = None, since_seconds: int | None = None, previous: bool = False,
                   kind: str | None = None, timestamps: bool = False) -> Iterator[LogChunk]:
        resource, (listed,) = self.find_with(name, namespace, kind, [(kube.PODS, pods_query(name))])
        job = Job(resource)
        replicas = {job.replica_id(t, i): (job.pod_name(t, i), self.container_of(job, t)) for t in job.replica_types
                    for i in range(job.replicas(t))}
        if replica is not None:
            picked = pick_replica(replica, name, list(replicas))
            replicas = {picked: replicas[picked]}
        if not follow or self.job_ended(job):  # a finished job's logs are merged in time order even with -f
            return self.merged_logs(job, replicas, by_name(listed), tail=tail, since_seconds=since_seconds,
                                    previous=previous, timestamps=timestamps)

        def source(replica_id: str, pod: str, container: str):
            def run(emit):
                if self.wait_for_pod(job, pod):
                    pod_logs.stream_pod(self.client, namespace, pod, container, replica_id, tail=tail,
                                        since_seconds=since_seconds, timestamps=timestamps, emit=emit)
            return run

        return pod_logs.follow_all([source(replica_id, *pod) for replica_id, pod in replicas.items()],
                                   lambda: self.job_ended(job))

    def merged_logs(self, job: Job, replicas: dict[str, tuple[str, str]], pods: dict[str, dict] | None = None,
                    **read) -> Iterator[LogChunk]:
        """The replicas' (id: (pod, container)) logs as they stand, merged in time order (``pods``: by name, when
        just listed)."""
        pods = self.pods_by_name(job.name, job.namespace) if pods is None else pods
        return pod_logs.merged([self.finished_log(job, pod, container, replica_id, pods, **read)
                                for replica_id, (pod, container) in replicas.items()])

    def reports(self, name: str, namespace: str, whole: bool = False,
                details: JobDetails | None = None) -> dict[str, ReplicaReports]:
        """Each replica's reports from its pod's log, or, its pod gone, every report its record kept. With
        ``details`` (:meth:`get`'s), neither the job nor its pods nor its records' list is read again."""
        job = Job(details.resource if details is not None else self.find(name, namespace))
        known = details is not None and details.pods is not None
        pods = details.pods if known else self.pods_by_name(name, namespace)
        kept = details.kept if known else None  # None: whether a replica has a record is learnt by reading it
        live, found = {}, {}
        for rtype in job.replica_types:
            for index in range(job.replicas(rtype)):
                pod, replica = job.pod_name(rtype, index), job.replica_id(rtype, index)
                gone = pods is not None and pod not in pods and ever_ran(job.resource)
                if gone and kept is not None and replica not in kept:
                    found[replica] = ReplicaReports(replica, [])  # no pod, no record: nothing to read
                    continue
                record = self.kept_record(job, pod, replica) if gone else None
                if record is not None:
                    found[replica] = ReplicaReports(replica, record.report_lines(), record.last_output)
                else:
                    live[replica] = (pod, self.container_of(job, rtype))
        lines = lines_of(self.merged_logs(job, live, pods, tail=None if whole else REPORT_TAIL_LINES,
                                          since_seconds=None, previous=False, timestamps=False)) if live else iter(())
        return {**reports_in(lines), **found}

    def kept_record(self, job: Job, pod: str, replica: str):
        """The record kept of a replica whose pod is gone (None: none kept)."""
        from trainctl.backends.kube import records

        return records.read(self.client, job.namespace, pod, job.uid, replica)

    def pods_by_name(self, name: str, namespace: str) -> dict[str, dict] | None:
        """Each pod of the job by name, in one request (None when they cannot be read: the logs themselves then
        say why)."""
        try:
            return by_name(self.client.request("GET", kube.PODS.path(namespace), query=pods_query(name), verb="list"))
        except (kube.ApiError, OSError):
            return None

    def finished_log(self, job: Job, pod: str, container: str, replica_id: str, pods: dict[str, dict] | None, *,
                     tail: int | None, since_seconds: int | None, previous: bool,
                     timestamps: bool) -> Iterator[LogChunk]:
        """One replica's log as it stands. Its pod gone, or its log unreadable, the run trainctl's controller kept
        (trainctl.backends.kube.records), after a line that says so. A pod held back by a failed init container
        gives that container's log instead, after a line that says so (else only "(no logs: ...)")."""
        from trainctl.backends.kube.kept import Kept

        found = pods.get(pod) if pods is not None else None
        kept = Kept(self.client, job, pod, replica_id, found, container, previous,
                            {"tail": tail, "since_seconds": since_seconds, "keep_stamps": timestamps})
        if pods is not None and found is None:  # the pod is gone, or not made yet: its log is not asked for
            yield from kept.chunks() if ever_ran(job.resource) and kept.run() is not None else [
                LogChunk(replica_id, pod_logs.no_logs(f'pods "{pod}" not found'), 0.0)]
            return
        failed = None if previous else failed_init((found or {}).get("status"))
        if failed is not None:
            container, previous, code = failed
            yield LogChunk(replica_id, f"(init container {container} exited {code}, so the replica never started; "
                                       "its log:)\n".encode(), 0.0)  # before its lines
        yield from kept.or_instead(pod_logs.stamped_chunks(self.client, job.namespace, pod, pod_logs.log_query(
            container, follow=False, timestamps=True, tail=tail, since_seconds=since_seconds, previous=previous),
            replica_id, timestamps), when=found is not None and failed is None)

    @staticmethod
    def container_of(job: Job, rtype: str) -> str:
        """The container whose log is the replica's: the framework's (``pytorch``, ``tensorflow``, ...)."""
        main = job.main_container(job.template(rtype)["spec"]["containers"]) or {}
        return main.get("name", job.framework.container)

    def job_ended(self, job: Job) -> bool:
        """Succeeded, Failed or gone."""
        try:
            resource = self.find(job.name, job.namespace, job.framework.kind)
        except UserError:
            return True
        return cond.has_finished(resource)

    def wait_for_pod(self, job: Job, pod: str) -> bool:
        """Until the operator created the pod; False if the job ended or went away first."""
        while True:
            if pod_logs.pod_status(self.client, job.namespace, pod) is not None:
                return True
            if self.job_ended(job):
                return False
            time.sleep(POLL_S)

    # ---- change ---------------------------------------------------------------------------------
    def delete(self, name: str, namespace: str, kind: str | None = None) -> None:
        """Delete the job, then its pods and services right away.

        Foreground propagation would wait for the cluster's garbage collector; deleting the
        children explicitly (after the job, so no operator recreates them) needs no collector
        and leaves nothing behind even where none runs. The operator and the collector delete
        the same children at the same time, so one already gone is what we wanted, not an error.
        """
        job = self.find(name, namespace, kind)
        selector = f"{LABEL_JOB_NAME}={name}"
        with self.errors(f"delete {job['kind'].lower()} {name}"):
            self.delete_if_present(collection_of(job["kind"]), name, namespace, propagation="Background")
            self.client.delete_collection(kube.PODS, namespace, selector)
            # services have no deletecollection verb
            for service in self.client.list(kube.SERVICES, namespace, selector=selector)["items"]:
                self.delete_if_present(kube.SERVICES, service["metadata"]["name"], namespace)
        from trainctl.backends.kube import code, records

        with self.errors(f"delete the code snapshot ConfigMaps of {name}"):
            code.release(self.client, job)  # none without a snapshot
        with self.errors(f"delete the kept records of {name}"):
            records.release(self.client, namespace, name)

    def delete_if_present(self, resource: kube.Resource, name: str, namespace: str, **options) -> None:
        try:
            self.client.delete(resource, name, namespace, **options)
        except kube.ApiError as error:
            if error.status != 404:
                raise

    def set_suspended(self, name: str, namespace: str, suspend: bool, kind: str | None = None) -> dict:
        found = self.find(name, namespace, kind)["kind"]
        # a TrainJob's own field; a v1 job's is in its runPolicy
        patch = {"spec": {"suspend": suspend} if found == TRAINJOB else {"runPolicy": {"suspend": suspend}}}
        with self.errors(f"{'suspend' if suspend else 'resume'} {found.lower()} {name}"):
            return self.client.patch(collection_of(found), name, patch, namespace)

    def install_crds(self, dry_run: bool = False, api: str = "all") -> list[str]:
        """Create or update trainctl's CRDs of ``api`` (v1, v2 or all); returns their names."""
        from trainctl.core.trainer_crds import project_crds

        names = []
        for crd in project_crds(api):
            name = crd["metadata"]["name"]
            names.append(name)
            if not dry_run:
                with self.errors(f"install CRD {name}"):
                    self.client.apply(kube.CRDS, crd)
        return names

    def install_runtimes(self, runtimes: list[dict]) -> list[str]:
        """Create or update ClusterTrainingRuntimes (trainctl.core.trainer_runtimes) and TrainingRuntimes (in their
        metadata's namespace): what became of each, ``created``, ``configured`` or ``unchanged``."""
        from trainctl.core.trainer_crds import RUNTIME

        outcomes = []
        for runtime in runtimes:
            kind, name, namespace = runtime["kind"], runtime["metadata"]["name"], runtime["metadata"].get("namespace")
            with self.errors(f"install {kind} {name}"):
                try:
                    outcomes.append(self.client.apply(trainer_resource(kind, namespaced=kind == RUNTIME), runtime,
                                                      namespace if kind == RUNTIME else None))
                except kube.ApiError as error:
                    if error.status == 404:
                        self.require_crd(kind)
                    raise
        return outcomes

    def require_crd(self, kind: str) -> None:
        """A UserError with the fix when ``kind``'s Trainer v2 CRD is not installed."""
        resource = trainer_resource(kind)
        with self.errors(f"read the {kind} CRD"):
            try:
                self.client.get(kube.CRDS, f"{resource.plural}.{resource.group}")
            except kube.ApiError as error:
                if error.status != 404:
                    raise
                raise UserError(f"the {kind} CRD is not installed in this cluster: run trainctl crds install") \
                    from None

    def list_runtimes(self, namespace: str | None) -> list[dict]:
        """The ClusterTrainingRuntimes and the TrainingRuntimes of ``namespace`` (None: of every namespace)."""
        from trainctl.core.trainer_crds import CLUSTER_RUNTIME, RUNTIME

        wanted = [(trainer_resource(CLUSTER_RUNTIME, namespaced=False), {}), (trainer_resource(RUNTIME), {})]
        with self.errors("list the training runtimes"):
            answers = self.client.list_each(wanted, namespace)
        for kind, answer in zip((CLUSTER_RUNTIME, RUNTIME), answers):
            if isinstance(answer, kube.ApiError) and answer.status == 404:
                self.require_crd(kind)
        with self.errors("list the training runtimes"):
            return [{"apiVersion": resource.api_version, "kind": resource.kind, **item}
                    for (resource, _), answer in zip(wanted, answers) for item in answered(answer)["items"]]


def cluster_job(resource: dict) -> Job:
    """The job's view; of a TrainJob whose runtime trainctl's controller has not found (and kept in it), none: then
    what the controller said of it, in one line."""
    if is_trainjob(resource) and SNAPSHOT_ANNOTATION not in (resource["metadata"].get("annotations") or {}):
        name, ref = resource["metadata"]["name"], TrainJob(resource).runtime_ref
        failed = cond.find(cond.conditions_of(resource), "Failed")
        raise UserError(f"TrainJob {name} failed: {failed.get('message')}" if failed else
                        f"TrainJob {name} has no pods yet: trainctl's controller has not found its {ref['kind']} "
                        f"{ref['name']!r} (is the controller running? trainctl controller install)")
    return Job(resource)


def pods_query(job_name: str) -> dict:
    """The query that lists a job's pods."""
    return {"labelSelector": f"{LABEL_JOB_NAME}={job_name}"}


def by_name(answer: dict | kube.ApiError) -> dict[str, dict] | None:
    """A pod list's pods by name; None for a list that could not be read (the logs themselves then say why)."""
    if isinstance(answer, kube.ApiError):
        return None
    return {pod["metadata"]["name"]: pod for pod in answer["items"]}


def answered(answer: dict | kube.ApiError) -> dict:
    """One of :meth:`trainctl.kube.client.Client.list_each`'s answers, its error raised."""
    if isinstance(answer, kube.ApiError):
        raise answer
    return answer


def event_time(event: dict) -> str:
    return str(event.get("lastTimestamp") or event.get("eventTime") or "")


def v1_checks(resource: dict) -> list[tuple]:
    """What a kubeflow.org/v1 job needs of the cluster, its CRD first: (collection, name, namespace, the problem
    without it)."""
    framework = by_kind(resource["kind"])
    checks = [(kube.CRDS, f"{framework.plural}.{API_GROUP}", None,
               f"the {framework.kind} CRD is not installed in this cluster: run trainctl crds install")]
    return checks + [(kube.PRIORITY_CLASSES, priority_class, None,
                      f'PriorityClass "{priority_class}" does not exist: create it or pick an existing one')
                     for priority_class in sorted(priority_classes(resource))]


def trainjob_checks(resource: dict) -> list[tuple]:
    """What a TrainJob needs of the cluster: its CRD first, and the runtime it names unless it carries that runtime
    (``trainctl apply -f`` of a file that gives it)."""
    trainjobs = trainer_resource(TRAINJOB)
    checks = [(kube.CRDS, f"{trainjobs.plural}.{trainjobs.group}", None,
               f"the {TRAINJOB} CRD is not installed in this cluster: run trainctl crds install --api v2")]
    if SNAPSHOT_ANNOTATION in (resource["metadata"].get("annotations") or {}):
        return checks
    from trainctl.core.trainer_crds import CLUSTER_RUNTIME
    from trainctl.core.trainer_runtimes import runtime_names

    ref = TrainJob(resource).runtime_ref
    cluster_wide = ref["kind"] == CLUSTER_RUNTIME
    fix = ("run trainctl runtimes install" if cluster_wide and ref["name"] in runtime_names() else
           f"create it, or give it in the file beside the {TRAINJOB} (trainctl apply -f)")
    where = "in this cluster" if cluster_wide else f'in namespace "{resource["metadata"]["namespace"]}"'
    return checks + [(trainer_resource(ref["kind"], namespaced=not cluster_wide), ref["name"],
                      None if cluster_wide else resource["metadata"]["namespace"],
                      f"{TRAINJOB} {resource['metadata']['name']} runs on {ref['kind']} {ref['name']!r}, which "
                      f"does not exist {where}: {fix}")]


def priority_classes(resource: dict) -> set[str]:
    job = Job(resource)
    names = {(job.run_policy.get("schedulingPolicy") or {}).get("priorityClass")}
    names |= {job.template(t)["spec"].get("priorityClassName") for t in job.replica_types}
    return {n for n in names if n}


def replica_row(pod: dict, replica_types: list[str]) -> ReplicaRow:
    """A pod as ``status`` shows it, as kubectl would: its phase, or why it waits (CrashLoopBackOff,
    ImagePullBackOff); restarts; its current run's exit code and reason; and, once kubelet restarted
    it in place, the run before (lastState), where a crash-looping replica's failure lives."""
    meta, status = pod["metadata"], PodStatus.of(pod)
    state, ended = status.shown()
    last, unplaced = status.ended(previous=True), status.unscheduled()
    labels = meta.get("labels") or {}
    label_type, index = labels.get(LABEL_REPLICA_TYPE, ""), labels.get(LABEL_REPLICA_INDEX)
    return ReplicaRow(name=meta["name"], replica_type=canonical_type(label_type, replica_types),
                      index=int(index) if index and index.isdigit() else None, state=state,
                      restarts=status.restarts(), exit_code=ended.get("exitCode"),
                      reason=ended.get("reason") or status.raw.get("reason") or unplaced.get("reason") or "",
                      node=(pod.get("spec") or {}).get("nodeName") or "", started=status.raw.get("startTime"),
                      finished=ended.get("finishedAt"), last_exit_code=last.get("exitCode"),
                      last_reason=last.get("reason") or "", last_finished=last.get("finishedAt"),
                      message=ended.get("message") or "", last_message=last.get("message") or "",
                      unscheduled=scheduler_word(unplaced), unscheduled_since=unplaced.get("lastTransitionTime"))


def scheduler_word(condition: dict) -> str:
    """``Unschedulable: 0/2 nodes are available: ...`` of a False PodScheduled condition ('' for none)."""
    if not condition:
        return ""
    return ": ".join(part for part in (condition.get("reason") or "Unschedulable", condition.get("message")) if part)


def canonical_type(label: str, replica_types: list[str]) -> str:
    """The spec's spelling of a replica-type label: ``ps`` -> ``PS``."""
    return next((rtype for rtype in replica_types if rtype.lower() == label), label.capitalize())


def podless_rows(job: Job, pods: list[dict], kept: dict[str, tuple] | None = None) -> list[ReplicaRow]:
    """A row for each replica of the spec without a pod: not created yet, or removed after the job ended.

    A removed pod's row is its last run as trainctl's controller kept it (``kept``: runs by replica id,
    trainctl.backends.kube.records); without a record, only that it was removed (the job's events and
    conditions still tell why it ended). With the default cleanPodPolicy (None) a finished job keeps every pod.
    """
    present = {pod["metadata"]["name"] for pod in pods}
    finished = cond.has_finished(job.resource)
    state, reason = (("Deleted", f"pod removed (cleanPodPolicy {job.run_policy['cleanPodPolicy']})") if finished
                     else ("Pending", "no pod yet"))
    rows = []
    for rtype in job.replica_types:
        for index in range(job.replicas(rtype)):
            name, runs = job.pod_name(rtype, index), (kept or {}).get(job.replica_id(rtype, index))
            if name in present:
                continue
            if runs:
                from trainctl.backends.kube.records import kept_row  # only for a kept run: status loads none else

                rows.append(kept_row(name, rtype, index, runs, finished))
            else:
                rows.append(ReplicaRow(name=name, replica_type=rtype, index=index, state=state, reason=reason))
    return rows


def ever_ran(resource: dict) -> bool:
    """Whether a replica of the job may have run: a condition beyond Created (Running, Restarting, Suspended,
    Succeeded, Failed ...), which the reconcile writes in the pass that sees a replica start or end."""
    from trainctl.core.conditions import conditions_of

    return any(condition.get("type") != "Created" for condition in conditions_of(resource))
