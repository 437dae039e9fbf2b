"""How jobs show: as the rows of ``trainctl list``, in plain columns, and in IPython and Jupyter.

A job's row (:func:`job_row`: state, replicas, age, duration, progress, and with ``wide`` its replica
types and images) is made here once, for the CLI's ``list`` and for a notebook alike, every cell read from the
API shown as trainctl.errors.visible shows it (as are the lines of a displayed ``job.logs()``). IPython asks an
object for its representations (``_repr_mimebundle_``, ``_repr_pretty_``); plain Python keeps the short
``repr``, which reads nothing. A table is HTML for a notebook and the CLI's plain columns for a
terminal. The job is read when it is shown, so a handle displayed twice shows its state twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from typing import TYPE_CHECKING, NamedTuple

from trainctl.errors import UserError, visible

if TYPE_CHECKING:
    from trainctl.backends.base import LogLine, ReplicaRow

LIST_COLUMNS = ["NAMESPACE", "NAME", "KIND", "STATE", "ATTEMPT", "REPLICAS", "AGE", "DURATION", "PROGRESS"]
WIDE_LIST_COLUMNS = ["TYPES", "IMAGES"]


def list_columns(wide: bool) -> list[str]:
    return LIST_COLUMNS + (WIDE_LIST_COLUMNS if wide else [])


def attempt(resource: dict) -> int:
    """The job's attempt, from 1: one more for each restart of the whole job or resume (docs/fault-tolerance.md)."""
    from trainctl.core.job import has_restart_record

    if not has_restart_record(resource):
        return 1
    from trainctl.core.restarts import Record

    return Record.of(resource).attempt + 1


def job_row(resource: dict, wide: bool, progress: str = "-") -> list[str]:
    from trainctl.core.conditions import state_of, status_of
    specs = replica_specs(resource)
    job_status = status_of(resource)
    row = [resource["metadata"].get("namespace", ""), resource["metadata"]["name"], resource["kind"],
           state_of(resource), str(attempt(resource)),
           str(sum((spec or {}).get("replicas", 1) for spec in specs.values())),
           since(resource["metadata"].get("creationTimestamp")),
           since(job_status.get("startTime"), job_status.get("completionTime")), progress]
    if wide:  # no spaces inside a cell: piped output splits on whitespace
        row += [",".join(f"{rtype}:{(spec or {}).get('replicas', 1)}" for rtype, spec in specs.items()),
                ",".join(sorted(set(replica_images(resource).values()) - {""}))]
    return [visible(cell) for cell in row]


def progress_cell(client, resource: dict) -> str:
    """The PROGRESS column: read from the job's reports where that is cheap (local), else from the summary the
    controller keeps in the job's annotation (trainctl.backends.reported). ``client``: the trainctl.sdk.client.Client."""
    from trainctl.backends.base import JobDetails
    from trainctl.backends.reported import from_annotation, job_progress

    details = JobDetails(resource)
    if client.backend.reads_reports_cheaply and resource.get("kind") != "Unknown":  # Unknown: a damaged job
        return job_progress(client.backend, details).cell()
    progress = from_annotation(details)
    return progress.cell() if progress else "-"


def replica_specs(resource: dict) -> dict:
    from trainctl.core.trainjob import is_trainjob

    if is_trainjob(resource):  # its replicas are its runtime's pods
        from trainctl.core.job import Job

        try:
            return Job(resource).replica_specs
        except UserError:  # a runtime snapshot edited by hand: the row shows no replicas rather than no list
            return {}
    return next((v for k, v in (resource.get("spec") or {}).items() if k.endswith("ReplicaSpecs")), {}) or {}


def replica_images(resource: dict) -> dict[str, str]:
    """Replica type -> the image of the container the operator wires (Job.images)."""
    from trainctl.core.job import Job

    return Job(resource).images


