"""What a running job's replicas reported with ``trainctl.report()``, read back: progress, metrics, stalls.

The replicas write points (time, step, total, metrics) to the channel :mod:`trainctl.reporting`
describes; a backend hands back each replica's lines (:meth:`Backend.reports
<trainctl.backends.base.Backend.reports>`: locally its progress file, on a cluster its pod's log)
and when it last wrote anything at all. This module turns them into what people read:

* :class:`Progress`, one replica's latest state: step of total, the rate over the last
  :data:`RATE_WINDOW_S` seconds, the ETA at that rate, each metric's latest value, when it last
  reported; :class:`JobProgress` the job's: its leading replica's (the first, in the kind's
  replica order, that reported: Master before Workers), every replica's, and whether it stalled.
* A **stall**: a Running job none of whose replicas wrote a line of output or a report for the
  job's ``trainctl.io/stall-after`` (``submit --stall-after``, default 10 minutes) since the latest
  of those and the replicas' start is called stalled; ``--stall-timeout`` fails it (the runtimes:
  trainctl/core/reconcile.py).
* ``job.metrics()``: every point with metrics of a replica, in order, thinned past
  :data:`MAX_POINTS` to that many evenly spaced ones (the first and the last always among them).

On a cluster ``list`` cannot read every job's logs; trainctl's controller stores each running job's
summary in its annotation :data:`PROGRESS_ANNOTATION` (at most once per job every 30 s, by the write time
the annotation carries), which is
what ``list`` shows there (:func:`from_annotation`).
"""

from __future__ import annotations

import json
import math
import time
from typing import TYPE_CHECKING, NamedTuple

from trainctl.core.conditions import status_of
from trainctl.errors import visible
from trainctl.reporting import points_of

if TYPE_CHECKING:
    from trainctl.backends.base import Backend, JobDetails, ReplicaReports

MAX_POINTS = 10_000  # of job.metrics(), per replica
RATE_WINDOW_S = 60.0  # the rate is the steps made over about the last minute of reports
PROGRESS_ANNOTATION = "trainctl.io/progress"
ANNOTATED_METRICS = 4  # of the latest metrics, the first few go into the annotation (it stays small)
MAX_ANNOTATION_CHARS = 2000
WRITTEN = "written"  # the annotation's own write time, in it
SHOWN_METRICS = 8  # of a replica's latest metrics, what status's line shows (job.progress() has them all)


class Point(NamedTuple):
    """One report: Unix time, step and total (None when not given), and the metrics given with it."""

    time: float
    step: int | None
    total: int | None
    metrics: dict[str, float]


class Progress(NamedTuple):
    """One replica's latest report: where it is, how fast it goes, its metrics' latest values."""

    replica: str
    step: int | None = None
    total: int | None = None
    time: float | None = None  # of the latest report
    metrics: dict[str, float] = {}  # each metric's latest value (never changed in place: see _replace below)
    rate: float | None = None  # steps per second, over the last minute of reports
    last_output: float | None = None  # the replica's last output line or report

    @property
    def fraction(self) -> float | None:
        if self.step is None or not self.total:
            return None
        return min(1.0, self.step / self.total)

    @property
    def eta(self) -> float | None:
        """Seconds left at the current rate, or None (no total, no rate yet)."""
        if self.step is None or not self.total or not self.rate:
            return None
        return max(0.0, (self.total - self.step) / self.rate)

    def eta_text(self) -> str:
        """``ETA 5s`` while steps are left; "" without an ETA or at the last step, where "ETA 0s" says nothing
        (and a display that showed it just before the job ended would keep it as its last word)."""
        if self.eta is None or self.step >= self.total:
            return ""
        return f"ETA {duration(self.eta)}"

    def text(self, now: float, finished: bool = False) -> str:
        """``30/40 (75%), 2.1 steps/s, ETA 5s, loss 0.0333, 2s ago``."""
        parts = [self.where()]
        if not finished:
            if self.rate:
                parts.append(f"{self.rate:.3g} steps/s")
            if self.eta_text():
                parts.append(self.eta_text())
        parts += metric_texts(self.metrics, SHOWN_METRICS)
        if self.time is not None and not finished:
            parts.append(f"{duration(max(0.0, now - self.time))} ago")
        return ", ".join(parts)

    def where(self) -> str:
        if self.step is None:
            return "no step reported"
        if not self.total:  # none given, or 0 from a replica that wrote it by hand
            return f"step {self.step}"
        return f"{self.step}/{self.total} ({self.fraction:.0%})"


