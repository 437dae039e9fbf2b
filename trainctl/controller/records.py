"""The controller keeps a record of every replica run that ends, so nothing vanishes with the pods.

For each replica, a ConfigMap owned by the job (trainctl/backends/kube/records.py: its format and bounds)
holds its last two ended runs: the tail of each one's log, its exit code, reason and termination message,
a function's result line, and the replica's progress reports. :class:`RecordKeeper` writes them:

* **When.** A run has ended when its pod's main container shows a termination: the pod Succeeded or
  Failed, or kubelet restarted the container in place (``lastState``, read with ``previous=true``).
  A pod being deleted while its container runs (by hand, an eviction through the API, suspend,
  cleanPodPolicy) is followed until its log ends, so the lines it prints while it shuts down are kept.
  And before the controller deletes a pod itself (:meth:`ready_to_delete`, asked by the executor), a
  running pod's log is first opened, and a finished pod is deleted only once its run is kept.
* **How much work.** Each ended run's log is read once, as one stream, keeping only its tail and its
  reports (trainctl/controller/tail.py); at most :data:`MAX_READS_PER_S` reads start a second and
  :data:`WORKERS` run at once (plus at most :data:`MAX_FOLLOWS` pods followed while they stop). Per run:
  one log read, and one write of the record (a read of it first, when it exists already).
* **Level-triggered and idempotent.** A run is known by its pod's uid and the container's restart
  number, which the record lists (in an annotation: a metadata-only list reads them all); a run kept
  is never read again. A new leader lists what is kept, then looks at every pod it caches (and does
  again every :data:`RESYNC_S`), so a restart re-derives what is missing. A pod gone before its run
  could be read (a lost node, a forced delete) leaves what its last status said, and that its log
  could not be kept. A pod whose node is not Ready is not followed (its kubelet does not answer); the lines a
  follow had read when its node went away are kept, and a run of a lost node's pod kept without them says
  ``node NAME unreachable (NotReady): its last lines not kept`` (trainctl/core/nodes.py).
* **Ownership.** A record is written only with the job as its controlling owner; one of an earlier job
  of the same name is replaced, a ConfigMap of that name that is no record is left alone (and said in
  an event). When a job is gone its records are deleted too (the garbage collector does the same, where
  one runs).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from trainctl.backends.kube import records as fmt
from trainctl.controller import pods as pod_objects
from trainctl.controller.executor import JobKey
from trainctl.controller.queue import WorkQueue
from trainctl.controller.tail import TailReader, reports_of
from trainctl.core.job import Job
from trainctl.kube.client import CONFIGMAPS, PODS, ApiError
from trainctl.kube.pods import terminated

log = logging.getLogger("trainctl.controller")

WORKERS = 4
MAX_READS_PER_S = 20.0  # as the progress watcher's: the same kubelets answer both
MAX_FOLLOWS = 32
RESYNC_S = 30.0
OPEN_WAIT_S = 2.0  # how long a delete waits for the log of the pod it stops to be open
SETTLE_S = 10.0  # after a followed log ended: how long its pod's final status may take to show
MAX_ATTEMPTS = 3  # reads of a run's log that fail for a passing reason, before it is kept without its log
MAX_HOLD_S = 120.0  # the longest a delete of a finished pod waits for its run to be kept


@dataclass(frozen=True)
class Due:
    """A run of a pod's main container to keep: ended, or (``live``) running while its pod stops."""

    pod: str
    pod_uid: str
    restart: int
    container: str
    previous: bool = False  # the run before the current one (kubelet's lastState)
    live: bool = False

    @property
    def key(self) -> str:
        return fmt.run_key(self.pod_uid, self.restart)


@dataclass(frozen=True)
class Captured:
    """What one read of a run's log kept."""

    run: fmt.KeptRun
    tail: bytes | None  # gzip of the stamped tail
    reports: list[bytes]
    result: bytes | None  # gzip of a result line the tail lost
    last_output: float | None


def due_runs(job: Job, pod: dict, stopping: bool = False) -> list[Due]:
    """The runs of the pod's main container that have ended (the earlier first); with ``stopping`` (its pod is
    being deleted, or is about to be) also the one that runs now."""
    metadata = pod["metadata"]
    name = (job.main_container((pod.get("spec") or {}).get("containers") or []) or {}).get("name", "")
    status = next((s for s in (pod.get("status") or {}).get("containerStatuses") or [] if s.get("name") == name), None)
    if not name or status is None:
        return []
    restarts = status.get("restartCount") or 0
    found = []
    if restarts and terminated(status, previous=True):
        found.append(Due(metadata["name"], metadata.get("uid", ""), restarts - 1, name, previous=True))
    if terminated(status):
        found.append(Due(metadata["name"], metadata.get("uid", ""), restarts, name))
    elif stopping and (status.get("state") or {}).get("running"):
        found.append(Due(metadata["name"], metadata.get("uid", ""), restarts, name, live=True))
    return found


