"""What :func:`trainctl.core.reconcile.reconcile` asks a runtime to do.

Plain frozen dataclasses: the local runtime turns them into processes, the controller
into API calls. Actions are idempotent by name (a replica that exists is not created
twice) and come in a deterministic order.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class CreateReplica:
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
    name: str
    rtype: str
    index: int
    reason: str  # Restart, ScaleDown, Suspend, Cleanup, Deadline, BackoffLimit


@dataclass(frozen=True)
class CreateService:
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
    reason: str


@dataclass
class Plan:
    actions: list = field(default_factory=list)
    #: the complete new .status; the runtime writes it when it differs from the stored one
    status: dict = field(default_factory=dict)
    #: seconds until a time-based rule fires (deadline, TTL); None when nothing is pending
    requeue_after: float | None = None
