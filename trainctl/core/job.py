"""A read-only view of a kubeflow.org/v1 job with the operator's defaults applied.

The Kubeflow operator defaults jobs in memory on every reconcile and never writes the
defaults back (contract 1.4); this view does the same, so the stored resource stays
exactly what the user wrote while every decision sees canonical replica types,
default replica counts, restart policies and ports.
"""

from __future__ import annotations

import copy
from functools import cached_property

from trainctl.core.conditions import status_of
from trainctl.core.trainjob import NodePlan, TrainerFramework, is_trainjob, node_plan_of
from trainctl.frameworks import Framework, by_kind
from trainctl.frameworks.base import (
    JOB_ROLE_MASTER,
    LABEL_JOB_NAME,
    LABEL_JOB_ROLE,
    LABEL_OPERATOR,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
)

# Kueue's kubeflow.org integration queues a job that carries this label (and was created suspended)
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Stalls (docs/progress.md), in whole seconds: a running job none of whose replicas wrote output or reported
# progress for STALL_AFTER is called stalled (shown, never acted on); past STALL_TIMEOUT it is failed.
# Annotations, not runPolicy fields: every operator keeps them, and the upstream one ignores them.
STALL_AFTER_ANNOTATION = "trainctl.io/stall-after"
STALL_TIMEOUT_ANNOTATION = "trainctl.io/stall-timeout"
# the restart record (trainctl.core.restarts, which reads it): here so that a job without one costs a reader
# (status, list) no import of that module
RESTART_RECORD_ANNOTATION = "trainctl.io/restarts"
DEFAULT_STALL_AFTER_S = 600


