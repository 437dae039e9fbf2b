"""Reading and following the replica log files of a local job, in chunks of whole lines.

A replica's log file is a faithful copy of its output; next to it the supervisor keeps an
index, ``<replica>.offsets``: ``<unix time> <log size>`` once a second while the log grows.
The index gives every line a time to within that second without touching the log: the
bytes between two entries were written between their two times. That is what ``--since``
starts from, what ``--timestamps`` prints and what orders the lines of several replicas
(lines written after the last entry get the file's modification time).

Logs are read as bytes in chunks of whole lines (one per index step, at most
``CHUNK_BYTES``) and never decoded here: printing a chunk is one write, which is what keeps
``trainctl logs`` within a small factor of ``cat`` (docs/benchmarks.md).
"""

from __future__ import annotations

import heapq
import os
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import BinaryIO

from trainctl.backends.base import LogChunk, prefix_lines
from trainctl.backends.local.store import JobDir

POLL_SECONDS = 0.1
# of a replica's progress file (trainctl.reporting): the end read for its latest progress, and the most read
# for all its points (a replica's writer keeps its series to some 100,000 points, a few MiB)
RECENT_REPORT_BYTES, MAX_REPORT_BYTES = 256 << 10, 32 << 20
# large enough that per-chunk costs vanish; small enough that a chunk and its prefixed copy stay in the CPU's
# caches and below the size at which malloc maps fresh pages for every one (4 MiB chunks took twice as long)
CHUNK_BYTES = 1 << 20
TAIL_BLOCK_BYTES = 64 << 10


def read_logs(job_dir: JobDir, replicas: list[str], tail: int | None, previous: bool,
              since_seconds: int | None = None, timestamps: bool = False) -> Iterator[LogChunk]:
    """Every replica's log merged in time order (to the index's 1 s step; ties: replica order)."""
    sources = [timed_chunks(job_dir, replica, tail, previous, since_seconds) for replica in replicas]
    merged = heapq.merge(*sources, key=lambda chunk: chunk.time)
    return (with_timestamps(chunk) for chunk in merged) if timestamps else merged


def timed_chunks(job_dir: JobDir, replica: str, tail: int | None, previous: bool,
                 since_seconds: int | None) -> Iterator[LogChunk]:
    """One replica's log (its last ``tail`` lines, those of the last ``since_seconds``) with times."""
    try:
        handle = open(job_dir.log_file(replica, previous), "rb")
    except FileNotFoundError:
        return
    with handle:
        status = os.fstat(handle.fileno())
        index = read_index(job_dir.offsets_file(replica, previous))
        start = line_start_at(handle, since_offset(index, since_seconds))
        if tail is not None:
            start = max(start, tail_start(handle, tail, status.st_size))
        # each entry closes a span of the log; what follows the last one was written by the mtime
        spans = [(size, written_at) for written_at, size in index if start < size < status.st_size]
        spans.append((status.st_size, status.st_mtime))
        handle.seek(start)
        for end, written_at in spans:
            while piece := handle.read(min(CHUNK_BYTES, end - handle.tell())):
                cut = piece.rfind(b"\n") + 1
                if not cut and len(piece) == CHUNK_BYTES:  # one line longer than a chunk: all of it
                    piece += handle.readline()
                    piece += b"" if piece.endswith(b"\n") else b"\n"
                    cut = len(piece)
                if not cut and end == status.st_size:  # the process ended in the middle of a line
                    piece, cut = piece + b"\n", len(piece) + 1
                if cut < len(piece):  # a line finished after this span's end: read again with the next
                    handle.seek(cut - len(piece), os.SEEK_CUR)
                    piece = piece[:cut]
                if not cut:
                    break
                yield LogChunk(replica, piece, written_at)


def read_index(offsets: Path) -> list[tuple[float, int]]:
    """The ``(time, size)`` entries of a log's index; a line being written (or damaged) is skipped."""
    try:
        text = offsets.read_text(errors="replace")
    except FileNotFoundError:
        return []
    entries = []
    for line in text.split("\n")[:-1]:  # the last piece is empty or still being written
        try:
            written_at, size = line.split()
            entries.append((float(written_at), int(size)))
        except ValueError:
            continue
    return entries


def since_offset(index: list[tuple[float, int]], since_seconds: int | None) -> int:
    """Where the lines written in the last ``since_seconds`` begin (0: the whole log).

    The index says the log had ``size`` bytes at ``time``; bytes past the size noted at the
    last entry older than the cutoff were written after it (within the index's 1 s step).
    """
    if since_seconds is None:
        return 0
    cutoff = time.time() - since_seconds
    return max((size for written_at, size in index if written_at < cutoff), default=0)


def start_offset(offsets: Path, since_seconds: int | None) -> int:
    return since_offset(read_index(offsets), since_seconds)


def line_start_at(handle: BinaryIO, offset: int) -> int:
    """The first whole line at or after byte ``offset``."""
    if not offset:
        return 0
    handle.seek(offset - 1)
    if handle.read(1) != b"\n":
        handle.readline()  # the rest of a line that began before the offset
    return handle.tell()


