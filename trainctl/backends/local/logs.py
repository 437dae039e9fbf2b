"""Reading and following the replica log files of a local job."""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

from trainctl.backends.base import LogLine
from trainctl.backends.local.store import JobDir

POLL_SECONDS = 0.1


def read_logs(job_dir: JobDir, replicas: list[str], tail: int | None, previous: bool) -> Iterator[LogLine]:
    for replica in replicas:
        path = job_dir.log_file(replica, previous)
        if not path.exists():
            continue
        with open(path, errors="replace") as handle:
            lines = deque(handle, maxlen=tail) if tail is not None else handle.readlines()
        for line in lines:
            yield LogLine(replica, line.rstrip("\n"))


class _Follower:
    """One replica's log, reopened when a restart rotates it."""

    def __init__(self, replica: str, path: Path) -> None:
        self.replica, self.path = replica, path
        self.handle = None
        self.inode = None
        self.partial = ""

    def read(self, tail: int | None) -> list[LogLine]:
        self._reopen_if_rotated(tail)
        if self.handle is None:
            return []
        text = self.partial + self.handle.read()
        *complete, self.partial = text.split("\n")
        return [LogLine(self.replica, line) for line in complete]

    def flush(self) -> list[LogLine]:
        lines = self.read(None)
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
            rest = self.partial + self.handle.read()
            self.partial = rest if not rest or rest.endswith("\n") else rest + "\n"
            self.handle.close()
        self.handle = open(self.path, errors="replace")
        if self.inode is None and tail is not None:
            lines = self.handle.readlines()
            skipped = "".join(lines[:-tail] if tail else lines)
            self.handle.seek(len(skipped.encode()))
        self.inode = inode


def follow_logs(job_dir: JobDir, replicas: list[str], tail: int | None,
                done: Callable[[], bool]) -> Iterator[LogLine]:
    """Lines of every replica as they are written, until the job is done and the files are drained."""
    followers = [_Follower(replica, job_dir.log_file(replica)) for replica in replicas]
    while True:
        finished = done()
        produced = False
        for follower in followers:
            for line in follower.flush() if finished else follower.read(tail):
                produced = True
                yield line
        if finished:
            return
        if not produced:
            time.sleep(POLL_SECONDS)
