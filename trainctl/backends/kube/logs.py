"""The logs of every pod of a job through the API server, merged in time order or followed.

Without ``--follow`` each pod's log is read with ``timestamps=true``: kubelet puts the
time it read each line in front of it, fixed width (``2006-01-02T15:04:05.000000000Z``),
so the pods' logs are merged by comparing those prefixes as bytes. Lines of one pod within
the same millisecond travel as one chunk (found by bisection, not line by line), and unless
``--timestamps`` asked for them the prefixes are sliced off again at that fixed width, in
C (``map`` of a slice), not with a regular expression: that was 1 s per million lines.

With ``--follow`` every pod streams in a thread of its own and lines are printed as they
arrive, until the job ends: a pod that outlives its job (a TFJob's parameter servers,
workers under cleanPodPolicy None) does not hold it open.
"""

from __future__ import annotations

import bisect
import heapq
import queue
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from operator import itemgetter

from trainctl.backends.base import LogChunk
from trainctl.kube.client import PODS, ApiError, Client
from trainctl.kube.pods import PodStatus

POLL_S = 0.5
JOB_CHECK_S = 1.0  # how often a follow asks whether the job has ended
DRAIN_S = 2.0  # after the job ended, how long lines still in flight may take to arrive
STAMP_BUCKET = len("2006-01-02T15:04:05.000")  # lines of one millisecond stay in one chunk
_DONE = object()

Emit = Callable[[LogChunk], None]


def merged(sources: list[Iterator[LogChunk]]) -> Iterator[LogChunk]:
    """The pods' chunks in time order (ties: replica order); read lazily, one connection per pod."""
    return heapq.merge(*sources, key=lambda chunk: chunk.time)


def stamped_chunks(client: Client, namespace: str, pod: str, query: dict, replica: str,
                   keep_stamps: bool, timeout: float = 60) -> Iterator[LogChunk]:
    """One pod's finished log (``query`` has ``timestamps=true``) as chunks timed by their lines; ApiError or
    OSError when it cannot be read (the caller says why, or reads the kept record), or when the server sends nothing
    for ``timeout`` seconds."""
    pieces = client.stream(PODS.path(namespace, pod, "log"), query, timeout=timeout, chunks=True)
    return stamped_blocks_to_chunks(whole_lines(pieces), replica, keep_stamps)


def stamped_blocks_to_chunks(blocks: Iterator[bytes] | list[bytes], replica: str,
                             keep_stamps: bool) -> Iterator[LogChunk]:
    """Blocks of kubelet-stamped whole lines (a pod's, or a kept record's) as chunks timed by their lines."""
    last_time = 0.0
    for block in blocks:
        for stamp, lines in split_by_stamp(block):
            last_time = stamp_time(stamp) or last_time
            yield LogChunk(replica, b"\n".join(lines if keep_stamps else without_stamps(lines)) + b"\n", last_time)


def log_query(container: str, *, follow: bool, timestamps: bool, tail: int | None, since_seconds: int | None,
              previous: bool = False) -> dict:
    """The query of a pod log request."""
    query = {"container": container, "follow": str(follow).lower(), "timestamps": str(timestamps).lower(),
             "previous": str(previous).lower()}
    if tail is not None:
        query["tailLines"] = tail
    if since_seconds is not None:
        query["sinceSeconds"] = since_seconds
    return query


def split_by_stamp(block: bytes) -> Iterator[tuple[bytes, list[bytes]]]:
    """Runs of lines (without their newlines) sharing their timestamp's millisecond: ``(stamp, lines)``.

    A container's lines come in time order, so the end of each run is found by bisection.
    """
    lines = block[:-1].split(b"\n")
    start = 0
    while start < len(lines):
        stamp = lines[start][:STAMP_BUCKET]
        end = max(start + 1, bisect.bisect_right(lines, stamp, lo=start, key=lambda line: line[:STAMP_BUCKET]))
        yield stamp, lines[start:end]
        start = end


