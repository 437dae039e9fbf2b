"""What the local backend checks before it creates anything: that each replica can start here.

On a cluster the command runs in its image, and only the cluster can tell. Locally it runs in
the submitter's working directory with this machine's PATH, and the commonest first mistakes
(a typo in the script's name, a tool that is not installed) would otherwise start the job,
fail a replica, restart it up to ``backoffLimit`` times and bury the cause in a log. Here each
is one line naming the word at fault, before any file or process of the job exists.

What is checked (``--no-preflight`` / ``preflight=False`` skips all of it):

* the executable resolves: on the replica's PATH, or as a path relative to the working
  directory, or absolute;
* the script of an interpreter exists: ``python[3[.N]] [options] FILE``, ``bash|sh [options] FILE``,
  and a framework's own script runner's (``torchrun [options] FILE``: Framework.script_runners, whose
  options the framework describes); ``python -m MODULE``, ``-c CODE`` and a runner's module option
  are not checked, since the module is found on the replica's own import path; nor is a function
  job's runner, trainctl's own file, which ``Client.run`` writes only for a real create;
* behind a framework's launcher (``mpirun ... python FILE``: Framework.launchers) the launcher
  resolves, and the first interpreter word after it is checked as above: launcher options are too
  many to parse, and a check that rejected a command that would run is worse than none; the
  framework may name one problem it knows (Framework.launcher_problem: Open MPI 4's single-dash
  options, which Open MPI 5 misreads as the program to run);
* volumes: a ``hostPath`` volume is honoured when its mount path already is that host path
  (``--volume host:/data:/data``), since a process sees this machine's files; anything else,
  and every ``persistentVolumeClaim``, cannot be provided to a process and is rejected.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from trainctl.core.job import Job
from trainctl.errors import UserError, setting, spelled
from trainctl.frameworks import ALL
from trainctl.frameworks.base import ScriptRunner
from trainctl.functions.shipping import RUNNER_FILE
from trainctl.paths import functions_dir

# what starts the job's command on other replicas, and the framework that knows it: the word after the
# launcher's options is checked
LAUNCHERS = {word: framework for framework in ALL for word in framework.launchers}
# the frameworks' programs that run a script file, by name
SCRIPT_RUNNERS = {runner.name: runner for framework in ALL for runner in framework.script_runners}
PYTHON = re.compile(r"python(\d+(\.\d+)*)?")
SHELLS = ("bash", "sh", "dash", "zsh")


def check(job: Job, workdir: str) -> None:
    """Raise UserError for the first replica that cannot start in ``workdir``."""
    seen = set()
    for rtype in job.replica_types:
        spec = job.template(rtype)["spec"]
        container = job.main_container(spec["containers"]) or {}
        # what the process will run: the job's directory, where local paths lead, does not exist yet
        command = wrapped(job.framework.local_command(job, rtype, [*(container.get("command") or []),
                                                                   *(container.get("args") or [])], ""))
        where = f"{job.framework.replica_spec_field}.{rtype}"
        if command and tuple(command) not in seen:
            seen.add(tuple(command))
            check_command(command, workdir, replica_path(container), where)
        check_volumes(spec, container, where)


def wrapped(command: list[str]) -> list[str]:
    """The job's own command inside trainctl's --pip wrapper (trainctl.code.pipwrap), which is what can be missing."""
    from trainctl.code.pods import GUARD

    if command[:4] == ["sh", "-c", GUARD, "trainctl-pip"] and "--" in command[5:]:  # [4] is the wrapper's source
        return command[command.index("--", 5) + 1:]
    return command


def replica_path(container: dict) -> str:
    """The PATH the replica gets: the container's own if it sets one, else the submitter's."""
    for variable in container.get("env") or []:
        if variable.get("name") == "PATH" and isinstance(variable.get("value"), str):
            return variable["value"]
    return os.environ.get("PATH", os.defpath)


def check_command(command: list[str], workdir: str, path: str, where: str) -> None:
    shown = " ".join(command)
    require_executable(command[0], workdir, path, where, shown)
    words = command
    if Path(command[0]).name in LAUNCHERS:
        problem = LAUNCHERS[Path(command[0]).name].launcher_problem(command, lambda: version_of(command[0], path))
        if problem:
            raise UserError(f"{where}: {shown}: {problem} {skip_hint()}")
        wrapped = [i for i, word in enumerate(command[1:], 1) if interpreter_kind(word)]
        if not wrapped:
            return
        words = command[wrapped[0]:]
        require_executable(words[0], workdir, path, where, shown)
    script = script_of(words)
    if script is None or (Path(workdir) / script).is_file() or function_runner(script):
        return
    if Path(script).is_absolute():  # in YAML written for a cluster, a file its image holds
        raise UserError(f"{where}: {shown}: no file {script} on this machine: an image may hold it, but the local "
                        "backend runs no image; copy the script into the project and name it by a relative path, "
                        f"or run the job on a cluster {skip_hint()}")
    raise UserError(f"{where}: {shown}: no file {script} in {workdir}, where the local backend runs the "
                    f"command: check its name, or submit from the directory it is relative to {skip_hint()}")


def function_runner(script: str) -> bool:
    """Whether ``script`` is a function job's runner, which Client.run writes under trainctl's own directory
    just before the create and a dry run never writes: trainctl's file to get right, not the user's."""
    path = Path(script)
    return path.name == RUNNER_FILE and path.is_absolute() and path.parent.parent == functions_dir()


def skip_hint() -> str:
    return f"({spelled('--no-preflight', 'preflight=False')} skips this check)"


def version_of(program: str, path: str) -> str:
    """What ``program --version`` prints on this machine; '' when it cannot run (its own check says why)."""
    import subprocess

    try:
        return subprocess.run([shutil.which(program, path=path) or program, "--version"],
                              capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def require_executable(word: str, workdir: str, path: str, where: str, shown: str) -> None:
    if "/" in word:
        target = Path(workdir) / word  # an absolute word stays absolute
        if not (target.is_file() and os.access(target, os.X_OK)):
            problem = "is not executable (chmod +x it)" if target.is_file() else f"does not exist in {workdir}"
            raise UserError(f"{where}: {shown}: {word} {problem} {skip_hint()}")
    elif shutil.which(word, path=path) is None:
        raise UserError(f"{where}: {shown}: {word!r} is not a command on this machine's PATH: check its "
                        f"spelling, install it, or activate the environment that has it {skip_hint()}")


def interpreter_kind(word: str) -> str | None:
    """"python", "shell", a framework's script runner by its name, or None for any other program."""
    name = Path(word).name
    if PYTHON.fullmatch(name):
        return "python"
    if name in SCRIPT_RUNNERS:
        return name
    return "shell" if name in SHELLS else None


