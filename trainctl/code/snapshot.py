"""A working directory as one deterministic, content-addressed tar.gz.

Deterministic means the same tree gives the same bytes, whoever packs it and whenever:
entries sorted by path, no owners, no times (tar and gzip headers both say 0), modes
reduced to 0644 or 0755. So the archive's sha256 names its content, and a cluster that
already holds that hash needs nothing uploaded again.

Only regular files travel. A symlink is followed when it points at a file inside the
root (the pod gets the content) and skipped otherwise; directory symlinks are skipped
(they may loop, or lead out of the tree). Every skip is reported, never silent.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from trainctl.code import ignore
from trainctl.errors import UserError

MiB = 1 << 20
DEFAULT_LIMIT = 32 * MiB  # compressed; a ConfigMap per 900 KiB of it
LARGE_FILE = 10 * MiB  # warned about: almost always data or a checkpoint, not code
GZIP_LEVEL = 6
MAX_FILES = 50_000


@dataclass(frozen=True)
class Snapshot:
    source: str  # the directory packed, absolute
    archive: bytes  # the tar.gz
    digest: str  # "sha256:<hex>" of archive
    files: int
    unpacked_bytes: int
    warnings: list[str] = field(default_factory=list)

    @property
    def hex(self) -> str:
        return self.digest.split(":", 1)[1]

    def summary(self) -> str:
        return (f"code: {self.files} file{'' if self.files == 1 else 's'}, {human(self.unpacked_bytes)} ({human(len(self.archive))} compressed) "
                f"from {self.source}, {self.digest[:19]}")


def human(size: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if size < 1024 or unit == "MiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def take(directory: str | Path, limit: int = DEFAULT_LIMIT, extra: dict[str, bytes] | None = None) -> Snapshot:
    """Pack ``directory``, plus the ``extra`` files trainctl adds (path in the archive -> content: a function
    job's call, under .trainctl/, which the tree itself never ships); a UserError when it is no directory
    or the archive passes ``limit`` bytes."""
    root = Path(directory).expanduser().resolve()
    if not root.is_dir():
        raise UserError(f"--workdir {str(directory)!r}: no such directory")
    files, warnings = collect(root)
    buffer = io.BytesIO()
    unpacked = 0
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=GZIP_LEVEL) as packed, \
            tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for relative, path in files:
            try:
                data = read(path)
                executable = os.access(path, os.X_OK)
            except OSError as err:
                warnings.append(f"skipped {relative}: {err.strerror or err}")
                continue
            add_file(tar, relative, data, executable)
            unpacked += len(data)
            if len(data) > LARGE_FILE:
                warnings.append(f"{relative} is {human(len(data))}: data and checkpoints belong on a volume "
                                "(--volume), not in the code snapshot")
            if buffer.tell() > limit:
                raise over_limit(root, files, limit)
        for relative, data in sorted((extra or {}).items()):
            add_file(tar, relative, data, executable=False)
            unpacked += len(data)
    archive = buffer.getvalue()
    if len(archive) > limit:
        raise over_limit(root, files, limit)
    return Snapshot(str(root), archive, "sha256:" + hashlib.sha256(archive).hexdigest(),
                    len(files) + len(extra or {}), unpacked, warnings)


def add_file(tar: tarfile.TarFile, name: str, data: bytes, executable: bool) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o755 if executable else 0o644, 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    tar.addfile(info, io.BytesIO(data))


def collect(root: Path) -> tuple[list[tuple[str, Path]], list[str]]:
    """(path relative to root, path) of every file that travels, sorted; and what was skipped.

    Like ``find -xdev`` it stays on the root's filesystem: a dataset or /proc mounted inside
    the tree stays home. Past :data:`MAX_FILES` the directory is not a project (``--workdir /``)."""
    from trainctl.backends.local.store import home

    files: list[tuple[str, Path]] = []
    warnings: list[str] = []
    state, device = home().resolve(), root.stat().st_dev  # local jobs' state when it lies inside the tree

    def walk(directory: Path, relative: str, rules: list) -> None:
        try:
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError as err:
            warnings.append(f"skipped {relative or '.'}/: {err.strerror or err}")
            return
        for entry in entries:
            path, name = Path(entry.path), f"{relative}/{entry.name}" if relative else entry.name
            is_dir = entry.is_dir(follow_symlinks=False)
            if ignore.always_skipped(path) or ignore.ignored(rules, name, is_dir) or path == state:
                continue
            if is_dir and entry.stat(follow_symlinks=False).st_dev != device:
                warnings.append(f"skipped {name}/: another filesystem is mounted there")
            elif is_dir:
                walk(path, name, rules + ignore.read_rules(path, name))
            elif entry.is_symlink():
                target = path.resolve()
                if target.is_file() and target.is_relative_to(root):
                    files.append((name, target))
                else:
                    warnings.append(f"skipped symlink {name}: it points at a directory, outside {root} or nowhere")
            elif entry.is_file(follow_symlinks=False):
                files.append((name, path))
            if len(files) > MAX_FILES:
                raise UserError(f"--workdir {root}: more than {MAX_FILES:,} files, which is not a project's code: "
                                "run from the project's directory, exclude data in .trainctlignore, or --no-workdir")

    walk(root, "", ignore.read_rules(root, ""))
    files.sort(key=lambda item: item[0])
    return files, warnings


def read(path: Path) -> bytes:
    """A file's bytes; non-blocking, so a special file that would wait (/proc/kmsg) fails instead."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(descriptor, "rb") as file:
        return file.read()


def over_limit(root: Path, files: list[tuple[str, Path]], limit: int) -> UserError:
    sizes = sorted(((safe_size(path), name) for name, path in files), reverse=True)[:3]
    largest = ", ".join(f"{name} ({human(size)})" for size, name in sizes)
    return UserError(f"--workdir: the code snapshot of {root} passes the {human(limit)} compressed limit "
                     f"(--workdir-limit); largest files: {largest}; exclude data and outputs in .trainctlignore, "
                     "or --no-workdir")


def safe_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
