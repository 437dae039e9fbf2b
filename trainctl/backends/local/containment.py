"""What holds every process of a local replica, so that none outlives it: a cgroup, else a PID namespace.

A pod's processes cannot outlive the pod: the container runtime keeps them in a cgroup (and a PID
namespace) and, when the container stops, kills whatever is left there. A local replica is a process
of this machine, and a daemon it starts can leave everything else behind: its process group
(``setsid``) and the ``TRAINCTL_JOB_UID`` environment marker (``env -i``, or a double fork and an
``execve`` with an empty environment). So each replica runs inside the first of these that this
machine allows, found once when a job's supervisor starts (:func:`detect`):

1. ``cgroup2``: a cgroup per replica, ``<the supervisor's cgroup>/trainctl-<job uid>/<replica>``, in the
   unified hierarchy. Needs write access to the supervisor's own cgroup: root, or a user slice that
   systemd delegates. Ended with ``cgroup.kill`` (Linux 5.14+; before, frozen and killed member by member).
2. ``cgroup1``: the same tree in the ``freezer`` hierarchy (else ``pids``) of a cgroup v1 machine, where
   root may write: frozen, every member SIGKILLed, thawed.
3. ``pidns``: the replica runs under :mod:`pidinit` as PID 1 of a PID namespace of its own (through an
   unprivileged user namespace when not root); when its command ends or it is killed, the kernel kills
   everything in the namespace. Its two wrapper processes carry ``TRAINCTL_INIT_JOB_UID``, not the
   replica's marker, so that ``delete`` finds them even when the command itself cleared its environment.
4. ``marker``: none of the above; processes are found by their ``TRAINCTL_JOB_UID`` alone, and one that
   clears its environment and leaves the process group escapes ``delete`` (the documented limit).

The replica's own process, environment, exit code and signals are the same under each. When a
replica's process ends, or the supervisor stops it to restart or suspend it, whatever is left in its
cgroup is killed, as a container's would be. ``TRAINCTL_CONTAINMENT=cgroup2|cgroup1|pidns|marker``
asks for one (tests do, to cover each); if the machine does not allow it the next one is used. The
supervisor appends what it chose to the job's ``containment`` file, so that ``delete`` finds the
cgroup even when the supervisor is gone and runtime.json is damaged.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trainctl.backends.local import processes

KINDS = ("cgroup2", "cgroup1", "pidns", "marker")
CHOICE_VARIABLE = "TRAINCTL_CONTAINMENT"
JOB_CGROUP_PREFIX = "trainctl-"
V1_HIERARCHIES = ("freezer", "pids")  # freezer first: it can stop a tree from forking while it is killed
PIDINIT = str(Path(__file__).with_name("pidinit.py"))
KILL_WAIT_SECONDS = 5.0
FREEZE_WAIT_SECONDS = 1.0
UID = re.compile(r"[0-9a-f-]{1,64}")


@dataclass(frozen=True)
class Containment:
    """How this supervisor's replicas are held: ``kind`` (one of KINDS) and, for a cgroup, the job's directory."""

    kind: str
    job_cgroup: str | None = None

    def as_record(self) -> dict:
        return {"kind": self.kind, "cgroup": self.job_cgroup}

    def launch(self, command: list[str], env: dict[str, str], cwd: str) -> tuple[list[str], dict[str, str]]:
        """The argv and environment that start ``command`` inside this containment."""
        if self.kind != "pidns":
            return command, env
        executable = resolve(command[0], env.get("PATH", os.defpath), cwd)
        wrapper_env = {key: value for key, value in env.items() if key != processes.MARKER}
        wrapper_env[processes.INIT_MARKER] = env[processes.MARKER]
        return ([sys.executable, "-I", "-S", PIDINIT, "--rename", f"{processes.INIT_MARKER}={processes.MARKER}",
                 "--", executable, *command], wrapper_env)

    def joiner(self, replica_id: str) -> Callable[[], None] | None:
        """What the replica's process runs between fork and exec: entering its own cgroup, so that
        everything it ever forks is a member before any of its own code runs."""
        if self.job_cgroup is None:
            return None
        directory = os.path.join(self.job_cgroup, replica_id)
        os.makedirs(directory, exist_ok=True)
        return lambda: join(directory)

    def end_replica(self, replica_id: str) -> None:
        """Kill what is left of a replica whose process ended or was stopped, as a stopped container's."""
        if self.job_cgroup is not None:
            kill_tree(os.path.join(self.job_cgroup, replica_id))

    def end_job(self) -> None:
        """Remove the job's cgroup once nothing of it runs (the supervisor is done)."""
        if self.job_cgroup is not None:
            kill_tree(self.job_cgroup)


