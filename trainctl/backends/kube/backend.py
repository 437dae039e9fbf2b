"""The Kubernetes implementation of :class:`trainctl.backends.base.Backend`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import cached_property

from trainctl import API_GROUP
from trainctl.backends.base import Backend, JobDetails, LogLine, ReplicaRow
from trainctl.backends.kube import logs as pod_logs
from trainctl.backends.kube.connection import api_errors, connect, describe, is_status, not_found
from trainctl.errors import UserError
from trainctl.frameworks import ALL, by_kind
from trainctl.frameworks.base import LABEL_JOB_NAME, LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE
from trainctl.job import Job

VERSION = "v1"
POLL_S = 0.5


class KubeBackend(Backend):
    def __init__(self, *, context: str | None = None, kubeconfig: str | None = None) -> None:
        self.connection = connect(context, kubeconfig)
        self.description = f"kubernetes (context {self.connection.context})"

    def default_namespace(self) -> str:
        return self.connection.namespace

    @cached_property
    def custom(self):
        from kubernetes import client

        return client.CustomObjectsApi(self.connection.api_client)

    @cached_property
    def core(self):
        from kubernetes import client

        return client.CoreV1Api(self.connection.api_client)

    def errors(self, what: str):
        return api_errors(what, self.connection)

    def failure(self, what: str, error) -> UserError:
        return UserError(describe(error, what, self.connection))

    # ---- create ------------------------------------------------------------------------
    def create(self, resource: dict, replace: bool = False) -> dict:
        framework = by_kind(resource["kind"])
        namespace, name = resource["metadata"]["namespace"], resource["metadata"]["name"]
        self.preflight(resource)
        if self._exists(framework, namespace, name):
            if not replace:
                raise UserError(f'{framework.singular} "{name}" already exists in namespace "{namespace}": '
                                "delete it first, pick another --name, or use --replace")
            self.delete(name, namespace, framework.kind)
        with self.errors(f"create {framework.singular} {name} in namespace {namespace}"):
            return self._create(framework, namespace, resource)

    def _create(self, framework, namespace: str, resource: dict) -> dict:
        return self.custom.create_namespaced_custom_object(API_GROUP, VERSION, namespace, framework.plural, resource)

    def _exists(self, framework, namespace: str, name: str) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            self.custom.get_namespaced_custom_object(API_GROUP, VERSION, namespace, framework.plural, name)
            return True
        except ApiException:
            return False

    def preflight(self, resource: dict) -> None:
        """Fail fast with the fix instead of leaving a job that can never run."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        framework = by_kind(resource["kind"])
        namespace = resource["metadata"]["namespace"]
        api = self.connection.api_client
        checks = [
            (lambda: client.ApiextensionsV1Api(api).read_custom_resource_definition(f"{framework.plural}.{API_GROUP}"),
             f"the {framework.kind} CRD is not installed in this cluster: run trainctl crds install"),
            (lambda: self.core.read_namespace(namespace),
             f'namespace "{namespace}" does not exist: create it (kubectl create namespace {namespace}) or pick -n'),
        ]
        for priority_class in priority_classes(resource):
            checks.append((lambda pc=priority_class: client.SchedulingV1Api(api).read_priority_class(pc),
                           f'PriorityClass "{priority_class}" does not exist: create it or drop --priority-class'))
        queue = (Job(resource).run_policy.get("schedulingPolicy") or {}).get("queue")
        if queue and self._volcano_installed():
            checks.append((lambda: self.custom.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues",
                                                                      queue),
                           f'Volcano queue "{queue}" does not exist: create it or pick another --queue'))
        for check, problem in checks:
            try:
                check()
            except ApiException as error:
                if is_status(error, 404):
                    raise UserError(problem) from None
                if not is_status(error, 403):  # a CLI user may not be allowed to read CRDs: let create decide
                    raise self.failure("preflight", error) from None

    def _volcano_installed(self) -> bool:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            client.ApiextensionsV1Api(self.connection.api_client).read_custom_resource_definition(
                "queues.scheduling.volcano.sh")
            return True
        except ApiException:
            return False

    # ---- read ------------------------------------------------------------------------------
    def get(self, name: str, namespace: str, kind: str | None = None) -> JobDetails:
        resource = self.find(name, namespace, kind)
        with self.errors(f"read pods of {name}"):
            pods = self.core.list_namespaced_pod(namespace, label_selector=f"{LABEL_JOB_NAME}={name}").items
            events = self.core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
        rows = sorted((replica_row(pod) for pod in pods), key=lambda r: (r.replica_type, r.index or 0))
        recent = sorted(events, key=lambda e: str(e.last_timestamp or e.event_time or ""))[-20:]
        return JobDetails(resource=resource, replicas=rows, events=[
            {"type": e.type, "reason": e.reason, "message": e.message,
             "time": str(e.last_timestamp or e.event_time or "")} for e in recent])

    def find(self, name: str, namespace: str, kind: str | None = None) -> dict:
        """The job named ``name`` of the given kind, or of whichever kind has it."""
        from kubernetes.client.exceptions import ApiException

        with self.errors(f"read job {name}"):
            for framework in [by_kind(kind)] if kind else ALL:
                try:
                    return self.custom.get_namespaced_custom_object(API_GROUP, VERSION, namespace,
                                                                    framework.plural, name)
                except ApiException as error:
                    if not is_status(error, 404):
                        raise
        raise not_found(name, namespace)

    def list(self, namespace: str | None, selector: str | None = None) -> list[dict]:
        from kubernetes.client.exceptions import ApiException

        jobs = []
        options = {"label_selector": selector} if selector else {}
        with self.errors("list jobs"):
            for framework in ALL:
                try:
                    if namespace is None:
                        listing = self.custom.list_cluster_custom_object(API_GROUP, VERSION, framework.plural,
                                                                         **options)
                    else:
                        listing = self.custom.list_namespaced_custom_object(API_GROUP, VERSION, namespace,
                                                                            framework.plural, **options)
                except ApiException as error:
                    if is_status(error, 404):
                        continue  # that CRD is not installed: no jobs of that kind
                    raise
                jobs += listing.get("items", [])
        return sorted(jobs, key=lambda j: (j["metadata"].get("namespace", ""), j["metadata"]["name"]))

    def logs(self, name: str, namespace: str, replica: str | None = None, follow: bool = False,
             tail: int | None = None, since_seconds: int | None = None, previous: bool = False,
             kind: str | None = None) -> Iterator[LogLine]:
        job = Job(self.find(name, namespace, kind))
        replicas = [(job.replica_id(t, i), job.pod_name(t, i), t) for t in job.replica_types
                    for i in range(job.replicas(t))]
        if replica is not None:
            replicas = [r for r in replicas if r[0] == replica]
            if not replicas:
                names = ", ".join(job.replica_id(t, i) for t in job.replica_types for i in range(job.replicas(t)))
                raise UserError(f"--replica {replica!r}: job {name} has {names}")
        container = job.framework.container

        def source(replica_id: str, pod: str, rtype: str):
            def run(emit):
                if follow and not self.wait_for_pod(job, pod):
                    return
                main = job.main_container(job.template(rtype)["spec"]["containers"]) or {}
                pod_logs.stream_pod(self.core, namespace, pod, main.get("name", container), replica_id,
                                    follow=follow, tail=tail, since_seconds=since_seconds, previous=previous,
                                    emit=emit)
            return run

        return pod_logs.multiplex([source(*r) for r in replicas])

    def wait_for_pod(self, job: Job, pod: str) -> bool:
        """Until the operator created the pod; False if the job ended or went away first."""
        from kubernetes.client.exceptions import ApiException

        while True:
            try:
                self.core.read_namespaced_pod(pod, job.namespace)
                return True
            except ApiException:
                pass
            try:
                resource = self.find(job.name, job.namespace, job.framework.kind)
            except UserError:
                return False
            conditions = (resource.get("status") or {}).get("conditions") or []
            if any(c["type"] in ("Succeeded", "Failed") and c["status"] == "True" for c in conditions):
                return False
            time.sleep(POLL_S)

    # ---- change ---------------------------------------------------------------------------------
    def delete(self, name: str, namespace: str, kind: str | None = None) -> None:
        """Delete the job, then its pods and services right away.

        Foreground propagation would wait for the cluster's garbage collector; deleting the
        children explicitly (after the job, so no operator recreates them) needs no collector
        and leaves nothing behind even where none runs.
        """
        framework = by_kind(self.find(name, namespace, kind)["kind"])
        selector = f"{LABEL_JOB_NAME}={name}"
        with self.errors(f"delete {framework.singular} {name}"):
            self.custom.delete_namespaced_custom_object(API_GROUP, VERSION, namespace, framework.plural, name,
                                                        propagation_policy="Background")
            self.core.delete_collection_namespaced_pod(namespace, label_selector=selector)
            for service in self.core.list_namespaced_service(namespace, label_selector=selector).items:
                self.core.delete_namespaced_service(service.metadata.name, namespace)

    def set_suspended(self, name: str, namespace: str, suspend: bool, kind: str | None = None) -> dict:
        framework = by_kind(self.find(name, namespace, kind)["kind"])
        patch = {"spec": {"runPolicy": {"suspend": suspend}}}
        with self.errors(f"{'suspend' if suspend else 'resume'} {framework.singular} {name}"):
            return self.custom.patch_namespaced_custom_object(API_GROUP, VERSION, namespace, framework.plural,
                                                              name, patch)

    def install_crds(self, dry_run: bool = False) -> list[str]:
        """Create or update trainctl's CRDs; returns their names."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        from trainctl.crds import all_crds

        api = client.ApiextensionsV1Api(self.connection.api_client)
        names = []
        for crd in all_crds():
            name = crd["metadata"]["name"]
            names.append(name)
            if dry_run:
                continue
            with self.errors(f"install CRD {name}"):
                try:
                    api.create_custom_resource_definition(crd)
                except ApiException as error:
                    if not is_status(error, 409):
                        raise
                    current = api.read_custom_resource_definition(name)
                    crd["metadata"]["resourceVersion"] = current.metadata.resource_version
                    api.replace_custom_resource_definition(name, crd)
        return names


def priority_classes(resource: dict) -> set[str]:
    job = Job(resource)
    names = {(job.run_policy.get("schedulingPolicy") or {}).get("priorityClass")}
    names |= {job.template(t)["spec"].get("priorityClassName") for t in job.replica_types}
    return {n for n in names if n}


def replica_row(pod) -> ReplicaRow:
    """A pod as `status` shows it: phase, restarts, exit code and the reason that matters."""
    labels = pod.metadata.labels or {}
    statuses = pod.status.container_statuses or []
    restarts = sum(s.restart_count for s in statuses)
    exit_code, reason, state = None, "", pod.status.phase or "Pending"
    for status in statuses:
        if status.state and status.state.terminated:
            exit_code, reason = status.state.terminated.exit_code, status.state.terminated.reason or ""
        elif status.state and status.state.waiting and status.state.waiting.reason:
            reason = status.state.waiting.reason  # ImagePullBackOff, CrashLoopBackOff ...
        elif not reason and status.last_state and status.last_state.terminated:
            reason = f"last: {status.last_state.terminated.reason}"
    if pod.metadata.deletion_timestamp:
        state = "Terminating"
    index = labels.get(LABEL_REPLICA_INDEX)
    started = pod.status.start_time.strftime("%Y-%m-%dT%H:%M:%SZ") if pod.status.start_time else None
    return ReplicaRow(name=pod.metadata.name, replica_type=labels.get(LABEL_REPLICA_TYPE, "").capitalize(),
                      index=int(index) if index and index.isdigit() else None, state=state, restarts=restarts,
                      exit_code=exit_code, reason=reason, node=pod.spec.node_name or "", started=started)