class Job:
    def __init__(self, resource: dict) -> None:
        self.resource = resource
        # a Trainer v2 TrainJob: its pods as its runtime gives them (trainctl/core/trainjob.py), its replica types
        # the runtime's replicatedJobs
        self.node_plan: NodePlan | None = node_plan_of(resource) if is_trainjob(resource) else None
        self.framework: Framework = TrainerFramework(self.node_plan) if self.node_plan else by_kind(resource["kind"])
        metadata = resource.get("metadata") or {}
        self.name: str = metadata["name"]
        self.namespace: str = metadata.get("namespace") or "default"
        self.uid: str = metadata.get("uid", "")
        self.spec: dict = resource.get("spec") or {}
        self.status: dict = status_of(resource)

    @property
    def stall_after(self) -> int:
        return annotated_seconds(self.resource, STALL_AFTER_ANNOTATION) or DEFAULT_STALL_AFTER_S

    @property
    def stall_timeout(self) -> int | None:
        return annotated_seconds(self.resource, STALL_TIMEOUT_ANNOTATION)

    # ---- replica specs, defaulted ---------------------------------------------
    @cached_property
    def replica_specs(self) -> dict[str, dict]:
        """Canonical replica type -> spec, in the framework's evaluation order."""
        if self.node_plan is not None:
            return self.node_plan.replica_specs()
        raw = self.spec.get(self.framework.replica_spec_field) or {}
        by_type = {}
        for key, spec in raw.items():
            rtype = self.framework.canonical_replica_type(key) or key
            by_type[rtype] = spec or {}
        order = [t for t in self.framework.replica_types if t in by_type]
        return {rtype: by_type[rtype] for rtype in order + [t for t in by_type if t not in order]}

    @property
    def replica_types(self) -> list[str]:
        return list(self.replica_specs)

    def replicas(self, rtype: str) -> int:
        value = self.replica_specs.get(rtype, {}).get("replicas")
        return self.framework.replicas_default(rtype) if value is None else value

    @property
    def total_replicas(self) -> int:
        return sum(self.replicas(rtype) for rtype in self.replica_types)

    def restart_policy(self, rtype: str) -> str:
        return self.replica_specs[rtype].get("restartPolicy") or self.framework.restart_policy

    def template(self, rtype: str) -> dict:
        """The pod template with the default port appended to the framework container."""
        template = copy.deepcopy(self.replica_specs[rtype].get("template") or {})
        containers = template.setdefault("spec", {}).setdefault("containers", [])
        container = self.main_container(containers)
        framework = self.framework
        if container is not None and framework.port_name:
            ports = container.setdefault("ports", [])
            if not any(p.get("name") == framework.port_name for p in ports):
                ports.append({"name": framework.port_name, "containerPort": framework.port})
        return template

    def main_container(self, containers: list[dict]) -> dict | None:
        return self.framework.main_container(containers)

    @property
    def images(self) -> dict[str, str]:
        """Replica type -> the image of its wired container ("" where it names none)."""
        return {rtype: str((self.main_container(self.template(rtype)["spec"]["containers"]) or {}).get("image") or "")
                for rtype in self.replica_types}

    def container_port(self, rtype: str) -> int | None:
        container = self.main_container(self.template(rtype)["spec"]["containers"])
        for port in (container or {}).get("ports", []):
            if port.get("name") == self.framework.port_name:
                return port.get("containerPort")
        return None

    # ---- run policy ---------------------------------------------------------------
    @property
    def run_policy(self) -> dict:
        policy = self.framework.run_policy(self.spec)
        policy.setdefault("cleanPodPolicy", "None")
        return policy

    @property
    def suspended(self) -> bool:
        return bool(self.run_policy.get("suspend"))

    @property
    def kueue_queue(self) -> str | None:
        """The Kueue LocalQueue the job waits in: Kueue stops a job whose replica counts change."""
        return (self.resource["metadata"].get("labels") or {}).get(KUEUE_QUEUE_LABEL)

    @property
    def managed_externally(self) -> bool:
        managed_by = self.run_policy.get("managedBy")
        return managed_by not in (None, "kubeflow.org/training-operator")

    # ---- names and labels -------------------------------------------------------------
    def pod_name(self, rtype: str, index: int) -> str:
        return self.framework.pod_name(self.name, rtype, index)

    def replica_id(self, rtype: str, index: int) -> str:
        """Short display name, the `master-0 |` log prefix."""
        return self.pod_name(rtype, index).removeprefix(f"{self.name}-")

    def selector_labels(self) -> dict[str, str]:
        return {LABEL_OPERATOR: self.framework.operator_name, LABEL_JOB_NAME: self.name}

    def labels(self, rtype: str, index: int) -> dict[str, str]:
        labels = {**self.selector_labels(), LABEL_REPLICA_TYPE: rtype.lower()}
        if self.node_plan is not None:  # the operator's replica labels too: the controller reads its pods back by them
            return {**labels, LABEL_REPLICA_INDEX: str(index), **self.node_plan.pod(rtype, index).labels}
        if rtype not in self.framework.unindexed_types:
            labels[LABEL_REPLICA_INDEX] = str(index)
        if self.is_master_role(rtype, index):
            labels[LABEL_JOB_ROLE] = JOB_ROLE_MASTER
        return labels

    def annotations(self, rtype: str, index: int) -> dict[str, str]:
        """What a replica's pod is annotated with besides its template's (a TrainJob's pod: JobSet's and its
        completion index, which its rank's env reads)."""
        return self.node_plan.pod(rtype, index).annotations if self.node_plan is not None else {}

    def is_master_role(self, rtype: str, index: int) -> bool:
        return self.framework.is_master_role(self.replica_types, rtype, index)


def main_container(framework: Framework, containers: list[dict]) -> dict | None:
    """The container the operator wires (see :meth:`Framework.main_container`)."""
    return framework.main_container(containers)


def annotated_seconds(resource: dict, key: str) -> int | None:
    """A positive whole number of seconds from the job's annotation ``key``; None when absent or not one (an
    annotation edited by hand must not break a read)."""
    value = ((resource.get("metadata") or {}).get("annotations") or {}).get(key)
    return int(value) if isinstance(value, str) and value.isdigit() and 0 < int(value) < 2**63 else None


def has_restart_record(resource: dict) -> bool:
    """Whether the job carries a restart record: without one it is on its first attempt, with nothing spent."""
    return RESTART_RECORD_ANNOTATION in (resource.get("metadata", {}).get("annotations") or {})
