"""A replica's kept run (trainctl/backends/kube/records.py) as a log reader wants it, looked up only when needed.

Apart from the records module so that reading the logs of pods that still exist (``logs``, and ``status``,
``list`` and ``wait`` reading progress) loads none of its machinery (gzip, zlib, dataclasses).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from trainctl.backends.base import LogChunk

if TYPE_CHECKING:
    from trainctl.backends.kube.records import Shown


class Kept:
    """A replica's kept run as a reader of its log wants it: looked up once, and only when needed."""

    def __init__(self, client, job, pod_name: str, replica: str, pod: dict | None, container: str, previous: bool,
                 read: dict) -> None:
        """``job``: a trainctl.core.job.Job; ``pod``: the replica's pod as listed (None: gone); ``read``: tail,
        since_seconds and keep_stamps, as for the pod's log."""
        self.client, self.job, self.pod_name, self.replica = client, job, pod_name, replica
        self.pod, self.container, self.previous, self.read = pod, container, previous, read
        self.looked_up, self.found = False, None

    def run(self) -> Shown | None:
        if not self.looked_up:
            from trainctl.backends.kube import records

            record = records.read(self.client, self.job.namespace, self.pod_name, self.job.uid, self.replica)
            self.found, self.looked_up = records.shown(record, self.pod, self.container, self.previous), True
        return self.found

    def chunks(self) -> Iterator[LogChunk]:
        from trainctl.backends.kube.records import kept_chunks

        return kept_chunks(self.run(), self.replica, **self.read)

    def or_instead(self, live: Iterator[LogChunk], when: bool) -> Iterator[LogChunk]:
        """The pod's log; when it cannot be read at all (and ``when``), the kept run of it instead, else the line
        that says why."""
        from trainctl.backends.kube.logs import no_logs
        from trainctl.kube.client import ApiError

        last = None
        try:
            for chunk in live:
                last = chunk.time
                yield chunk
        except (ApiError, OSError) as error:  # a pod that is gone, or has no previous run
            if last is None and when and self.run() is not None:
                yield from self.chunks()
            else:
                yield LogChunk(self.replica, no_logs(error), last or 0.0)
