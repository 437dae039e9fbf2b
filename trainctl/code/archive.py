"""A code snapshot's tar.gz, kept in a private temporary file instead of in memory.

A snapshot may be as large as ``--workdir-limit`` allows, and a user may raise that limit: held in
memory, a 150 MiB archive made submit a 200 MB process before a single ConfigMap was sent. So the
archive is written once, as it is packed, into a :class:`tempfile.SpooledTemporaryFile`: in memory
up to :data:`IN_MEMORY` bytes, past that a file in the temporary directory (``$TMPDIR``, else
``/tmp``) that never has a name: it is created with mode 0600 and unlinked at once (``O_TMPFILE``
where Linux has it), so nothing of it is left on any way out of the process, a kill included.
Its size and sha256 are counted as it is written, and readers take it a piece at a time
(:meth:`Archive.pieces`: one ConfigMap's chunk; the unpacker's stream).
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from typing import BinaryIO

IN_MEMORY = 1 << 20  # smaller archives (most projects' code) never touch the disk


class OverLimit(Exception):
    """The archive grew past its limit."""


class SpoolFailed(Exception):
    """The temporary file could not be written (a full disk, a file size limit): not the packed file's fault."""

    def __init__(self, error: OSError) -> None:
        super().__init__(error.strerror or str(error))
        self.error = error


class Archive:
    """The bytes of one tar.gz: written once (the writing side is a file object for gzip), then read back as
    often as needed. ``limit``: the most bytes it may hold; a write past it raises :class:`OverLimit` before
    anything of that write is kept."""

    def __init__(self, limit: int | None = None) -> None:
        self.file = tempfile.SpooledTemporaryFile(max_size=IN_MEMORY)
        self.limit, self.size, self.sha256 = limit, 0, hashlib.sha256()

    @classmethod
    def of(cls, data: bytes) -> Archive:
        """An archive holding ``data`` (one read back from ConfigMaps, or made by a test)."""
        archive = cls()
        archive.write(data)
        return archive

    def write(self, data) -> int:
        if self.limit is not None and self.size + len(data) > self.limit:
            raise OverLimit
        try:
            self.file.write(data)
        except OSError as error:
            raise SpoolFailed(error) from None
        self.sha256.update(data)
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        """Write out what the file buffers, so that a full disk is found now, not by the first reader."""
        try:
            self.file.flush()
        except OSError as error:
            raise SpoolFailed(error) from None

    @property
    def digest(self) -> str:
        return "sha256:" + self.sha256.hexdigest()

    def __len__(self) -> int:
        return self.size

    def pieces(self, size: int) -> Iterator[bytes]:
        """The archive from its start, ``size`` bytes at a time. Each read seeks to where this reader is, so
        two readers may take turns."""
        offset = 0
        while offset < self.size:
            self.file.seek(offset)
            piece = self.file.read(min(size, self.size - offset))
            if not piece:
                return
            offset += len(piece)
            yield piece

    def stream(self) -> BinaryIO:
        """The archive as a seekable binary file at its start, for one reader at a time (the unpacker's)."""
        self.file.seek(0)
        return self.file

    def __bytes__(self) -> bytes:
        """All of it in memory: for tests and the small archives ``apply -f`` reads, never for a submit."""
        return b"".join(self.pieces(1 << 20))

    def close(self) -> None:
        """Let the file go (it has no name: nothing is left behind); what it still buffered is dropped."""
        try:
            self.file.close()
        except OSError:  # the buffer could not be written out, which no longer matters
            pass
