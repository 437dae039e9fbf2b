"""A working directory as one deterministic, content-addressed tar.gz.

Deterministic means the same tree gives the same bytes, whoever packs it and whenever:
entries sorted by path, no owners, no times (tar and gzip headers both say 0), modes
reduced to 0644 or 0755. So the archive's sha256 names its content, and a cluster that
already holds that hash needs nothing uploaded again.

What travels: the regular files the ignore rules keep (:mod:`.ignore`), less credential-like
ones (:mod:`.credentials`), which stay home unless ``ship_secrets`` names each, and are named in
one warning. A symlink travels as its target's content only when the target's own path travels:
a link into ``.git``, into an ignored directory or to a held-back key does not, nor one that
leads outside the root, to a directory (which may loop) or round in a loop. FIFOs, sockets and
devices never travel. Every skip is a warning naming the path, never silent.

Limits, each a one-line refusal naming the largest files, all checked before anything is sent:
:data:`MAX_FILES` files and :data:`MAX_UNPACKED` bytes as they unpack (counted from the files'
sizes before one is read: a 1 GiB sparse file compresses to a megabyte, yet would fill every
pod), and ``limit`` bytes compressed, checked as the archive grows. Files are streamed into the
archive, never read whole, and opened only as regular files; the archive itself goes to a private
temporary file (:mod:`.archive`), so memory holds neither, whatever the limit. The init container
(:mod:`.unpack`) enforces the same file and byte limits on whatever it is given.
"""

from __future__ import annotations

import errno
import gzip
import io
import os
import posixpath
import stat
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from trainctl.code import credentials, ignore, regular, unpack
from trainctl.code.archive import Archive, OverLimit, SpoolFailed
from trainctl.errors import UserError, option, setting
from trainctl.paths import home

MiB = 1 << 20
DEFAULT_LIMIT = 32 * MiB  # compressed; a ConfigMap per 900 KiB of it
LARGE_FILE = 10 * MiB  # warned about: almost always data or a checkpoint, not code
GZIP_LEVEL = 6
MAX_FILES, MAX_UNPACKED = unpack.MAX_FILES, unpack.MAX_BYTES  # what the init container accepts
HELD_BACK_NAMED = 50  # past this many, the warning counts the rest, so that it stays one readable line


@dataclass(frozen=True)
class Snapshot:
    source: str  # the directory packed, absolute
    archive: Archive  # the tar.gz
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
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def take(directory: str | Path, limit: int = DEFAULT_LIMIT, extra: dict[str, bytes] | None = None,
         ship_secrets: Iterable[str] = (), library: dict[str, bytes] | None = None) -> Snapshot:
    """Pack ``directory``, plus the ``extra`` files trainctl adds (path in the archive -> content: a function
    job's call, under .trainctl/, which the tree itself never ships), and the credential-like files
    ``ship_secrets`` names (paths relative to ``directory``). ``library``: files of trainctl's own that every
    snapshot carries (trainctl.code.pods.replica_library), packed like ``extra`` but left out of the files and
    bytes the summary says travel, which are the user's. A UserError when it is no directory, when a
    ship_secrets path names no held-back file, or past a limit."""
    root, extra = Path(directory).expanduser().resolve(), extra or {}
    if not root.is_dir():
        raise UserError(f"{option('workdir')} {str(directory)!r}: no such directory")
    walk = Walk(root)
    files = walk.files_that_travel(ship_secrets)
    sizes = {name: safe_size(path) for name, path in files.items()}
    if sum(sizes.values()) > MAX_UNPACKED:
        raise UserError(f"{option('workdir')}: the files of {root} unpack to {human(sum(sizes.values()))}, more "
                        f"than the {MAX_UNPACKED // MiB} MiB a code snapshot may hold; largest files: "
                        f"{largest(sizes)}; put data on a volume ({option('volume')}), exclude it in .trainctlignore, "
                        f"or {setting('no_workdir')}")
    archive, packed = pack(root, files, sizes, {**(library or {}), **extra}, limit, walk.warnings)
    warnings = walk.warnings + [f"{name} is {human(size)}: data and checkpoints belong on a volume "
                                f"({option('volume')}), not in the code snapshot"
                                for name, size in packed.items() if size > LARGE_FILE]
    return Snapshot(str(root), archive, archive.digest, len(packed) + len(extra),
                    sum(packed.values()) + sum(len(data) for data in extra.values()), warnings)