def since(timestamp: str | None, until: str | None = None) -> str:
    """Human duration between two RFC 3339 times (until: now)."""
    if not timestamp:
        return "-"
    # fromisoformat (C, Python >= 3.11 reads the Z) rather than strptime, whose first use loads _strptime,
    # locale and calendar: every list and status reads an age
    start = datetime.fromisoformat(timestamp)
    end = datetime.fromisoformat(until) if until else datetime.now(timezone.utc)
    seconds = max(0, int((end - start).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


class Unscheduled(NamedTuple):
    """Replicas of a job that the scheduler cannot place (a node lost, a topology spread that one node cannot meet,
    too little GPU): the job's kubeflow.org/v1 conditions may well say Running (its master runs), so trainctl's
    displays say this beside the state. ``why``: the scheduler's reason and message for the first of them."""

    running: int  # of the replicas the job needs
    needed: int
    waiting: int  # how many the scheduler cannot place
    waiting_since: str | None  # since when the first of them cannot be placed (RFC 3339)
    why: str  # "Unschedulable: 0/2 nodes are available: ..."

    def text(self, why: bool = False) -> str:
        """``1/4 replicas running; 3 unschedulable for 8m`` and, with ``why``, ``: Unschedulable: 0/2 nodes ...``."""
        how_long = f" for {since(self.waiting_since)}" if self.waiting_since else ""
        return visible(f"{self.running}/{self.needed} replicas running; {self.waiting} unschedulable{how_long}"
                       + (f": {self.why}" if why else ""))


def unscheduled(resource: dict, replicas: list[ReplicaRow]) -> Unscheduled | None:
    """The job's replicas that the scheduler cannot place (a pod's PodScheduled condition False); None when there
    are none."""
    waiting = [row for row in replicas if row.unscheduled]
    if not waiting:
        return None
    needed = sum((spec or {}).get("replicas", 1) for spec in replica_specs(resource).values())
    running = sum(row.state == "Running" for row in replicas)
    first = min(waiting, key=lambda row: row.unscheduled_since or "~")  # "~": after any time, for a row without
    return Unscheduled(running, max(needed, running + len(waiting)), len(waiting), first.unscheduled_since,
                       first.unscheduled)


def unscheduled_now(client, name: str, namespace: str | None) -> Unscheduled | None:
    """:func:`unscheduled` of the job read now, for a wait's display (None also when it went away meanwhile: the
    wait says so next). ``client``: the trainctl.sdk.client.Client."""
    try:
        details = client.get(name, namespace)
    except UserError:
        return None
    return unscheduled(details.resource, details.replicas)


def column_widths(headers: list[str], rows: list[list[str]], minimum: list[int] | None = None) -> list[int]:
    return [max([len(h), *(len(r[i]) for r in rows), *(minimum[i:i + 1] if minimum else [])])
            for i, h in enumerate(headers)]


def plain_lines(headers: list[str] | None, rows: list[list[str]], widths: list[int]) -> list[str]:
    """Whitespace-aligned lines (the header first, when given), as kubectl prints when piped."""
    lines = [headers] if headers else []
    lines += [[cell or "-" for cell in row] for row in rows]  # an empty cell would shift awk's fields
    return ["   ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in lines]


def table(client, resources: list[dict]) -> dict[str, str]:
    """The jobs as ``trainctl list`` shows them: ``{"text/html": <table>, "text/plain": columns}``; ``client``
    reads their progress."""
    import html

    headers = list_columns(wide=False)
    rows = [job_row(resource, False, progress_cell(client, resource)) for resource in resources]
    cells = "".join(f"<th>{html.escape(header)}</th>" for header in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return {"text/html": f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>",
            "text/plain": "\n".join(plain_lines(headers, rows, column_widths(headers, rows)))}


class Jobs(list):
    """``client.jobs()``: a list of handles that shows as a table of the jobs as they were listed (a list's own
    printer would win over a bundle in IPython, so HTML and text come from their own methods)."""

    def __init__(self, client, handles: list, resources: list[dict]) -> None:
        """``handles``: a JobHandle (trainctl.sdk.handle) per job of ``resources``, which ``client`` listed."""
        super().__init__(handles)
        self.client, self.resources = client, resources

    def _repr_html_(self) -> str:
        return table(self.client, self.resources)["text/html"]

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(table(self.client, self.resources)["text/plain"])


class LogLines:
    """``job.logs()``: the lines, one at a time, as an iterator, as written; shown in IPython, their text with its
    control characters made visible (trainctl.errors.visible: a terminal's IPython would act on them)."""

    def __init__(self, lines: Iterator[LogLine]) -> None:
        self.lines = lines

    def __iter__(self) -> Iterator[LogLine]:
        return self

    def __next__(self) -> LogLine:
        return next(self.lines)

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text("\n".join(str(line._replace(text=visible(line.text))) for line in self))
