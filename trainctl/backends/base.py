"""The interface every place a job can run implements: local processes or Kubernetes.

A backend stores kubeflow.org/v1 job resources and reports what became of
them. Resources cross this boundary as plain dicts exactly as the API server
would hold them (``apiVersion``, ``kind``, ``metadata``, ``spec``, ``status``),
so the CLI and the Python API never care where a job runs.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

from trainctl.errors import UserError, option

if TYPE_CHECKING:
    from trainctl.code.snapshot import Snapshot


#: the state of a replica while kubelet (or the local supervisor) waits to restart it
CRASH_LOOP = "CrashLoopBackOff"

# The records below are NamedTuples, not dataclasses: every CLI command makes these classes, and a dataclass
# costs ten times as long to make (and loads inspect); docs/benchmarks.md, CLI latency. A changed copy is
# ``row._replace(state=...)``.


class ReplicaRow(NamedTuple):
    """One replica (a pod, or a local process) as ``status`` shows it."""

    name: str  # pod name, e.g. mnist-worker-1
    replica_type: str  # Master, Worker, ...
    index: int | None
    state: str  # Pending, Running, Succeeded, Failed, Deleted ...
    restarts: int = 0
    exit_code: int | None = None
    reason: str = ""  # OOMKilled, ImagePullBackOff, ...
    node: str = ""
    started: str | None = None  # RFC 3339
    finished: str | None = None
    # the run before the current one, for a replica restarted in place (kubectl's lastState):
    # a crash-looping replica's failure lives here while its new run waits or runs
    last_exit_code: int | None = None
    last_reason: str = ""
    last_finished: str | None = None
    # evidence of who caused a failure (trainctl/core/attribution.py), of the current and the last run:
    message: str = ""  # the container's termination message (the function runner's record of a raise)
    last_message: str = ""
    exit_window: tuple[float, float] | None = None  # Unix seconds it exited between (local: two polls)
    last_exit_window: tuple[float, float] | None = None
    stopped: bool = False  # stopped by the job itself when it failed: a consequence, never the cause
    kept: str = ""  # where the row comes from when its pod is gone: "pod removed; from the kept record"
    # a Pending pod the scheduler cannot place (its PodScheduled condition False): the scheduler's reason and
    # message ("Unschedulable: 0/2 nodes are available: ..."), and since when (RFC 3339)
    unscheduled: str = ""
    unscheduled_since: str | None = None


class LogLine(NamedTuple):
    replica: str  # e.g. master-0
    text: str
    time: float | None = None  # Unix seconds by which it was written, where the backend knows it

    def __str__(self) -> str:
        return f"{self.replica} | {self.text}"  # as trainctl logs prints it


class LogChunk(NamedTuple):
    """Whole lines of one replica's output, the bytes exactly as the process wrote them.

    Backends read logs in chunks and the CLI prints them in chunks: prefixing a chunk's
    lines is one ``bytes.replace``, so ``trainctl logs`` keeps up with ``cat`` where a
    Python step per line would not (see docs/benchmarks.md).
    """

    replica: str
    data: bytes  # one or more lines, each ending in b"\n"
    time: float | None = None  # every line in it was written by then (Unix seconds)


def prefix_lines(data: bytes, prefix: bytes) -> bytes:
    """``prefix`` in front of every line of ``data`` (whole lines, each ending in a newline)."""
    body = data.replace(b"\n", b"\n" + prefix)  # ends in a prefix too many: leave it out unread
    return b"".join((prefix, memoryview(body)[:len(body) - len(prefix)]))


def lines_of(chunks: Iterator[LogChunk]) -> Iterator[LogLine]:
    """The chunks as one :class:`LogLine` per line (text decoded, invalid UTF-8 replaced)."""
    for chunk in chunks:
        for text in chunk.data.decode(errors="replace").split("\n")[:-1]:
            yield LogLine(chunk.replica, text, chunk.time)


def pick_replica(replica: str, job_name: str, replica_ids: list[str]) -> str:
    """``replica`` (``--replica``) as a replica id: ``worker-1``, or the pod name ``status`` shows (``mnist-worker-1``)."""
    if replica in replica_ids:
        return replica
    if replica.startswith(f"{job_name}-") and replica[len(job_name) + 1:] in replica_ids:
        return replica[len(job_name) + 1:]
    raise UserError(f"{option('replica')} {replica!r}: job {job_name} has {', '.join(replica_ids)} "
                    f"(or as pods: {', '.join(f'{job_name}-{r}' for r in replica_ids)})")


class ReplicaReports(NamedTuple):
    """What one replica reported with ``trainctl.report()`` (trainctl.reporting): the channel's lines, as written,
    untrusted, oldest first, and when the replica last wrote output or a report (Unix seconds, None: unknown)."""

    replica: str  # e.g. master-0
    lines: list[str]
    last_output: float | None = None


#: of each replica's log, the last lines a progress read looks through (a replica reports at least once a second
#: while it reports at all, so only a replica printing thousands of lines a second hides its latest report)
REPORT_TAIL_LINES = 2000


def reports_in(log_lines: Iterator[LogLine]) -> dict[str, ReplicaReports]:
    """Each replica's report lines among its log lines, and when it last wrote one."""
    from trainctl.reporting import MARKER

    found: dict[str, tuple[list[str], float | None]] = {}
    for line in log_lines:
        lines, last = found.setdefault(line.replica, ([], None))
        if MARKER in line.text:
            lines.append(line.text)
        if line.time:  # 0.0: a pod with no log yet (its "(no logs: ...)" line)
            found[line.replica] = (lines, max(last or 0.0, line.time))
    return {replica: ReplicaReports(replica, lines, last) for replica, (lines, last) in found.items()}


