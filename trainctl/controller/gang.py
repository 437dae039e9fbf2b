"""Gang scheduling: one PodGroup per job for Volcano or scheduler-plugins (contract 1.10), or
YuniKorn's task groups.

:class:`GangScheduler` holds what each scheduler reads; :class:`PodGroups` keeps the objects.
Enabled by ``--gang-scheduler-name``: ``volcano``, ``yunikorn``, or any other name for the
scheduler-plugins coscheduling scheduler. The controller creates PodGroups only when
that PodGroup CRD is installed (it checks at start-up and says so once otherwise).
YuniKorn has no CRD: everything it reads is on the pods themselves, the application id
and queue labels and, on every pod, the job's task groups (one per replica type: how many
members, what each requests, where it may run) plus the name of the pod's own group.

A TrainJob is gang-scheduled as upstream's Volcano and CoScheduling plugins do it: by its runtime's
``podGroupPolicy``, not by the controller's flag (:class:`Gangs`): ``volcano`` where the Volcano PodGroup CRD is
installed, ``coscheduling`` with the scheduler-plugins scheduler ``--gang-scheduler-name`` names.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal

from trainctl.controller.executor import Executor
from trainctl.controller.informer import Informer
from trainctl.controller.pods import owner_reference
from trainctl.core.conditions import has_finished
from trainctl.core.job import Job
from trainctl.errors import UserError
from trainctl.kube.client import PRIORITY_CLASSES, ApiError, Client, Resource
from trainctl.kube.quantities import format_quantity, parse_quantity

VOLCANO = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", kind="PodGroup")
COSCHEDULING = Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", kind="PodGroup")
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_TASK_ANNOTATION = "volcano.sh/task-spec"
COSCHEDULING_LABEL = "scheduling.x-k8s.io/pod-group"
YUNIKORN_APP_ID_LABEL = "yunikorn.apache.org/app-id"
YUNIKORN_QUEUE_LABEL = "yunikorn.apache.org/queue"
YUNIKORN_TASK_GROUPS = "yunikorn.apache.org/task-groups"
YUNIKORN_TASK_GROUP_NAME = "yunikorn.apache.org/task-group-name"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"  # a TrainJob's Volcano queue (upstream's plugin)
POD_GROUP_POLICIES = ("volcano", "coscheduling")  # a runtime's spec.podGroupPolicy, one of them
# why a controller cannot gang-schedule a TrainJob whose runtime names that policy, and the fix
UNAVAILABLE = {
    "volcano": "the Volcano PodGroup CRD (podgroups.scheduling.volcano.sh) was not installed when the controller "
               "started: install Volcano, then restart the controller",
    "coscheduling": "the controller runs with no scheduler-plugins gang scheduler: start it with "
                    "--gang-scheduler-name SCHEDULER (the scheduler-plugins scheduler's name; its PodGroup CRD, "
                    "podgroups.scheduling.x-k8s.io, installed)",
}


@dataclass(frozen=True)
class GangScheduler:
    name: str

    @property
    def volcano(self) -> bool:
        return self.name.lower() == "volcano"

    @property
    def yunikorn(self) -> bool:
        return self.name.lower() == "yunikorn"

    @property
    def resource(self) -> Resource | None:
        """The PodGroup kind the controller keeps one of per job; None for YuniKorn, which reads pods only."""
        if self.yunikorn:
            return None
        return VOLCANO if self.volcano else COSCHEDULING

    def pod_group(self, job: Job, priorities: dict[str, int], existing: dict | None) -> dict:
        policy = scheduling_policy(job)
        min_member = policy.get("minAvailable")
        if min_member is None:
            min_member = job.total_replicas
        resources = policy.get("minResources") or min_resources(job, min_member, priorities)
        if self.volcano:
            queue = ((existing or {}).get("spec") or {}).get("queue") or policy.get("queue") or "default"
            spec = {"minMember": min_member, "queue": queue, "minResources": resources}
            if policy.get("priorityClass"):
                spec["priorityClassName"] = policy["priorityClass"]
            if policy.get("networkTopology"):  # a TrainJob's runtime: podGroupPolicy.volcano.networkTopology
                spec["networkTopology"] = policy["networkTopology"]
        else:
            spec = {"minMember": min_member, "minResources": resources}
            if policy.get("scheduleTimeoutSeconds") is not None:
                spec["scheduleTimeoutSeconds"] = policy["scheduleTimeoutSeconds"]
        annotations = dict((job.resource.get("metadata") or {}).get("annotations") or {})
        return {"apiVersion": self.resource.api_version, "kind": "PodGroup",
                "metadata": {"name": job.name, "namespace": job.namespace, "annotations": annotations},
                "spec": spec}

    def admitted(self, pod_group: dict | None) -> bool:
        """Volcano holds pods back until the group is admitted (phase set and not Pending)."""
        if not self.volcano:
            return True
        phase = ((pod_group or {}).get("status") or {}).get("phase")
        return bool(phase) and phase != "Pending"

    def decorate(self, job: Job, rtype: str, pod: dict) -> str | None:
        """Point the pod at the gang scheduler and its group; returns a warning when the template picked another."""
        spec, metadata = pod["spec"], pod["metadata"]
        scheduler = self.name.lower() if self.volcano or self.yunikorn else self.name
        warning = None
        if spec.get("schedulerName") and spec["schedulerName"] != scheduler:
            warning = "Another scheduler is specified when gang-scheduling is enabled and it will not be overwritten"
        spec.setdefault("schedulerName", scheduler)
        if self.volcano:
            metadata["annotations"] = {**(metadata.get("annotations") or {}),
                                       VOLCANO_GROUP_ANNOTATION: job.name, VOLCANO_TASK_ANNOTATION: rtype.lower()}
        elif self.yunikorn:
            queue = (job.run_policy.get("schedulingPolicy") or {}).get("queue")
            metadata["labels"] = {**(metadata.get("labels") or {}), YUNIKORN_APP_ID_LABEL: job.name,
                                  **({YUNIKORN_QUEUE_LABEL: queue} if queue else {})}
            metadata["annotations"] = {**(metadata.get("annotations") or {}),
                                       YUNIKORN_TASK_GROUPS: json.dumps(task_groups(job)),
                                       YUNIKORN_TASK_GROUP_NAME: rtype.lower()}
        else:
            metadata["labels"] = {**(metadata.get("labels") or {}), COSCHEDULING_LABEL: job.name}
        return warning


def scheduling_policy(job: Job) -> dict:
    """What a job's PodGroup is made from: a v1 job's ``runPolicy.schedulingPolicy``; a TrainJob's, as upstream's
    plugins read it, from its runtime's ``podGroupPolicy`` (coscheduling's ``scheduleTimeoutSeconds``, Volcano's
    ``networkTopology``), its annotation ``scheduling.volcano.sh/queue-name`` and its pods' PriorityClass."""
    if job.node_plan is None:
        return job.run_policy.get("schedulingPolicy") or {}
    policy = job.node_plan.pod_group_policy
    annotations = (job.resource.get("metadata") or {}).get("annotations") or {}
    found = {"scheduleTimeoutSeconds": (policy.get("coscheduling") or {}).get("scheduleTimeoutSeconds"),
             "networkTopology": (policy.get("volcano") or {}).get("networkTopology"),
             "queue": annotations.get(VOLCANO_QUEUE_ANNOTATION),
             "priorityClass": next((job.template(rtype)["spec"].get("priorityClassName") for rtype in job.replica_types
                                    if job.template(rtype)["spec"].get("priorityClassName")), None)}
    return {key: value for key, value in found.items() if value is not None}