# ---- choosing one -----------------------------------------------------------------------------------

def detect(uid: str) -> Containment:
    """The first kind of KINDS this machine allows (TRAINCTL_CONTAINMENT's first, when it names one)."""
    wanted = os.environ.get(CHOICE_VARIABLE)
    order = [wanted, *KINDS] if wanted in KINDS else list(KINDS)
    for kind in order:
        found = PROBES[kind](uid)
        if found is not None:
            return found
    return Containment("marker")


def probe_cgroup2(uid: str) -> Containment | None:
    return _job_cgroup("cgroup2", _own_cgroup(lambda controllers: controllers == ""), uid)


def probe_cgroup1(uid: str) -> Containment | None:
    for hierarchy in V1_HIERARCHIES:
        found = _job_cgroup("cgroup1", _own_cgroup(lambda controllers: hierarchy in controllers.split(",")), uid)
        if found is not None:
            return found
    return None


def probe_pidns(uid: str) -> Containment | None:
    try:
        probe = subprocess.run([sys.executable, "-I", "-S", PIDINIT, "--probe"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Containment("pidns") if probe.returncode == 0 else None


PROBES: dict[str, Callable[[str], Containment | None]] = {
    "cgroup2": probe_cgroup2, "cgroup1": probe_cgroup1, "pidns": probe_pidns, "marker": lambda uid: Containment("marker"),
}


def _own_cgroup(matches: Callable[[str], bool]) -> str | None:
    """The directory of this process's cgroup in the hierarchy whose controller list ``matches``."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if matches(controllers):
            version = "cgroup2" if controllers == "" else "cgroup"
            for mount_point, root, fstype, options in cgroup_mounts():
                wanted = fstype == version and (version == "cgroup2"
                                                or set(controllers.split(",")) <= set(options.split(",")))
                if wanted and (path == root or path.startswith(root.rstrip("/") + "/")):
                    return mount_point + path[len(root.rstrip("/")):]
    return None


def _job_cgroup(kind: str, parent: str | None, uid: str) -> Containment | None:
    """``<parent>/trainctl-<uid>``, if it can be made there and a process can be moved into it."""
    if parent is None or not UID.fullmatch(uid):
        return None
    directory = os.path.join(parent, JOB_CGROUP_PREFIX + uid)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        return None
    if _can_join(directory):
        return Containment(kind, directory)
    with contextlib.suppress(OSError):
        os.rmdir(directory)
    return None


def _can_join(directory: str) -> bool:
    """A throwaway child moves itself into ``directory``: what every replica will do (delegation rules,
    read-only mounts and seccomp all show here, not at mkdir)."""
    child = os.fork()
    if child == 0:
        try:
            join(directory)
        except BaseException:
            os._exit(1)
        os._exit(0)
    return os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0


# ---- cgroups ------------------------------------------------------------------------------------

def cgroup_mounts() -> list[tuple[str, str, str, str]]:
    """(mount point, root within the hierarchy, cgroup or cgroup2, super options) of each cgroup mount."""
    mounts = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields, _, rest = line.partition(" - ")
            fstype, _, options = (rest.split() + ["", "", ""])[:3]
            if fstype in ("cgroup", "cgroup2"):
                parts = fields.split()
                mounts.append((_unescape(parts[4]), _unescape(parts[3]), fstype, options))
    return mounts


def _unescape(text: str) -> str:
    """mountinfo writes a space in a path as \\040 (octal)."""
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), text)


def join(directory: str) -> None:
    """Move the calling process into the cgroup at ``directory``."""
    handle = os.open(os.path.join(directory, "cgroup.procs"), os.O_WRONLY)
    try:
        os.write(handle, str(os.getpid()).encode())
    finally:
        os.close(handle)


def members(directory: str) -> list[int]:
    """Every process in the cgroup at ``directory`` and below it."""
    pids = []
    for root, _, _ in os.walk(directory):
        with contextlib.suppress(OSError, ValueError):
            pids += [int(pid) for pid in Path(root, "cgroup.procs").read_text().split()]
    return pids


def kill_tree(directory: str) -> None:
    """SIGKILL every process in the cgroup tree at ``directory``, however fast it forks, and remove the tree."""
    if not os.path.isdir(directory):
        return
    if not _write(os.path.join(directory, "cgroup.kill"), "1"):
        with _frozen(directory):
            _kill_each(members(directory))
    deadline = time.monotonic() + KILL_WAIT_SECONDS
    while members(directory) and time.monotonic() < deadline:
        _kill_each(members(directory))  # one that joined while the kill was being written
        time.sleep(0.01)
    while not _remove_tree(directory) and time.monotonic() < deadline:
        time.sleep(0.01)  # a killed member is gone from cgroup.procs a moment before the cgroup is empty


@contextlib.contextmanager
def _frozen(directory: str):
    """The tree stopped (cgroup v2's cgroup.freeze, v1's freezer) while the block runs, where it can be."""
    for state_file, frozen, thawed in (("cgroup.freeze", "1", "0"), ("freezer.state", "FROZEN", "THAWED")):
        path = os.path.join(directory, state_file)
        if _write(path, frozen):
            deadline = time.monotonic() + FREEZE_WAIT_SECONDS
            while not _is_frozen(directory) and time.monotonic() < deadline:
                time.sleep(0.005)
            try:
                yield
            finally:
                _write(path, thawed)  # the SIGKILLs take effect as each member thaws
            return
    yield


def _is_frozen(directory: str) -> bool:
    with contextlib.suppress(OSError):
        events = Path(directory, "cgroup.events")
        if events.exists():
            return "frozen 1" in events.read_text().splitlines()
        return Path(directory, "freezer.state").read_text().strip() == "FROZEN"
    return True  # nothing to wait for


def _kill_each(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _remove_tree(directory: str) -> bool:
    """rmdir every cgroup of the tree, deepest first; whether the whole tree is gone."""
    for root, _, _ in sorted(os.walk(directory), key=lambda entry: -entry[0].count("/")):
        with contextlib.suppress(OSError):
            os.rmdir(root)
    return not os.path.exists(directory)


def _write(path: str, text: str) -> bool:
    try:
        with open(path, "w") as handle:
            handle.write(text)
        return True
    except OSError:
        return False


# ---- stopping a whole job ----------------------------------------------------------------------------

def stop_job(uid: str, cgroups: list[str], grace: float = processes.GRACE_SECONDS) -> None:
    """Every process of the job, found by its markers and in its cgroups: SIGTERM, up to ``grace``
    seconds to exit, then the cgroups killed whole and SIGKILL for the rest, until none is left."""
    cgroups = [directory for directory in cgroups if os.path.isdir(directory)]

    def everything() -> set[int]:
        found = {pid for directory in cgroups for pid in members(directory)}
        for marker in (processes.MARKER, processes.INIT_MARKER):
            found.update(processes.processes_with(marker, uid))
        return found

    processes.stop_all(everything, grace, before_kill=lambda: [kill_tree(directory) for directory in cgroups])


def recorded_cgroups(records: list[dict], uid: str) -> list[str]:
    """The job cgroups a job's ``containment`` records name, kept only where each is what it claims to be:
    a directory ``trainctl-<this uid>`` on a mounted cgroup filesystem (a record could have been edited,
    and a cgroup's kill file ends every process below it)."""
    mounts = [mount_point for mount_point, _, _, _ in cgroup_mounts()]
    found = []
    for record in records:
        directory = record.get("cgroup") if isinstance(record, dict) else None
        if not isinstance(directory, str) or not UID.fullmatch(uid):
            continue
        real = os.path.realpath(directory)
        if os.path.basename(real) == JOB_CGROUP_PREFIX + uid and any(
                real.startswith(mount_point.rstrip("/") + "/") for mount_point in mounts):
            found.append(real)
    return sorted(set(found))


def parse_records(text: str) -> list[dict]:
    """The lines of a ``containment`` file that are JSON objects (a line cut short is skipped)."""
    records = []
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict):
                records.append(record)
    return records


def resolve(word: str, path: str, cwd: str) -> str:
    """The file ``word`` executes, as execvp would find it from ``cwd`` (for pidinit, which is given a path):
    a missing or non-executable command is then the start error it would have been without the wrapper."""
    if "/" in word:
        candidate = os.path.join(cwd, word)
        if not os.path.exists(candidate):
            raise FileNotFoundError(2, os.strerror(2), word)
        if not os.access(candidate, os.X_OK) or os.path.isdir(candidate):
            raise PermissionError(13, os.strerror(13), word)
        return candidate
    found = shutil.which(word, path=path)
    if found is None:
        raise FileNotFoundError(2, os.strerror(2), word)
    return os.path.join(cwd, found)
