"""From submit options to a :class:`~trainctl.code.pods.CodeRequest`: what travels with this job.

The defaults differ by backend, on purpose. On Kubernetes the command runs in an image
that does not hold the submitter's files, so the working directory travels unless
``--no-workdir`` says the image has the code. Locally the replicas already run in the
working directory, so a snapshot is taken only when ``--workdir`` asks for one (which
also shields a running job from edits made meanwhile).
"""

from __future__ import annotations

from pathlib import Path

from trainctl.code.pods import DEFAULT_MOUNT, REPLICA_LIB, CodeRequest, replica_library
from trainctl.errors import UserError, option, setting
from trainctl.frameworks import by_kind
from trainctl.submit.options import Checked, SubmitOptions, as_checked

MAX_REQUIREMENTS_BYTES = 64 * 1024  # it travels in every replica's command


def request(options: SubmitOptions | Checked, backend_name: str, kind: str,
            extra: dict[str, bytes] | None = None) -> CodeRequest | None:
    """What ``options`` (checked here unless :func:`~trainctl.submit.options.check` made them already) ship on
    ``backend_name``; None when nothing does. UserError for what cannot ship.
    ``extra``: files trainctl adds to the snapshot when one ships (see :func:`trainctl.code.snapshot.take`)."""
    from trainctl.code import snapshot

    checked = as_checked(by_kind(kind), options)
    requirements = read_requirements(checked.requirements)
    ships = checked.workdir is not None or (backend_name == "kubernetes" and not checked.no_workdir)
    if checked.api == "v2":
        refuse_v2_code(checked, ships and backend_name != "kubernetes")
    if checked.ship_secret and not ships:
        raise UserError(f"{option('ship_secret')} {checked.ship_secret[0]}: no code snapshot travels with this job "
                        f"({setting('no_workdir')}, or the local backend without {option('workdir')}): leave it out")
    taken = (snapshot.take(checked.workdir or ".", checked.workdir_limit, extra, checked.ship_secret,
                           replica_library(REPLICA_LIB)) if ships else None)
    if taken is None and not checked.pip and requirements is None:
        return None
    return CodeRequest(taken, checked.workdir_mount or DEFAULT_MOUNT, tuple(checked.pip), requirements)


def refuse_v2_code(checked: Checked, ships_locally: bool) -> None:
    """``--api v2``: its code snapshot and packages travel to a cluster in a runtime patch and the trainer's command
    (:func:`trainctl.code.pods.attach_trainjob`); the local backend runs a TrainJob's pods in the working directory,
    and takes no snapshot for them."""
    if ships_locally:
        raise UserError(f"{option('workdir')} cannot travel with {setting('api', 'v2')} on the local backend: its "
                        "TrainJobs run in the working directory: leave it out")


def read_requirements(path: str | None) -> str | None:
    if path is None:
        return None
    where = f"{option('requirements')} {path!r}"
    try:
        if not Path(path).is_file():  # /dev/zero, a FIFO: not a requirements file, and endless to read
            raise UserError(f"{where}: no such file")
        with open(path, "rb") as file:
            data = file.read(MAX_REQUIREMENTS_BYTES + 1)
    except OSError as err:
        raise UserError(f"{where}: cannot read it ({err.strerror or err})") from None
    if len(data) > MAX_REQUIREMENTS_BYTES:
        raise UserError(f"{where}: more than {MAX_REQUIREMENTS_BYTES:,} bytes: "
                        "list only what the image lacks")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{where}: not UTF-8 text; save it as UTF-8") from None
    if "\x00" in text:  # it travels as a command argument, which cannot hold NUL
        raise UserError(f"{where}: holds a NUL byte; a requirements file is plain text")
    return text
