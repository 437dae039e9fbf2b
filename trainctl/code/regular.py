"""Reading files of a tree anyone may have shaped: regular files only, never blocking, never more than asked.

A FIFO named ``.gitignore`` blocks ``open()`` until some process writes to it, ``/dev/zero`` never
ends, and a file swapped for a link between the walk and the read leads elsewhere. So a file is
opened non-blocking (a FIFO then opens at once), judged by ``fstat`` of the open descriptor (what
was opened is what is judged, with no race), and read up to a bound.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

KINDS = {stat.S_IFDIR: "a directory", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket",
         stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device", stat.S_IFLNK: "a symlink"}


class NotRegular(OSError):
    """The path is a directory, FIFO, socket or device: nothing a snapshot reads."""

    def __init__(self, kind: str) -> None:
        super().__init__(f"{kind}, not a regular file")
        self.kind = kind


def kind_of(mode: int) -> str:
    """What ``mode`` (an st_mode) is, in words: 'a regular file', 'a FIFO', 'a socket', ..."""
    return KINDS.get(stat.S_IFMT(mode), "a regular file" if stat.S_ISREG(mode) else "a special file")


def open_regular(path: str | os.PathLike, follow_symlinks: bool = True) -> tuple[BinaryIO, os.stat_result]:
    """``path`` open for reading, and its status; NotRegular (closed again) for anything but a regular file."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow_symlinks else os.O_NOFOLLOW)
    descriptor = os.open(path, flags)
    status = os.fstat(descriptor)
    if not stat.S_ISREG(status.st_mode):
        os.close(descriptor)
        raise NotRegular(kind_of(status.st_mode))
    return os.fdopen(descriptor, "rb"), status


def read_prefix(path: str | os.PathLike, limit: int) -> bytes:
    """At most ``limit`` bytes from the start of the regular file ``path`` (OSError, or NotRegular, otherwise)."""
    file, _ = open_regular(path)
    with file:
        return file.read(limit)
