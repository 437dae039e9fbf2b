"""Job state on disk for the local backend.

One directory per job, ``<home>/jobs/<namespace>/<name>/``:

* ``job.json``     the resource with its status (what ``status -o yaml`` prints)
* ``runtime.json`` the supervisor's table: pid, heartbeat, ports, one entry per replica
* ``events.jsonl`` the job's events, one JSON object per line
* ``logs/<replica>.log`` (and ``.previous.log`` after a restart), kept until delete or TTL
* ``logs/<replica>.offsets`` the log's size once a second while it grows, so ``--since`` finds where to start
* ``logs/<replica>.termination`` what the running replica wrote as its termination message (the function
  runner's record of a raise), read and removed by the supervisor when the run ends
* ``logs/<replica>.preempting`` written just before the supervisor stops the replica (trainctl.preempting())
* ``checkpoints/`` the replicas' ``trainctl.checkpoint_dir()``, kept across restarts until delete or TTL
* ``uid``          the job's uid, written once at creation: ``delete`` finds the job's processes
  by it even when job.json and runtime.json are damaged

Writers replace files atomically (temp file + rename) under a per-job lock, so a
reader never sees half a file and ``suspend`` from the CLI never races the supervisor.
A job directory appears whole or not at all: :meth:`JobDir.create` fills a hidden
sibling directory and renames it into place, which also makes creation exclusive.

Every path is built from a namespace, a name and a replica id, and each of them must
be one DNS-1123 label, so no input (``-n ../../x``) and no directory found on disk
(listing) can make the store read or write outside ``<home>/jobs``.
A file that cannot be parsed raises :class:`DamagedState`, a one-line error naming
the file and the way out (``trainctl delete``), instead of a traceback.

The replicas can reach this directory (``TRAINCTL_CHECKPOINT_DIR/..``), so any file in it may have
become a link, a FIFO, a directory or gigabytes long. Every read here opens without following a
link and without blocking, accepts a regular file only and reads at most a stated bound (the table
in docs/local-backend.md); every write opens without following a link or blocking on a FIFO, and
replaces whatever else stands at a file trainctl itself keeps (:func:`open_own_file`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from trainctl.code.regular import NotRegular, kind_of, read_prefix, read_suffix, unreadable
from trainctl.errors import NotFound, UserError, setting, spelled
from trainctl.kube.names import DNS_1123_LABEL, LABEL_MAX
from trainctl.paths import functions_dir, home

# A job directory being created: ".<name>.<creator pid>.<random>.creating", renamed into place when full.
DRAFT_SUFFIX = ".creating"
ABANDONED_DRAFT = r"\.[a-z0-9-]+\.(?P<pid>[0-9]+)\.[^./]+\.creating"  # compiled when drafts are looked for
# The most read of each file in a job's directory (docs/local-backend.md, "Files a job may shape"). job.json and
# runtime.json: a resource is at most 1.5 MiB in etcd, and 256 replicas' rows with their 4 KiB messages a few MiB.
MAX_STATE_BYTES = 16 << 20
MAX_EVENTS_BYTES = 1 << 20  # events.jsonl's end: get() shows its last 20 events
MAX_UID_BYTES = 256
MAX_CONTAINMENT_BYTES = 1 << 20  # one line per supervisor start


class DamagedState(UserError):
    """A state file of a job exists but cannot be read: say which and how to get rid of the job."""

    def __init__(self, job: JobDir, path: Path, problem: object) -> None:
        delete = spelled(f"trainctl delete {job.name} -n {job.namespace}",
                         f"client.delete({job.name!r}, {job.namespace!r})")
        super().__init__(f'job "{job.name}" in namespace "{job.namespace}" (local): its state file {path} is damaged '
                         f"({problem}); {delete} stops its processes and removes it")


class AlreadyExists(UserError):
    """Another job of that name holds the directory."""

    def __init__(self, job: JobDir) -> None:
        super().__init__(f'job "{job.name}" already exists in namespace "{job.namespace}" (local): '
                         f"delete it first, pick another name, or use {setting('replace')}")


def write_json(path: Path, data: object) -> None:
    """Replace ``path`` whole (an unserializable value changes nothing): see :func:`write_text`."""
    write_text(path, json.dumps(data, indent=1, sort_keys=False))


def write_text(path: Path, text: str) -> None:
    """Replace ``path`` whole: a reader sees the old file or the new one, and a failed write
    (ENOSPC) leaves the old file and no temporary behind."""
    import tempfile  # here: reading a job writes nothing

    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w") as output:
            output.write(text)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def read_json(path: Path) -> dict:
    """The object in ``path``; ValueError when it is not a whole JSON object (truncated, garbage) or longer than
    :data:`MAX_STATE_BYTES`, NotRegular (an OSError) when it is no regular file (a link, a FIFO)."""
    data = read_prefix(path, MAX_STATE_BYTES + 1, follow_symlinks=False)
    if len(data) > MAX_STATE_BYTES:
        raise ValueError(f"longer than {MAX_STATE_BYTES >> 20} MiB")
    data = json.loads(data)
    if not isinstance(data, dict):
        raise ValueError(f"a JSON object was expected, found {type(data).__name__}")
    return data


def job_problem(resource: dict) -> str | None:
    """Why a parsed job.json cannot be used as a job (what every command relies on), or None."""
    wrong = [key for key, kind in (("kind", str), ("metadata", dict), ("spec", dict))
             if not isinstance(resource.get(key), kind)]
    if wrong:
        return f"no {', '.join(wrong)} of the right type: it is not a job resource"
    status = resource.get("status", {})
    if not isinstance(status, dict) or not _list_of_dicts(status.get("conditions", [])):
        return "its status is not a status with a list of conditions"
    return None


def runtime_problem(runtime: dict) -> str | None:
    """Why a parsed runtime.json cannot be used as the supervisor's table, or None."""
    for key in ("replicas", "ports", "gpus"):
        if not isinstance(runtime.get(key, {}), dict):
            return f"{key} is not a mapping"
    rows = runtime.get("replicas", {}).values()
    if not all(isinstance(row, dict) and isinstance(row.get("name"), str) and isinstance(row.get("rtype"), str)
               and isinstance(row.get("index"), int) for row in rows):
        return "a replica row lacks its name, type or index"
    return None


