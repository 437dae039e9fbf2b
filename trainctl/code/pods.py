"""Where a snapshot lives in the cluster and how each replica gets it.

The archive is cut into chunks of :data:`CHUNK_BYTES`, one ConfigMap each (binaryData,
under the API server's 1 MiB per object), named by the archive's hash: identical code
maps to the same ConfigMaps, which later jobs reuse instead of uploading. Every replica's
pod template gains, as plain kubeflow.org/v1 pod fields any operator honours:

* a projected volume of those ConfigMaps (chunk ``i`` as file ``NNNNN``),
* an emptyDir at the container's workingDir (``--workdir-mount``, default /workspace),
* an init container in the replica's own image running :mod:`trainctl.code.unpack`,
* what ``trainctl.report()`` needs (trainctl.reporting): the snapshot's stand-in package ``trainctl``
  first on PYTHONPATH (in front of a PYTHONPATH the container's env gives; an image's own ENV
  PYTHONPATH is replaced, as any container variable replaces the image's), reports to
  ``/dev/stdout`` (``TRAINCTL_PROGRESS``), the job's name (``TRAINCTL_JOB``) and the kind's launch facts
  (``TRAINCTL_LAUNCH``: which of its processes reports),
* with ``--pip``/``--requirements``: an emptyDir for the packages and the main container's
  command wrapped by :mod:`trainctl.code.pipwrap`.

A TrainJob has no pod template: :func:`attach_trainjob` says the same in what its API lets a client say (a runtime
patch with the volumes and mounts; the unpacker and pip's wrapper in front of the trainer's command; the env in
``trainer.env``).

Scripts run as ``sh -c GUARD <name> <source> ARGS...``: the guard is a fixed text that
says what is missing when the image has no ``python3``; the source and every value are
positional arguments, never part of the shell text.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from trainctl.code.sizes import human
from trainctl.core.job import main_container
from trainctl.errors import UserError, option
from trainctl.frameworks import Framework
from trainctl.frameworks.base import NODE

if TYPE_CHECKING:  # at run time the snapshot comes made: status (describe) must not load tarfile and gzip
    from trainctl.code.archive import Archive
    from trainctl.code.snapshot import Snapshot

CHUNK_BYTES = 900 * 1024  # binaryData under 1 MiB per ConfigMap, with room for metadata and ownerReferences
PREFIX = "trainctl-code"
CHUNKS_VOLUME, CHUNKS_PATH = "trainctl-code-chunks", "/trainctl/code-chunks"
WORKSPACE_VOLUME = "trainctl-workspace"
PIP_VOLUME, PIP_PATH = "trainctl-pip", "/trainctl/pip"
DEFAULT_MOUNT = "/workspace"
CHUNK_KEY = "chunk"
LABEL_SNAPSHOT = "trainctl.io/code-snapshot"
MANAGED_BY = ("app.kubernetes.io/managed-by", "trainctl")
DIGEST, SIZE, FILES, SOURCE = ("trainctl.io/code-digest", "trainctl.io/code-size", "trainctl.io/code-files",
                               "trainctl.io/code-source")
GUARD = ('command -v python3 >/dev/null 2>&1 || { echo "trainctl: $0 needs python3 in the image '
         '(it ships code and packages without building one): use an image with python3, or submit with '
         '--no-workdir and no --pip" >&2; exit 127; }; exec python3 -c "$@"')
ABRIDGED = "left out of this abridged dry run"
CODE_MANAGER = "trainctl.io/code"  # the manager of the runtime patch that brings a TrainJob's snapshot
# In a snapshot, relative to where it is unpacked: the stand-in package ``trainctl`` (trainctl.report for
# images without trainctl), which report_env puts first on the replicas' PYTHONPATH
REPLICA_LIB = ".trainctl/lib"  # what stands for a program's source in submit --dry-run's view


class CodeRequest(NamedTuple):
    """What travels with a job: a snapshot (or none), where it is unpacked, and packages to install."""

    snapshot: Snapshot | None
    mount: str = DEFAULT_MOUNT
    pip: tuple[str, ...] = ()
    requirements: str | None = None  # the text of --requirements FILE


def describe(annotations: dict) -> str | None:
    """The job's code snapshot as ``status`` shows it: hash, size, files and source; None without one."""
    if DIGEST not in annotations:
        return None
    size = annotations.get(SIZE, "")
    size = human(int(size)) if size.isdigit() else "size unknown"
    return (f"code: {annotations[DIGEST][:19]} ({size} compressed, {annotations.get(FILES, '?')} files) "
            f"from {annotations.get(SOURCE, '?')}")


