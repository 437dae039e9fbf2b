"""Objects a framework asks for besides pods and services, applied with the job as their owner.

``Framework.cluster_objects`` lists them on every pass (MPI's ServiceAccount, hostfile ConfigMap
and RBAC; an elastic PyTorchJob's HorizontalPodAutoscaler; a TrainJob's headless Service, and on an MPI runtime its
hostfile ConfigMap and SSH key Secret), and so does a job's checkpoint claim
(trainctl.core.checkpoint_volume) for any kind. :class:`OwnedObjects` creates each one,
updates the fields the controller owns when they drift (never the rest: a ServiceAccount's
secrets are the cluster's), refuses to take over an object of the same name that another owner
holds, and deletes those of the framework's ``pruned_kinds`` it stopped asking for. What it applied
last is remembered, so the steady state sends no request at all.

A Secret is only ever created: the controller may not read Secrets (docs/controller.md, "Permissions"), so one of
that name that exists already is used as it is, as upstream's MPI plugin uses it. An SSH key Secret asked for
without data gets a new key pair as it is created (trainctl.controller.sshkeys).
"""

from __future__ import annotations

import base64

from trainctl.controller import pods as pod_objects
from trainctl.controller.sshkeys import key_pair
from trainctl.controller.executor import Executor, JobKey
from trainctl.core.job import Job
from trainctl.frameworks.policies.mpi import SSH_AUTH_TYPE
from trainctl.kube.client import (
    CONFIGMAPS,
    ROLE_BINDINGS,
    ROLES,
    SECRETS,
    SERVICE_ACCOUNTS,
    SERVICES,
    ApiError,
    Client,
    Resource,
)

HPA_V2 = Resource("autoscaling", "v2", "horizontalpodautoscalers", kind="HorizontalPodAutoscaler")
HPA_V2BETA2 = Resource("autoscaling", "v2beta2", "horizontalpodautoscalers", kind="HorizontalPodAutoscaler")
CLAIMS = Resource("", "v1", "persistentvolumeclaims", kind="PersistentVolumeClaim")
OBJECT_RESOURCES = {"ServiceAccount": SERVICE_ACCOUNTS, "ConfigMap": CONFIGMAPS, "Role": ROLES,
                    "RoleBinding": ROLE_BINDINGS, "PersistentVolumeClaim": CLAIMS, "Service": SERVICES,
                    "Secret": SECRETS}
#: created once and never updated: a claim's spec is immutable once bound (the API server fills in its volume), a
#: TrainJob's headless Service is the same on every pass (the API server fills in the rest of its spec)
CREATE_ONLY = ("PersistentVolumeClaim", "Service")
#: the fields of an object that the controller owns; the rest (e.g. secrets of a ServiceAccount) is left alone
OWNED_FIELDS = ("data", "rules", "subjects", "roleRef", "spec")


class OwnedObjects:
    def __init__(self, client: Client, executor: Executor) -> None:
        self.client, self.executor = client, executor
        self.applied: dict[tuple, dict] = {}  # (job key, kind, name) -> the body last applied
        self.hpa = HPA_V2  # the HorizontalPodAutoscaler version the cluster serves (the manager finds out)

    def sync(self, key: JobKey, job: Job, desired: list[dict], pruned_kinds: tuple[str, ...]) -> None:
        """Create or update what the framework asks for; delete what it stopped asking for (pruned kinds)."""
        wanted = set()
        for obj in desired:
            wanted.add((key, obj["kind"], obj["metadata"]["name"]))
            self.apply(key, job, obj)
        for memo in [m for m in self.applied if m[0] == key and m[1] in pruned_kinds and m not in wanted]:
            kind, name = memo[1], memo[2]
            try:
                self.client.delete(self.resource_of(kind), name, job.namespace)
            except ApiError as error:
                if error.status != 404:
                    raise
            del self.applied[memo]

    def forget(self, key: JobKey) -> None:
        """The job is gone: its objects go with it (the cluster's garbage collector, ownerReferences)."""
        self.applied = {memo: body for memo, body in self.applied.items() if memo[0] != key}

    def resource_of(self, kind: str) -> Resource:
        return self.hpa if kind == HPA_V2.kind else OBJECT_RESOURCES[kind]

    def apply(self, key: JobKey, job: Job, obj: dict) -> None:
        memo = (key, obj["kind"], obj["metadata"]["name"])
        if self.applied.get(memo) == obj:
            return  # applied already: the steady state sends nothing
        resource = self.resource_of(obj["kind"])
        body = {**obj, "apiVersion": resource.api_version,
                "metadata": {**obj["metadata"], "ownerReferences": [pod_objects.owner_reference(job)]}}
        if resource is SECRETS and obj.get("type") == SSH_AUTH_TYPE and not obj.get("data"):
            body["data"] = new_ssh_key_data()
        try:
            self.client.create(resource, body, job.namespace)
        except ApiError as error:
            if error.status != 409:
                raise
            if resource is not SECRETS:  # one that exists is used as it is: the controller may not read Secrets
                self.update_existing(job, resource, body)
        self.applied[memo] = obj

    def update_existing(self, job: Job, resource: Resource, body: dict) -> None:
        name = body["metadata"]["name"]
        current = self.client.get(resource, name, job.namespace)
        if pod_objects.controller_uid(current) != job.uid and not (resource is SERVICE_ACCOUNTS):
            message = (f'Resource "{name}" of {resource.kind} already exists and is not managed by '
                       f"{job.framework.kind}")
            self.executor.record_event(job, "Warning", "ErrResourceExists", message)
            raise ApiError(409, "AlreadyExists", message)
        if body["kind"] in CREATE_ONLY or all(current.get(f) == body.get(f) for f in OWNED_FIELDS if f in body):
            return
        merged = {**current, **{f: body[f] for f in OWNED_FIELDS if f in body}}
        self.client.replace(resource, merged, job.namespace)


def new_ssh_key_data() -> dict[str, str]:
    """A new key pair as an ``kubernetes.io/ssh-auth`` Secret's data: ``ssh-privatekey`` and, as upstream adds it,
    ``ssh-publickey`` (mounted as ``authorized_keys`` too)."""
    private, public = key_pair()
    return {name: base64.b64encode(text.encode()).decode()
            for name, text in (("ssh-privatekey", private), ("ssh-publickey", public))}
