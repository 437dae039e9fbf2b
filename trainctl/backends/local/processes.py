"""Replica processes: start them in their own process group, find them, stop them.

Every process of a job carries ``TRAINCTL_JOB_UID=<uid>`` in its environment, and
children inherit it, so the whole tree of a job (mpirun's ranks, torch's workers) can
be found through /proc even after the supervisor is gone. A process that clears its
environment loses the marker; containment.py holds such processes in a cgroup or a PID
namespace of the replica's, and this marker is the layer under it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:  # socket and subprocess are imported where used: reading commands (logs, status) use neither
    import subprocess

MARKER = "TRAINCTL_JOB_UID"
SUPERVISOR_MARKER = "TRAINCTL_SUPERVISOR_UID"
INIT_MARKER = "TRAINCTL_INIT_JOB_UID"  # the PID-namespace wrappers of a replica (containment.py)
KILL_WAIT_SECONDS = 5.0
GRACE_SECONDS = 3.0
# POSIX numbers them so on every Unix; the signal module is not imported for them, since making its enums costs
# every reading command (status, logs) a millisecond
SIGTERM, SIGKILL = 15, 9


def free_port(host: str = "127.0.0.1", avoid: set[int] = frozenset()) -> int:
    """A port nothing listens on now and that is not in ``avoid`` (ports promised to other jobs)."""
    import socket

    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
            port = probe.getsockname()[1]
        if port not in avoid:
            return port


def start(command: list[str], env: dict[str, str], cwd: str, log: BinaryIO,
          before_exec: Callable[[], None] | None = None) -> subprocess.Popen:
    """One replica: its own session (so one killpg stops its tree), output appended to ``log``;
    ``before_exec`` runs in the child first (entering the replica's cgroup)."""
    import subprocess

    return subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=before_exec)


def processes_with(marker: str, value: str) -> list[int]:
    """Pids whose environment has ``marker=value`` (Linux /proc)."""
    return [int(entry.name) for entry in Path("/proc").iterdir()
            if entry.name.isdigit() and int(entry.name) != os.getpid() and carries(int(entry.name), marker, value)]


def carries(pid: int, marker: str, value: str) -> bool:
    """``pid`` has ``marker=value`` in its environment: it is that job's, not a process that reused its pid."""
    try:
        return f"{marker}={value}".encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False  # gone, or not ours to read


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def stop_group(process: subprocess.Popen, grace: float = GRACE_SECONDS, terminate: bool = True) -> None:
    """SIGTERM a replica's process group, SIGKILL what is left after ``grace`` seconds, reap it.
    ``terminate`` False: the caller sent SIGTERM already (to several replicas at once, see :func:`terminate`)."""
    import subprocess

    if terminate:
        _signal_group(process.pid, SIGTERM)
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    _signal_group(process.pid, SIGKILL)
    process.wait()


def terminate(process: subprocess.Popen) -> None:
    """SIGTERM a replica's process group: the start of its grace period (:func:`stop_group` ends it)."""
    _signal_group(process.pid, SIGTERM)


def stop_all(find: Callable[[], Iterable[int]], grace: float = GRACE_SECONDS,
             before_kill: Callable[[], object] = lambda: None) -> None:
    """Stop every process ``find`` returns: SIGTERM, up to ``grace`` seconds to exit, then ``before_kill``
    (a cgroup's kill) and SIGKILL for what is left, until ``find`` returns none alive."""
    for sig, wait in ((SIGTERM, grace), (SIGKILL, KILL_WAIT_SECONDS)):
        if sig == SIGKILL:
            before_kill()
        for pid in find():
            _kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(alive(pid) for pid in find()):
            time.sleep(0.05)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