def pack(root: Path, files: dict[str, Path], sizes: dict[str, int], extra: dict[str, bytes], limit: int,
         warnings: list[str]) -> tuple[Archive, dict[str, int]]:
    """The tar.gz of ``files`` (streamed, each at the size the walk saw) and ``extra``; the size of each file
    packed. Refused the moment the archive passes ``limit``: an incompressible 256 MiB file is not packed whole
    first and refused after."""
    archive, packed = Archive(limit), {}
    try:
        with gzip.GzipFile(filename="", mode="wb", fileobj=archive, mtime=0, compresslevel=GZIP_LEVEL) as zipped, \
                tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name, path in files.items():
                if add_file(tar, name, path, sizes[name], warnings):
                    packed[name] = sizes[name]
            for name, data in sorted(extra.items()):
                tar.addfile(header(name, len(data), executable=False), io.BytesIO(data))
        archive.flush()
    except OverLimit:
        archive.close()
        raise UserError(f"{option('workdir')}: the code snapshot of {root} passes the {human(limit)} compressed "
                        f"limit ({option('workdir_limit')}); largest files: {largest(sizes)}; exclude data and outputs "
                        f"in .trainctlignore, or {setting('no_workdir')}") from None
    except SpoolFailed as failed:
        archive.close()
        raise UserError(f"{option('workdir')}: the code snapshot of {root} could not be written to a temporary file "
                        f"in {tempfile.gettempdir()} ({failed}): free space there, or point TMPDIR at a disk with "
                        "room") from None
    return archive, packed


def add_file(tar: tarfile.TarFile, name: str, path: Path, size: int, warnings: list[str]) -> bool:
    """Stream ``size`` bytes of the regular file ``path`` into ``tar`` as ``name`` (a file grown since the walk
    travels as it was then); False, with a warning, when it is no longer a regular file that opens."""
    try:
        file, _ = regular.open_regular(path, follow_symlinks=False)  # a link's path is already its target's
    except OSError as err:
        warnings.append(f"skipped {name}: {err.strerror or err}")
        return False
    with file:
        try:
            tar.addfile(header(name, size, os.access(path, os.X_OK)), file)  # 16 KiB at a time
        except OSError as err:  # cut short meanwhile: the archive holds half a member and cannot go on
            raise UserError(f"{option('workdir')}: {name} changed while it was packed ({err}): submit again") \
                from None
    return True


def header(name: str, size: int, executable: bool) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o755 if executable else 0o644, 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