def chunks(archive: Archive) -> Iterator[bytes]:
    """The archive in ConfigMap-sized pieces, read one at a time (an empty archive is one empty chunk)."""
    if not len(archive):
        yield b""
    yield from archive.pieces(CHUNK_BYTES)


def config_map_names(snapshot: Snapshot) -> list[str]:
    count = max(1, -(-len(snapshot.archive) // CHUNK_BYTES))
    return [f"{PREFIX}-{snapshot.hex[:20]}-{index}" for index in range(count)]


def labels(snapshot: Snapshot) -> dict[str, str]:
    return {MANAGED_BY[0]: MANAGED_BY[1], LABEL_SNAPSHOT: snapshot.hex[:20]}


def config_maps(snapshot: Snapshot, namespace: str | None) -> Iterator[dict]:
    """The ConfigMaps holding ``snapshot``, without owners (the backend adds the jobs), one at a time, each
    chunk read from the archive's file as its ConfigMap is made: all of them at once would hold the archive in
    memory, a third larger in base64."""
    for name, chunk in zip(config_map_names(snapshot), chunks(snapshot.archive)):
        metadata = {"name": name, **({"namespace": namespace} if namespace else {}), "labels": labels(snapshot),
                    "annotations": {DIGEST: snapshot.digest}}
        yield {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata,
               "binaryData": {CHUNK_KEY: base64.b64encode(chunk).decode()}}


def script_command(module: str, name: str, args: list[str]) -> list[str]:
    source = (Path(__file__).parent / f"{module}.py").read_text(encoding="utf-8")
    return ["sh", "-c", GUARD, name, source, *args]


def script_containers(resource: dict) -> Iterator[dict]:
    """Every container of the job (init containers too) whose command is a :func:`script_command`; of a TrainJob,
    its ``trainer`` (whose command runs the unpacker, pip's wrapper, or the one after the other)."""
    for container in [*job_containers(resource), (resource.get("spec") or {}).get("trainer")]:
        command = container.get("command") if isinstance(container, dict) else None
        if isinstance(command, list) and len(command) > 4 and command[:3] == ["sh", "-c", GUARD]:
            yield container


def script_starts(command: list) -> list[int]:
    """Where each :func:`script_command` starts in ``command`` (a TrainJob's unpacker runs pip's wrapper after it)."""
    return [index for index in range(len(command) - 4) if command[index:index + 3] == ["sh", "-c", GUARD]]


def job_containers(resource: dict) -> Iterator[object]:
    """The containers and init containers of a v1 job's replicas."""
    specs = next((value for key, value in (resource.get("spec") or {}).items() if key.endswith("ReplicaSpecs")), {})
    for spec in (specs or {}).values():
        pod = ((spec or {}).get("template") or {}).get("spec") or {}
        yield from [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]


def abridged(resource: dict) -> dict:
    """A copy of ``resource`` with each program's source (the unpacker's, pip's wrapper's) replaced by one line
    of Python that names it: what ``submit --dry-run`` shows, a page instead of two programs per replica.
    Were that copy applied anyway, each would stop with the line instead of running half a job."""
    resource = copy.deepcopy(resource)
    for container in script_containers(resource):
        command = container["command"]
        for start in script_starts(command):
            name, source = command[start + 3:start + 5]
            command[start + 4] = (f'raise SystemExit("{name}: its {source.count(chr(10))} lines are {ABRIDGED}; '
                                  'print the job with --dry-run -o yaml")')
    return resource


def abridged_programs(resource: dict) -> list[str]:
    """The programs :func:`abridged` left out of ``resource`` (none in a job to apply)."""
    return sorted({container["command"][start + 3] for container in script_containers(resource)
                   for start in script_starts(container["command"]) if ABRIDGED in str(container["command"][start + 4])})


def attach(resource: dict, framework: Framework, code: CodeRequest) -> None:
    """Give every replica of ``resource`` the snapshot and packages of ``code`` (in place).

    A part that is not what a job has (a template's mistake) is passed over: validation names it next."""
    metadata = resource.get("metadata")
    if code.snapshot is not None and isinstance(metadata, dict):
        annotate(metadata, code.snapshot)
    specs = resource.get("spec")
    specs = specs.get(framework.replica_spec_field) if isinstance(specs, dict) else None
    for spec in specs.values() if isinstance(specs, dict) else []:
        template = spec.get("template") if isinstance(spec, dict) else None
        pod = template.get("spec") if isinstance(template, dict) else None
        if not isinstance(pod, dict) or not isinstance(pod.get("containers"), list):
            continue
        container = main_container(framework, pod["containers"])
        if container is None:
            continue
        if code.snapshot is not None:
            ship_snapshot(pod, container, code)
            report_env(container, code.mount, metadata.get("name") if isinstance(metadata, dict) else None,
                       framework)
        if code.pip or code.requirements is not None:
            wrap_with_pip(pod, container, code)


def ship_snapshot(pod: dict, container: dict, code: CodeRequest) -> None:
    entry(pod, "volumes", []).extend(snapshot_volumes(code.snapshot))
    unpack = script_command("unpack", "trainctl-unpack", unpack_args(code))
    # the replica's image as the replica pulls it, and its user, who then owns the files it unpacks
    same = {key: copy.deepcopy(container[key]) for key in ("imagePullPolicy", "securityContext") if key in container}
    entry(pod, "initContainers", []).append({
        "name": PREFIX, "image": container.get("image"), **same, "command": unpack,
        "volumeMounts": [{"name": CHUNKS_VOLUME, "mountPath": CHUNKS_PATH, "readOnly": True}, workspace_mount(code)]})
    entry(container, "volumeMounts", []).append(workspace_mount(code))  # not the same object: YAML would alias it
    container["workingDir"] = code.mount


def snapshot_volumes(snapshot: Snapshot) -> list[dict]:
    """The snapshot's ConfigMaps as one projected volume (chunk ``i`` as file ``NNNNN``), and the workspace."""
    return [{"name": CHUNKS_VOLUME, "projected": {"sources": [
                {"configMap": {"name": name, "items": [{"key": CHUNK_KEY, "path": f"{index:05d}"}]}}
                for index, name in enumerate(config_map_names(snapshot))]}},
            {"name": WORKSPACE_VOLUME, "emptyDir": {}}]


def workspace_mount(code: CodeRequest) -> dict:
    return {"name": WORKSPACE_VOLUME, "mountPath": code.mount}


def unpack_args(code: CodeRequest) -> list[str]:
    return ["--chunks", CHUNKS_PATH, "--digest", code.snapshot.digest, "--into", code.mount]


def attach_trainjob(resource: dict, framework: Framework, code: CodeRequest) -> None:
    """Give the TrainJob ``resource`` the snapshot and packages of ``code`` (in place), with what upstream's
    TrainJob API lets a client say (a TrainJob has no pod template): a runtime patch (manager :data:`CODE_MANAGER`)
    adds the snapshot's volumes and pip's emptyDir to the pods of the runtime's ``node`` replicatedJob and mounts
    them into its ``node`` container; the trainer's command becomes pip's wrapper's (``--pip``), and that the
    unpacker's, which unpacks into the workspace, then runs the rest there (a patch can add no init container:
    upstream's patches only change the runtime's own); and ``trainer.env`` gets what ``trainctl.report()`` needs."""
    metadata, spec = resource.get("metadata"), resource.get("spec")
    packages = bool(code.pip) or code.requirements is not None
    if (code.snapshot is None and not packages) or not isinstance(metadata, dict) or not isinstance(spec, dict):
        return  # nothing travels, or a template's mistake: validation names it next
    trainer = entry(spec, "trainer", {})
    if not isinstance(trainer.get("command"), list) or not trainer["command"]:
        raise UserError("a TrainJob that ships code or packages runs its own command: give one (trainer.command), "
                        f"or ship neither ({option('no_workdir')}, no {option('pip')})")
    pod: dict = {"volumes": [], "containers": [{"name": NODE, "volumeMounts": []}]}
    if packages:
        wrap_with_pip(pod, trainer, code, pod["containers"][0])
    if code.snapshot is not None:
        annotate(metadata, code.snapshot)
        pod["volumes"][:0] = snapshot_volumes(code.snapshot)
        pod["containers"][0]["volumeMounts"][:0] = [{"name": CHUNKS_VOLUME, "mountPath": CHUNKS_PATH,
                                                     "readOnly": True}, workspace_mount(code)]
        trainer["command"] = script_command("unpack", "trainctl-unpack",
                                            [*unpack_args(code), "--", *trainer["command"]])
        report_env(trainer, code.mount, metadata.get("name"), framework)
    entry(spec, "runtimePatches", []).append({"manager": CODE_MANAGER, "trainingRuntimeSpec": {"template": {
        "spec": {"replicatedJobs": [{"name": NODE, "template": {"spec": {"template": {"spec": pod}}}}]}}}})


def annotate(metadata: dict, snapshot: Snapshot) -> None:
    entry(metadata, "annotations", {}).update({DIGEST: snapshot.digest, SIZE: str(len(snapshot.archive)),
                                               FILES: str(snapshot.files), SOURCE: snapshot.source})


def report_env(container: dict, mount: str, job_name: object, framework: Framework) -> None:
    """What ``trainctl.report()`` needs in a pod (see the module docstring); a value the container's env
    already gives wins (``TRAINCTL_PROGRESS=""`` turns reporting off)."""
    import json

    from trainctl import reporting

    env = entry(container, "env", [])
    given = {item.get("name"): item for item in env if isinstance(item, dict)}
    library = f"{mount.rstrip('/')}/{REPLICA_LIB}"
    path = given.get("PYTHONPATH")
    if path is None:
        env.append({"name": "PYTHONPATH", "value": library})
    elif isinstance(path.get("value"), str):
        path["value"] = f"{library}:{path['value']}" if path["value"] else library
    launch = json.dumps(framework.function_launch.as_call(), separators=(",", ":"))
    for name, value in ((reporting.ENV, "/dev/stdout"), (reporting.JOB_ENV, job_name), (reporting.LAUNCH_ENV, launch)):
        if name not in given and isinstance(value, str):
            env.append({"name": name, "value": value})


def replica_library(directory: str) -> dict[str, bytes]:
    """The files of the stand-in package ``trainctl`` under ``directory`` (path -> content): its
    ``__init__`` (trainctl/code/replica_package.py, which gives way to an installed trainctl),
    :mod:`trainctl.reporting` and :mod:`trainctl.checkpoints`, whose functions it exports."""
    from trainctl import checkpoints, reporting
    from trainctl.code import replica_package

    return {f"{directory}/trainctl/__init__.py": Path(replica_package.__file__).read_bytes(),
            f"{directory}/trainctl/reporting.py": Path(reporting.__file__).read_bytes(),
            f"{directory}/trainctl/checkpoints.py": Path(checkpoints.__file__).read_bytes()}


def wrap_with_pip(pod: dict, container: dict, code: CodeRequest, mounted: dict | None = None) -> None:
    """``container``'s command (and args) under pip's wrapper, the packages' emptyDir in ``pod``, mounted into
    ``mounted`` (default ``container``; a TrainJob's trainer has its ``node`` container's in a runtime patch)."""
    command = [*entry(container, "command", []), *(container.pop("args", None) or [])]
    # --option=VALUE: a requirements file starting with "--index-url" must not read as an option
    options = [f"--pip={spec}" for spec in code.pip]
    if code.requirements is not None:
        options.append(f"--requirements-text={code.requirements}")
    container["command"] = script_command("pipwrap", "trainctl-pip", [*options, "--", *command])
    entry(pod, "volumes", []).append({"name": PIP_VOLUME, "emptyDir": {}})
    entry(container if mounted is None else mounted, "volumeMounts", []).append({"name": PIP_VOLUME,
                                                                                 "mountPath": PIP_PATH})


def entry(mapping: dict, key: str, empty: dict | list):
    """``mapping[key]``, created empty if absent; a template's value of another type is its mistake, named."""
    if mapping.get(key) is None:
        mapping[key] = empty
    value = mapping[key]
    if not isinstance(value, type(empty)):
        raise UserError(f"the template's {key} is a {type(value).__name__}, not a {type(empty).__name__}: "
                        f"code shipping ({option('workdir')}, {option('pip')}) adds to it")
    return value
