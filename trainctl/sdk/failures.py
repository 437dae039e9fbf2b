"""Why a job failed, in a form a person can act on: the failure summary.

When a job fails, ``status``, ``wait``, ``submit --wait/--follow`` and the Python API
(:class:`trainctl.errors.JobFailed`) all tell the same story, built here from what every
backend reports (:class:`~trainctl.backends.base.JobDetails`) plus each failed run's log:

    worker-0 raised RuntimeError: deliberate failure on rank 1; exit code 1 (Error), restarted 1 time
      master-0: stopped after its peer was lost (gloo)
      Failed: PyTorchJob mnist is failed because 1 Worker replica(s) failed: worker-0 raised RuntimeError: ...
      last 4 lines of worker-0's log:
        | Traceback (most recent call last):
        |   File "train.py", line 9, in <module>
        |     raise RuntimeError("deliberate failure on rank 1")
        | RuntimeError: deliberate failure on rank 1
      more: trainctl logs mnist --replica worker-0

Which replica is named is decided by evidence, not by a clock (trainctl/core/attribution.py):
a replica whose failure follows a lost peer (gloo's "Connection closed by peer", NCCL's watchdog,
TensorFlow's UnavailableError, mpirun stopping the rest ...) is listed as a consequence, and of the
others the earliest, by the most precise time known, is the cause; failures too close together
to order are said to be so. Every failed run counts: a replica's last run, and the run before its
current one when it was restarted in place (whose log is then the previous one).

What a replica or the API wrote (log lines, reasons, the condition's message) is in the summary as
trainctl.errors.visible shows it: ``\\x1b`` as ``^[``, a progress bar's line as its final state. The runs
judged keep their evidence as it was written.

Everything here is pure but for ``read_log``, which the caller passes: only it knows the backend.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from trainctl.backends.base import CRASH_LOOP, JobDetails, ReplicaRow
from trainctl.core import conditions as cond
from trainctl.core.attribution import Attribution, Judged, Run, attribute, failed_runs_of, join_names, signal_name
from trainctl.errors import visible

LOG_TAIL_LINES = 20  # shown of the cause's log
LOG_LINE_CHARS = 1000  # shown of each of those lines (as trainctl.errors.visible shows it), and how much was cut
EVIDENCE_LINES = 100  # read of each failed run's log: a traceback, or an abort's C++ report, must fit
MISSING_ENV = re.compile(r"KeyError: '(?P<name>[A-Z][A-Z0-9_]*)'")  # os.environ["RANK"] where nothing set it
LISTED = 5  # replicas named per line of consequences or other failures; the rest are counted

FailedRun = Run  # one run of a replica that ended badly (the name the Python API has documented)
__all__ = ["CRASH_LOOP", "FailedRun", "FailureSummary", "failed_runs", "signal_name", "summarize"]


@dataclass(frozen=True)
class FailureSummary:
    """What a person needs to see first when a job failed (or succeeded despite failed replicas)."""

    job: str  # kind/name, e.g. pytorchjob/mnist
    name: str
    namespace: str
    state: str  # Failed, or Succeeded when only replicas that did not decide the outcome failed
    message: str  # the Failed condition's message
    first: Run | None  # the cause (of causes too close to order, the first that raised); None when none is known
    attribution: Attribution = field(default_factory=Attribution)
    log_tail: list[str] = field(default_factory=list)  # the last lines of ``first``'s log

    def headline(self) -> str:
        """One line: who caused the failure and how, or the job's own message when no replica is known."""
        if self.first is None:
            return f"{self.job} failed: {self.message or 'no replica reported a failure'}"
        if self.state == "Succeeded":  # e.g. a PyTorchJob succeeds when its master does, whatever the workers did
            return f"{self.job} succeeded, but {self.first.replica} failed: {self.first.explanation}"
        found = self.attribution
        if found.unordered:
            names = join_names(list(dict.fromkeys(judged.run.replica for judged in found.unordered)))
            verdict = ("no exception found" if not any(judged.exception for judged in found.unordered)
                       else "too close to tell which was first")
            return f"{names} failed within {found.spread()} s; {verdict}"
        culprit = found.culprit
        if not culprit.is_cause:
            return f"{culprit.sentence()}: {how(culprit.run)}; no replica's own failure was found"
        if culprit.plain_exit:  # the sentence would only repeat the code
            return f"{culprit.run.replica} failed first: {how(culprit.run)}"
        return f"{culprit.sentence()}; {how(culprit.run)}"

    def lines(self) -> list[str]:
        """The whole summary, ready to print one line at a time."""
        lines = [self.headline()]
        found = self.attribution
        if found.culprit is not None and (hint := env_hint(found.culprit.exception, self.job.split("/")[0])):
            lines.append(f"  hint: {hint}")
        if self.state == "Failed":
            lines += [f"  {judged.sentence()}; {how(judged.run)}" for judged in found.unordered]
            lines += consequence_lines(found, self.first)
        if self.first is not None and self.message:
            lines.append(f"  {self.state}: {self.message}")
        others = [judged for judged in found.causes if judged not in found.unordered
                  and judged.run.replica != (self.first.replica if self.first else None)]
        if others:
            lines.append("  also failed: " + listed([judged.sentence() for judged in others]))
        if self.first is not None:
            run = self.first
            which = " (its previous run)" if run.previous else ""
            count = len(self.log_tail)
            lines.append(f"  last {count} line{'' if count == 1 else 's'} of {run.replica}'s log{which}:"
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


def env_hint(exception: str | None, kind: str) -> str | None:
    """For ``KeyError: 'TF_CONFIG'`` and its kin, read from os.environ: what the job's kind does set, and which
    kind sets the missing name (a script written for another framework), or which launcher sets it for the
    processes it starts (a framework's FunctionLaunch: torchrun's LOCAL_RANK)."""
    from trainctl.frameworks import ALL

    found = MISSING_ENV.search(exception or "")
    if found is None or not any(framework.kind.lower() == kind for framework in ALL):
        return None
    name, framework = found.group("name"), next(fw for fw in ALL if fw.kind.lower() == kind)
    given = operator_env(framework)
    shown = ", ".join(n for n in given if not n.startswith("PET_") and n != "PYTHONUNBUFFERED")
    if name in given:
        return None  # it was set: the KeyError is about something else
    said = f"{name} is not set: a {framework.kind}'s replicas get {shown}"
    launched = launcher_setting(name)
    if launched:
        launcher, default = launched
        return (f"{said}; {launcher} sets {name} for the processes it starts: start the script with {launcher} "
                f"({launcher} train.py), or read os.environ.get({name!r}, {default!r})")
    others = [fw.kind for fw in ALL if fw is not framework and name in operator_env(fw)]
    return f"{said}; {name} is what a {' or '.join(others)} gets" if others else said


def launcher_setting(name: str) -> tuple[str, str] | None:
    """The launcher that sets variable ``name`` for the processes it starts (torchrun's LOCAL_RANK), and the value
    a single process would have, from the frameworks' launch facts; None when no launcher sets it."""
    from trainctl.frameworks import ALL

    for framework in ALL:
        launch = framework.function_launch
        for variable, default, _ in launch.defaults if launch.launcher else ():
            if variable == name:
                return launch.launcher, default
    return None


def operator_env(framework) -> list[str]:
    """The names the operator sets in a 2-replica job of ``framework``'s kind (the reconcile core, in a cluster)."""
    from trainctl.core.actions import CreateReplica
    from trainctl.core.network import ClusterNetwork
    from trainctl.core.reconcile import reconcile

    container = {"name": framework.container, "image": "image", "command": ["run"]}
    specs = {rtype: {"replicas": count, "template": {"spec": {"containers": [dict(container)]}}}
             for rtype, count in framework.topology(2).items() if count}
    job = {"apiVersion": "kubeflow.org/v1", "kind": framework.kind, "metadata": {"name": "job", "namespace": "ns"},
           "spec": {framework.replica_spec_field: specs}}
    plan = reconcile(job, [], datetime.now(timezone.utc), ClusterNetwork())
    return list(dict.fromkeys(name for action in plan.actions if isinstance(action, CreateReplica)
                              for name in action.env))


def how(run: Run) -> str:
    """``exit code 1 (Error), restarted 1 time``; of a run that raised and was then stopped (its shutdown hung),
    that the code is the stop's."""
    stopped = "stopped when the job failed: " if run.stopped else ""
    return f"{stopped}{run.explanation}, restarted {run.restarts} time{'' if run.restarts == 1 else 's'}"


def consequence_lines(found: Attribution, shown: Run | None) -> list[str]:
    """``master-0: stopped after its peer was lost (gloo)``: one line per kind of consequence, replicas
    named once each, however many runs of theirs it was; the shown replica's other runs go unsaid."""
    groups: dict[str, list[str]] = {}
    for judged in found.consequences:
        if shown is None or judged.run.replica != shown.replica:
            names = groups.setdefault(judged.what(), [])
            if judged.run.replica not in names:
                names.append(judged.run.replica)
    return [f"  {listed(names)}: {'each ' if len(names) > 1 else ''}{what}" for what, names in groups.items()]


def listed(items: list[str]) -> str:
    """The first few items, joined, and how many more there are: 64 replicas stay one line."""
    shown = ", ".join(items[:LISTED])
    return f"{shown} and {len(items) - LISTED} more" if len(items) > LISTED else shown


def failed_runs(details: JobDetails) -> list[Run]:
    """Every replica's failed runs: its current one and the one before, as rows report them."""
    job_name = details.resource["metadata"]["name"]
    return [run for row in details.replicas for run in runs_of_row(row, job_name)]


def runs_of_row(row: ReplicaRow, job_name: str) -> list[Run]:
    replica = row.name.removeprefix(f"{job_name}-")
    current = Run(replica, row.exit_code, visible(row.reason), row.finished, restarts=row.restarts,
                  exit_window=row.exit_window, message=row.message, stopped=row.stopped)
    last = Run(replica, row.last_exit_code, visible(row.last_reason), row.last_finished, previous=True,
               restarts=row.restarts, exit_window=row.last_exit_window, message=row.last_message)
    return failed_runs_of(current, last, failed=row.state == "Failed", succeeded=row.state == "Succeeded")


def summarize(details: JobDetails,
              read_logs: Callable[[list[Run]], list[list[str]]] | None = None) -> FailureSummary | None:
    """The summary of a job that failed, or that succeeded while some replica failed; None otherwise.

    ``read_logs``: for each run given, the last :data:`EVIDENCE_LINES` lines of its log (the previous
    log when ``run.previous``), [] when it cannot be read; asked once, for every failed run.
    """
    resource = details.resource
    # Failed first: a job the controller gave up on after it succeeded has both
    state = next((ctype for ctype in ("Failed", "Succeeded") if cond.reached(resource, ctype)), "")
    runs = failed_runs(details)
    if state == "Succeeded":  # a run the job stopped at its end (an idle MPI host) did not fail
        runs = [run for run in runs if not run.stopped]
    if not state or (state == "Succeeded" and not runs):
        return None
    if read_logs is not None:
        logs = dict(zip(runs, read_logs(runs)))
        runs = [replace(run, log=tuple(logs[run])) for run in runs]
    found = attribute(runs, resource["kind"])
    culprit: Judged | None = found.culprit
    metadata = resource["metadata"]
    message = visible(str(cond.find(cond.conditions_of(resource), state).get("message") or ""))
    return FailureSummary(job=f"{resource['kind'].lower()}/{metadata['name']}", name=metadata["name"],
                          namespace=metadata.get("namespace") or "default", state=state, message=message,
                          first=culprit.run if culprit else None, attribution=found,
                          log_tail=[shown_line(line) for line in culprit.run.log[-LOG_TAIL_LINES:]] if culprit else [])


def shown_line(line: str) -> str:
    """A line of the log tail as it is shown: escaped, and its start when it is longer than :data:`LOG_LINE_CHARS`
    (a replica may print 20 MiB on one line), saying how much was cut."""
    shown = visible(line)
    if len(shown) <= LOG_LINE_CHARS:
        return shown
    return f"{shown[:LOG_LINE_CHARS]}... [{len(shown) - LOG_LINE_CHARS} more characters cut]"
