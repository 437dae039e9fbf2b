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

Both files are the replica's to shape (docs/local-backend.md, "Files a job may shape"): they are
opened without following a link or blocking, read only as regular files and never more than a
chunk at a time (the index: its last :data:`MAX_INDEX_BYTES`); a log that is no regular file is
shown as one line saying so, an index that is none is not used.
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
from trainctl.backends.local.store import JobDir, without_cut_line
from trainctl.code.regular import open_regular, read_suffix, unreadable

POLL_SECONDS = 0.1
# of a replica's progress file (trainctl.reporting): the end read for its latest progress, and the most read
# for all its points (a replica's writer keeps its series to some 100,000 points, a few MiB)
RECENT_REPORT_BYTES, MAX_REPORT_BYTES = 256 << 10, 32 << 20
# large enough that per-chunk costs vanish; small enough that a chunk and its prefixed copy stay in the CPU's
# caches and below the size at which malloc maps fresh pages for every one (4 MiB chunks took twice as long)
CHUNK_BYTES = 1 << 20
TAIL_BLOCK_BYTES = 64 << 10
# after the last CHUNK_BYTES of a line longer than that, which is all that is shown of it: read whole, such a line
# (a progress bar's, rewritten by carriage returns for as long as the training runs) takes as much memory as it is
# long; its end is what a terminal would show of it
LINE_CUT = b" [trainctl: a line longer than 1 MiB, cut to its last MiB]\n"
# of a log's index, the end read: an entry a second for some 46 hours; older lines get the first entry's time
MAX_INDEX_BYTES = 4 << 20


def read_logs(job_dir: JobDir, replicas: list[str], tail: int | None, previous: bool,
              since_seconds: int | None = None, timestamps: bool = False) -> Iterator[LogChunk]:
    """Every replica's log merged in time order (to the index's 1 s step; ties: replica order)."""
    sources = [timed_chunks(job_dir, replica, tail, previous, since_seconds) for replica in replicas]
    merged = heapq.merge(*sources, key=lambda chunk: chunk.time)
    return (with_timestamps(chunk) for chunk in merged) if timestamps else merged


def timed_chunks(job_dir: JobDir, replica: str, tail: int | None, previous: bool,
                 since_seconds: int | None) -> Iterator[LogChunk]:
    """One replica's log (its last ``tail`` lines, those of the last ``since_seconds``) with times."""
    path = job_dir.log_file(replica, previous)
    try:
        handle, status = open_regular(path, follow_symlinks=False)
    except FileNotFoundError:
        return
    except OSError as error:  # NotRegular too: a link to /dev/zero, a FIFO the replica left there
        yield unreadable_chunk(replica, path, error)
        return
    with handle:
        index = read_index(job_dir.offsets_file(replica, previous))
        start = line_start_at(handle, since_offset(index, since_seconds))
        if tail is not None:
            start = max(start, tail_start(handle, tail, status.st_size))
        # each entry closes a span of the log; what follows the last one was written by the mtime
        spans = [(size, written_at) for written_at, size in index if start < size < status.st_size]
        spans.append((status.st_size, status.st_mtime))
        handle.seek(start)
        for end, written_at in spans:
            # past ``end`` after a long line: the spans it covered are done
            while (left := end - handle.tell()) > 0 and (piece := handle.read(min(CHUNK_BYTES, left))):
                cut = piece.rfind(b"\n") + 1
                if not cut and len(piece) == CHUNK_BYTES:  # one line longer than a chunk: its end, when it ended
                    piece = long_line_end(handle, status.st_size)
                    yield LogChunk(replica, piece, next(when for size, when in spans if size >= handle.tell()))
                    continue
                if not cut and end == status.st_size:  # the process ended in the middle of a line
                    piece, cut = piece + b"\n", len(piece) + 1
                if cut < len(piece):  # a line finished after this span's end: read again with the next
                    handle.seek(cut - len(piece), os.SEEK_CUR)
                    piece = piece[:cut]
                if not cut:
                    break
                yield LogChunk(replica, piece, written_at)


def long_line_end(handle: BinaryIO, size: int) -> bytes:
    """What is shown of a line longer than a chunk that ``handle`` has just read a chunk of: its last
    :data:`CHUNK_BYTES` and :data:`LINE_CUT` (which ends it, as its newline or the end of the first ``size`` bytes
    did); ``handle`` is left after it. Read a chunk at a time, never whole: it may be gigabytes long."""
    ended = False
    while not ended and (block := handle.read(max(0, min(CHUNK_BYTES, size - handle.tell())))):
        newline = block.find(b"\n")
        if ended := newline >= 0:
            handle.seek(newline + 1 - len(block), os.SEEK_CUR)
    after = handle.tell()
    handle.seek(max(0, after - ended - CHUNK_BYTES))
    kept = handle.read(CHUNK_BYTES)
    handle.seek(after)
    return kept + LINE_CUT


def unreadable_chunk(replica: str, path: Path, error: OSError) -> LogChunk:
    """The one line that stands for a replica's log that is no regular file: ``logs/master-0.log: unreadable
    (a FIFO, not a regular file)``."""
    return LogChunk(replica, unreadable(f"{path.parent.name}/{path.name}", error).encode() + b"\n", time.time())


