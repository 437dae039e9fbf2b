"""A pod's state as kubelet reports it, read in one place: its phase, its containers' runs, restarts, why it waits.

A pod's ``status`` holds its ``phase`` and, per container (init containers apart), the ``state``
of the current run (``waiting`` with a reason, ``running``, or ``terminated`` with an exit code,
reason, message and time) and, once kubelet restarted it in place, the ``lastState`` of the run
before. Three readers need it: ``status``'s replica rows (the state as kubectl shows it), the logs
(whose log tells why a pod never ran) and the controller (a replica in the reconcile core's terms).
They all read it through :class:`PodStatus`, so a restart, a failed init container or a
termination is understood the same way everywhere.
"""

from __future__ import annotations

PHASES = ("Pending", "Running", "Succeeded", "Failed")
FINISHED = ("Succeeded", "Failed")
STARTING = "PodInitializing"  # what a container waiting for the init containers says: no trouble


def terminated(container: dict, previous: bool = False) -> dict:
    """A container's current run's termination ({} while it waits or runs); ``previous``: the run before."""
    return ((container.get("lastState" if previous else "state") or {}).get("terminated")) or {}


def telling(terminations: list[dict]) -> dict:
    """Of several containers' terminations, the one that explains most: a failed one, else any ({} without)."""
    ended = [termination for termination in terminations if termination]
    return next((termination for termination in ended if termination.get("exitCode")), ended[0] if ended else {})


class PodStatus:
    """One pod's ``status`` (and whether it is being deleted), read."""

    def __init__(self, status: dict | None, deleting: bool = False) -> None:
        self.raw = status or {}
        self.deleting = deleting

    @classmethod
    def of(cls, pod: dict) -> PodStatus:
        return cls(pod.get("status"), bool((pod.get("metadata") or {}).get("deletionTimestamp")))

    @property
    def phase(self) -> str:
        """The phase kubelet reports (Pending until it reports one; Unknown for a lost node)."""
        return self.raw.get("phase") or "Pending"

    @property
    def finished(self) -> bool:
        return self.phase in FINISHED

    @property
    def containers(self) -> list[dict]:
        return self.raw.get("containerStatuses") or []

    @property
    def init_containers(self) -> list[dict]:
        return self.raw.get("initContainerStatuses") or []

    def restarts(self, with_init: bool = False) -> int:
        """kubelet's in-place restarts of the containers (and of the init containers: they count against a
        job's backoffLimit too)."""
        statuses = self.containers + (self.init_containers if with_init else [])
        return sum(status.get("restartCount", 0) for status in statuses)

    def container(self, name: str | None) -> dict:
        """The status of container ``name`` ({} when kubelet reports none)."""
        return next((status for status in self.containers if status.get("name") == name), {})

    def ended(self, previous: bool = False) -> dict:
        """The containers' telling termination: of their current runs, or with ``previous`` of the runs before."""
        return telling([terminated(status, previous) for status in self.containers])

    def init_trouble(self) -> tuple[str, dict]:
        """kubectl's ``Init:<reason>`` for an init container that failed, cannot start or waits to run again
        (``Init:ImagePullBackOff``), with the failed run's termination; ``("", {})`` when they are fine."""
        for container in self.init_containers:
            ended = terminated(container)
            if ended.get("exitCode"):
                return f"Init:{ended.get('reason') or 'Error'}", ended
            waiting = ((container.get("state") or {}).get("waiting") or {}).get("reason")
            if waiting and waiting != STARTING:
                return f"Init:{waiting}", terminated(container, previous=True)
        return "", {}

    def waiting_reason(self) -> str:
        """Why the pod waits: its init containers' trouble, else the first waiting container's reason."""
        return self.init_trouble()[0] or next(
            (reason for status in self.containers if (reason := ((status.get("state") or {}).get("waiting")
                                                                 or {}).get("reason"))), "")

    def unscheduled(self) -> dict:
        """The scheduler's word on a pod it has not placed: its PodScheduled condition while that is False (reason
        Unschedulable, or SchedulingGated; the scheduler's message, such as ``0/2 nodes are available: ...``; and
        since when: lastTransitionTime); {} once the pod is bound, and before the scheduler looked at it."""
        if self.phase != "Pending":
            return {}
        return next((condition for condition in self.raw.get("conditions") or []
                     if condition.get("type") == "PodScheduled" and condition.get("status") == "False"), {})

    def shown(self) -> tuple[str, dict]:
        """The state as kubectl shows it (its phase, or why it waits: CrashLoopBackOff, Init:Error, Terminating)
        and the termination that explains it."""
        state, ended = self.phase, self.ended()
        waiting = self.waiting_reason()
        if waiting and state in ("Pending", "Running"):
            state = waiting
        init_state, init_ended = self.init_trouble()
        if init_state and self.phase == "Pending":  # the code snapshot's unpacking failed, say
            state, ended = init_state, ended or init_ended
        return ("Terminating" if self.deleting else state), ended


def failed_init(status: dict | None) -> tuple[str, bool, int] | None:
    """(name, previous, exit code) of the init container that failed and so kept the main container from ever
    starting (code shipping's unpack, a --pip install, the wait for the master): then its log is the only one
    that says why. ``status``: the pod's (None: no such pod). None when the main container ran, or nothing failed."""
    pod = PodStatus(status)
    if any((container.get("state") or {}).get("running") or terminated(container) or terminated(container, True)
           for container in pod.containers):
        return None
    for init in pod.init_containers:
        ended, before = terminated(init).get("exitCode", 0), terminated(init, True).get("exitCode", 0)
        if ended:  # it failed and stays failed (restartPolicy Never)
            return init.get("name", ""), False, ended
        if before and (init.get("state") or {}).get("waiting"):  # failed, and waits to be run again
            return init.get("name", ""), True, before
    return None
