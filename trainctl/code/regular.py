"""Reading files of a tree anyone may have shaped: regular files only, never blocking, never more than asked.

A FIFO named ``.gitignore`` blocks ``open()`` until some process writes to it, ``/dev/zero`` never
ends, and a file swapped for a link between the walk and the read leads elsewhere. So a file is
opened non-blocking (a FIFO then opens at once), judged by ``fstat`` of the open descriptor (what
was opened is what is judged, with no race), and read up to a bound.

The same holds for every file in a local job's directory, which its replicas may shape as they like
(docs/local-backend.md, "Files a job may shape"): :func:`read_prefix` and :func:`read_suffix` with
``follow_symlinks=False``, and :func:`unreadable` to say in one line what stood there instead.
"""

from __future__ import annotations

import errno
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
    try:
        descriptor = os.open(path, flags)
    except OSError as error:
        if error.errno == errno.ELOOP and not follow_symlinks:  # O_NOFOLLOW's answer to a link
            raise NotRegular(KINDS[stat.S_IFLNK]) from None
        if error.errno == errno.ENXIO:  # a socket cannot be opened at all: name it as the others are named
            raise NotRegular(KINDS[stat.S_IFSOCK]) from None
        raise
    status = os.fstat(descriptor)
    if not stat.S_ISREG(status.st_mode):
        os.close(descriptor)
        raise NotRegular(kind_of(status.st_mode))
    return os.fdopen(descriptor, "rb"), status


def read_prefix(path: str | os.PathLike, limit: int, follow_symlinks: bool = True) -> bytes:
    """At most ``limit`` bytes from the start of the regular file ``path`` (OSError, or NotRegular, otherwise)."""
    file, _ = open_regular(path, follow_symlinks)
    with file:
        return file.read(limit)


def read_suffix(path: str | os.PathLike, limit: int) -> tuple[bytes, bool]:
    """At most the last ``limit`` bytes of the regular file ``path`` (never through a link), and whether they
    begin past its start (the first line may be cut); OSError, or NotRegular, otherwise."""
    file, status = open_regular(path, follow_symlinks=False)
    with file:
        start = max(0, status.st_size - limit)
        file.seek(start)
        return file.read(limit), start > 0


def unreadable(name: str, error: OSError) -> str:
    """One line saying why ``name`` (as a person finds it, e.g. ``logs/master-0.log``) was not read:
    ``logs/master-0.log: unreadable (a FIFO, not a regular file)``."""
    return f"{name}: unreadable ({error.strerror or error})"
