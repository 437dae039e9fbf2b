"""The job a data scientist holds: ``job = client.run(...)``, then ``job.wait()``, ``job.result()``.

A :class:`JobHandle` is a name, a namespace and the client that reaches them: it holds no
state of its own, so every attribute is read fresh from the backend, and a handle made in
another process (``client.job("mnist")``) is as good as the one ``run`` returned.

In a notebook a handle shows as a table (trainctl.sdk.display), ``wait()`` as a line updated in place
(trainctl.sdk.progress), and Ctrl-C (the stop button) while waiting or following the logs stops only
that: :class:`~trainctl.errors.StoppedWatching` says the job keeps running and how to stop it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from trainctl.errors import InvalidArgument, StoppedWatching, UserError

if TYPE_CHECKING:
    from trainctl.backends.base import JobDetails, LogLine, ReplicaRow
    from trainctl.backends.reported import JobProgress, Point
    from trainctl.core.restarts import Record
    from trainctl.sdk.display import LogLines, Unscheduled
    from trainctl.sdk.failures import FailureSummary
    from trainctl.sdk.plotting import Plot


class JobHandle:
    def __init__(self, client, name: str, namespace: str, kind: str | None = None) -> None:
        """``client``: the trainctl.sdk.client.Client that reaches the job."""
        self.client, self.name, self.namespace, self.kind = client, name, namespace, kind

    def __repr__(self) -> str:
        kind = f"{self.kind.lower()}/" if self.kind else ""
        return f"<JobHandle {kind}{self.name} in {self.namespace} on {self.client.backend_name}>"

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict[str, str]:
        """In IPython: the job's row of ``trainctl list`` (state, replicas, age, duration, progress), read now."""
        from trainctl.sdk.display import table

        return table(self.client, [self.resource])

    # ---- reading ----------------------------------------------------------------------------
    def details(self) -> JobDetails:
        """The resource with its status, every replica and recent events, read now."""
        return self.client.get(self.name, self.namespace, self.kind)

    @property
    def resource(self) -> dict:
        return self.details().resource

    @property
    def status(self) -> str:
        """Pending, Created, Running, Restarting, Suspended, Succeeded or Failed (:attr:`summary` adds what the
        state leaves unsaid: replicas the scheduler cannot place)."""
        from trainctl.core.conditions import state_of

        return state_of(self.resource)

    @property
    def summary(self) -> str:
        """The state, and what it does not say: ``Running (1/4 replicas running; 3 unschedulable for 8m:
        Unschedulable: 0/2 nodes are available: ...)`` while the scheduler cannot place some replica (the job's
        Running condition says only that its master runs); just the state otherwise."""
        from trainctl.core.conditions import state_of
        from trainctl.sdk.display import unscheduled

        details = self.details()
        waiting = unscheduled(details.resource, details.replicas)
        return state_of(details.resource) + (f" ({waiting.text(why=True)})" if waiting else "")

    @property
    def replicas(self) -> list[ReplicaRow]:
        """Each replica (pod or process): its state, exit code, reason and restarts; one the scheduler cannot place
        has reason Unschedulable, ``.unscheduled`` (the scheduler's reason and message) and ``.unscheduled_since``."""
        return self.details().replicas

    def restarts(self) -> Record:
        """What became of its attempts: ``.attempt`` (0 for the first), ``.counted`` (restarts that spent
        backoffLimit), ``.disruptions``, ``.preemptions``, ``.history`` (why and when each recent attempt began);
        ``.lines(backoff_limit, rules)`` as ``trainctl status`` says them (docs/fault-tolerance.md)."""
        from trainctl.core.restarts import Record

        return Record.of(self.resource)

    def failure(self) -> FailureSummary | None:
        """Which replica failed first, how, and its last log lines; None if nothing failed."""
        return self.client.failure_summary(self.name, self.namespace)

    def progress(self) -> JobProgress:
        """How far it got, from what its replicas reported with ``trainctl.report()``: ``.step``, ``.total``,
        ``.eta`` (seconds), ``.metrics`` (each one's latest value), ``.time`` (of the latest report), all of its
        leading replica; ``.replicas`` (each one's), ``.stalled_for`` (seconds, while it is stalled)."""
        return self.client.progress(self.name, self.namespace)

    def metrics(self, replica: str | None = None) -> list[Point]:
        """Every point reported with metrics (``.time``, ``.step``, ``.total``, ``.metrics``), oldest first, at most
        10,000 (evenly thinned past that); of ``replica`` (``worker-1``), else of the leading one. For pandas:
        ``DataFrame([{"step": p.step, **p.metrics} for p in job.metrics()])``."""
        return self.client.metrics(self.name, self.namespace, replica=replica)

    def plot(self, metrics: list[str] | str | None = None, path: str | None = None,
             replica: str | None = None) -> Plot:
        """The curves of ``metrics`` (default: every one reported, the first 16 past that; ``.left_out`` names the
        rest) over the steps; shown inline in Jupyter, and written to ``path`` (a .png, .svg or .pdf) when given.
        Needs matplotlib: ``pip install 'trainctl[plot]'``."""
        from trainctl.sdk.plotting import plot

        wanted = [metrics] if isinstance(metrics, str) else metrics
        return plot(self.metrics(replica), wanted, f"{(self.kind or 'job').lower()}/{self.name}", path)

    def logs(self, follow: bool = False, replica: str | None = None, tail: int | None = None) -> LogLines:
        """Every replica's lines (``str(line)`` is ``master-0 | text``); ``follow``: as they come, until the job
        ends. ``replica``: only ``worker-1``'s. A function job's result line is left out (see :meth:`result`), and so
        are the progress reports a pod writes to its log (:meth:`progress`).
        An iterator; in IPython, shown as the lines' text."""
        from trainctl.functions.results import without_plumbing
        from trainctl.sdk.display import LogLines

        lines = without_plumbing(self.client.logs(self.name, self.namespace, replica=replica, follow=follow,
                                                 tail=tail))
        return LogLines(self._watched(lines) if follow else lines)

    def _watched(self, lines: Iterator[LogLine]) -> Iterator[LogLine]:
        with self._watching():
            yield from lines

    @contextmanager
    def _watching(self) -> Iterator[None]:
        """Ctrl-C inside ends the watching with :class:`StoppedWatching`, not a traceback into time.sleep."""
        try:
            yield
        except KeyboardInterrupt:
            namespace = None if self.namespace == self.client.default_namespace() else self.namespace
            raise StoppedWatching(self.name, namespace) from None

    def _latest_line(self) -> str | None:
        """The last line any replica wrote, for a progress display (None when there is none yet, or no log)."""
        from trainctl.functions.results import without_plumbing

        try:
            lines = [line.text for line in without_plumbing(self.client.logs(self.name, self.namespace, tail=1))]
        except UserError:  # deleted meanwhile: the wait says so next
            return None
        return next((text for text in reversed(lines) if text.strip()), None)

    def _progress_now(self) -> JobProgress | None:
        """The reported progress, for a progress display (None when the job went away meanwhile)."""
        try:
            return self.progress()
        except UserError:
            return None

    def _unscheduled_now(self) -> Unscheduled | None:
        """The replicas the scheduler cannot place, for a progress display."""
        from trainctl.sdk.display import unscheduled_now

        return unscheduled_now(self.client, self.name, self.namespace)

    # ---- waiting ----------------------------------------------------------------------------
    def wait(self, timeout: float | None = None, progress: bool = True) -> JobHandle:
        """Until the job succeeds; raises :class:`~trainctl.errors.JobFailed` (with the failure summary) if it
        fails, TimeoutError after ``timeout`` seconds. ``progress``: show its state, the time waited, the replicas
        the scheduler cannot place and why, and its reported progress as a bar (else the latest log line) while
        waiting, and say once if it stalls (in a notebook one line updated in place; trainctl.sdk.progress)."""
        from trainctl.sdk import progress as shown

        label = f"{(self.kind or 'job').lower()}/{self.name}"
        with self._watching(), shown.reporter(label, progress, self._latest_line, self._progress_now,
                                              self._unscheduled_now) as report:
            self.client.wait(self.name, self.namespace, timeout=timeout, on_progress=report, raise_on_failure=True)
        return self

    def result(self, timeout: float | None = None, allow_pickle: bool = False, *, wait: bool = True,
               follow_logs: bool = False) -> object:
        """A function job's return value on rank 0, once it succeeded: ``client.run(train).result()``.

        ``wait``: wait for the job to end (silently; ``timeout`` seconds at most), else a job that has not
        succeeded yet is a UserError. ``follow_logs``: print every replica's lines as they come until the job
        ends (``master-0 | ...``), then return the value: one call to run and watch. The value travels as one
        line of tagged JSON in rank 0's log (at most 1 MiB, see :mod:`trainctl.functions.runner`), so it is
        there as long as the job's logs are; reading it never runs code. A job run with ``pickle_result=True``
        returns a pickle, read only with ``allow_pickle=True``: that trusts whoever can write the job
        (docs/python-api.md, "what result() trusts").
        """
        from trainctl.core.conditions import TERMINAL
        from trainctl.functions.results import value_in
        from trainctl.functions.shipping import FUNCTION_ANNOTATION

        for keyword, value in (("allow_pickle", allow_pickle), ("wait", wait), ("follow_logs", follow_logs)):
            if not isinstance(value, bool):
                raise InvalidArgument(f"{keyword}={value!r}: give True or False")
        if follow_logs:
            for line in self.logs(follow=True):
                print(line, flush=True)
        if not wait and (state := self.status) not in TERMINAL:
            raise UserError(f"job {self.name} is {state}: it has no result yet: result(wait=True) waits for it")
        self.wait(timeout, progress=False)  # at once for a job that ended; JobFailed for one that failed
        if FUNCTION_ANNOTATION not in (self.resource["metadata"].get("annotations") or {}):
            raise UserError(f"job {self.name} runs a command, not a function from Client.run: it has no result")
        read: set[str] = set()  # the replicas whose logs had a line
        value = value_in(texts_of(self.client.logs(self.name, self.namespace), read), allow_pickle, self.name)
        if value is None:
            raise self._no_result(any_logs=bool(read))
        return value[0]

    def _no_result(self, any_logs: bool) -> UserError:
        """Why a job that succeeded has no result line: its logs are gone, or its function did not return."""
        rows = self.replicas
        gone = [row.name for row in rows if row.state == "Deleted"]  # on a cluster: pods removed
        if not any_logs or (rows and len(gone) == len(rows)):
            return UserError(f"job {self.name} succeeded, but its logs are gone, and its result line with them: a "
                             "result lasts as long as the logs of rank 0 (ttl_after_finished, clean_pod_policy on "
                             "a cluster)")
        removed = f" (the logs of {', '.join(gone)} are gone with their pods)" if gone else ""
        return UserError(f"job {self.name} succeeded, but no replica's log holds a result line{removed}: its function "
                         "ended rank 0's process without returning (sys.exit() or os._exit() in it skip the print "
                         "of the value); return the value instead")

    def export(self, directory: str | os.PathLike) -> Path:
        """Every replica's logs (and the run before each), the result, metrics, events and the resource as files
        in ``directory`` (created; an existing one must be empty): ``job.export("mnist-record")``. On a cluster,
        what the pods took with them comes from the record trainctl's controller kept."""
        return self.client.export(self.name, directory, self.namespace)

    # ---- changing ---------------------------------------------------------------------------
    def delete(self) -> None:
        self.client.delete(self.name, self.namespace)

    def suspend(self) -> JobHandle:
        self.client.suspend(self.name, self.namespace)
        return self

    def resume(self) -> JobHandle:
        self.client.resume(self.name, self.namespace)
        return self


def texts_of(lines: Iterator[LogLine], replicas: set[str]) -> Iterator[str]:
    """The lines' text, noting in ``replicas`` each replica that had one."""
    for line in lines:
        replicas.add(line.replica)
        yield line.text