def tail_start(handle: BinaryIO, count: int, size: int) -> int:
    """Where the last ``count`` lines of the first ``size`` bytes begin (a trailing partial line counts)."""
    if count == 0:
        return size
    handle.seek(max(0, size - 1))
    stop = size - 1 if size and handle.read(1) == b"\n" else size  # the last line's own newline
    found, block_end = 0, stop
    while block_end > 0:
        block_start = max(0, block_end - TAIL_BLOCK_BYTES)
        handle.seek(block_start)
        block = handle.read(block_end - block_start)
        newline = len(block)
        while (newline := block.rfind(b"\n", 0, newline)) >= 0:
            found += 1
            if found == count:
                return block_start + newline + 1
        block_end = block_start
    return 0


def report_lines(path: Path, whole: bool) -> list[str]:
    """The lines of a replica's progress file (the last :data:`RECENT_REPORT_BYTES`, or with ``whole`` the
    last :data:`MAX_REPORT_BYTES`), a line cut by where the read began left out. The replica writes the file:
    only a regular file is read (not a FIFO or a device it put there), and never more than that."""
    from trainctl.code.regular import NotRegular, open_regular

    try:
        handle, status = open_regular(path, follow_symlinks=False)
    except (OSError, NotRegular):
        return []
    with handle:
        start = max(0, status.st_size - (MAX_REPORT_BYTES if whole else RECENT_REPORT_BYTES))
        handle.seek(start)
        data = handle.read(status.st_size - start)
    lines = data.decode(errors="replace").split("\n")
    return lines[1 if start else 0:-1]  # the first may be cut; the last is empty or still being written


def with_timestamps(chunk: LogChunk) -> LogChunk:
    """The chunk with its time in front of every line (RFC 3339, to the second: the index's step)."""
    stamp = datetime.fromtimestamp(chunk.time, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ ").encode()
    return LogChunk(chunk.replica, prefix_lines(chunk.data, stamp), chunk.time)


class _Follower:
    """One replica's log, reopened when a restart rotates it."""

    def __init__(self, replica: str, path: Path, previous: Path, start: Callable[[], int]) -> None:
        self.replica, self.path, self.previous = replica, path, previous
        self.start = start  # byte offset to begin at when the log is first opened (--since)
        self.handle: BinaryIO | None = None
        self.inode = None
        self.partial = b""
        # started before the replica: every run counts, even one that ended between two polls
        self.from_first_run = not path.exists()

    def read(self, tail: int | None) -> LogChunk | None:
        """The whole lines written since the last read."""
        self._reopen_if_rotated(tail)
        if self.handle is None:
            return None
        data = self.partial + self.handle.read()
        cut = data.rfind(b"\n") + 1
        self.partial = data[cut:]
        return LogChunk(self.replica, data[:cut], time.time()) if cut else None

    def flush(self, tail: int | None) -> LogChunk | None:
        """Everything left, a last unfinished line included."""
        chunk = self.read(tail)
        if self.partial:
            chunk = LogChunk(self.replica, (chunk.data if chunk else b"") + self.partial + b"\n", time.time())
            self.partial = b""
        return chunk

    def _reopen_if_rotated(self, tail: int | None) -> None:
        try:
            inode = os.stat(self.path).st_ino
        except FileNotFoundError:
            return
        if inode == self.inode:
            return
        if self.handle is not None:  # a restart rotated the log: keep what the last run wrote since the last read
            self._keep(self.handle.read())
            self.handle.close()
        elif self.from_first_run:
            self._keep_missed_run()
        first_open = self.inode is None
        self.handle = open(self.path, "rb")
        start = line_start_at(self.handle, self.start()) if first_open else 0
        if first_open and tail is not None:
            start = max(start, tail_start(self.handle, tail, complete_size(self.handle)))
        self.handle.seek(start)
        self.inode = inode

    def _keep_missed_run(self) -> None:
        """A run that started, wrote and was rotated away before the first poll saw it."""
        try:
            self._keep(self.previous.read_bytes())
        except FileNotFoundError:
            pass

    def _keep(self, data: bytes) -> None:
        rest = self.partial + data
        self.partial = rest if not rest or rest.endswith(b"\n") else rest + b"\n"


def complete_size(handle: BinaryIO) -> int:
    """The size of the log up to its last newline: a line still being written is read as it grows."""
    size = os.fstat(handle.fileno()).st_size
    handle.seek(max(0, size - TAIL_BLOCK_BYTES))
    block = handle.read(size - handle.tell())
    return size - len(block) + block.rfind(b"\n") + 1


def follow_logs(job_dir: JobDir, replicas: list[str], tail: int | None, since_seconds: int | None,
                done: Callable[[], bool], timestamps: bool = False) -> Iterator[LogChunk]:
    """Lines of every replica as they are written, until ``done()`` and the files are drained."""
    followers = [_Follower(replica, job_dir.log_file(replica), job_dir.log_file(replica, previous=True),
                           lambda replica=replica: start_offset(job_dir.offsets_file(replica), since_seconds))
                 for replica in replicas]
    while True:
        finished = done()
        produced = False
        for follower in followers:
            chunk = follower.flush(tail) if finished else follower.read(tail)
            if chunk is not None:
                produced = True
                yield with_timestamps(chunk) if timestamps else chunk
        if finished:
            return
        if not produced:
            time.sleep(POLL_SECONDS)