def kept_run(due: Due, pod: dict, read: TailReader | None, tail: bytes, lost: str) -> fmt.KeptRun:
    """The run as its pod's last known status tells it (the termination of that restart number)."""
    status = next((s for s in (pod.get("status") or {}).get("containerStatuses") or []
                   if s.get("name") == due.container), {})
    restarts = status.get("restartCount") or 0
    ended = terminated(status, previous=restarts > due.restart) if restarts - due.restart in (0, 1) else {}
    started = ended.get("startedAt") or ((status.get("state") or {}).get("running") or {}).get("startedAt")
    code = ended.get("exitCode")
    return fmt.KeptRun(pod=due.pod, pod_uid=due.pod_uid, restart=due.restart,
                       exit_code=code if type(code) is int else None, reason=str(ended.get("reason") or "")[:200],
                       signal=ended.get("signal") if type(ended.get("signal")) is int else None,
                       message=str(ended.get("message") or "")[:fmt.MESSAGE_CHARS], started=started,
                       finished=ended.get("finishedAt"), read=read.read if read else 0,
                       kept=read.kept(tail) if read else 0, lost=lost,
                       deleted=bool(pod["metadata"].get("deletionTimestamp")))


class RateLimit:
    """At most ``per_s`` starts a second, spread evenly, across threads."""

    def __init__(self, per_s: float) -> None:
        self.interval, self.next, self.lock = 1 / per_s, 0.0, threading.Lock()

    def wait(self) -> None:
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next)
            self.next = start + self.interval
        time.sleep(max(0.0, start - now))


def ended_in(pod: dict, due: Due) -> bool:
    """Whether the pod's status shows the run ``due`` ended (terminated, or restarted since)."""
    status = next((s for s in (pod.get("status") or {}).get("containerStatuses") or []
                   if s.get("name") == due.container), {})
    restarts = status.get("restartCount") or 0
    return restarts > due.restart or (restarts == due.restart and bool(terminated(status)))


def merged(existing: fmt.Record | None, captured: list[Captured], replica: str) -> fmt.Record:
    """The record with the runs just read (the later first) in front of those it kept, at most MAX_RUNS."""
    from trainctl.reporting import points_of

    new = list(reversed(captured))
    keys = {c.run.key for c in new}
    old = [(run, data) for run, data in zip(existing.runs, existing.logs) if run.key not in keys] if existing else []
    pairs = [(c.run, c.tail) for c in new] + old
    lines = [line.encode() for line in existing.report_lines()] if existing else []
    lines += [line for c in captured for line in c.reports]
    points = [point for line in lines for point in points_of(line.decode(errors="replace"))]
    reports = reports_of(points)
    newest = new[0]
    return fmt.Record(replica=replica, runs=tuple(run for run, _ in pairs[:fmt.MAX_RUNS]),
                      logs=tuple(data for _, data in pairs[:fmt.MAX_RUNS]),
                      reports=fmt.packed(b"".join(reports)) if reports else None, result=newest.result,
                      last_output=newest.last_output)