def stored_window(value: object) -> tuple[float, float] | None:
    """A replica row's exit window (two Unix times, a JSON list), or None for anything else."""
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(type(v) in (int, float) for v in value):
        return float(value[0]), float(value[1])
    return None


def _list_of_dicts(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def append_line(path: Path, line: str) -> None:
    """Add one whole line to ``path`` or nothing: a write cut short (a full disk) is taken back,
    so the next line does not run into a fragment. Only one process appends to each file; whatever a
    replica put in its place (a link, a FIFO) is replaced by a new file (:func:`open_own_file`)."""
    data = (line + "\n").encode()
    handle = open_own_file(path)
    try:
        end = os.lseek(handle, 0, os.SEEK_END)
        try:
            if os.write(handle, data) != len(data):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        except OSError:
            os.ftruncate(handle, end)
            raise
    finally:
        os.close(handle)


def check_component(what: str, value: object) -> str:
    """``value`` as one safe path component of the store, or a UserError naming it: a DNS-1123 label cannot climb
    out or hide (no '/', no '..', no leading dot: the store's own hidden files), nor hold anything a terminal or
    rich markup would interpret."""
    if not isinstance(value, str) or len(value) > LABEL_MAX or not re.fullmatch(DNS_1123_LABEL, value):
        raise UserError(f"{what} {value!r} cannot name a local job directory: use a DNS-1123 label "
                        f"(at most {LABEL_MAX} lower-case letters, digits and '-', starting and ending "
                        "with a letter or digit)")
    return value


def open_own_file(path: Path, flags: int = os.O_WRONLY | os.O_APPEND) -> int:
    """A descriptor of the regular file ``path`` (created if missing) that trainctl keeps in a job's directory,
    opened with ``flags``. A link there is never followed and a FIFO never blocks the open: anything but a regular
    file was put there by a replica and is removed (a directory with what it holds) for a new, empty file."""
    flags |= os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    for _ in range(3):  # a replica replacing it again meanwhile gets the same answer
        try:
            handle = os.open(path, flags, 0o644)
        except OSError as error:
            # ELOOP: a link; ENXIO: a FIFO nobody reads, or a socket; EISDIR: a directory
            if error.errno not in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                raise
        else:
            mode = os.fstat(handle).st_mode
            if stat.S_ISREG(mode):
                os.set_blocking(handle, True)  # a regular file never blocks; writes that wait for the disk may
                return handle
            os.close(handle)
        remove_odd(path)
    raise NotRegular(kind_of(os.lstat(path).st_mode))


def remove_odd(path: Path) -> None:
    """Remove whatever stands at ``path`` (a link itself, not what it names; a directory with its content)."""
    try:
        os.unlink(path)
    except IsADirectoryError:
        remove_tree(path)
    except FileNotFoundError:
        pass


@contextlib.contextmanager
def file_lock(path: Path, timeout: float | None = None) -> Iterator[bool]:
    """Hold ``path``'s exclusive lock; yields whether it is held (False once ``timeout`` seconds pass first)."""
    with os.fdopen(open_own_file(path), "a") as handle:
        held = acquire(handle, timeout)
        try:
            yield held
        finally:
            if held:
                fcntl.flock(handle, fcntl.LOCK_UN)


def acquire(handle, timeout: float | None) -> bool:
    if timeout is None:
        fcntl.flock(handle, fcntl.LOCK_EX)
        return True
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)


