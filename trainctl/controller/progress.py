"""What the controller learns of running jobs from their pods' logs: progress for ``list``, activity for stalls.

A pod reports with ``trainctl.report()`` to its own log (trainctl.reporting) and needs no permission on
the API server. Every :data:`ROUND_S` seconds (``trainctl controller run --progress-interval``) this watcher
reads, for each running job, the last :data:`TAIL_LINES` lines of its leading pod's log (one request; the first
replica in the kind's order, Master before Workers), and, only while that pod has been silent for half the
job's stall time, the last line of each other running pod. From them:

* the job's progress summary (trainctl.backends.reported), stored in the job's annotation
  ``trainctl.io/progress`` when it changed, at most once per job every :data:`MIN_WRITE_INTERVAL_S` seconds
  (``--progress-write-interval``) by the write time the annotation itself carries, so a restarted controller
  or a new leader keeps the bound (a merge patch of the annotation; nothing else of the job is written; the
  last output in it to the minute, so a job that prints but does not report is written about once a minute),
  which is what ``trainctl list`` shows on a cluster (reading every job's logs there would be a request per
  pod per job);
* the job's last activity (its pods' last log line, or their start), which the reconcile core compares
  with the job's ``trainctl.io/stall-timeout`` (trainctl/core/reconcile.py). Activity that could not be
  read is unknown, never old: a kubelet that does not answer fails no job;
* the job's cadence: the longest of the last :data:`CADENCE_GAPS` gaps between two lines of the leading pod's log,
  from which the core derives how long the job may be silent while one of its nodes is suspect.

While a node of the job is suspect (NotReady, or its kubelet silent: trainctl/controller/leases.py), each reconcile of
the job asks :meth:`ProgressWatcher.evidence` for the last lines of each of its running pods elsewhere (at most
:data:`MAX_EVIDENCE_READS`, the leading one first; a read at most every :data:`EVIDENCE_REUSE_S` seconds), which
trainctl/core/nodes.py judges the node by; they give the cadence too when no round found it yet.

Reads are spread so that at most :data:`MAX_READS_PER_S` log requests go out a second: with many running
jobs a round takes longer, and each job's progress is that much older.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timezone

from trainctl.backends.base import ReplicaReports, lines_of
from trainctl.controller.executor import JobKey
from trainctl.core import conditions as cond
from trainctl.core.job import Job
from trainctl.core.nodes import Evidence
from trainctl.kube.client import ApiError
from trainctl.kube.pods import PodStatus

log = logging.getLogger("trainctl.controller")

# the defaults of `trainctl controller run --progress-interval` and `--progress-write-interval`
ROUND_S = 10
MIN_WRITE_INTERVAL_S = 30  # per job: the bound on the annotation's writes (the issue's: one per 10 s at most)
LAST_OUTPUT_STEP_S = 60  # the stored last output is rounded down to this: a job that only prints is written rarely
TAIL_LINES = 200
MAX_READS_PER_S = 20.0
CADENCE_GAPS = 20
MAX_EVIDENCE_READS = 8
EVIDENCE_REUSE_S = 2.0
#: a log read answers in milliseconds; one from a kubelet that stopped (not yet known to be silent) is given up on
#: after this long, so the round, or the reconcile reading evidence, goes on
READ_TIMEOUT_S, EVIDENCE_READ_TIMEOUT_S = 10.0, 5.0


class ProgressWatcher:
    def __init__(self, controller) -> None:
        """``controller``: the trainctl.controller.controller.Controller whose caches, client and queue it uses."""
        self.controller = controller
        self.activity: dict[JobKey, datetime] = {}  # per job: its last known sign of life
        self.written: dict[JobKey, tuple[float, dict]] = {}  # per job: when this controller last wrote, and what
        self.cadence: dict[JobKey, float] = {}  # per job: the longest recent gap between two lines of its output
        self.evidences: dict[JobKey, Evidence] = {}  # per job: the last evidence read while a node was suspect
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.round_s, self.write_interval_s = ROUND_S, MIN_WRITE_INTERVAL_S

    def start(self, acting: threading.Event, round_s: float = ROUND_S,
              write_interval_s: float = MIN_WRITE_INTERVAL_S) -> None:
        """Read every ``round_s`` seconds; write a job's annotation at most once every ``write_interval_s``."""
        self.round_s, self.write_interval_s = round_s, write_interval_s
        self.thread = threading.Thread(target=self.run, args=(acting,), name="progress", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()

    def run(self, acting: threading.Event) -> None:
        while not self.stopping.is_set():
            started = time.monotonic()
            if acting.is_set():
                for key, resource in self.running_jobs():
                    if self.stopping.is_set():
                        return
                    self.watch(key, resource)
            self.stopping.wait(max(0.0, self.round_s - (time.monotonic() - started)))

    def running_jobs(self) -> list[tuple[JobKey, dict]]:
        found = []
        for kind, informers in self.controller.jobs.items():
            for informer in informers:
                for resource in informer.items():
                    if cond.reached(resource, "Running") and not cond.has_finished(resource):
                        found.append(((kind, resource["metadata"].get("namespace", ""),
                                       resource["metadata"]["name"]), resource))
        live = {key for key, _ in found}
        for memo in (self.activity, self.written, self.cadence, self.evidences):
            for key in [key for key in memo if key not in live]:
                del memo[key]
        return found

    def watch(self, key: JobKey, resource: dict) -> None:
        """Read the job's leading pod (and, if it is silent, the others), then store what changed."""
        from trainctl.backends.reported import points, summary, to_annotation

        job = Job(resource)
        pods = self.running_pods(key, job)
        if not pods:
            return
        lead, *others = pods
        times: list[float] = []
        read = self.tail(job, lead, TAIL_LINES, times)
        if len(times) > 1:
            self.cadence[key] = cadence_of(times)
        if read is None:
            self.activity.pop(key, None)  # unknown, not old
            return
        started = [started_at(pod) for pod in pods]
        last = max([t for t in [read.last_output, *started] if t is not None], default=None)
        if last is not None and time.time() - last > job.stall_after / 2:
            for pod in others:  # the lead is quiet: is anyone talking?
                other = self.tail(job, pod, 1)
                if other is None:
                    self.activity.pop(key, None)
                    return
                last = max(last, other.last_output or 0.0)
        if last is not None:
            self.activity[key] = datetime.fromtimestamp(last, timezone.utc)
            if job.stall_timeout is not None and time.time() - last >= job.stall_timeout:
                self.controller.queue.add(key)  # the reconcile core fails it
        progress = summary(read, points(read), time.time())
        stored_last = None if last is None else last - last % LAST_OUTPUT_STEP_S
        self.store(key, resource, to_annotation(progress if progress.time is not None else None, stored_last))

    def running_pods(self, key: JobKey, job: Job) -> list[dict]:
        """The job's running pods, its leading replica's first."""
        from trainctl.controller import pods as pod_objects
        from trainctl.frameworks.base import LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE

        index = (job.framework.operator_name, key[1], key[2])
        order = job.replica_types
        running = [pod for pod in self.controller.children(self.controller.pods, index)
                   if pod_objects.controller_uid(pod) == job.uid and PodStatus.of(pod).phase == "Running"]

        def place(pod: dict) -> tuple:
            labels = pod["metadata"].get("labels") or {}
            rtype = job.framework.canonical_replica_type(labels.get(LABEL_REPLICA_TYPE, ""))
            index_text = labels.get(LABEL_REPLICA_INDEX, "0")
            return (order.index(rtype) if rtype in order else len(order), int(index_text) if index_text.isdigit() else 0)

        return sorted(running, key=place)

    def evidence(self, key: JobKey, job: Job) -> Evidence | None:
        """When each of the job's running pods on a node that answers last wrote a line, read now (or under
        :data:`EVIDENCE_REUSE_S` ago), with the job's cadence: the one its rounds found, else the longest of the pods'
        just read (a node may be lost before the first round after the job's start)."""
        now = datetime.now(timezone.utc)
        last = self.evidences.get(key)
        if last is not None and 0 <= (now - last.read_at).total_seconds() < EVIDENCE_REUSE_S:
            return last
        reachable = [pod for pod in self.running_pods(key, job) if not self.controller.unreachable(pod)]
        heard, cadences = {}, []
        for pod in reachable[:MAX_EVIDENCE_READS]:
            times: list[float] = []
            read = self.tail(job, pod, CADENCE_GAPS + 1, times, timeout=EVIDENCE_READ_TIMEOUT_S)
            if read is not None and read.last_output is not None:
                heard[pod["metadata"]["name"]] = datetime.fromtimestamp(read.last_output, timezone.utc)
            if len(times) > 1:
                cadences.append(cadence_of(times))
        cadence = self.cadence.get(key) or max(cadences, default=None)
        self.evidences[key] = Evidence(now, heard, cadence)
        log.info("%s/%s: a node of the job is suspect; cadence %s; last lines elsewhere: %s", key[1], key[2],
                 "unknown" if cadence is None else f"{cadence:.1f} s",
                 ", ".join(f"{name} {(now - moment).total_seconds():.1f} s ago" for name, moment in heard.items())
                 or "none read")
        return self.evidences[key]

    def tail(self, job: Job, pod: dict, lines: int, times: list[float] | None = None,
             timeout: float = READ_TIMEOUT_S) -> ReplicaReports | None:
        """The pod's last ``lines`` lines as reports with their last time (and each line's time, into ``times``); None
        when its log cannot be read (also when its node is not Ready or its kubelet silent: the read would wait, and
        a kubelet not yet known to be silent costs ``timeout`` seconds at most)."""
        if self.controller.unreachable(pod):
            return None
        from trainctl.backends.kube import logs as pod_logs
        from trainctl.backends.kube.backend import KubeBackend
        from trainctl.frameworks.base import LABEL_REPLICA_TYPE
        from trainctl.reporting import MARKER

        rtype = job.framework.canonical_replica_type((pod["metadata"].get("labels") or {}).get(LABEL_REPLICA_TYPE, ""))
        container = KubeBackend.container_of(job, rtype) if rtype else job.framework.container
        query = pod_logs.log_query(container, follow=False, timestamps=True, tail=lines, since_seconds=None)
        time.sleep(1 / MAX_READS_PER_S)
        name = pod["metadata"]["name"]
        texts, last = [], None
        try:
            for line in lines_of(pod_logs.stamped_chunks(self.controller.client, job.namespace, name, query, name,
                                                         keep_stamps=False, timeout=timeout)):
                last = line.time or last
                if times is not None and line.time:
                    times.append(line.time)
                if MARKER in line.text:
                    texts.append(line.text)
        except (ApiError, OSError) as error:
            log.debug("progress of %s/%s: log of %s not read: %s", job.namespace, job.name, name, error)
            return None
        return ReplicaReports(name, texts, last)

    def store(self, key: JobKey, resource: dict, fields: dict | None) -> None:
        """The job's annotation, when it changed and its last write is ``write_interval_s`` old.

        The last write's time is the one the stored annotation carries, so a restarted controller or a new
        leader keeps the bound; the time this controller wrote is remembered too, because its informer may
        not yet have seen its own write."""
        from trainctl.backends.reported import PROGRESS_ANNOTATION, stamped, stored_fields
        from trainctl.kube import job_resource

        stored, stored_when = stored_fields(resource)
        when, last = self.written.get(key, (None, None))
        now = time.time()
        interval = self.write_interval_s
        if fields is None or fields in (stored, last) or too_soon(now, stored_when, interval) \
                or too_soon(now, when, interval):
            return
        patch = {"metadata": {"annotations": {PROGRESS_ANNOTATION: stamped(fields, now)}}}
        try:
            self.controller.client.patch(job_resource(Job(resource).framework), key[2], patch, key[1])
        except (ApiError, OSError) as error:
            log.debug("progress of %s/%s not stored: %s", key[1], key[2], error)
            return
        self.written[key] = (now, fields)
        self.controller.metrics.progress_writes.inc(key[0])


def too_soon(now: float, written: float | None, interval: float) -> bool:
    """Whether a write at ``written`` (Unix time) forbids one now. A time further ahead than the interval is
    another clock gone wrong, not a reason never to write again."""
    return written is not None and abs(now - written) < interval

def cadence_of(times: list[float]) -> float:
    """The longest of the last :data:`CADENCE_GAPS` gaps between consecutive line times (Unix seconds, in order)."""
    recent = times[-(CADENCE_GAPS + 1):]
    return max(later - earlier for earlier, later in zip(recent, recent[1:]))


def started_at(pod: dict) -> float | None:
    from trainctl.backends.reported import unix_time

    return unix_time(PodStatus.of(pod).raw.get("startTime"))
