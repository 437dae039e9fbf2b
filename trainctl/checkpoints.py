"""Checkpoints that survive restarts and preemption, for any script: where they go, which one to load, when to save.

    import trainctl

    trainctl.preempting()                      # arm the notice early: SIGTERM becomes a request to stop
    latest = trainctl.latest_checkpoint()      # the newest checkpoint every rank completed, or None
    start = trainctl.checkpoint_step(latest) if latest else 0
    ...                                        # load it
    for step in range(start + 1, steps + 1):
        train_one_step()
        stopping = trainctl.preempting()       # DDP: all-reduce it, so that every rank saves the same step
        if step % 10 == 0 or stopping:
            path = trainctl.checkpoint_path(step)
            torch.save(state, path / f"rank-{rank}.pt")
            trainctl.checkpoint_complete(path)  # every rank, last: its part is whole
        if stopping:
            raise SystemExit(trainctl.PREEMPTED_EXIT)

This module runs inside the replicas, so it imports nothing but the standard library (and
:mod:`trainctl.reporting`'s reading of the job kind's launch facts: which variables hold a rank and a world size): it travels with every job under the stand-in package
``trainctl`` (trainctl/code/replica_package.py), like ``trainctl.report()``. docs/fault-tolerance.md walks
through it with plain DDP and with ``torch.distributed.checkpoint``.

**Where.** :func:`checkpoint_dir` is the job's own directory that outlives its replicas: the runtime names it
in :data:`CHECKPOINT_DIR_ENV` (locally under the job's state directory, removed by ``delete``; on Kubernetes a
volume the job owns or one you name: ``--checkpoints``). Outside a job it is ``./checkpoints``, so a script runs
anywhere; in a job with no checkpoint storage it says once that what it saves there will not survive its pod.

**Complete.** A checkpoint is the directory ``step-<N>`` of :func:`checkpoint_dir`. Each rank writes its part,
then calls :func:`checkpoint_complete`, which makes its part durable and then writes the rank's marker
``.trainctl-complete/<attempt>-<rank>-of-<world>``. :func:`latest_checkpoint` returns the newest checkpoint
with a marker from every rank of one world in one attempt: a checkpoint a rank was writing when it died, or
one rewritten on a later attempt while another rank's old marker is still there, is never returned.

**Preemption.** Before a replica is stopped (a suspend, Kueue's preemption, a deleted pod, the job's own
restart) it gets SIGTERM and its grace period. :func:`preempting` tells: its first call turns SIGTERM into
a notice instead of death (so call it once before training), and it also looks at the file named in
:data:`PREEMPTING_ENV`, which the local runtime writes before the signal. A script that saved then exits
with :data:`PREEMPTED_EXIT` (a signal's code: never mistaken for success, and retried as a disruption).
"""

from __future__ import annotations

import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

CHECKPOINT_DIR_ENV = "TRAINCTL_CHECKPOINT_DIR"
PREEMPTING_ENV = "TRAINCTL_PREEMPTING"
ATTEMPT_ENV = "TRAINCTL_RESTART_ATTEMPT"
JOB_ENV = "TRAINCTL_JOB"  # set in every replica trainctl starts (trainctl.reporting)
PREEMPTED_EXIT = 128 + signal.SIGTERM
OUTSIDE_A_JOB = "checkpoints"
STEP = re.compile(r"step-(\d+)")
MARKERS = ".trainctl-complete"
MARKER = re.compile(r"(\d+)-(\d+)-of-(\d+)")
# where no launch facts say otherwise (a script run by hand): torch.distributed's own variables
DEFAULT_FACTS = {"rank_variables": ["RANK"], "world_variables": ["WORLD_SIZE"]}

_notice: dict = {"armed": False, "since": None}
_warned: set = set()


def checkpoint_dir() -> Path:
    """The job's checkpoint directory (created if missing): it survives restarts, suspends and preemption."""
    named = os.environ.get(CHECKPOINT_DIR_ENV)
    if not named and os.environ.get(JOB_ENV) and "storage" not in _warned:
        _warned.add("storage")
        print(f"trainctl: this job has no checkpoint storage, so ./{OUTSIDE_A_JOB} goes with its pod; submit with "
              "--checkpoints 10Gi (or pvc:CLAIM, host:/path) to keep checkpoints across restarts", file=sys.stderr)
    directory = Path(named or OUTSIDE_A_JOB)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def restart_attempt() -> int:
    """This replica's attempt: 0 on the job's first run, 1 after its first restart or resume, and so on."""
    value = os.environ.get(ATTEMPT_ENV, "")
    return int(value) if value.isdigit() else 0


def checkpoint_path(step: int, rank: int | None = None) -> Path:
    """The directory of the checkpoint of ``step`` (created); this rank's marker of an earlier write of it is
    removed, so the checkpoint is not complete again until this rank says so (``rank``: as for
    :func:`checkpoint_complete`)."""
    if type(step) is not int or step < 0:
        raise ValueError(f"checkpoint_path({step!r}): give the step as a whole number >= 0")
    path = checkpoint_dir() / f"step-{step}"
    markers = path / MARKERS
    markers.mkdir(parents=True, exist_ok=True)
    rank = own_rank(rank)
    for marker in markers.iterdir():
        found = MARKER.fullmatch(marker.name)
        if found and int(found.group(2)) == rank:
            marker.unlink(missing_ok=True)
    return path