class RecordKeeper:
    def __init__(self, controller, enabled: bool = True) -> None:
        """``controller``: the trainctl.controller.controller.Controller whose caches, client, queue and metrics
        it uses; not ``enabled`` (``controller run --no-keep-records``), it keeps nothing and holds no delete."""
        self.controller, self.client, self.metrics = controller, controller.client, controller.metrics
        self.enabled = enabled
        self.tasks = WorkQueue()  # ("pod", job key, pod name), ("gone", job key, pod uid), ("sweep", job key)
        self.kept: dict[tuple[str, str], dict[str, tuple[str, frozenset[str]]]] = {}  # (ns, job): replica: uid, runs
        self.in_flight: set[str] = set()  # run keys being read
        self.attempts: dict[str, int] = {}  # run key: failed reads
        self.held: dict[str, float] = {}  # run key: since when a delete waits for it
        self.gone: dict[str, dict] = {}  # pod uid: the pod as it was deleted, until its task looked at it
        self.follows = 0
        self.lock = threading.Lock()
        self.record_locks = [threading.Lock() for _ in range(64)]  # a record is written by one thread at a time
        self.rate = RateLimit(MAX_READS_PER_S)
        self.acting = threading.Event()
        self.listed = threading.Event()
        self.stopping = threading.Event()

    # ---- lifecycle -----------------------------------------------------------------------------------
    def start(self, acting: threading.Event) -> None:
        if not self.enabled:
            return  # self.acting stays unset: it looks at no pod and holds no delete
        self.acting = acting
        for number in range(WORKERS):
            threading.Thread(target=self.work, name=f"records-{number}", daemon=True).start()
        threading.Thread(target=self.resync_loop, name="records-resync", daemon=True).start()

    def stop(self) -> None:
        self.stopping.set()
        self.tasks.shutdown()

    def resync_loop(self) -> None:
        while not self.stopping.is_set():
            if not self.acting.wait(1.0) or self.stopping.is_set():
                continue
            if not self.listed.is_set() and not self.list_kept():
                self.stopping.wait(1.0)
                continue
            for informer in self.controller.pods:
                for pod in informer.items():
                    self.look_at(pod)
            self.stopping.wait(RESYNC_S)

    def list_kept(self) -> bool:
        """Learn what every record in scope keeps, from their metadata alone; False when they cannot be listed."""
        for namespace in {informer.namespace for informer in self.controller.pods}:
            try:
                items = fmt.list_metadata(self.client, namespace, f"{fmt.RECORD_LABEL}={fmt.FORMAT}")
            except (ApiError, OSError) as error:
                log.warning("records: cannot list the kept records: %s; retrying", error)
                return False
            for item in items:
                self.remember_listed(item)
        self.listed.set()
        return True

    def remember_listed(self, item: dict) -> None:
        from trainctl.frameworks.base import LABEL_JOB_NAME

        metadata = item.get("metadata") or {}
        job_name = (metadata.get("labels") or {}).get(LABEL_JOB_NAME)
        listed = fmt.listed_runs(metadata)
        if job_name and listed is not None:
            self.remember(metadata.get("namespace", ""), job_name, *listed)

    def remember(self, namespace: str, job_name: str, replica: str, job_uid: str, runs: frozenset[str]) -> None:
        with self.lock:
            self.kept.setdefault((namespace, job_name), {})[replica] = (job_uid, runs)
            for run in runs:
                self.attempts.pop(run, None)
                self.held.pop(run, None)

    def is_kept(self, job: Job, replica: str, run: str) -> bool:
        with self.lock:
            uid, runs = self.kept.get((job.namespace, job.name), {}).get(replica, ("", frozenset()))
        return uid == job.uid and run in runs

    def has_record(self, job: Job, replica: str) -> bool:
        with self.lock:
            return replica in self.kept.get((job.namespace, job.name), {})

    # ---- events ---------------------------------------------------------------------------------------
    def on_pod(self, event: str, pod: dict) -> None:
        """A pod changed (called on the pods' informer thread: it only looks, and queues)."""
        if not self.acting.is_set() or not self.listed.is_set():
            return  # the resync after the listing looks at every pod
        if event == "DELETED":
            found = self.job_of(pod)
            if found is not None:
                metadata = pod["metadata"]
                with self.lock:
                    self.gone[metadata.get("uid", "")] = pod
                self.tasks.add(("gone", found[0], metadata.get("uid", "")))
        else:
            self.look_at(pod)

    def look_at(self, pod: dict) -> None:
        found = self.job_of(pod)
        if found is None:
            return
        key, job = found
        for due in due_runs(job, pod, stopping=bool(pod["metadata"].get("deletionTimestamp"))):
            if due.live:
                if not self.unreachable(pod):
                    self.follow(key, job, pod, due)
            elif not self.is_kept(job, replica_of(job, pod), due.key) and due.key not in self.in_flight:
                self.tasks.add(("pod", key, pod["metadata"]["name"]))

    def job_of(self, pod: dict) -> tuple[JobKey, Job] | None:
        """The live job that controls ``pod``, when it is one of ours to keep records for."""
        index = pod_objects.job_index(pod)
        kind = self.controller.by_operator.get(index[0]) if index else None
        if kind is None:
            return None
        key = (kind, index[1], index[2])
        resource = self.controller.lookup(self.controller.jobs[key[0]], key[1], key[2])
        if resource is None or resource["metadata"].get("deletionTimestamp"):
            return None
        job = Job(resource)
        if job.managed_externally or pod_objects.controller_uid(pod) != job.uid:
            return None
        return key, job

    def ready_to_delete(self, key: JobKey, job: Job, pod_name: str) -> bool:
        """Whether the executor may delete the pod now: its ended runs are kept (else their reading is queued and
        the job is reconciled again once they are), and a running one's log is open, so no last line is lost."""
        pod = self.controller.lookup(self.controller.pods, job.namespace, pod_name)
        if pod is None or pod["metadata"].get("deletionTimestamp") or pod_objects.controller_uid(pod) != job.uid \
                or not self.acting.is_set():
            return True
        waiting = False
        for due in due_runs(job, pod, stopping=True):
            if due.live:
                self.follow(key, job, pod, due, wait=True)
            elif not self.is_kept(job, replica_of(job, pod), due.key) and not self.held_too_long(due.key):
                self.tasks.add(("pod", key, pod_name))
                waiting = True
        return not waiting

    def held_too_long(self, run: str) -> bool:
        """A delete waits for a run's record :data:`MAX_HOLD_S` at most: a record is never worth a stuck job."""
        with self.lock:
            since = self.held.setdefault(run, time.monotonic())
        return time.monotonic() - since > MAX_HOLD_S

    def forget(self, key: JobKey) -> None:
        """The job is gone: its records go too (the garbage collector's work, done here too, as for pods). Once:
        what it kept is forgotten with it (every pod of a deleted job wakes its key)."""
        with self.lock:
            known = self.kept.pop((key[1], key[2]), None)
        if known and self.acting.is_set():
            self.tasks.add(("sweep", key))

    # ---- the workers ----------------------------------------------------------------------------------
    def work(self) -> None:
        while True:
            task = self.tasks.get()
            if task is None:
                return
            try:
                getattr(self, f"do_{task[0]}")(*task[1:])
                self.tasks.forget(task)
            except (ApiError, OSError) as error:
                log.warning("records: %s %s: %s; retrying in %.1fs", task[0], task[1:], error, self.tasks.retry(task))
            except Exception:  # noqa: BLE001 - a record is never worth a worker of the controller
                log.exception("records: %s %s failed", task[0], task[1:])
            finally:
                self.tasks.done(task)

    def do_pod(self, key: JobKey, pod_name: str) -> None:
        """Read and keep those of the pod's ended runs that are not kept yet."""
        self.listed.wait(RESYNC_S)  # a new leader knows what is kept before it reads any run again
        pod = self.controller.lookup(self.controller.pods, key[1], pod_name)
        found = self.job_of(pod) if pod is not None else None
        if found is None:
            return
        job = found[1]
        dues = [due for due in due_runs(job, pod) if not self.is_kept(job, replica_of(job, pod), due.key)]
        claimed = [due for due in dues if self.claim(due.key)]
        try:
            self.store(key, job, pod_name, replica_of(job, pod), [self.capture(job, pod, due) for due in claimed])
        finally:
            self.release([due.key for due in claimed])

    def do_gone(self, key: JobKey, pod_uid: str) -> None:
        """A pod was removed: its runs that were neither kept nor being read are kept as its last status told
        them, without their logs."""
        with self.lock:
            pod = self.gone.pop(pod_uid, None)
        found = self.job_of(pod) if pod is not None else None
        if found is None:
            return
        job, pod_name = found[1], pod["metadata"]["name"]
        dues = [due for due in due_runs(job, pod, stopping=True) if not self.is_kept(job, replica_of(job, pod), due.key)]
        claimed = [due for due in dues if self.claim(due.key)]
        try:
            why = self.unreachable(pod) or "its pod was removed before its log could be read"
            lost = [Captured(kept_run(due, pod, None, b"", why), None, [], None, None) for due in claimed]
            self.store(key, job, pod_name, replica_of(job, pod), lost)
        finally:
            self.release([due.key for due in claimed])

    def unreachable(self, pod: dict) -> str:
        """Why the pod's log cannot be read, when its node is not Ready or gone (trainctl/core/nodes.py); else ''."""
        down = self.controller.node_down(pod)
        return f"node {pod['spec']['nodeName']} unreachable ({down}): its last lines not kept" if down else ""

    def do_sweep(self, key: JobKey) -> None:
        """Delete the records of a job that is gone (those of a newer job of that name stay)."""
        live = self.controller.lookup(self.controller.jobs[key[0]], key[1], key[2])
        uid = live["metadata"].get("uid") if live else None
        for item in fmt.list_metadata(self.client, key[1], fmt.selector(key[2])):
            metadata = item.get("metadata") or {}
            if pod_objects.controller_uid(item) == uid:
                continue
            try:
                self.client.delete(CONFIGMAPS, metadata["name"], key[1], uid=metadata.get("uid"))
            except ApiError as error:
                if error.status not in (404, 409):
                    raise

    def last_seen(self, namespace: str, name: str) -> dict | None:
        """The pod as cached, or as it was when it was deleted."""
        for informer in self.controller.pods:
            if informer.namespace in (None, namespace) and (found := informer.last_seen(namespace, name)):
                return found
        return None

    def claim(self, run: str) -> bool:
        """Take the run for this thread: False when another thread has it."""
        with self.lock:
            if run in self.in_flight:
                return False
            self.in_flight.add(run)
            return True

    def release(self, runs: list[str]) -> None:
        with self.lock:
            self.in_flight.difference_update(runs)

    # ---- reading a run ----------------------------------------------------------------------------------
    def capture(self, job: Job, pod: dict, due: Due) -> Captured:
        """One read of the run's whole log (OSError to try again later, for a passing failure with attempts
        left: the task is retried with back-off)."""
        reader = TailReader(fmt.RUN_TAIL_BYTES)
        lost = self.read_log(job.namespace, due, reader)
        if lost is not None and lost[1]:
            with self.lock:
                self.attempts[due.key] = self.attempts.get(due.key, 0) + 1
                again = self.attempts[due.key] < MAX_ATTEMPTS
            if again:
                raise OSError(f"the log of {due.pod}: {lost[0]}")
        return captured(due, pod, reader, lost[0] if lost else "")

    def read_log(self, namespace: str, due: Due, reader: TailReader,
                 opened: threading.Event | None = None) -> tuple[str, bool] | None:
        """Stream the run's log into ``reader``: None once read to its end, else why not and whether that may
        pass (a server error before anything came)."""
        from trainctl.backends.kube.logs import log_query

        query = log_query(due.container, follow=due.live, timestamps=True, tail=None, since_seconds=None,
                          previous=due.previous)
        if not due.live:
            self.rate.wait()
        self.metrics.record_log_reads.inc()
        try:
            for piece in self.client.stream(PODS.path(namespace, due.pod, "log"), query,
                                            timeout=None if due.live else 60, chunks=True,
                                            opened=opened.set if opened else None):
                reader.feed(piece)
        except (ApiError, OSError) as error:
            status = getattr(error, "status", 0)
            why = ("its pod was removed before its log could be read" if status == 404 else
                   f"its log could not be read{' to the end' if reader.read else ''}: {error}")
            return why[:500], (status == 0 or status >= 500) and not reader.read
        finally:
            reader.finish()
        return None

    # ---- following a pod that stops --------------------------------------------------------------------
    def follow(self, key: JobKey, job: Job, pod: dict, due: Due, wait: bool = False) -> None:
        """Read a running pod's log until it ends, then keep the run; ``wait``: until the log is open (at most
        :data:`OPEN_WAIT_S`), so that the delete that follows loses no line."""
        if self.is_kept(job, replica_of(job, pod), due.key):
            return
        with self.lock:
            if due.key in self.in_flight or self.follows >= MAX_FOLLOWS:
                return
            self.in_flight.add(due.key)
            self.follows += 1
        opened = threading.Event()
        threading.Thread(target=self.follow_run, args=(key, job, pod, due, opened), name=f"follow-{due.pod}",
                         daemon=True).start()
        if wait:
            opened.wait(OPEN_WAIT_S)

    def follow_run(self, key: JobKey, job: Job, pod: dict, due: Due, opened: threading.Event) -> None:
        try:
            reader = TailReader(fmt.RUN_TAIL_BYTES)
            lost = self.read_log(job.namespace, due, reader, opened)
            self.store(key, job, due.pod, replica_of(job, pod),
                       [captured(due, self.final_state(pod, due), reader, lost[0] if lost else "")])
        except Exception:  # noqa: BLE001 - as in work(): said, and the resync may find the run again
            log.exception("records: following %s/%s failed", job.namespace, due.pod)
        finally:
            opened.set()
            with self.lock:
                self.follows -= 1
            self.release([due.key])

    def final_state(self, pod: dict, due: Due) -> dict:
        """The pod as its run ended: as cached once that shows the end (or the pod is gone), waiting at most
        :data:`SETTLE_S`; else the last one seen."""
        namespace, name = pod["metadata"].get("namespace", ""), pod["metadata"]["name"]
        deadline = time.monotonic() + SETTLE_S
        while True:
            current = self.last_seen(namespace, name)
            if current is None or current["metadata"].get("uid") != due.pod_uid:
                return pod
            if ended_in(current, due) or time.monotonic() > deadline \
                    or self.controller.lookup(self.controller.pods, namespace, name) is None:
                return current
            pod = current
            if self.stopping.wait(0.2):
                return pod

    # ---- writing the record -------------------------------------------------------------------------------
    def store(self, key: JobKey, job: Job, pod_name: str, replica: str, runs: list[Captured]) -> None:
        """Put the runs into the replica's record (creating it, or replacing what it kept, conditionally on what was
        read), then reconcile the job: a delete may be waiting for this."""
        if not runs:
            return
        name = fmt.record_name(pod_name)
        with self.record_locks[hash((job.namespace, name)) % len(self.record_locks)]:
            known = self.has_record(job, replica)
            for _ in range(3):
                existing = self.existing(job, name, replica) if known else None
                if existing is False:  # not ours to write: the runs count as kept, so no delete waits for them
                    self.remember(job.namespace, job.name, replica, job.uid, frozenset(c.run.key for c in runs))
                    break
                record = fmt.fitted(merged(existing, runs, replica), fmt.record_budget(job.total_replicas))
                written = self.write(job, pod_name, record, existing)
                if written is not None:  # kept, or refused for good: either way no run of it is read again
                    self.remember(job.namespace, job.name, replica, job.uid, record.keys)
                    if written:
                        self.metrics.records_written.inc(job.framework.kind)
                        self.metrics.record_bytes.inc(job.framework.kind, amount=fmt.stored_size(record))
                    break
                known = True  # created or changed meanwhile: read it and merge again
        self.controller.queue.add(key)

    def write(self, job: Job, pod_name: str, record: fmt.Record, existing: fmt.Record | None) -> bool | None:
        """Create or replace the ConfigMap: True once written; None on a conflict (someone wrote it since it was
        read); False when the API server refuses it for good (forbidden, a quota, invalid), which is logged:
        reading the runs again would only meet the same answer."""
        body = fmt.body(record._replace(resource_version=existing.resource_version if existing else ""), job.resource,
                        pod_name)
        try:
            if existing is None:
                self.client.create(CONFIGMAPS, body, job.namespace)
            else:
                self.client.replace(CONFIGMAPS, body, job.namespace)
        except ApiError as error:
            if error.status in (404, 409):  # deleted or changed since it was read
                return None
            if 400 <= error.status < 500 and error.status != 429:
                log.warning("records: the record of %s/%s was not kept: %s", job.namespace, pod_name, error)
                return False
            raise
        return True

    def existing(self, job: Job, name: str, replica: str) -> fmt.Record | None | bool:
        """The replica's record as stored (None: there is none, or a stale one of an earlier job of the same name
        that this one replaces); False for a ConfigMap of that name that is no record, which is left alone."""
        try:
            found = self.client.get(CONFIGMAPS, name, job.namespace)
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        record = fmt.decoded(found, job.uid, replica)
        if record is not None:
            return record
        labels = (found.get("metadata") or {}).get("labels") or {}
        if labels.get(fmt.RECORD_LABEL) == fmt.FORMAT:  # an earlier job's, or damaged: this job's replaces it
            return fmt.Record(replica=replica, resource_version=found["metadata"].get("resourceVersion", ""))
        self.controller.executor.record_event(job, "Warning", "RecordNotKept",
                                              f"ConfigMap {name} exists and is not trainctl's record of {replica}: "
                                              "its runs' logs are not kept; delete or rename that ConfigMap")
        return False


def replica_of(job: Job, pod: dict) -> str:
    return pod["metadata"]["name"].removeprefix(f"{job.name}-")


def captured(due: Due, pod: dict, reader: TailReader, lost: str) -> Captured:
    """What one read of a run's log keeps, with the run as ``pod``'s status tells it."""
    tail = reader.tail()
    result = reader.result_line(tail)
    return Captured(run=kept_run(due, pod, reader, tail, lost), tail=fmt.packed(tail) if tail else None,
                    reports=reader.report_lines(), result=fmt.packed(result) if result else None,
                    last_output=reader.last_time)
