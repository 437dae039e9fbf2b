"""Byte counts as people read them: ``687.5 KiB``. Apart from the snapshot code (tarfile, gzip, hashing), so
that ``status``, which shows a job's snapshot size, does not load it."""

from __future__ import annotations


def human(size: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")