class Walk:
    """One pass over a root: the files that travel, the credential-like ones held back, and every skip in words.

    Like ``find -xdev`` it stays on the root's filesystem: a dataset or /proc mounted inside the tree
    stays home. Past :data:`MAX_FILES` the directory is not a project (``--workdir /``)."""

    def __init__(self, root: Path) -> None:
        self.root, self.device = root, root.stat().st_dev
        self.state = home().resolve()  # local jobs' state, when it lies inside the tree
        self.scope = ignore.scope(root)
        self.files: dict[str, Path] = {}  # name in the archive -> the regular file read for it
        self.links: dict[str, Path] = {}  # decided once every regular file is known
        self.held_back: dict[str, Path] = {}
        self.warnings: list[str] = []
        self.walk(root, "", self.scope.rules + ignore.read_rules(root, self.scope.prefix.rstrip("/")))

    def files_that_travel(self, ship_secrets: Iterable[str]) -> dict[str, Path]:
        """Name in the archive -> file, sorted: the regular files, the released secrets and the links that travel."""
        self.release(ship_secrets)
        self.follow_links()
        if self.held_back:
            self.warnings.insert(0, held_back_warning(sorted(self.held_back)))
        return dict(sorted(self.files.items()))

    def walk(self, directory: Path, relative: str, rules: list[ignore.Rule]) -> None:
        try:
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError as err:
            self.warnings.append(f"skipped {relative or '.'}/: {err.strerror or err}")
            return
        for entry in entries:
            self.visit(entry, f"{relative}/{entry.name}" if relative else entry.name, rules)
            if len(self.files) + len(self.links) > MAX_FILES:
                raise UserError(f"{option('workdir')} {self.root}: more than {MAX_FILES:,} files, which is not a "
                                "project's code: run from the project's directory, exclude data in .trainctlignore, "
                                f"or {setting('no_workdir')}")

    def visit(self, entry: os.DirEntry, name: str, rules: list[ignore.Rule]) -> None:
        path = Path(entry.path)
        try:
            status = entry.stat(follow_symlinks=False)
        except OSError as err:  # gone since the directory was listed
            self.warnings.append(f"skipped {name}: {err.strerror or err}")
            return
        is_dir = stat.S_ISDIR(status.st_mode)
        if ignore.always_skipped(path) or ignore.ignored(rules, self.scope.prefix + name, is_dir) or path == self.state:
            return
        if is_dir and status.st_dev != self.device:
            self.warnings.append(f"skipped {name}/: another filesystem is mounted there")
        elif is_dir:
            self.walk(path, name, rules + ignore.read_rules(path, self.scope.prefix + name))
        elif not (stat.S_ISREG(status.st_mode) or stat.S_ISLNK(status.st_mode)):
            self.warnings.append(f"skipped {name}: {regular.kind_of(status.st_mode)}, not a regular file")
        elif credentials.credential_like(name, path):  # a link by its own name, and its target's content
            self.held_back[name] = path
        else:
            (self.files if stat.S_ISREG(status.st_mode) else self.links)[name] = path

    def release(self, ship_secrets: Iterable[str]) -> None:
        """Send the held-back files ``ship_secrets`` names; one line for a path that names none of them."""
        for requested in dict.fromkeys(ship_secrets):
            path = self.held_back.pop(posixpath.normpath(requested), None)
            if path is None:
                raise UserError(f"{option('ship_secret')} {requested!r}: not a file the snapshot of {self.root} "
                                f"holds back (held back: {', '.join(sorted(self.held_back)) or 'none'}); give its path "
                                "relative to the workdir, as the warning names it (a file an ignore file leaves "
                                "out needs a '!' line in .trainctlignore too)")
            (self.links if path.is_symlink() else self.files)[posixpath.normpath(requested)] = path

    def follow_links(self) -> None:
        """Each link travels as its target's content, when its target's own path travels; else a warning."""
        regular_files = dict(self.files)
        for name, link in self.links.items():
            target, reason = self.target_of(link, regular_files)
            if target is None:
                self.warnings.append(f"skipped symlink {name}: {reason}")
            else:
                self.files[name] = regular_files[target]

    def target_of(self, link: Path, regular_files: dict[str, Path]) -> tuple[str | None, str]:
        """The archive name of the file ``link`` leads to, when that file travels itself; else None and why."""
        try:
            real = Path(os.path.realpath(link, strict=True))
        except OSError as err:
            return None, "it loops" if err.errno == errno.ELOOP else "it points nowhere"
        if not real.is_relative_to(self.root):
            return None, f"it points outside {self.root}"
        if real.is_dir():
            return None, "it points at a directory (directory links are not followed: they may loop or lead out)"
        target = real.relative_to(self.root).as_posix()
        if target not in regular_files:
            return None, f"it points at {target}, which does not travel itself (ignored, held back or always skipped)"
        return target, ""


def held_back_warning(names: list[str]) -> str:
    shown = ", ".join(names[:HELD_BACK_NAMED])
    if len(names) > HELD_BACK_NAMED:
        shown += f" and {len(names) - HELD_BACK_NAMED} more"
    return (f"held back {len(names)} credential-like file{'' if len(names) == 1 else 's'} (never shipped by "
            f"default): {shown}; ship one on purpose with {setting('ship_secret', ['PATH'])}")


def largest(sizes: dict[str, int]) -> str:
    top = sorted(((size, name) for name, size in sizes.items()), reverse=True)[:3]
    return ", ".join(f"{name} ({human(size)})" for size, name in top)


def safe_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
