"""Streaming the logs of every pod of a job through the API server, multiplexed with prefixes."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator

from trainctl.backends.base import LogLine
from trainctl.kube.client import PODS, ApiError, Client

POLL_S = 0.5
_DONE = object()


def multiplex(sources: list[Callable[[Callable[[LogLine], None]], None]]) -> Iterator[LogLine]:
    """Run each source in a thread; yield their lines as they come, until all are done."""
    lines: queue.Queue = queue.Queue()

    def run(source):
        try:
            source(lines.put)
        finally:
            lines.put(_DONE)

    for source in sources:
        threading.Thread(target=run, args=(source,), daemon=True).start()
    remaining = len(sources)
    while remaining:
        item = lines.get()
        if item is _DONE:
            remaining -= 1
        else:
            yield item


def stream_pod(client: Client, namespace: str, pod: str, container: str, replica: str, *, follow: bool,
               tail: int | None, since_seconds: int | None, previous: bool, emit: Callable[[LogLine], None]) -> None:
    """One pod's log. With follow: wait while it is Pending, reopen after each restart, stop when it ends."""
    seen_restarts = -1
    while True:
        if follow and not wait_started(client, namespace, pod):
            return
        query = {"container": container, "follow": str(follow).lower(), "previous": str(previous).lower()}
        if tail is not None:
            query["tailLines"] = tail
        if since_seconds is not None:
            query["sinceSeconds"] = since_seconds
        try:
            for line in client.stream(PODS.path(namespace, pod, "log"), query, timeout=None if follow else 60):
                emit(LogLine(replica, line.rstrip(b"\n").decode(errors="replace")))
        except (ApiError, OSError) as error:  # a pod that is gone or has no previous run ends its stream
            emit(LogLine(replica, f"(no logs: {getattr(error, 'message', '') or error})"))
            return
        if not follow:
            return
        status = pod_status(client, namespace, pod)
        if status is None or status[0] in ("Succeeded", "Failed"):
            return
        if status[1] == seen_restarts:
            time.sleep(POLL_S)
        seen_restarts = status[1]
        tail, since_seconds = None, None  # after a restart, the new run from its start


def pod_status(client: Client, namespace: str, pod: str) -> tuple[str, int] | None:
    """Phase and restart count; None when the pod does not exist (or cannot be read)."""
    try:
        obj = client.get(PODS, pod, namespace)
    except (ApiError, OSError):
        return None
    status = obj.get("status") or {}
    return status.get("phase", "Pending"), sum(s.get("restartCount", 0) for s in status.get("containerStatuses") or [])


def wait_started(client: Client, namespace: str, pod: str) -> bool:
    """Until the pod's containers run (or ended); False if it disappeared."""
    while True:
        status = pod_status(client, namespace, pod)
        if status is None:
            return False
        if status[0] != "Pending":
            return True
        time.sleep(POLL_S)
