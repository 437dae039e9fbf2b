"""Why a job failed, in a form a person can act on: the failure summary.

When a job fails, ``status``, ``wait``, ``submit --wait/--follow`` and the Python API
(:class:`trainctl.errors.JobFailed`) all tell the same story, built here from what every
backend reports (:class:`~trainctl.backends.base.JobDetails`) plus the failing run's log:

    worker-1 failed first: exit code 1 (Error), restarted 0 times
      Failed: PyTorchJob mnist is failed because 1 Worker replica(s) failed.
      last 3 lines of worker-1's log:
        | Traceback (most recent call last):
        |   File "train.py", line 9, in <module>
        | RuntimeError: loss is NaN
      more: trainctl logs mnist --replica worker-1

"Failed first" means the earliest finish time of a failing run (a replica's last run, or
the run before its current one when it was restarted in place). Finish times have one
second resolution, so within a second a replica that exited with its own code wins over one
killed by a signal: replicas the job stopped because another one failed die by SIGTERM or
SIGKILL, and they are victims, not causes.

Everything here is pure (no I/O): the caller reads the log tail, since only it knows the
backend; :func:`failing_run` says which log (current or previous run) to read.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field

from trainctl.backends.base import JobDetails, ReplicaRow

LOG_TAIL_LINES = 20
#: states a replica can be in while kubelet (or the local supervisor) waits to restart it
CRASH_LOOP = "CrashLoopBackOff"


@dataclass(frozen=True)
class FailedRun:
    """One run of a replica that ended badly."""

    replica: str  # short id, e.g. worker-1 (the `logs --replica` name)
    exit_code: int | None
    reason: str  # what the backend said: Error, OOMKilled, ContainerCannotRun ...
    finished: str | None  # RFC 3339
    previous: bool  # the replica was restarted since: the run's log is the previous one
    restarts: int = 0

    @property
    def explanation(self) -> str:
        """``exit code 137 (OOMKilled, SIGKILL)``: the code plus every name it has."""
        names = [name for name in (self.reason, signal_name(self.exit_code)) if name]
        code = "no exit code" if self.exit_code is None else f"exit code {self.exit_code}"
        return f"{code} ({', '.join(dict.fromkeys(names))})" if names else code


@dataclass(frozen=True)
class FailureSummary:
    """What a person needs to see first when a job failed (or succeeded despite failed replicas)."""

    job: str  # kind/name, e.g. pytorchjob/mnist
    name: str
    namespace: str
    state: str  # Failed, or Succeeded when only replicas that did not decide the outcome failed
    message: str  # the Failed condition's message
    first: FailedRun | None  # None when no replica is left to blame (pods deleted, deadline ...)
    others: list[FailedRun] = field(default_factory=list)
    log_tail: list[str] = field(default_factory=list)

    def headline(self) -> str:
        """One line: who failed first and how, or the job's own message when no replica is known."""
        if self.first is None:
            return f"{self.job} failed: {self.message or 'no replica reported a failure'}"
        run = self.first
        if self.state == "Succeeded":  # e.g. a PyTorchJob succeeds when its master does, whatever the workers did
            return f"{self.job} succeeded, but {run.replica} failed: {run.explanation}"
        return f"{run.replica} failed first: {run.explanation}, restarted {run.restarts} times"

    def lines(self) -> list[str]:
        """The whole summary, ready to print one line at a time."""
        lines = [self.headline()]
        if self.first is not None and self.message:
            lines.append(f"  {self.state}: {self.message}")
        if self.others:
            lines.append("  also failed: " + "; ".join(f"{run.replica}: {run.explanation}" for run in self.others))
        if self.first is not None:
            run = self.first
            which = " (its previous run)" if run.previous else ""
            lines.append(f"  last {len(self.log_tail)} lines of {run.replica}'s log{which}:"
                         if self.log_tail else f"  {run.replica}'s log{which} is empty or gone")
            lines += [f"    | {text}" for text in self.log_tail]
            lines.append(f"  more: {self.logs_command()}")
        return lines

    def logs_command(self) -> str:
        run = self.first
        namespace = f" -n {self.namespace}" if self.namespace != "default" else ""
        previous = " --previous" if run and run.previous else ""
        return f"trainctl logs {self.name}{namespace} --replica {run.replica if run else ''}{previous}"

    def __str__(self) -> str:
        return "\n".join(self.lines())


def signal_name(code: int | None) -> str:
    """SIGKILL for 137 (128 + 9, a container's convention) or -9 (Python's); '' for ordinary codes."""
    if code is not None and -128 < code < 0:
        number = -code
    elif code is not None and 128 < code < 256:
        number = code - 128
    else:
        return ""
    try:
        return signal.Signals(number).name
    except ValueError:
        return ""


def failed_runs(details: JobDetails) -> list[FailedRun]:
    """Every replica's latest failing run, the first to fail first."""
    job_name = details.resource["metadata"]["name"]
    runs = [run for run in (failing_run(row, job_name) for row in details.replicas) if run is not None]
    return sorted(runs, key=lambda run: (run.finished or "~", bool(signal_name(run.exit_code))))


def failing_run(row: ReplicaRow, job_name: str) -> FailedRun | None:
    """The replica's latest run that failed: the current one if it ended so, else the one before it."""
    replica = row.name.removeprefix(f"{job_name}-")
    if row.state == "Failed":
        return FailedRun(replica, row.exit_code, row.reason, row.finished, previous=False, restarts=row.restarts)
    if row.last_exit_code not in (None, 0) and row.state != "Succeeded":  # a retry that worked clears it
        return FailedRun(replica, row.last_exit_code, row.last_reason, row.last_finished, previous=True,
                         restarts=row.restarts)
    return None


def summarize(details: JobDetails, log_tail: list[str] | None = None) -> FailureSummary | None:
    """The summary of a job that failed, or that succeeded while some replica failed; None otherwise.

    ``log_tail``: the last lines of the first failed run's log (see :func:`failed_runs`).
    """
    resource = details.resource
    conditions = {c.get("type"): c for c in (resource.get("status") or {}).get("conditions") or []
                  if c.get("status") == "True"}
    runs = failed_runs(details)
    state = "Failed" if "Failed" in conditions else "Succeeded" if "Succeeded" in conditions else ""
    if not state or (state == "Succeeded" and not runs):
        return None
    metadata = resource["metadata"]
    return FailureSummary(job=f"{resource['kind'].lower()}/{metadata['name']}", name=metadata["name"],
                          namespace=metadata.get("namespace") or "default", state=state,
                          message=conditions[state].get("message", ""), first=runs[0] if runs else None,
                          others=runs[1:], log_tail=list(log_tail or []))