class JobDetails:
    """A job as ``status`` shows it: the resource, its replicas' rows, its recent events.

    ``pods`` and ``kept``: what a cluster backend read on the way to the rows (the job's pods by name; the runs kept
    of replicas whose pod is gone, by replica id), so that reading the job's progress next (``status``) asks for
    neither again; None where they were not read. Not part of what the details are (equality, repr)."""

    __slots__ = ("resource", "replicas", "events", "pods", "kept")

    def __init__(self, resource: dict, replicas: list[ReplicaRow] | None = None,
                 events: list[dict] | None = None, *, pods: dict[str, dict] | None = None,
                 kept: dict[str, tuple] | None = None) -> None:
        self.resource = resource
        self.replicas = [] if replicas is None else replicas
        self.events = [] if events is None else events
        self.pods, self.kept = pods, kept

    def __repr__(self) -> str:
        return f"JobDetails(resource={self.resource!r}, replicas={self.replicas!r}, events={self.events!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JobDetails) and (self.resource, self.replicas, self.events) == (
            other.resource, other.replicas, other.events)

    __hash__ = None  # mutable, as the dataclass was


class Backend(abc.ABC):
    #: shown in every command's summary: "local" or "kubernetes (context X)"
    description: str

    def default_namespace(self) -> str:
        """Namespace used when none is given."""
        return "default"

    @abc.abstractmethod
    def create(self, resource: dict, replace: bool = False, preflight: bool = True,
               snapshot: Snapshot | None = None, dry_run: bool = False) -> dict:
        """Store a validated job; return it as stored. Error if it exists and not replace.

        ``preflight``: first check what would keep the job from ever running here (locally: its
        commands, scripts and volumes; on a cluster: its CRD, namespace, PriorityClass, queue).
        ``snapshot``: the code the resource was rendered to run from (trainctl.code), stored with it.
        ``dry_run``: every check the create would make (a cluster's own validation included), then
        nothing stored or started; the resource is returned as it would be submitted."""

    @abc.abstractmethod
    def get(self, name: str, namespace: str, kind: str | None = None) -> JobDetails:
        """The job with status, its replicas and recent events. NotFound if absent."""

    def resource(self, name: str, namespace: str, kind: str | None = None) -> dict:
        """The job alone, with its status, as :meth:`get` has it (what a wait polls). NotFound if absent."""
        return self.get(name, namespace, kind).resource

    @abc.abstractmethod
    def list(self, namespace: str | None, selector: str | None = None) -> list[dict]:
        """Jobs of every kind; namespace None means all namespaces."""

    def logs(self, name: str, namespace: str, replica: str | None = None, follow: bool = False,
             tail: int | None = None, since_seconds: int | None = None, previous: bool = False,
             kind: str | None = None) -> Iterator[LogLine]:
        """Lines of every replica (or one): see :meth:`log_chunks`."""
        return lines_of(self.log_chunks(name, namespace, replica, follow, tail, since_seconds, previous, kind))

    @abc.abstractmethod
    def log_chunks(
        self,
        name: str,
        namespace: str,
        replica: str | None = None,
        follow: bool = False,
        tail: int | None = None,
        since_seconds: int | None = None,
        previous: bool = False,
        kind: str | None = None,
        timestamps: bool = False,
    ) -> Iterator[LogChunk]:
        """Every replica's lines (or one's), in time order; with follow, as they come, until the job
        ends. With timestamps, each line begins with its RFC 3339 time and a space."""

    #: whether :meth:`reports` costs no more than reading a file (local), so that ``list`` reads every job's; on a
    #: cluster ``list`` shows what the controller stored in the job's annotation (trainctl.backends.reported)
    reads_reports_cheaply = False

    def reports(self, name: str, namespace: str, whole: bool = False,
                details: JobDetails | None = None) -> dict[str, ReplicaReports]:
        """Each replica's reports, by replica id; ``whole``: every line kept, else only recent ones (for the
        latest progress); ``details``: what :meth:`get` just returned, not read again. Here from the logs, where a
        pod writes them (``TRAINCTL_PROGRESS=/dev/stdout``)."""
        return reports_in(self.logs(name, namespace, tail=None if whole else REPORT_TAIL_LINES))

    @abc.abstractmethod
    def delete(self, name: str, namespace: str, kind: str | None = None) -> None:
        """Delete the job and everything it started."""

    def kueue_workload(self, resource: dict) -> dict | None:
        """Kueue's Workload for the job, where Kueue is installed and has made one; None elsewhere."""
        return None

    @abc.abstractmethod
    def set_suspended(self, name: str, namespace: str, suspend: bool, kind: str | None = None) -> dict:
        """Set spec.runPolicy.suspend; return the updated job."""