class PodGroups:
    """Keeps one PodGroup per job for the gang scheduler, through the executor's expectations; its informers
    are the cache the controller reads PodGroups from (a PodGroup's status is the scheduler's verdict)."""

    def __init__(self, scheduler: GangScheduler, client: Client, executor: Executor, informers: list) -> None:
        self.scheduler, self.client, self.executor, self.informers = scheduler, client, executor, informers
        self.priorities: dict[str, int] = {}  # PriorityClass name -> value, read once each

    def sync(self, key: tuple[str, str, str], job: Job, existing: dict | None) -> bool:
        """Keep the job's PodGroup (``existing``: the cached one); False while Volcano has not admitted it (create
        no pods yet)."""
        resource = self.scheduler.resource
        if has_finished(job.resource) or job.suspended:
            if existing is not None:
                self.executor.delete(key, resource, job.name, job.namespace)
            return True
        desired = self.scheduler.pod_group(job, self.priority_values(job), existing)
        desired["metadata"]["ownerReferences"] = [owner_reference(job)]
        if existing is None:
            self.executor.create(key, resource, desired, job.namespace)
        elif existing.get("spec") != desired["spec"]:
            self.client.replace(resource, {**existing, "spec": desired["spec"]}, job.namespace)
        return self.scheduler.admitted(existing)

    def priority_values(self, job: Job) -> dict[str, int]:
        for rtype in job.replica_types:
            name = job.template(rtype)["spec"].get("priorityClassName")
            if name and name not in self.priorities:
                try:
                    self.priorities[name] = self.client.get(PRIORITY_CLASSES, name).get("value", 0)
                except ApiError:
                    self.priorities[name] = 0
        return self.priorities