def without_stamps(lines: list[bytes]) -> Iterator[bytes]:
    """The lines of one run without kubelet's timestamp and its space (one width: kubelet's format is fixed)."""
    width = lines[0].find(b" ") + 1
    return map(itemgetter(slice(width, None)), lines)


def stamp_time(stamp: bytes) -> float | None:
    try:
        return datetime.fromisoformat(stamp.decode() + "+00:00").timestamp()
    except ValueError:
        return None  # not a kubelet timestamp: keep the previous line's time


def whole_lines(pieces: Iterator[bytes]) -> Iterator[bytes]:
    """Pieces of a byte stream regrouped to end at a newline (a last unfinished line gets one)."""
    carry = b""
    for piece in pieces:
        data = carry + piece
        cut = data.rfind(b"\n") + 1
        carry = data[cut:]
        if cut:
            yield data[:cut]
    if carry:
        yield carry + b"\n"


def no_logs(error: Exception | str) -> bytes:
    return f"(no logs: {getattr(error, 'message', '') or error})\n".encode()


def follow_all(sources: list[Callable[[Emit], None]], job_ended: Callable[[], bool]) -> Iterator[LogChunk]:
    """Run each source in a thread; yield their chunks as they come, until all are done or the job
    ended (then what is still in flight gets ``DRAIN_S`` to arrive)."""
    chunks: queue.Queue = queue.Queue()

    def run(source):
        try:
            source(chunks.put)
        finally:
            chunks.put(_DONE)

    for source in sources:
        threading.Thread(target=run, args=(source,), daemon=True).start()
    remaining, next_check, deadline = len(sources), time.monotonic() + JOB_CHECK_S, None
    while remaining:
        now = time.monotonic()
        if deadline is None and now >= next_check:
            next_check = now + JOB_CHECK_S
            if job_ended():
                deadline = now + DRAIN_S
        if deadline is not None and now >= deadline:
            return  # pods outliving the job (PS, cleanPodPolicy None): their threads end with the process
        try:
            item = chunks.get(timeout=min(POLL_S, (deadline or next_check) - now))
        except queue.Empty:
            continue
        if item is _DONE:
            remaining -= 1
        else:
            yield item


def stream_pod(client: Client, namespace: str, pod: str, container: str, replica: str, *, tail: int | None,
               since_seconds: int | None, timestamps: bool, emit: Emit) -> None:
    """One pod's log as it is written: wait while it is Pending, reopen after each restart, stop when it ends."""
    seen_restarts = -1
    while True:
        if not wait_started(client, namespace, pod):
            return
        query = log_query(container, follow=True, timestamps=timestamps, tail=tail, since_seconds=since_seconds)
        try:
            for block in whole_lines(client.stream(PODS.path(namespace, pod, "log"), query, timeout=None,
                                                   chunks=True)):
                emit(LogChunk(replica, block, time.time()))
        except (ApiError, OSError) as error:  # a pod that is gone ends its stream
            emit(LogChunk(replica, no_logs(error), time.time()))
            return
        status = pod_status(client, namespace, pod)
        if status is None or status.finished:
            return
        if status.restarts() == seen_restarts:
            time.sleep(POLL_S)
        seen_restarts = status.restarts()
        tail, since_seconds = None, None  # after a restart, the new run from its start


def pod_status(client: Client, namespace: str, pod: str) -> PodStatus | None:
    """The pod's status; None when the pod does not exist (or cannot be read)."""
    try:
        return PodStatus.of(client.get(PODS, pod, namespace))
    except (ApiError, OSError):
        return None


def wait_started(client: Client, namespace: str, pod: str) -> bool:
    """Until the pod's containers run (or ended); False if it disappeared."""
    while True:
        status = pod_status(client, namespace, pod)
        if status is None:
            return False
        if status.phase != "Pending":
            return True
        time.sleep(POLL_S)