def read_index(offsets: Path) -> list[tuple[float, int]]:
    """The ``(time, size)`` entries of a log's index (of its last :data:`MAX_INDEX_BYTES`); a line being written
    (or damaged) is skipped, and an index that is no regular file has none."""
    try:
        data, cut = read_suffix(offsets, MAX_INDEX_BYTES)
    except OSError:  # missing, or NotRegular: the log is still read, its lines timed by its modification time
        return []
    entries = []
    for line in without_cut_line(data, cut).decode(errors="replace").split("\n")[:-1]:  # the last: still written
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
    if handle.read(1) != b"\n":  # the rest of a line that began before the offset, a chunk at a time
        while (rest := handle.readline(CHUNK_BYTES)) and not rest.endswith(b"\n"):
            pass
    return handle.tell()


def tail_start(handle: BinaryIO, count: int, size: int) -> int:
    """Where the last ``count`` lines of the first ``size`` bytes begin (a trailing partial line counts).

    A line longer than a chunk ends the search: it is shown by its last :data:`CHUNK_BYTES` (``long_line_end``),
    so what is returned is a chunk and a byte before its end, and the lines before it are left out: finding its
    start could mean reading gigabytes backwards.
    """
    if count == 0:
        return size
    handle.seek(max(0, size - 1))
    stop = size - 1 if size and handle.read(1) == b"\n" else size  # the last line's own newline
    found, block_end, line_end = 0, stop, stop
    while block_end > 0:
        block_start = max(0, block_end - TAIL_BLOCK_BYTES)
        handle.seek(block_start)
        block = handle.read(block_end - block_start)
        newline = len(block)
        while (newline := block.rfind(b"\n", 0, newline)) >= 0:
            found += 1
            if found == count:
                return block_start + newline + 1
            line_end = block_start + newline
        block_end = block_start
        if line_end - block_end > CHUNK_BYTES:
            return line_end - CHUNK_BYTES - 1
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
    """One replica's log, reopened when a restart rotates it; read at most a chunk at a time."""

    def __init__(self, replica: str, path: Path, previous: Path, start: Callable[[], int]) -> None:
        self.replica, self.path, self.previous = replica, path, previous
        self.start = start  # byte offset to begin at when the log is first opened (--since)
        self.handle: BinaryIO | None = None
        self.draining: list[BinaryIO] = []  # runs' logs rotated away, each read to its end before what follows
        self.inode = None
        self.partial = b""
        # started before the replica: every run counts, even one that ended between two polls
        self.from_first_run = not os.path.lexists(path)

    def read(self, tail: int | None) -> LogChunk | None:
        """The whole lines written since the last read (of at most about a chunk)."""
        return self._read(tail)[0]

    def flush(self, tail: int | None) -> Iterator[LogChunk]:
        """Everything left, a chunk at a time, a last unfinished line included."""
        while True:
            chunk, more = self._read(tail)
            if chunk is not None:
                yield chunk
            if not more:
                break
        if self.partial:
            yield LogChunk(self.replica, self.partial + b"\n", time.time())
            self.partial = b""

    def _read(self, tail: int | None) -> tuple[LogChunk | None, bool]:
        """The whole lines of the next chunk, and whether it held any bytes (so there may be more)."""
        self._reopen_if_rotated(tail)
        data = self._next_bytes()
        whole = self.partial + data
        cut = whole.rfind(b"\n") + 1
        if not cut and len(whole) >= CHUNK_BYTES:  # a line longer than a chunk: shown in chunk-long pieces
            whole, cut = whole + b"\n", len(whole) + 1
        self.partial = whole[cut:]
        return (LogChunk(self.replica, whole[:cut], time.time()) if cut else None), bool(data)

    def _next_bytes(self) -> bytes:
        """The next chunk of the oldest run not read to its end; a rotated run's last line is ended there."""
        while self.draining:
            data = self.draining[0].read(CHUNK_BYTES)
            if data:
                return data
            self.draining.pop(0).close()
            self._end_line()
        return self.handle.read(CHUNK_BYTES) if self.handle is not None else b""

    def _reopen_if_rotated(self, tail: int | None) -> None:
        try:
            inode = os.lstat(self.path).st_ino  # the replica's link, if it left one, is what is judged
        except FileNotFoundError:
            return
        if inode == self.inode:
            return
        if self.handle is not None:  # a restart rotated the log: what the last run wrote is still read first
            self.draining.append(self.handle)
            self.handle = None
        elif self.from_first_run:
            self._drain_missed_run()
        first_open, self.inode = self.inode is None, inode
        try:
            self.handle, _ = open_regular(self.path, follow_symlinks=False)
        except FileNotFoundError:  # rotated away meanwhile: the next poll finds the next run's
            self.inode = None if first_open else self.inode
            return
        except OSError as error:  # NotRegular too: said once, in one line, after what came before
            self._end_line()
            self.partial += unreadable_chunk(self.replica, self.path, error).data
            return
        start = line_start_at(self.handle, self.start()) if first_open else 0
        if first_open and tail is not None:
            start = max(start, tail_start(self.handle, tail, complete_size(self.handle)))
        self.handle.seek(start)

    def _drain_missed_run(self) -> None:
        """A run that started, wrote and was rotated away before the first poll saw it."""
        try:
            handle, _ = open_regular(self.previous, follow_symlinks=False)
        except FileNotFoundError:
            return
        except OSError as error:
            self.partial += unreadable_chunk(self.replica, self.previous, error).data
            return
        self.draining.append(handle)

    def _end_line(self) -> None:
        """What is kept of an unfinished line ends here (its run ended, or another line must follow)."""
        if self.partial and not self.partial.endswith(b"\n"):
            self.partial += b"\n"


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
            chunks = follower.flush(tail) if finished else filter(None, [follower.read(tail)])
            for chunk in chunks:
                produced = True
                yield with_timestamps(chunk) if timestamps else chunk
        if finished:
            return
        if not produced:
            time.sleep(POLL_SECONDS)