class Gangs:
    """The gang schedulers of one controller and which of them schedules a job: a v1 job, the controller's own
    (``--gang-scheduler-name``); a TrainJob, the one its runtime's ``podGroupPolicy`` names (none without one), as
    upstream's plugins decide. One :class:`PodGroups` per PodGroup kind, shared by the schedulers that make it."""

    def __init__(self, v1: GangScheduler | None, trainjob: dict[str, GangScheduler], client: Client,
                 executor: Executor, scopes: list[str | None]) -> None:
        self.v1, self.trainjob = v1, trainjob
        kinds = {scheduler.resource: scheduler for scheduler in (*trainjob.values(), v1)
                 if scheduler is not None and scheduler.resource is not None}
        self.groups = {resource: PodGroups(scheduler, client, executor,
                                           [Informer(client, resource, ns) for ns in scopes])
                       for resource, scheduler in kinds.items()}

    @property
    def informers(self) -> list[Informer]:
        return [informer for groups in self.groups.values() for informer in groups.informers]

    def scheduler_of(self, job: Job) -> GangScheduler | None:
        """The job's gang scheduler, None for none; a TrainJob whose runtime asks for one this controller cannot
        run is one line (UserError)."""
        if job.node_plan is None:
            return self.v1
        policy = {key: value for key, value in job.node_plan.pod_group_policy.items() if value is not None}
        if not policy:
            return None
        if len(policy) > 1 or next(iter(policy)) not in POD_GROUP_POLICIES:
            raise UserError(f"TrainJob {job.name!r}: its runtime's spec.podGroupPolicy names {', '.join(policy)}: "
                            f"name one of {', '.join(POD_GROUP_POLICIES)}")
        kind = next(iter(policy))
        if kind not in self.trainjob:
            raise UserError(f"TrainJob {job.name!r}: its runtime's spec.podGroupPolicy.{kind} asks for gang "
                            f"scheduling, but {UNAVAILABLE[kind]}; or run it on a runtime without podGroupPolicy")
        return self.trainjob[kind]

    def decorate(self, job: Job, rtype: str, pod: dict) -> str | None:
        scheduler = self.scheduler_of(job)
        return scheduler.decorate(job, rtype, pod) if scheduler else None

    def pod_groups_of(self, job: Job) -> PodGroups | None:
        """Where the job's PodGroup is kept; None for a job without one (no gang, or YuniKorn's)."""
        scheduler = self.scheduler_of(job)
        return self.groups.get(scheduler.resource) if scheduler else None


def task_groups(job: Job) -> list[dict]:
    """YuniKorn's task groups: one per replica type, in the job's order. ``minAvailable`` below the
    job's replicas keeps members from the first types, as the PodGroup's ``minMember`` counts them."""
    policy = job.run_policy.get("schedulingPolicy") or {}
    left = job.total_replicas if policy.get("minAvailable") is None else policy["minAvailable"]
    groups = []
    for rtype in job.replica_types:
        members = min(job.replicas(rtype), max(left, 0))
        left -= members
        if not members:
            continue
        spec = job.template(rtype)["spec"]
        group = {"name": rtype.lower(), "minMember": members,
                 "minResource": {name: format_quantity(value) for name, value in pod_requests(spec).items()}}
        for field in ("nodeSelector", "tolerations", "affinity"):
            if spec.get(field):
                group[field] = spec[field]
        groups.append(group)
    return groups


def pod_requests(spec: dict) -> dict[str, Decimal]:
    """What one pod asks for: its containers' requests (limits where a container has none), summed."""
    totals: dict[str, Decimal] = {}
    for container in spec.get("containers", []):
        resources = container.get("resources") or {}
        for name, quantity in (resources.get("requests") or resources.get("limits") or {}).items():
            totals[name] = totals.get(name, Decimal(0)) + parse_quantity(quantity)
    return dict(sorted(totals.items()))


def min_resources(job: Job, min_member: int, priorities: dict[str, int]) -> dict[str, str]:
    """Requests (or limits) of the first ``min_member`` pods, highest PriorityClass first."""
    def priority(rtype: str) -> int:
        return priorities.get(job.template(rtype)["spec"].get("priorityClassName") or "", 0)

    totals: dict[str, Decimal] = {}
    counted = 0
    for rtype in sorted(job.replica_types, key=priority, reverse=True):
        for _ in range(job.replicas(rtype)):
            if counted >= min_member:
                break
            counted += 1
            for name, value in pod_requests(job.template(rtype)["spec"]).items():
                totals[name] = totals.get(name, Decimal(0)) + value
    return {name: format_quantity(value) for name, value in sorted(totals.items())}