class JobDir:
    """``<root>/jobs/<namespace>/<name>``, refused unless it provably stays inside ``<root>/jobs``."""

    def __init__(self, namespace: str, name: str, root: Path | None = None) -> None:
        self.namespace = check_component("namespace", namespace)
        self.name = check_component("job name", name)
        jobs = (root or home()) / "jobs"
        self.path = jobs / namespace / name
        # Labels cannot hold '/' or '..'; a symlinked namespace directory still could lead out.
        if not Path(os.path.realpath(self.path)).is_relative_to(os.path.realpath(jobs)):
            raise UserError(f"{self.path} leads outside the state directory {jobs} (a symbolic link?): "
                            "remove the link, or set TRAINCTL_HOME to a directory of your own")

    @classmethod
    def at(cls, path: Path) -> JobDir:
        return cls(path.parent.name, path.name, path.parent.parent.parent)

    @contextlib.contextmanager
    def create(self) -> Iterator[JobDir]:
        """A hidden, empty draft of this job's directory to fill; renamed into place when the block
        ends, removed if it raises. The rename fails if the job exists, so of two creators one wins."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        import tempfile

        remove_abandoned_drafts(self.path.parent)
        draft = copy_with_path(self, Path(tempfile.mkdtemp(prefix=f".{self.name}.{os.getpid()}.", suffix=DRAFT_SUFFIX,
                                                           dir=self.path.parent)))
        try:
            yield draft
            try:
                os.rename(draft.path, self.path)
            except OSError as err:
                if err.errno in (errno.EEXIST, errno.ENOTEMPTY):
                    raise AlreadyExists(self) from None
                raise
        finally:
            remove_tree(draft.path)  # gone already after the rename

    @property
    def job_file(self) -> Path:
        return self.path / "job.json"

    @property
    def runtime_file(self) -> Path:
        return self.path / "runtime.json"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def uid_file(self) -> Path:
        return self.path / "uid"

    @property
    def containment_file(self) -> Path:
        """One JSON line per supervisor start: what holds the replicas (containment.py), for delete."""
        return self.path / "containment"

    def record_containment(self, record: dict) -> None:
        append_line(self.containment_file, json.dumps(record))

    def containment_records(self) -> list[dict]:
        from trainctl.backends.local.containment import parse_records

        try:
            data, cut = read_suffix(self.containment_file, MAX_CONTAINMENT_BYTES)
        except OSError:  # NotRegular too: a record a replica replaced holds nothing delete can trust
            return []
        return parse_records(without_cut_line(data, cut).decode(errors="replace"))

    def log_file(self, replica: str, previous: bool = False) -> Path:
        check_component("replica", replica)
        return self.logs / (f"{replica}.previous.log" if previous else f"{replica}.log")

    def termination_file(self, replica: str) -> Path:
        """Where the replica's run may write its termination message, as to a container's /dev/termination-log."""
        check_component("replica", replica)
        return self.logs / f"{replica}.termination"

    def preempting_file(self, replica: str) -> Path:
        """Written just before the replica is stopped: ``trainctl.preempting()`` sees it (trainctl.checkpoints)."""
        check_component("replica", replica)
        return self.logs / f"{replica}.preempting"

    def progress_file(self, replica: str) -> Path:
        """Where the replica's ``trainctl.report()`` lines go (trainctl.reporting), across its restarts."""
        check_component("replica", replica)
        return self.logs / f"{replica}.progress"

    @property
    def replica_lib(self) -> Path:
        """The stand-in package ``trainctl`` the replicas import ``report`` from (trainctl.submit.code_plan)."""
        return self.path / "lib"

    def offsets_file(self, replica: str, previous: bool = False) -> Path:
        """``<unix time> <log size>`` lines: when each part of the log was written (for --since)."""
        check_component("replica", replica)
        return self.logs / (f"{replica}.previous.offsets" if previous else f"{replica}.offsets")

    def rotate_logs(self, replica: str) -> None:
        """On a restart the last run's log (and its index) becomes the ``--previous`` one."""
        for current, previous in ((self.log_file(replica), self.log_file(replica, True)),
                                  (self.offsets_file(replica), self.offsets_file(replica, True))):
            if os.path.lexists(current):  # a link a replica left is rotated too, and read as one
                os.replace(current, previous)

    def exists(self) -> bool:
        return self.job_file.exists()

    def not_found(self) -> NotFound:
        elsewhere = [entry.name for entry in _listing(home() / "jobs")
                     if entry.is_dir() and (Path(entry.path) / self.name / self.job_file.name).is_file()]
        return NotFound.job(self.name, self.namespace, "local backend", elsewhere)

    def read_job(self) -> dict:
        """The stored resource; NotFound without job.json, DamagedState when it cannot be parsed."""
        try:
            return self._read(self.job_file, job_problem)
        except FileNotFoundError:
            raise self.not_found() from None

    def write_job(self, resource: dict) -> None:
        write_json(self.job_file, resource)

    def read_runtime(self) -> dict:
        """The supervisor's table ({} before the first write); DamagedState when it cannot be parsed."""
        try:
            return self._read(self.runtime_file, runtime_problem)
        except FileNotFoundError:
            return {}

    def _read(self, path: Path, problem: Callable[[dict], str | None]) -> dict:
        """``path`` parsed; DamagedState if it is no JSON object or ``problem`` finds it unusable."""
        try:
            data = read_json(path)
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as err:  # ValueError covers JSON and UTF-8 decoding
            raise DamagedState(self, path, getattr(err, "strerror", None) or err) from None
        found = problem(data)
        if found:
            raise DamagedState(self, path, found)
        return data

    def uids(self) -> set[str]:
        """Every uid this directory records for its job, from whichever files can still be read."""
        found = set()
        with contextlib.suppress(OSError, ValueError):
            found.add(read_prefix(self.uid_file, MAX_UID_BYTES, follow_symlinks=False).decode().strip())
        for read in (self.read_job, self.read_runtime):
            with contextlib.suppress(UserError):
                record = read()
                found.add((record.get("metadata") or {}).get("uid") or record.get("uid"))
        return {uid for uid in found if isinstance(uid, str) and uid}

    def write_runtime(self, runtime: dict) -> None:
        write_json(self.runtime_file, runtime)

    def locked(self, timeout: float | None = None) -> contextlib.AbstractContextManager[bool]:
        """This job's lock: the CLI and the supervisor never write job.json at the same time."""
        return file_lock(self.path / ".lock", timeout)

    @staticmethod
    def locked_home(name: str) -> contextlib.AbstractContextManager[None]:
        """A lock shared by every job of this state directory (e.g. to hand out ports)."""
        home().mkdir(parents=True, exist_ok=True)
        return file_lock(home() / f".{name}.lock")

    def append_event(self, event: dict) -> None:
        append_line(self.path / "events.jsonl", json.dumps(event))

    def events(self) -> list[dict]:
        """The recorded events; a line cut short (a crash or a full disk mid-append), or one that is
        no event (not an object of strings), is skipped."""
        try:
            data, cut = read_suffix(self.path / "events.jsonl", MAX_EVENTS_BYTES)
        except FileNotFoundError:
            return []
        except OSError as error:  # NotRegular too: say so where the events are shown, in one line
            return [unreadable_event("events.jsonl", error)]
        events = []
        for line in without_cut_line(data, cut).splitlines():
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if isinstance(event, dict) and all(isinstance(value, str) for value in event.values()):
                    events.append(event)
        return events

    def remove(self) -> None:
        remove_tree(self.path)


