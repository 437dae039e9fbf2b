"""``wait``: block until jobs reach a state, with progress on stderr, and say why a job failed.

The spinner shows the state, the replicas the scheduler cannot place and why (its conditions may say Running
meanwhile), the time waited and, once a replica reported with ``trainctl.report()``, a progress bar
(trainctl.sdk.progress); a stall is said once, on a line of its own.

``--for`` takes a condition type in any case, or kubectl's ``condition=NAME``. Several jobs
are waited for under one ``--timeout``; the exit status is 0 only when every one reached the
state. A job that failed instead ends with its failure summary (trainctl/sdk/failures.py): which
replica failed first, its exit code and reason, and the last lines of its log. Ctrl-C stops
the waiting only, and says so (common.watching).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

from trainctl.cli import completers
from trainctl.cli.common import (Context, Kubeconfig, Local, Namespace, console, make_client, print_failure,
                                 watching)
from trainctl.cli.formatting import colored_state
from trainctl.cli.params import Argument, Option
from trainctl.cli.plain import escape, shown

if TYPE_CHECKING:
    import typer

RESTART_CHECK_S = 5.0  # how often a wait looks at restart counts (one more read of the job's replicas)

Names = Annotated[list[str], Argument(help="One or more job names (see trainctl list).", show_default=False,
                                      metavar="NAME",
                                      autocompletion=completers.job_names)]


def wait(names: Names, namespace: Namespace = None,
         for_: Annotated[str, Option("--for", help="Succeeded, Failed, Running or Suspended (any case; "
                                                   "condition=NAME as in kubectl).")] = "Succeeded",
         timeout: Annotated[str | None, Option("--timeout", help="Give up after this long (e.g. 10m); exit 1.")] = None,
         local: Local = False, context: Context = None, kubeconfig: Kubeconfig = None) -> None:
    from trainctl.sdk.client import condition_type
    from trainctl.submit.durations import parse_duration

    until = condition_type(for_)  # a bad --for fails before anything is read
    seconds = parse_duration(timeout, "--timeout")
    client = make_client(local, context, kubeconfig)
    deadline = None if seconds is None else time.monotonic() + seconds
    worst = 0
    for name in dict.fromkeys(names):
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        with watching(name, namespace):
            worst = max(worst, wait_for(client, name, namespace, until, left))
    raise SystemExit(worst)


def wait_for(client, name: str, namespace: str | None, until: str = "Succeeded", timeout: float | None = None) -> int:
    """Wait with a progress line on stderr; 0 when ``until`` is reached, 1 otherwise.

    A job that ended Failed (when that was not awaited) is explained by its failure summary;
    one that succeeded although some replica failed gets a note naming it.
    """
    from trainctl.core.conditions import has_finished, reached, state_of
    from trainctl.sdk.display import unscheduled_now
    from trainctl.sdk.progress import ProgressPeek, UnscheduledPeek, bar_text

    err = console(stderr=True)
    started = time.monotonic()
    restarts = RestartWatch(client, name, namespace)
    peek = ProgressPeek(lambda: reported_progress(client, name, namespace))
    unplaced = UnscheduledPeek(lambda: unscheduled_now(client, name, namespace))
    with err.status(f"waiting for {name} to reach {until}") as spinner:
        def progress(resource: dict) -> None:
            if reached(resource, until) or has_finished(resource):
                return  # the wait is over: nothing more to show (a job that reached it is not stalled either)
            reported = peek(resource)
            bar = f" {escape(bar_text(reported))}" if reported and reported.lead else ""
            waiting = unplaced(resource)
            spinner.update(f"waiting for {name} to reach {until}: {shown(state_of(resource))} "
                           + (f"[yellow]({shown(waiting.text(why=True))})[/] " if waiting else "")
                           + f"({time.monotonic() - started:.0f}s){bar}")
            note = restarts.note(resource)
            if note:
                err.print(note)
            stall = peek.stall_news()
            if stall:
                err.print(f"[yellow]{escape(f'{name}: {stall}')}[/]")
        try:
            resource = client.wait(name, namespace, until=until, timeout=timeout, on_progress=progress)
        except TimeoutError as timed_out:
            err.print(f"[red]timed out:[/] {timed_out}")
            return 1
    final = state_of(resource)
    ok = reached(resource, until)
    err.print(f"{name}: {colored_state(final)} on {client.backend.description}"
              f"{'' if ok else f' (waited for {until})'}")
    if final in ("Failed", "Succeeded") and until != "Failed":
        summary = client.failure_summary(name, namespace)
        if summary is not None:
            print_failure(summary, err)
    return 0 if ok else 1


def reported_progress(client, name: str, namespace: str | None):
    """The job's reported progress (trainctl.backends.reported), None when it cannot be read now (deleted meanwhile)."""
    from trainctl.errors import UserError

    try:
        return client.progress(name, namespace)
    except UserError:
        return None


class RestartWatch:
    """Says once that a job restarts with no backoffLimit: upstream's meaning (kept) is to restart for
    as long as it fails, so a wait without --timeout would otherwise wait forever and say nothing."""

    def __init__(self, client, name: str, namespace: str | None) -> None:
        self.client, self.name, self.namespace = client, name, namespace
        self.next_check, self.said = 0.0, False

    def note(self, resource: dict) -> str | None:
        from trainctl.core.job import Job

        if self.said or time.monotonic() < self.next_check:
            return None
        self.next_check = time.monotonic() + RESTART_CHECK_S
        job = Job(resource)
        if job.run_policy.get("backoffLimit") is not None \
                or all(job.restart_policy(rtype) == "Never" for rtype in job.replica_types):
            return None
        restarts = sum(row.restarts for row in self.client.get(self.name, self.namespace).replicas)
        if not restarts:
            return None
        self.said = True
        return (f"{self.name} has restarted {restarts} time{'' if restarts == 1 else 's'} and has no backoffLimit, so "
                f"it restarts for as long as it fails: stop it with trainctl delete {self.name}, or give "
                "runPolicy.backoffLimit (submit --backoff-limit)")


def register(app: typer.Typer) -> None:
    app.command(help="Wait for jobs' state; exit 0 when every one reached it, 1 otherwise (a failed job's "
                     "summary says why). Example: trainctl wait mnist --for succeeded --timeout 30m")(wait)
