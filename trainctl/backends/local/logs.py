"""Reading and following the replica log files of a local job."""

from __future__ import annotations

import io
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO

from trainctl.backends.base import LogLine
from trainctl.backends.local.store import JobDir

POLL_SECONDS = 0.1


def read_logs(job_dir: JobDir, replicas: list[str], tail: int | None, previous: bool,
              since_seconds: int | None = None) -> Iterator[LogLine]:
    for replica in replicas:
        path = job_dir.log_file(replica, previous)
        if not path.exists():
            continue
        with open_from(path, start_offset(job_dir.offsets_file(replica, previous), since_seconds)) as handle:
            lines = deque(handle, maxlen=tail) if tail is not None else handle.readlines()
        for line in lines:
            yield LogLine(replica, line.rstrip("\n"))


def start_offset(offsets: Path, since_seconds: int | None) -> int:
    """Where the lines written in the last ``since_seconds`` begin (0: the whole log).

    The index says the log had ``size`` bytes at ``time``; bytes past the size noted at the
    last entry older than the cutoff were written after it (within the index's 1 s step).
    """
    if since_seconds is None:
        return 0
    cutoff = time.time() - since_seconds
    start = 0
    try:
        entries = offsets.read_text().splitlines()
    except FileNotFoundError:
        return 0
    for entry in entries:
        written_at, size = entry.split()
        if float(written_at) >= cutoff:
            break
        start = int(size)
    return start


def open_from(path: Path, offset: int) -> TextIO:
    """The log opened at the first whole line at or after byte ``offset``."""
    handle = open(path, "rb")
    if offset:
        handle.seek(offset - 1)
        if handle.read(1) != b"\n":
            handle.readline()  # the rest of a line that began before the cutoff
    return io.TextIOWrapper(handle, errors="replace")


class _Follower:
    """One replica's log, reopened when a restart rotates it."""

    def __init__(self, replica: str, path: Path, previous: Path, start: Callable[[], int]) -> None:
        self.replica, self.path, self.previous = replica, path, previous
        self.start = start  # byte offset to begin at when the log is first opened (--since)
        self.handle = None
        self.inode = None
        self.partial = ""
        # started before the replica: every run counts, even one that ended between two polls
        self.from_first_run = not path.exists()

    def read(self, tail: int | None) -> list[LogLine]:
        self._reopen_if_rotated(tail)
        if self.handle is None:
            return []
        text = self.partial + self.handle.read()
        *complete, self.partial = text.split("\n")
        return [LogLine(self.replica, line) for line in complete]

    def flush(self, tail: int | None) -> list[LogLine]:
        lines = self.read(tail)
        if self.partial:
            lines.append(LogLine(self.replica, self.partial))
            self.partial = ""
        return lines

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
        self.handle = open_from(self.path, self.start() if first_open else 0)
        if first_open and tail is not None:
            self.handle = skip_to_last(self.handle, tail)
        self.inode = inode


    def _keep_missed_run(self) -> None:
        """A run that started, wrote and was rotated away before the first poll saw it."""
        try:
            with open(self.previous, errors="replace") as handle:
                self._keep(handle.read())
        except FileNotFoundError:
            pass

    def _keep(self, text: str) -> None:
        rest = self.partial + text
        self.partial = rest if not rest or rest.endswith("\n") else rest + "\n"


def skip_to_last(handle: TextIO, count: int) -> TextIO:
    """The same log positioned so that only its last ``count`` complete lines remain to be read."""
    binary = handle.detach()  # nothing was decoded yet, so the byte position is exact
    boundaries = deque([binary.tell()], maxlen=count + 1)  # ends of the last count complete lines, and before
    for line in iter(binary.readline, b""):
        if not line.endswith(b"\n"):
            break  # a line still being written is read as it grows
        boundaries.append(boundaries[-1] + len(line))
    binary.seek(boundaries[0])
    return io.TextIOWrapper(binary, errors="replace")


def follow_logs(job_dir: JobDir, replicas: list[str], tail: int | None, since_seconds: int | None,
                done: Callable[[], bool]) -> Iterator[LogLine]:
    """Lines of every replica as they are written, until the job is done and the files are drained."""
    followers = [_Follower(replica, job_dir.log_file(replica), job_dir.log_file(replica, previous=True),
                           lambda replica=replica: start_offset(job_dir.offsets_file(replica), since_seconds))
                 for replica in replicas]
    while True:
        finished = done()
        produced = False
        for follower in followers:
            for line in follower.flush(tail) if finished else follower.read(tail):
                produced = True
                yield line
        if finished:
            return
        if not produced:
            time.sleep(POLL_SECONDS)