def without_cut_line(data: bytes, cut: bool) -> bytes:
    """``data`` read from somewhere past a file's start (``cut``) without its first, partial line."""
    return data[data.find(b"\n") + 1:] if cut else data


def unreadable_event(name: str, error: OSError) -> dict:
    """A warning event saying that the job's file ``name`` could not be read, and why."""
    from datetime import datetime, timezone

    from trainctl.core.times import rfc3339

    return {"type": "Warning", "reason": "Unreadable", "message": unreadable(name, error),
            "time": rfc3339(datetime.now(timezone.utc))}


def remove_tree(path: Path) -> None:
    import shutil  # only here: it imports bz2 and lzma, a millisecond of every reading command

    shutil.rmtree(path, ignore_errors=True)


def remove_abandoned_drafts(namespace_dir: Path) -> None:
    """The drafts of creators that died mid-create (kill -9 of a submit: its finally never ran), told from
    those being filled right now by the creator's pid in the draft's name (see JobDir.create)."""
    from trainctl.backends.local.processes import alive

    with contextlib.suppress(OSError):
        for entry in namespace_dir.iterdir():
            match = re.fullmatch(ABANDONED_DRAFT, entry.name)
            if match and not alive(int(match.group("pid"))):
                remove_tree(entry)


def remove_function_files(resource: dict | None) -> None:
    """A function job's shipped files (under trainctl.paths.functions_dir), which outlive no job."""
    from trainctl.functions.shipping import remove_placed

    remove_placed(resource, functions_dir())


