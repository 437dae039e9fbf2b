"""What ``JobHandle.wait`` and ``trainctl wait`` show while they wait: one live line in a notebook or a terminal,
plain lines elsewhere.

The live line is the job's state, the time waited, and either its progress, once a replica reported
with ``trainctl.report()`` (trainctl.backends.reported), as a bar with step/total, ETA and the latest
metrics, or else the latest line any replica logged:
``pytorchjob/mnist: Running (Master 1 active) 42s | ━━━━━━━━━╸━━━━━━ 30/40 75% ETA 5s loss 0.0333``.
In a Jupyter kernel it is one output updated in place (an IPython display, with an HTML progress
bar); in a terminal, Rich's status spinner on stderr, rewritten in place. Anywhere else (a log file,
CI, a piped script) a line is printed only when something a person cares about changes (the job's
state or its replica counts, the progress passing another tenth of its total, a stall), never per
poll, so a long wait is a handful of lines rather than a scrolling wall. The state comes from the
job resource the wait reads anyway; the latest log line is read when the state changes and at most
every :data:`LOG_PEEK_SECONDS` otherwise (on a cluster, a request per pod), the progress at most
every :data:`PROGRESS_PEEK_SECONDS`. A stall (no output nor progress for the job's stall time) is
said once, on a line of its own. While fewer replicas are active than the job has, its replicas are read
at most every :data:`UNSCHEDULED_PEEK_SECONDS` too: one the scheduler cannot place is said on the line
(``1/4 replicas running; 3 unschedulable for 8m: Unschedulable: 0/2 nodes are available: ...``), since the job's
own conditions may say Running meanwhile.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from trainctl.errors import visible

if TYPE_CHECKING:
    from trainctl.backends.reported import JobProgress
    from trainctl.sdk.display import Unscheduled

Reporter = Callable[[dict], None]
LatestLine = Callable[[], "str | None"]
ReadProgress = Callable[[], "JobProgress | None"]
ReadUnscheduled = Callable[[], "Unscheduled | None"]
LOG_PEEK_SECONDS = 1.0
PROGRESS_PEEK_SECONDS = 2.0
UNSCHEDULED_PEEK_SECONDS = 5.0  # on a cluster, one read of the job's pods
BAR_WIDTH = 16
PLAIN_PROGRESS_TENTHS = 10  # plain lines: one each time the progress passes another tenth of the total
SHOWN_LOG_CHARS = 120
ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")  # colours and cursor moves: the line is shown as text


def describe(resource: dict) -> str:
    """``Running (Master 1 active, Worker 2 active)``: the state and what the status counts, as read from the API
    (trainctl.errors.visible)."""
    from trainctl.core.conditions import state_of, status_of

    counts = []
    for rtype, status in (status_of(resource).get("replicaStatuses") or {}).items():
        parts = [f"{status[key]} {key}" for key in ("active", "succeeded", "failed") if status.get(key)]
        if parts:
            counts.append(f"{rtype} {', '.join(parts)}")
    return visible(state_of(resource) + (f" ({'; '.join(counts)})" if counts else ""))


@contextmanager
def reporter(label: str, enabled: bool = True, latest_line: LatestLine | None = None,
             read_progress: ReadProgress | None = None,
             read_unscheduled: ReadUnscheduled | None = None) -> Iterator[Reporter]:
    """A callback for ``Client.wait(on_progress=...)`` that shows ``label: <state>`` as it changes;
    ``latest_line`` reads the job's last log line, ``read_progress`` its reported progress, ``read_unscheduled``
    its replicas the scheduler cannot place, for the displays."""
    peek, waiting = ProgressPeek(read_progress), UnscheduledPeek(read_unscheduled)
    if not enabled:
        yield lambda resource: None
    elif in_notebook():
        yield notebook_display(label, live_line(label, latest_line, peek, waiting), peek)
    elif sys.stderr.isatty():
        with rich_status(label, live_line(label, latest_line, peek, waiting), peek) as report:
            yield report
    else:
        yield plain_lines(label, peek, waiting)


class ProgressPeek:
    """The job's reported progress, read at most every :data:`PROGRESS_PEEK_SECONDS` (and when its state
    changes); :meth:`stall_news` says a stall once."""

    def __init__(self, read: ReadProgress | None) -> None:
        self.read, self.read_at, self.state = read, float("-inf"), ""
        self.progress: JobProgress | None = None
        self.stall_said = False

    def __call__(self, resource: dict) -> JobProgress | None:
        from trainctl.core.conditions import state_of

        now, state = time.monotonic(), state_of(resource)
        if self.read is not None and (now - self.read_at >= PROGRESS_PEEK_SECONDS or state != self.state):
            self.read_at, self.state = now, state
            self.progress = self.read() or self.progress
        return self.progress

    def stall_news(self) -> str | None:
        """The stall, the first time it is seen (a job that moves again may stall again: said again then)."""
        stall = self.progress.stall_text() if self.progress else None
        news = stall if stall and not self.stall_said else None
        self.stall_said = stall is not None
        return news


class UnscheduledPeek:
    """The job's replicas that the scheduler cannot place, read at most every :data:`UNSCHEDULED_PEEK_SECONDS`
    and only while fewer replicas are active than the job has (the job resource says how many are, not why)."""

    def __init__(self, read: ReadUnscheduled | None) -> None:
        self.read, self.read_at = read, float("-inf")
        self.found: Unscheduled | None = None

    def __call__(self, resource: dict) -> Unscheduled | None:
        from trainctl.core.conditions import has_finished

        if self.read is None or has_finished(resource) or all_active(resource):
            self.found = None
        elif time.monotonic() - self.read_at >= UNSCHEDULED_PEEK_SECONDS:
            self.read_at, self.found = time.monotonic(), self.read()
        return self.found


def all_active(resource: dict) -> bool:
    """Whether the job's status counts as many active replicas as its spec asks for."""
    from trainctl.core.conditions import status_of
    from trainctl.sdk.display import replica_specs

    active = sum(status.get("active") or 0 for status in (status_of(resource).get("replicaStatuses") or {}).values())
    return active >= sum((spec or {}).get("replicas", 1) for spec in replica_specs(resource).values())