def script_of(words: list[str]) -> str | None:
    """The file an interpreter command runs, or None when it runs none or names a module or code."""
    kind = interpreter_kind(words[0])
    if kind == "python":
        return python_script(words[1:])
    if kind == "shell":
        return shell_script(words[1:])
    if kind is not None:
        return runner_script(words[1:], SCRIPT_RUNNERS[kind])
    return None


def python_script(args: list[str]) -> str | None:
    skip_next = False
    for word in args:
        if skip_next:
            skip_next = False
        elif word == "--":
            continue
        elif word in ("-W", "-X"):
            skip_next = True  # -W default, -X dev: the value is a separate word
        elif word.startswith(("-W", "-X", "--")):
            continue
        elif word.startswith("-") and word != "-":
            if "c" in word or "m" in word:  # -c CODE, -m MODULE, also combined as -uc, -um
                return None
        else:
            return None if word == "-" else word
    return None


def runner_script(args: list[str], runner: ScriptRunner) -> str | None:
    skip_next = False
    for word in args:
        if skip_next:
            skip_next = False
        elif word in runner.no_file:
            return None
        elif word.startswith("-"):
            skip_next = "=" not in word and word not in runner.switches
        else:
            return word
    return None


def shell_script(args: list[str]) -> str | None:
    skip_next = False
    for word in args:
        if skip_next:
            skip_next = False
        elif word in ("-o", "+o", "-O", "+O"):
            skip_next = True
        elif word.startswith(("-", "+")) and word not in ("-", "--"):
            if "c" in word or "s" in word:  # -c STRING, -s: commands from stdin
                return None
        elif word != "--":
            return None if word == "-" else word
    return None


def check_volumes(spec: dict, container: dict, where: str) -> None:
    """A process sees this machine's files: a mount can only be honoured where it already is the host path."""
    sources = {volume.get("name"): volume for volume in spec.get("volumes") or []}
    for mount in container.get("volumeMounts") or []:
        volume = sources.get(mount.get("name")) or {}
        target = mount.get("mountPath", "")
        if "persistentVolumeClaim" in volume:
            claim = volume["persistentVolumeClaim"].get("claimName")
            raise UserError(f"{where}: volume {mount.get('name')!r} is PersistentVolumeClaim {claim!r}, which "
                            f"exists only on a cluster: locally use a directory, "
                            f"{setting('volume', ['host:/dir:/dir'])} {skip_hint()}")
        if "hostPath" in volume:
            source = volume["hostPath"].get("path", "")
            if not os.path.exists(source):
                raise UserError(f"{where}: volume {mount.get('name')!r}: host path {source} does not exist "
                                f"on this machine {skip_hint()}")
            if os.path.realpath(target) != os.path.realpath(source):
                raise UserError(f"{where}: volume {mount.get('name')!r} mounts host path {source} at {target}, but "
                                "local replicas are processes that see this machine's files where they are: mount "
                                f"it at its own path ({setting('volume', [f'host:{source}:{source}'])}) and use that "
                                f"path in the job {skip_hint()}")