def copy_with_path(job_dir: JobDir, path: Path) -> JobDir:
    """The same job at another (already checked) place: the draft that create() fills."""
    draft = object.__new__(JobDir)
    draft.namespace, draft.name, draft.path = job_dir.namespace, job_dir.name, path
    return draft


def all_job_dirs(namespace: str | None) -> list[JobDir]:
    """Every job directory, in order; entries whose names are no DNS-1123 label are not jobs
    (drafts being created, files a person left there) and are passed over."""
    root = home() / "jobs"
    namespaces = [check_component("namespace", namespace)] if namespace else sorted(entry.name for entry in _listing(root) if entry.is_dir())
    found = []
    for ns in namespaces:
        for entry in sorted(_listing(root / ns), key=lambda e: e.name):
            with contextlib.suppress(UserError):
                if entry.is_dir() and not entry.is_symlink():
                    found.append(JobDir(ns, entry.name))
    return found


def _listing(directory: Path) -> list[os.DirEntry]:
    try:
        return list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return []


def all_recorded_ports(exclude: JobDir | None = None) -> set[int]:
    """Ports recorded by every local job (in any namespace) other than ``exclude``."""
    ports: set[int] = set()
    for job_dir in all_job_dirs(None):
        if exclude is None or job_dir.path != exclude.path:
            with contextlib.suppress(UserError):  # a damaged table holds no port we could honour
                ports.update((job_dir.read_runtime().get("ports") or {}).values())
    return ports