def bar_text(progress: JobProgress) -> str:
    """``━━━━━━━━━╸━━━━━━ 30/40 75% ETA 5s loss 0.0333``, or ``step 30, loss 0.0333`` without a total."""
    from trainctl.backends.reported import metric_texts

    lead = progress.lead
    if lead is None:
        return ""
    parts = [lead.where()] if lead.fraction is None else [f"{bar(lead.fraction)} {lead.step}/{lead.total} "
                                                          f"{lead.fraction:.0%}"]
    if lead.eta_text() and not progress.finished:
        parts.append(lead.eta_text())
    parts += metric_texts(lead.metrics, 3)
    return " ".join(parts)


def bar(fraction: float) -> str:
    """A bar of :data:`BAR_WIDTH` cells, ``━`` done, ``╸`` a half cell, ``━``-dim left as ``─``."""
    halves = round(fraction * BAR_WIDTH * 2)
    done, half = divmod(halves, 2)
    return "━" * done + ("╸" if half else "") + "─" * (BAR_WIDTH - done - half)


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (an IPython shell with a kernel), which can update an output."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


def live_line(label: str, latest_line: LatestLine | None, peek: ProgressPeek,
              unscheduled: UnscheduledPeek | None = None) -> Callable[[dict], str]:
    """The text of the live line for a resource: state, seconds waited, the replicas the scheduler cannot place,
    then the progress bar once the job reported progress, else the latest log line (read now and then)."""
    started, peeked, latest, state = time.monotonic(), [float("-inf")], [""], [""]

    def text(resource: dict) -> str:
        now, described = time.monotonic(), describe(resource)
        progress = peek(resource)
        waiting = unscheduled(resource) if unscheduled is not None else None
        shown = bar_text(progress) if progress else ""
        if not shown and latest_line is not None and (now - peeked[0] >= LOG_PEEK_SECONDS or described != state[0]):
            peeked[0], state[0] = now, described
            latest[0] = shown_text(latest_line() or "") or latest[0]
        stall = progress.stall_text() if progress else None
        return (f"{label}: {described} {now - started:.0f}s" + (f" | {waiting.text(why=True)}" if waiting else "")
                + (f" | {shown or latest[0]}" if shown or latest[0] else "") + (f" | {stall}" if stall else ""))

    return text


def shown_text(line: str) -> str:
    """A log line as one line of text: what a progress bar drew last (after its final ``\\r``), without its colours
    and cursor moves, any other control shown (trainctl.errors.visible)."""
    return visible(ESCAPES.sub("", line)).strip()[:SHOWN_LOG_CHARS]


def notebook_display(label: str, text: Callable[[dict], str], peek: ProgressPeek) -> Reporter:
    import html

    from IPython.display import display

    output = display({"text/plain": "waiting"}, raw=True, display_id=True)
    shown = [""]

    def report(resource: dict) -> None:
        line = text(resource)
        if line != shown[0]:  # at most once a second: the seconds waited tick
            shown[0] = line
            progress = peek.progress
            fraction = progress.lead.fraction if progress and progress.lead else None
            meter = f'<progress value="{fraction:.4f}" max="1" style="width:12em"></progress> ' \
                if fraction is not None else ""
            output.update({"text/plain": line, "text/html": f"<div>{meter}<code>{html.escape(line)}</code></div>"},
                          raw=True)
        if (stall := peek.stall_news()) is not None:
            print(f"{label}: {stall}", file=sys.stderr, flush=True)

    return report


@contextmanager
def rich_status(label: str, text: Callable[[dict], str], peek: ProgressPeek) -> Iterator[Reporter]:
    from rich.console import Console
    from rich.markup import escape

    console = Console(stderr=True)
    with console.status(escape(f"{label}: waiting")) as spinner:
        def report(resource: dict) -> None:
            spinner.update(escape(text(resource)))
            if (stall := peek.stall_news()) is not None:
                console.print(f"[yellow]{escape(f'{label}: {stall}')}[/]")

        yield report


def plain_lines(label: str, peek: ProgressPeek, unscheduled: UnscheduledPeek | None = None) -> Reporter:
    """A line per change of state, per change of the replicas the scheduler cannot place (not per minute they
    wait), per tenth of the total passed (or, without a total, per hundred steps), and one for a stall."""
    shown: list = ["", None, None]

    def report(resource: dict) -> None:
        text, progress = describe(resource), peek(resource)
        if text != shown[0]:
            shown[0] = text
            print(f"{label}: {text}", file=sys.stderr, flush=True)
        waiting = unscheduled(resource) if unscheduled is not None else None
        if waiting and waiting._replace(waiting_since=None) != shown[2]:
            print(f"{label}: {waiting.text(why=True)}", file=sys.stderr, flush=True)
        shown[2] = waiting._replace(waiting_since=None) if waiting else None
        lead = progress.lead if progress else None
        if lead is not None and lead.step is not None:
            mark = int(lead.fraction * PLAIN_PROGRESS_TENTHS) if lead.fraction is not None else lead.step // 100
            if mark != shown[1]:
                shown[1] = mark
                print(f"{label}: {bar_text(progress)}", file=sys.stderr, flush=True)
        if (stall := peek.stall_news()) is not None:
            print(f"{label}: {stall}", file=sys.stderr, flush=True)

    return report