def checkpoint_step(path: str | os.PathLike) -> int:
    """The step of a checkpoint directory ``step-<N>``."""
    found = STEP.fullmatch(Path(path).name)
    if not found:
        raise ValueError(f"{path}: not a checkpoint directory (step-<N>, made by checkpoint_path)")
    return int(found.group(1))


def checkpoint_complete(path: str | os.PathLike, rank: int | None = None, world_size: int | None = None) -> None:
    """Say that this rank's part of the checkpoint ``path`` is written: its files are synced to disk, then its
    marker written. Every rank calls it, each after its own part (a rank with nothing to save too). ``rank`` and
    ``world_size`` default to what the job's launcher set (the kind's variables, else RANK and WORLD_SIZE)."""
    path = Path(path)
    rank, world = own_rank(rank), own_world(world_size)
    if not 0 <= rank < world:
        raise ValueError(f"checkpoint_complete: rank {rank} is not one of a world of {world}")
    for file in sorted(path.rglob("*")):
        if file.is_file() and not file.is_symlink():
            sync(file)
    markers = path / MARKERS
    markers.mkdir(parents=True, exist_ok=True)
    marker = markers / f"{restart_attempt()}-{rank}-of-{world}"
    write_marker(marker, f"{time.time():.3f}\n")
    sync(marker)
    sync(markers)


def latest_checkpoint() -> Path | None:
    """The newest checkpoint every rank completed (see the module docstring), or None."""
    directory = Path(os.environ.get(CHECKPOINT_DIR_ENV) or OUTSIDE_A_JOB)
    try:
        entries = list(directory.iterdir())
    except OSError:
        return None
    steps = sorted(((int(found.group(1)), entry) for entry in entries if (found := STEP.fullmatch(entry.name))),
                   reverse=True)
    return next((entry for _, entry in steps if complete(entry)), None)


def complete(path: Path) -> bool:
    """Whether every rank of one world marked ``path`` complete in one attempt."""
    try:
        names = [entry.name for entry in (path / MARKERS).iterdir()]
    except OSError:
        return False
    ranks: dict[tuple[int, int], set[int]] = {}
    for name in names:
        found = MARKER.fullmatch(name)
        if found:
            attempt, rank, world = (int(part) for part in found.groups())
            ranks.setdefault((attempt, world), set()).add(rank)
    return any(world > 0 and seen == set(range(world)) for (_, world), seen in ranks.items())


def preempting() -> bool:
    """Whether this replica is being stopped (SIGTERM came, or the runtime's notice file is there): save a
    checkpoint now and exit with :data:`PREEMPTED_EXIT`. The first call arms the notice (see the module docstring)."""
    arm()
    if _notice["since"] is not None:
        return True
    notice = os.environ.get(PREEMPTING_ENV)
    return bool(notice) and os.path.exists(notice)


def arm() -> None:
    """Turn SIGTERM into the notice :func:`preempting` reads (a handler set before is still called). Only the main
    thread may set a handler: called from another, it arms nothing and the notice file alone tells."""
    if _notice["armed"] or threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum, frame):
        _notice["since"] = time.time()
        if callable(previous):
            previous(signum, frame)

    signal.signal(signal.SIGTERM, on_term)
    _notice["armed"] = True


def own_rank(given: int | None) -> int:
    return given if given is not None else first_number("rank_variables", 0)


def own_world(given: int | None) -> int:
    return given if given is not None else first_number("world_variables", 1)


def first_number(key: str, default: int) -> int:
    """The first number of the variables the job kind's launch facts list under ``key`` (the runtime names them in
    TRAINCTL_LAUNCH: trainctl.reporting), else of torch.distributed's; ``default`` when none is set."""
    from trainctl.reporting import launch_facts, names

    for name in names(launch_facts(os.environ), key) or DEFAULT_FACTS[key]:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return default


def write_marker(marker: Path, text: str) -> None:
    """Write a rank's marker afresh. Only its name is ever read; whatever stands there (a link, a FIFO another
    process left) is replaced, never written through or waited on. Written to a name of its own, then renamed into
    place (a rename replaces a link itself): two writers of one marker (a save hook and a callback) both succeed."""
    temporary = marker.with_name(f".{marker.name}.{os.getpid()}.{time.monotonic_ns()}")
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(handle, "w") as out:
        out.write(text)
    try:
        os.replace(temporary, marker)
    except IsADirectoryError:  # a directory stood there: it goes
        import shutil

        shutil.rmtree(marker, ignore_errors=True)
        os.replace(temporary, marker)


def sync(path: Path) -> None:
    """Make what was written to ``path`` durable (a file's data, or a directory's entries); a link or a FIFO found
    there is neither followed nor waited on."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:  # a file system that cannot (some FUSE mounts): what it holds is what there is
        pass
    finally:
        os.close(handle)
