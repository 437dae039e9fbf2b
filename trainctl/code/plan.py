"""From submit options to a :class:`~trainctl.code.pods.CodeRequest`: what travels with this job.

The defaults differ by backend, on purpose. On Kubernetes the command runs in an image
that does not hold the submitter's files, so the working directory travels unless
``--no-workdir`` says the image has the code. Locally the replicas already run in the
working directory, so a snapshot is taken only when ``--workdir`` asks for one (which
also shields a running job from edits made meanwhile).
"""

from __future__ import annotations

from pathlib import Path

from trainctl.code.pods import DEFAULT_MOUNT, CodeRequest
from trainctl.errors import UserError, option, setting
from trainctl.submit_options import SubmitOptions, check_given, pip_specs, workdir_limit, workdir_mount

MAX_REQUIREMENTS_BYTES = 64 * 1024  # it travels in every replica's command
# In a snapshot, relative to where it is unpacked: the stand-in package ``trainctl`` (trainctl.report for
# images without trainctl), which trainctl.code.pods puts first on the replicas' PYTHONPATH
REPLICA_LIB = ".trainctl/lib"


def request(options: SubmitOptions, backend_name: str, kind: str,
            extra: dict[str, bytes] | None = None) -> CodeRequest | None:
    """What ``options`` ship on ``backend_name``; None when nothing does. UserError for bad values.
    ``extra``: files trainctl adds to the snapshot when one ships (see :func:`trainctl.code.snapshot.take`)."""
    from trainctl.code import snapshot

    check_given(options)  # '' must not become the default: --workdir '' is no directory, not this one
    limit = workdir_limit(options.workdir_limit)
    mount = workdir_mount(options.workdir_mount) or DEFAULT_MOUNT
    pip = pip_specs(options.pip)
    if options.no_workdir and options.workdir is not None:
        raise UserError(f"{option('workdir')} and {option('no_workdir')} contradict each other: give one of them")
    if (pip or options.requirements is not None) and kind == "MPIJob":
        raise UserError(f"{option('pip')}/{option('requirements')}: not for mpi jobs, whose ranks on the workers "
                        "start over ssh, outside any wrapper: install the packages in the image")
    requirements = read_requirements(options.requirements)
    ships = options.workdir is not None or (backend_name == "kubernetes" and not options.no_workdir)
    if options.ship_secret and not ships:
        raise UserError(f"{option('ship_secret')} {options.ship_secret[0]}: no code snapshot travels with this job "
                        f"({setting('no_workdir')}, or the local backend without {option('workdir')}): leave it out")
    taken = (snapshot.take(options.workdir or ".", limit, extra, options.ship_secret, replica_library(REPLICA_LIB))
             if ships else None)
    if taken is None and not pip and requirements is None:
        return None
    return CodeRequest(taken, mount, tuple(pip), requirements)


def replica_library(directory: str) -> dict[str, bytes]:
    """The files of the stand-in package ``trainctl`` under ``directory`` (path -> content): its
    ``__init__`` (trainctl/code/replica_package.py, which gives way to an installed trainctl) and
    :mod:`trainctl.reporting`, whose ``report`` it exports."""
    from trainctl import reporting
    from trainctl.code import replica_package

    return {f"{directory}/trainctl/__init__.py": Path(replica_package.__file__).read_bytes(),
            f"{directory}/trainctl/reporting.py": Path(reporting.__file__).read_bytes()}


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
