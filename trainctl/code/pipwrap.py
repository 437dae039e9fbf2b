"""The replica's command under ``--pip``/``--requirements``: install the packages, then run it.

    python3 -c "<this file>" [--pip=SPEC]... [--requirements-text=TEXT] -- COMMAND [ARGS...]

It runs as the replica's main container, so pip's output is in ``trainctl logs``, and a
failed install ends the replica with pip's exit code after one line that says so (the
command never runs half-equipped). The packages are installed by the Python that runs the
command when the command starts with one (``python``, ``/venv/bin/python3.12``: a notebook's
kernel runs its functions with its own), else by the ``python3`` that runs this wrapper: the
first ``python3`` on PATH is often another interpreter than the command's. Packages go to ``$TRAINCTL_PIP_CACHE/<hash of the
request>`` with ``pip install --target`` (an emptyDir per pod on a cluster, so a restarted
container reuses it; the job's state directory locally) and reach the command through
PYTHONPATH and PATH. ``--target`` also works where the image's Python is marked
externally managed (Debian's). Standard library only: its source travels in the pod spec.
"""

import argparse
import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys

PREFIX = "trainctl-pip"
DEFAULT_CACHE = "/trainctl/pip"
DONE = ".trainctl-installed"
PYTHON = re.compile(r"python[0-9.]*")  # python, python3, python3.12: an interpreter, by its name


def interpreter(command):
    """The Python the packages are for: the command's own, when it starts with one; else this one."""
    return command[0] if PYTHON.fullmatch(os.path.basename(command[0])) else sys.executable


def install(packages, requirements, cache, python):
    """The directory holding the packages, installed by ``python`` now unless an earlier run of this pod did."""
    key = hashlib.sha256(json.dumps([packages, requirements, python]).encode()).hexdigest()[:16]
    target = os.path.join(cache, key)
    os.makedirs(cache, exist_ok=True)
    with open(target + ".lock", "w") as lock:  # replicas of a local job share the cache: one installs
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.exists(os.path.join(target, DONE)):
            print(f"{PREFIX}: packages already installed in {target}", flush=True)
            return target
        command = [python, "-m", "pip", "install", "--target", target, "--no-warn-script-location"]
        if requirements is not None:
            path = target + ".requirements.txt"
            with open(path, "w") as out:
                out.write(requirements)
            command += ["--requirement", path]
        print(f"{PREFIX}: {' '.join(command)} {' '.join(packages)}", flush=True)
        env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        try:
            code = subprocess.call([*command, *packages], env=env)
        except OSError as err:  # the command's interpreter is not there: the command could not run either
            fail(f"cannot run {python!r}: {err.strerror}", 127)
        if code != 0:
            hint = f" (is pip in the image? {python} -m pip must work)" if not has_pip(python) else ""
            fail(f"pip install failed with exit code {code}{hint}: the job's command did not run", code)
        open(os.path.join(target, DONE), "w").close()
    return target


def fail(message, code):
    print(f"{PREFIX}: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


def has_pip(python):
    return subprocess.call([python, "-m", "pip", "--version"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL) == 0


def prepend(variable, value):
    current = os.environ.get(variable)
    os.environ[variable] = value + (os.pathsep + current if current else "")


def main(argv=None):
    parser = argparse.ArgumentParser(prog=PREFIX)
    parser.add_argument("--pip", action="append", default=[])
    parser.add_argument("--requirements-text")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    target = install(args.pip, args.requirements_text, os.environ.get("TRAINCTL_PIP_CACHE") or DEFAULT_CACHE,
                     interpreter(command))
    prepend("PYTHONPATH", target)
    prepend("PATH", os.path.join(target, "bin"))
    sys.stdout.flush()
    try:
        os.execvp(command[0], command)
    except OSError as err:
        fail(f"cannot run {command[0]!r}: {err.strerror}", 127)


if __name__ == "__main__":
    main()
