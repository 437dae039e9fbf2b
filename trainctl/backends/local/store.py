"""Job state on disk for the local backend.

One directory per job, ``<home>/jobs/<namespace>/<name>/``:

* ``job.json``     the resource with its status (what ``status -o yaml`` prints)
* ``runtime.json`` the supervisor's table: pid, heartbeat, ports, one entry per replica
* ``events.jsonl`` the job's events, one JSON object per line
* ``logs/<replica>.log`` (and ``.previous.log`` after a restart), kept until delete or TTL
* ``logs/<replica>.offsets`` the log's size once a second while it grows, so ``--since`` finds where to start

Writers replace files atomically (temp file + rename) under a per-job lock, so a
reader never sees half a file and ``suspend`` from the CLI never races the supervisor.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from trainctl.errors import NotFound


def home() -> Path:
    """$TRAINCTL_HOME, else $XDG_DATA_HOME/trainctl, else ~/.local/share/trainctl."""
    if os.environ.get("TRAINCTL_HOME"):
        return Path(os.environ["TRAINCTL_HOME"]).absolute()
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return (Path(data_home) / "trainctl").absolute()


def write_json(path: Path, data: object) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(data, indent=1, sort_keys=False))
    os.replace(temporary, path)


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class JobDir:
    def __init__(self, namespace: str, name: str, root: Path | None = None) -> None:
        self.namespace, self.name = namespace, name
        self.path = (root or home()) / "jobs" / namespace / name

    @classmethod
    def at(cls, path: Path) -> JobDir:
        return cls(path.parent.name, path.name, path.parent.parent.parent)

    @property
    def job_file(self) -> Path:
        return self.path / "job.json"

    @property
    def runtime_file(self) -> Path:
        return self.path / "runtime.json"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    def log_file(self, replica: str, previous: bool = False) -> Path:
        return self.logs / (f"{replica}.previous.log" if previous else f"{replica}.log")

    def offsets_file(self, replica: str, previous: bool = False) -> Path:
        """``<unix time> <log size>`` lines: when each part of the log was written (for --since)."""
        return self.logs / (f"{replica}.previous.offsets" if previous else f"{replica}.offsets")

    def rotate_logs(self, replica: str) -> None:
        """On a restart the last run's log (and its index) becomes the ``--previous`` one."""
        for current, previous in ((self.log_file(replica), self.log_file(replica, True)),
                                  (self.offsets_file(replica), self.offsets_file(replica, True))):
            if current.exists():
                os.replace(current, previous)

    def exists(self) -> bool:
        return self.job_file.exists()

    def read_job(self) -> dict:
        try:
            return read_json(self.job_file)
        except FileNotFoundError:
            raise NotFound(f'job "{self.name}" not found in namespace "{self.namespace}" '
                           "(local backend): see trainctl list") from None

    def write_job(self, resource: dict) -> None:
        write_json(self.job_file, resource)

    def read_runtime(self) -> dict:
        try:
            return read_json(self.runtime_file)
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def write_runtime(self, runtime: dict) -> None:
        write_json(self.runtime_file, runtime)

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """This job's lock: the CLI and the supervisor never write job.json at the same time."""
        return file_lock(self.path / ".lock")

    @staticmethod
    def locked_home(name: str) -> contextlib.AbstractContextManager[None]:
        """A lock shared by every job of this state directory (e.g. to hand out ports)."""
        home().mkdir(parents=True, exist_ok=True)
        return file_lock(home() / f".{name}.lock")

    def append_event(self, event: dict) -> None:
        with open(self.path / "events.jsonl", "a") as handle:
            handle.write(json.dumps(event) + "\n")

    def events(self) -> list[dict]:
        try:
            lines = (self.path / "events.jsonl").read_text().splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line) for line in lines if line.strip()]

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def all_job_dirs(namespace: str | None) -> list[JobDir]:
    root = home() / "jobs"
    namespaces = [root / namespace] if namespace else sorted(p for p in root.glob("*") if p.is_dir())
    return [JobDir.at(path) for ns in namespaces for path in sorted(ns.glob("*")) if (path / "job.json").exists()]


def all_recorded_ports(exclude: JobDir | None = None) -> set[int]:
    """Ports recorded by every local job (in any namespace) other than ``exclude``."""
    ports: set[int] = set()
    for job_dir in all_job_dirs(None):
        if exclude is None or job_dir.path != exclude.path:
            ports.update((job_dir.read_runtime().get("ports") or {}).values())
    return ports
