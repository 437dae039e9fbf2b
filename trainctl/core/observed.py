"""What a runtime saw of one replica (a pod, or a local process), in the core's terms."""

from __future__ import annotations

from dataclasses import dataclass

PHASES = ("Pending", "Running", "Succeeded", "Failed")


@dataclass(frozen=True)
class ObservedReplica:
    rtype: str  # canonical replica type, e.g. "Worker"
    index: int
    name: str  # pod name, e.g. "mnist-worker-1"
    phase: str  # one of PHASES
    exit_code: int | None = None  # of the framework container, when terminated
    restart_count: int = 0  # in-place restarts (kubelet), not recreations
    deleting: bool = False  # deletion requested (deletionTimestamp)
    reason: str = ""  # OOMKilled, Error, ...
    started_at: str | None = None
    finished_at: str | None = None

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def active(self) -> bool:
        return not self.finished and not self.deleting