class JobProgress(NamedTuple):
    """A job's progress: its leading replica's (``step``, ``total``, ``eta``, ``metrics``, ``time`` are that
    one's), every replica that reported, and for a running job how long it has been stalled."""

    state: str
    replicas: list[Progress]  # those that reported, in replica order
    stalled_for: float | None = None  # seconds without output or reports, once past the stall time
    stall_after: float | None = None

    @property
    def lead(self) -> Progress | None:
        return self.replicas[0] if self.replicas else None

    step = property(lambda self: self.lead.step if self.lead else None)
    total = property(lambda self: self.lead.total if self.lead else None)
    eta = property(lambda self: self.lead.eta if self.lead else None)
    rate = property(lambda self: self.lead.rate if self.lead else None)
    time = property(lambda self: self.lead.time if self.lead else None)
    metrics = property(lambda self: dict(self.lead.metrics) if self.lead else {})

    @property
    def finished(self) -> bool:
        return self.state in ("Succeeded", "Failed")

    def replicas_differ(self) -> bool:
        return len({(p.step, p.total) for p in self.replicas}) > 1

    def stall_text(self) -> str | None:
        """``stalled: no output or progress for 12m``, while the job is stalled."""
        if self.stalled_for is None:
            return None
        return f"stalled: no output or progress for {duration(self.stalled_for)}"

    def lines(self, now: float | None = None) -> list[str]:
        """What ``status`` prints: the job's progress, a line per replica when they differ, the stall."""
        now = time.time() if now is None else now
        lines = []
        if self.lead is not None:
            lines.append(f"progress: {self.lead.text(now, self.finished)}")
            if self.replicas_differ():
                lines += [f"  {p.replica}: {p.text(now, self.finished)}" for p in self.replicas]
        if self.stall_text():
            lines.append(self.stall_text())
        return lines

    def cell(self) -> str:
        """The PROGRESS column of ``list``: ``30/40 75%``, ``step 30``, that it stalled, or ``-``."""
        if self.stalled_for is not None:
            return f"stalled {duration(self.stalled_for)}"
        lead = self.lead
        if lead is None or lead.step is None:
            return "-"
        return f"{lead.step}/{lead.total} {lead.fraction:.0%}" if lead.total else f"step {lead.step}"

    def __str__(self) -> str:
        return "\n".join(self.lines()) or f"{self.state}: nothing reported"

    def _repr_pretty_(self, printer, cycle: bool) -> None:  # IPython shows what status prints
        printer.text(str(self))


# ---- reading ------------------------------------------------------------------------------------

def points(reports: ReplicaReports) -> list[Point]:
    return [Point(*point) for line in reports.lines for point in points_of(line)]


def job_progress(backend: Backend, details: JobDetails, now: float | None = None) -> JobProgress:
    """The job's progress now, from its replicas' recent reports and output (see the module docstring)."""
    from trainctl.core.conditions import state_of
    from trainctl.errors import UserError

    resource = details.resource
    metadata = resource["metadata"]
    try:
        found = backend.reports(metadata["name"], metadata.get("namespace") or "default", details=details)
    except UserError:  # deleted meanwhile, or its logs cannot be read: nothing reported, as far as anyone can see
        found = {}
    now = time.time() if now is None else now
    progress = [summary(reports, points(reports), now) for reports in in_replica_order(resource, found)]
    return judged(JobProgress(state_of(resource), [p for p in progress if p.time is not None]), details,
                  [p.last_output for p in progress], now)


def in_replica_order(resource: dict, found: dict[str, ReplicaReports]) -> list[ReplicaReports]:
    from trainctl.core.job import Job

    job = Job(resource)
    order = [job.replica_id(t, i) for t in job.replica_types for i in range(job.replicas(t))]
    return sorted(found.values(), key=lambda r: order.index(r.replica) if r.replica in order else len(order))


def summary(reports: ReplicaReports, series: list[Point], now: float) -> Progress:
    """One replica's :class:`Progress` from its points (in the order written)."""
    progress = Progress(reports.replica, last_output=reports.last_output)
    if not series:
        return progress
    latest, metrics = series[-1], {}
    for point in series:
        metrics.update(point.metrics)
    total = next((p.total for p in reversed(series) if p.total is not None), None)
    step = next((p.step for p in reversed(series) if p.step is not None), None)
    return progress._replace(step=step, total=total, time=latest.time, metrics=metrics, rate=rate(series, now),
                   last_output=max(reports.last_output or 0.0, latest.time))


def rate(series: list[Point], now: float) -> float | None:
    """Steps per second from the last report back to the first one within :data:`RATE_WINDOW_S` of it (or the
    one before, so there are two); None without two reports of different steps and times."""
    stepped = [p for p in series if p.step is not None]
    if len(stepped) < 2:
        return None
    last = stepped[-1]
    first = next((p for p in stepped if last.time - p.time <= RATE_WINDOW_S), stepped[0])
    if first is last:
        first = stepped[-2]
    if last.time <= first.time or last.step <= first.step:
        return None
    return (last.step - first.step) / (last.time - first.time)


def judged(progress: JobProgress, details: JobDetails, outputs: list[float | None], now: float) -> JobProgress:
    """``progress`` with the stall, if the job runs and nothing was heard from it for its stall time."""
    from trainctl.core.job import Job

    job = Job(details.resource)
    stall_after = job.stall_after
    if progress.state != "Running":
        return progress._replace(stall_after=stall_after)
    heard = [t for t in outputs if t] + [t for t in map(unix_time, [row.started for row in details.replicas])
                                         if t is not None]
    started = unix_time(status_of(details.resource).get("startTime"))
    last = max(heard + ([started] if started is not None else []), default=None)
    silent = None if last is None else now - last
    return progress._replace(stall_after=stall_after,
                             stalled_for=silent if silent is not None and silent >= stall_after else None)


