"""Streaming the logs of every pod of a job through the API server, multiplexed with prefixes."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator

from trainctl.backends.base import LogLine

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


def stream_pod(core, namespace: str, pod: str, container: str, replica: str, *, follow: bool, tail: int | None,
               since_seconds: int | None, previous: bool, emit: Callable[[LogLine], None]) -> None:
    """One pod's log. With follow: wait while it is Pending, reopen after each restart, stop when it ends."""
    seen_restarts = -1
    while True:
        if follow and not wait_started(core, namespace, pod):
            return
        options = {"container": container, "follow": follow, "previous": previous, "_preload_content": False}
        if tail is not None:
            options["tail_lines"] = tail
        if since_seconds is not None:
            options["since_seconds"] = since_seconds
        try:
            response = core.read_namespaced_pod_log(pod, namespace, **options)
        except Exception as error:  # noqa: BLE001 - a pod that is gone or has no previous run ends its stream
            emit(LogLine(replica, f"(no logs: {getattr(error, 'reason', error)})"))
            return
        pending = b""
        for chunk in response.stream(1024):
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for line in complete:
                emit(LogLine(replica, line.decode(errors="replace")))
        if pending:
            emit(LogLine(replica, pending.decode(errors="replace")))
        if not follow:
            return
        status = pod_status(core, namespace, pod)
        if status is None or status[0] in ("Succeeded", "Failed"):
            return
        if status[1] == seen_restarts:
            time.sleep(POLL_S)
        seen_restarts = status[1]
        tail, since_seconds = None, None  # after a restart, the new run from its start


def pod_status(core, namespace: str, pod: str) -> tuple[str, int] | None:
    from kubernetes.client.exceptions import ApiException

    try:
        obj = core.read_namespaced_pod(pod, namespace)
    except ApiException:
        return None
    restarts = sum(s.restart_count for s in obj.status.container_statuses or [])
    return obj.status.phase, restarts


def wait_started(core, namespace: str, pod: str) -> bool:
    """Until the pod's containers run (or ended); False if it disappeared."""
    while True:
        status = pod_status(core, namespace, pod)
        if status is None:
            return False
        if status[0] != "Pending":
            return True
        time.sleep(POLL_S)
