"""The job a data scientist holds: ``job = client.run(...)``, then ``job.wait()``, ``job.result()``.

A :class:`JobHandle` is a name, a namespace and the client that reaches them: it holds no
state of its own, so every attribute is read fresh from the backend, and a handle made in
another process (``client.job("mnist")``) is as good as the one ``run`` returned.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from trainctl.errors import InvalidArgument, UserError

if TYPE_CHECKING:
    from trainctl.api import Client
    from trainctl.backends.base import JobDetails, LogLine, ReplicaRow
    from trainctl.failures import FailureSummary


class JobHandle:
    def __init__(self, client: Client, name: str, namespace: str, kind: str | None = None) -> None:
        self.client, self.name, self.namespace, self.kind = client, name, namespace, kind

    def __repr__(self) -> str:
        kind = f"{self.kind.lower()}/" if self.kind else ""
        return f"<JobHandle {kind}{self.name} in {self.namespace} on {self.client.backend_name}>"

    # ---- reading ----------------------------------------------------------------------------
    def details(self) -> JobDetails:
        """The resource with its status, every replica and recent events, read now."""
        return self.client.get(self.name, self.namespace, self.kind)

    @property
    def resource(self) -> dict:
        return self.details().resource

    @property
    def status(self) -> str:
        """Pending, Created, Running, Restarting, Suspended, Succeeded or Failed."""
        from trainctl.api import state_of

        return state_of(self.resource)

    @property
    def replicas(self) -> list[ReplicaRow]:
        """Each replica (pod or process): its state, exit code, reason and restarts."""
        return self.details().replicas

    def failure(self) -> FailureSummary | None:
        """Which replica failed first, how, and its last log lines; None if nothing failed."""
        return self.client.failure_summary(self.name, self.namespace)

    def logs(self, follow: bool = False, replica: str | None = None, tail: int | None = None) -> Iterator[LogLine]:
        """Every replica's lines (``str(line)`` is ``master-0 | text``); ``follow``: as they come, until the job
        ends. ``replica``: only ``worker-1``'s. A function job's result line is left out (see :meth:`result`)."""
        from trainctl.function_runner import MARKERS

        lines = self.client.logs(self.name, self.namespace, replica=replica, follow=follow, tail=tail)
        return (line for line in lines if not line.text.startswith(MARKERS))

    # ---- waiting ----------------------------------------------------------------------------
    def wait(self, timeout: float | None = None, progress: bool = True) -> JobHandle:
        """Until the job succeeds; raises :class:`~trainctl.errors.JobFailed` (with the failure summary) if it
        fails, TimeoutError after ``timeout`` seconds. ``progress``: show its state while waiting."""
        from trainctl import progress as shown

        label = f"{(self.kind or 'job').lower()}/{self.name}"
        with shown.reporter(label, progress) as report:
            self.client.wait(self.name, self.namespace, timeout=timeout, on_progress=report, raise_on_failure=True)
        return self

    def result(self, timeout: float | None = None, allow_pickle: bool = False) -> object:
        """A function job's return value on rank 0, once it succeeded (waits for that, without progress).

        It travels as one line of tagged JSON in rank 0's log (at most 1 MiB, see
        :mod:`trainctl.function_runner`), so it is there as long as the job's logs are; reading it never runs
        code. A job run with ``pickle_result=True`` returns a pickle, read only with ``allow_pickle=True``:
        that trusts whoever can write the job (docs/python-api.md, "what result() trusts").
        """
        from trainctl.results import value_of
        from trainctl.running import FUNCTION_ANNOTATION

        if not isinstance(allow_pickle, bool):
            raise InvalidArgument(f"allow_pickle={allow_pickle!r}: give True or False")
        self.wait(timeout, progress=False)
        if FUNCTION_ANNOTATION not in (self.resource["metadata"].get("annotations") or {}):
            raise UserError(f"job {self.name} runs a command, not a function from Client.run: it has no result")
        for line in self.client.logs(self.name, self.namespace):
            value = value_of(line.text, allow_pickle, self.name)
            if value is not None:
                return value[0]
        raise UserError(f"job {self.name} succeeded but no replica's log holds its result line: were its logs "
                        "removed (ttl_after_finished, clean_pod_policy on a cluster)?")

    # ---- changing ---------------------------------------------------------------------------
    def delete(self) -> None:
        self.client.delete(self.name, self.namespace)

    def suspend(self) -> JobHandle:
        self.client.suspend(self.name, self.namespace)
        return self

    def resume(self) -> JobHandle:
        self.client.resume(self.name, self.namespace)
        return self