def unix_time(stamp: object) -> float | None:
    """An RFC 3339 time as the API server writes it (``2026-01-02T03:04:05Z``) in Unix seconds."""
    from trainctl.core.times import readable_time  # not from the reconcile engine: status would load it all

    moment = readable_time(stamp)
    return moment.timestamp() if moment else None


def metrics(reports: ReplicaReports) -> list[Point]:
    """Every point with metrics of the replica, thinned to :data:`MAX_POINTS`."""
    return thinned([point for point in points(reports) if point.metrics], MAX_POINTS)


def thinned(series: list, limit: int) -> list:
    """``limit`` evenly spaced items of ``series`` (the first and the last among them), or all of it."""
    if len(series) <= limit:
        return series
    step = (len(series) - 1) / (limit - 1)
    return [series[round(index * step)] for index in range(limit)]


# ---- the controller's summary in the job's annotation -----------------------------------------------

def to_annotation(lead: Progress | None, last_output: float | None) -> dict | None:
    """A job's leading replica's progress and the job's last sign of life as the annotation's fields (None:
    nothing to store). Only what ``list`` shows and the stall needs; the replicas' own lines stay in their logs."""
    if lead is None and last_output is None:
        return None
    return {"step": lead.step if lead else None, "total": lead.total if lead else None,
            "time": round(lead.time, 3) if lead and lead.time else None,
            "metrics": dict(list(lead.metrics.items())[:ANNOTATED_METRICS]) if lead else {},
            "rate": lead.rate if lead else None, "lastOutput": round(last_output, 3) if last_output else None}


def stamped(fields: dict, written: float) -> str:
    """The annotation's text: its fields and when it was written (Unix time), which bounds the next write
    whoever makes it (another leader, the same controller after a restart)."""
    return json.dumps({**fields, WRITTEN: round(written, 3)}, separators=(",", ":"))


def stored_fields(resource: dict) -> tuple[dict | None, float | None]:
    """The job's stored annotation as its fields and when it was written (None for what it lacks or garbles)."""
    text = ((resource.get("metadata") or {}).get("annotations") or {}).get(PROGRESS_ANNOTATION)
    try:
        data = json.loads(text) if isinstance(text, str) and len(text) <= MAX_ANNOTATION_CHARS else None
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(data, dict):
        return None, None
    written = data.pop(WRITTEN, None)
    return data, float(written) if type(written) in (int, float) and math.isfinite(written) else None


def from_annotation(details: JobDetails, now: float | None = None) -> JobProgress | None:
    """The progress the controller stored in the job's annotation, judged for a stall now; None without one."""
    from trainctl.core.conditions import state_of

    resource = details.resource
    text = ((resource.get("metadata") or {}).get("annotations") or {}).get(PROGRESS_ANNOTATION)
    if not isinstance(text, str) or len(text) > MAX_ANNOTATION_CHARS:
        return None
    try:
        data = json.loads(text)
        stored = stored_progress(data)
    except (ValueError, TypeError, AttributeError, RecursionError):  # edited by hand, or garbled
        return None
    now = time.time() if now is None else now
    reported = [stored] if stored.time is not None else []
    return judged(JobProgress(state_of(resource), reported), details, [stored.last_output], now)


def stored_progress(data: dict) -> Progress:
    """The annotation's fields, each checked as a replica's line would be."""
    def count(key):
        value = data.get(key)
        return value if type(value) is int and value >= 0 else None

    def moment(key):
        value = data.get(key)
        return float(value) if type(value) in (int, float) and math.isfinite(value) and value > 0 else None

    metrics = data.get("metrics") or {}
    return Progress("", step=count("step"), total=count("total"), time=moment("time"), rate=moment("rate"),
                    last_output=moment("lastOutput"),
                    metrics={str(name)[:64]: float(value) for name, value in list(metrics.items())[:ANNOTATED_METRICS]
                             if type(value) in (int, float)})


# ---- words ---------------------------------------------------------------------------------------------

def duration(seconds: float) -> str:
    """``45s``, ``12m``, ``1h05m``, ``2d3h``."""
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600}h"


def metric_texts(metrics: dict[str, float], count: int) -> list[str]:
    """``loss 0.0333`` for each of the first ``count`` metrics; a name is any replica's to write, so it is shown as
    trainctl.errors.visible shows it (``^[[31mred^[[0m``), never as a terminal would act on it."""
    return [f"{visible(name)} {number(value)}" for name, value in list(metrics.items())[:count]]


def number(value: float) -> str:
    """A metric as people read it: four significant digits (``0.03333``, ``1.235e+04``)."""
    return f"{value:.4g}"
