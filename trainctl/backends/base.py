"""The interface every place a job can run implements: local processes or Kubernetes.

A backend stores kubeflow.org/v1 job resources and reports what became of
them. Resources cross this boundary as plain dicts exactly as the API server
would hold them (``apiVersion``, ``kind``, ``metadata``, ``spec``, ``status``),
so the CLI and the Python API never care where a job runs.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ReplicaRow:
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


@dataclass(frozen=True)
class LogLine:
    replica: str  # e.g. master-0
    text: str


@dataclass
class JobDetails:
    resource: dict
    replicas: list[ReplicaRow] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)


class Backend(abc.ABC):
    #: shown in every command's summary: "local" or "kubernetes (context X)"
    description: str

    def default_namespace(self) -> str:
        """Namespace used when none is given."""
        return "default"

    @abc.abstractmethod
    def create(self, resource: dict, replace: bool = False) -> dict:
        """Store a validated job; return it as stored. Error if it exists and not replace."""

    @abc.abstractmethod
    def get(self, name: str, namespace: str, kind: str | None = None) -> JobDetails:
        """The job with status, its replicas and recent events. NotFound if absent."""

    @abc.abstractmethod
    def list(self, namespace: str | None, selector: str | None = None) -> list[dict]:
        """Jobs of every kind; namespace None means all namespaces."""

    @abc.abstractmethod
    def logs(
        self,
        name: str,
        namespace: str,
        replica: str | None = None,
        follow: bool = False,
        tail: int | None = None,
        since_seconds: int | None = None,
        previous: bool = False,
        kind: str | None = None,
    ) -> Iterator[LogLine]:
        """Lines of every replica (or one), interleaved as they come."""

    @abc.abstractmethod
    def delete(self, name: str, namespace: str, kind: str | None = None) -> None:
        """Delete the job and everything it started."""

    @abc.abstractmethod
    def set_suspended(self, name: str, namespace: str, suspend: bool, kind: str | None = None) -> dict:
        """Set spec.runPolicy.suspend; return the updated job."""
