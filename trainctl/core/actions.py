"""What :func:`trainctl.core.reconcile.reconcile` asks a runtime to do.

Plain frozen dataclasses: the local runtime turns them into processes, the controller
into API calls. Execute them in list order (a DeleteReplica of a restarted local replica
comes before the CreateReplica of the same name). Actions are idempotent by name: a
replica the runtime reports in ``observed`` is never created again, and reconciling the
same observed state twice yields no new creates. The order is deterministic: replica
types in the framework's order, then index.

A runtime without a cluster ignores CreateService/DeleteService (the core only emits
them for a ClusterNetwork); every runtime must handle the other four.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CreateReplica:
    """Start replica ``name`` (a pod, or a local process running the wired container's command)."""

    rtype: str
    index: int
    name: str
    labels: dict
    #: the defaulted pod template (metadata + spec) with the operator env appended and restartPolicy set
    pod: dict
    #: the wired container's env, flattened in order (what a local process gets on top of os.environ)
    env: dict = field(default_factory=dict)


@dataclass(frozen=True)
class DeleteReplica:
    """Stop and remove replica ``name`` (pod: delete; local: terminate the process)."""

    name: str
    rtype: str
    index: int
    #: Restart (the core recreates it: at once locally, on a later pass in a cluster),
    #: ScaleDown, Suspend, or Cleanup (job finished or failed: stop it for good)
    reason: str
    #: seconds between SIGTERM and SIGKILL; None: the pod's own terminationGracePeriodSeconds. 0 (forced): its node
    #: is lost (trainctl/core/nodes.py), and the kubelet that would confirm a graceful delete is gone, so the pod would
    #: stay Terminating, its name taken, for ever. Short (nodes.SURVIVOR_GRACE_S): a survivor of a node loss, stuck in
    #: a collective with the ranks that are gone, whose SIGTERM handler never runs
    grace_period: int | None = None

    @property
    def force(self) -> bool:
        return self.grace_period == 0


@dataclass(frozen=True)
class CreateService:
    """Headless Service named like the pod (cluster only; MPIJob gets none)."""

    name: str
    rtype: str
    index: int
    labels: dict
    ports: list


@dataclass(frozen=True)
class DeleteService:
    name: str


@dataclass(frozen=True)
class RecordEvent:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True)
class DeleteJob:
    """Delete the job object itself (ttlSecondsAfterFinished expired); children go with it."""

    reason: str


@dataclass
class Plan:
    """The outcome of one reconcile: store ``annotations`` if given, do ``actions`` in order, store ``status`` if
    it changed, and reconcile again after ``requeue_after`` seconds (or on the next observed change)."""

    actions: list = field(default_factory=list)
    #: the complete new .status; the runtime writes it when it differs from the stored one
    status: dict = field(default_factory=dict)
    #: seconds until a time-based rule fires (deadline, TTL); None when nothing is pending
    requeue_after: float | None = None
    #: the job's annotations the runtime sets before it acts (the restart record: trainctl/core/restarts.py), or
    #: None when none changed. Written first: a pass that restarts the job and dies half-way has said so already,
    #: so the next one stops the old attempt's replicas instead of deciding the restart (and counting it) again
    annotations: dict[str, str] | None = None
