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
    # what tells this run's failure from one caused by another replica's (trainctl/core/attribution.py):
    message: str = ""  # the termination message: the function runner's record, or the log's tail
    exit_window: tuple[float, float] | None = None  # Unix seconds it exited between, where the runtime saw it
    # the run before this one, for a replica restarted in place (kubelet's lastState) or recreated locally
    last_exit_code: int | None = None
    last_reason: str = ""
    last_finished_at: str | None = None
    last_message: str = ""
    last_exit_window: tuple[float, float] | None = None
    # what befell the pod rather than the program (trainctl/core/restarts.py): a DisruptionTarget condition, an
    # eviction, a lost or shut-down node ('' for nothing); a replica being deleted says so with ``deleting``
    disruption: str = ""
    # its node (trainctl/core/nodes.py): the node's name ('' before it is bound); '' while the node is Ready, else
    # NotReady (its Ready condition False or Unknown, since node_down_since) or gone (no such Node object)
    node: str = ""
    node_down: str = ""
    node_down_since: str | None = None
    # when the node's kubelet last renewed its Lease (RFC 3339; None: not known) and the lease's duration in seconds:
    # a kubelet two renewals late is silent before its node leaves Ready (trainctl/core/nodes.py)
    node_heard_at: str | None = None
    node_lease_s: int | None = None
    attempt: int = 0  # the job's attempt it was started for (its trainctl.io/restart-attempt label; 0 without)
    # its pod's Ready condition (its readiness probes passed); None where the runtime has none: a local process
    pod_ready: bool | None = None

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def active(self) -> bool:
        return not self.finished and not self.deleting

    @property
    def ready(self) -> bool:
        """Running and ready to serve (JobSet's dependsOn ``Ready``): a process that runs, a pod whose Ready
        condition is true."""
        return self.phase == "Running" and self.active and self.pod_ready is not False
