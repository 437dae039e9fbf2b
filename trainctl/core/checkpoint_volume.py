"""Where a job's checkpoints live, so that they outlive its replicas: restarts, suspends, preemption.

A job names its checkpoint storage in the annotation :data:`ANNOTATION` (``--checkpoints`` on submit):

* ``SIZE`` (``10Gi``): a PersistentVolumeClaim of that size from the cluster's default StorageClass,
  ``ReadWriteMany`` (every replica, on any node, sees one directory), named ``<job>-checkpoints``, created by
  trainctl's controller and owned by the job, so it is deleted with it;
* ``pvc:CLAIM``: a claim of the user's, kept; the job's directory in it is ``<job>/``;
* ``host:/path``: a directory of the node (one-node clusters, tests), kept; the job's is ``/path/<ns>/<job>``.
  Not a system directory of the node (:data:`SYSTEM_DIRECTORIES`), nor anything under one, nor a directory
  that holds one (``/var``: a namespace named ``lib`` would put a job's directory in ``/var/lib/<job>``): every
  replica mounts the path read-write, as root as often as not. Every character prints (no newline, ESC,
  bidirectional override: the path is shown in messages and logs), and it is normalized (no ``..``, ``//``).
  On a cluster the path is the node's, whose symbolic links the client cannot see: it is checked as written.
  On the local backend the node is this machine, and the job's directory is checked once its links are
  followed (:func:`local_problem`: ``/mnt/link -> /etc`` is refused as ``/etc``), and used so resolved.

Each replica's main container mounts it at :data:`MOUNT_PATH` and finds it in ``TRAINCTL_CHECKPOINT_DIR``
(trainctl.checkpoints.checkpoint_dir()). Locally the directory is ``checkpoints/`` of the job's state
directory (removed by ``delete``), or the ``host:`` path's. The annotation is read leniently (a value
edited by hand that reads as none of the forms wires nothing); submit checks what it writes.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass

from trainctl.checkpoints import CHECKPOINT_DIR_ENV
from trainctl.kube.names import dns_subdomain_problem

ANNOTATION = "trainctl.io/checkpoints"
MOUNT_PATH = "/trainctl/checkpoints"
VOLUME = "trainctl-checkpoints"
LOCAL_DIR = "checkpoints"  # in the job's state directory
SIZE = re.compile(r"[1-9][0-9]{0,11}(?:Ki|Mi|Gi|Ti|Pi|K|M|G|T|P)?")
FORMS = "SIZE (e.g. 10Gi: a claim the job owns), pvc:CLAIM (yours, kept) or host:/path (a node's directory, kept)"
# A node's own directories (by name: the node is not this machine, its symbolic links unknown here): the system,
# its devices and kernel, root's home, and what kubelet, the container runtimes and the cluster keep.
# Also what runs things on a schedule or by mail (/var/spool: cron, at), and the package managers' own records.
SYSTEM_DIRECTORIES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/root", "/run",
                      "/sbin", "/snap", "/sys", "/usr", "/var/lib/apt", "/var/lib/calico", "/var/lib/cilium",
                      "/var/lib/cni", "/var/lib/containerd", "/var/lib/containers", "/var/lib/docker", "/var/lib/dpkg",
                      "/var/lib/etcd", "/var/lib/k0s", "/var/lib/kubelet", "/var/lib/minikube", "/var/lib/rancher",
                      "/var/lib/rpm", "/var/lib/systemd", "/var/lock", "/var/log", "/var/mail", "/var/run",
                      "/var/snap", "/var/spool", "/opt/cni")


@dataclass(frozen=True)
class Storage:
    kind: str  # size | pvc | host
    value: str  # the size, the claim's name, or the host path


def parse(text: object) -> Storage | None:
    """The storage ``text`` names, or None when it is none of the forms."""
    return storage_or_problem(text)[0]


def problem(text: str) -> str | None:
    """What is wrong with a ``--checkpoints`` value, or None."""
    return storage_or_problem(text)[1]


def storage_or_problem(text: object) -> tuple[Storage | None, str | None]:
    if not isinstance(text, str):
        return None, f"expected {FORMS}"
    kind, _, value = text.partition(":")
    if kind == "pvc":
        issue = dns_subdomain_problem(value)
        return (None, f"the claim name {value!r} is {issue}") if issue else (Storage("pvc", value), None)
    if kind == "host":
        issue = host_path_problem(value)
        return (None, issue) if issue else (Storage("host", value), None)
    if SIZE.fullmatch(text):
        return Storage("size", text), None
    return None, f"expected {FORMS}"


def host_path_problem(path: str) -> str | None:
    """Why ``path``, as written, may not be a ``host:`` path; None when it may."""
    hidden = next((char for char in path if not char.isprintable()), None)
    if hidden is not None:  # a newline, ESC or bidi override would forge what a message or log line shows
        return (f"the host path holds {hidden!r} (character {path.index(hidden) + 1}), which does not print: name a "
                "directory without control or invisible characters")
    if not path.startswith("/") or path.startswith("//") or posixpath.normpath(path) != path or path == "/":
        return f"the host path {path!r} must be an absolute, normalized directory other than /"
    return system_problem(path)


def local_problem(resource: dict) -> str | None:
    """Why a job's ``host:`` checkpoint path may not be used on this machine (the local backend, where the node is
    this machine): refused as written, or its job directory, once its symbolic links are followed, is or lies in
    or holds a system directory. None when it is clear, or names no ``host:`` path."""
    text = ((resource.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    if not (isinstance(text, str) and text.startswith("host:")):
        return None
    if issue := problem(text):
        return issue
    metadata = resource["metadata"]
    spelled = job_directory(Storage("host", text[len("host:"):]), metadata.get("namespace") or "default",
                            metadata["name"])
    return resolved_problem(spelled, os.path.realpath(spelled))


def resolved_problem(spelled: str, real: str) -> str | None:
    """Why the job's directory ``spelled``, which resolves to ``real`` on this machine, may not hold checkpoints."""
    if real == spelled:
        return None
    if any(not char.isprintable() for char in real):
        return f"the job's directory {spelled} leads to {real!r}, whose name does not print: use a directory of its own"
    if issue := system_problem(real):
        return f"the job's directory {spelled} leads to {real} through a symbolic link, and {issue}"
    return None


def system_problem(path: str) -> str | None:
    """Why a normalized absolute ``path`` of the node may not hold checkpoints: it is, lies in or holds a system
    directory (:data:`SYSTEM_DIRECTORIES`); None when it is clear of them all."""
    system = next((system for system in SYSTEM_DIRECTORIES
                   if posixpath.commonpath([system, path]) in (system, path)), None)
    if system is None:
        return None
    if posixpath.commonpath([system, path]) == system:
        where = f"{path} is" if path == system else f"{path} is in {system},"
        why = f"{where} a system directory of the node: every replica would mount a directory in it read-write"
    else:
        why = (f"{path} holds {system}, a system directory of the node, which the job's directory "
               f"{path}/<namespace>/<job> may fall in")
    return f"{why}; use a directory of its own, such as host:/mnt/checkpoints, or a claim (SIZE, pvc:CLAIM)"


def storage_of(resource: dict) -> Storage | None:
    annotations = (resource.get("metadata") or {}).get("annotations") or {}
    return parse(annotations.get(ANNOTATION)) if isinstance(annotations, dict) else None


def claim_name(job_name: str) -> str:
    return f"{job_name}-checkpoints"


def job_directory(storage: Storage, namespace: str, name: str) -> str:
    """The job's own directory under a ``host:`` path (namespace and name are DNS labels: no climbing out)."""
    return posixpath.join(storage.value, namespace, name)


def local_directory(resource: dict, state_dir: str) -> str:
    """Where a local job's replicas keep checkpoints: the ``host:`` path's job directory with its links followed,
    else the job's own (also when a link made after submit leads the former into a system directory)."""
    storage = storage_of(resource)
    metadata = resource.get("metadata") or {}
    if storage is not None and storage.kind == "host":
        spelled = job_directory(storage, metadata.get("namespace") or "default", metadata["name"])
        real = os.path.realpath(spelled)
        if resolved_problem(spelled, real) is None:
            return real
    return posixpath.join(state_dir, LOCAL_DIR)


def wire_pod(resource: dict, spec: dict, container: dict) -> None:
    """Mount the job's checkpoint storage in ``container`` of a pod ``spec`` and name it in its env (in place);
    nothing when the job names none, or the template has a volume of that name of its own."""
    storage = storage_of(resource)
    volumes = spec.get("volumes") or []
    if storage is None or any(isinstance(v, dict) and v.get("name") == VOLUME for v in volumes):
        return
    metadata = resource.get("metadata") or {}
    name, namespace = metadata["name"], metadata.get("namespace") or "default"
    mount = {"name": VOLUME, "mountPath": MOUNT_PATH}
    if storage.kind == "host":
        source = {"hostPath": {"path": job_directory(storage, namespace, name), "type": "DirectoryOrCreate"}}
    else:
        claim = claim_name(name) if storage.kind == "size" else storage.value
        source = {"persistentVolumeClaim": {"claimName": claim}}
        if storage.kind == "pvc":
            mount["subPath"] = name
    spec["volumes"] = [*volumes, {"name": VOLUME, **source}]
    container["volumeMounts"] = [*(container.get("volumeMounts") or []), mount]
    container["env"] = [*(container.get("env") or []), {"name": CHECKPOINT_DIR_ENV, "value": MOUNT_PATH}]


def claim(resource: dict) -> dict | None:
    """The PersistentVolumeClaim the job owns (its storage is a size), as the controller creates it; else None."""
    storage = storage_of(resource)
    if storage is None or storage.kind != "size":
        return None
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim_name(resource["metadata"]["name"]),
                         "labels": {"app.kubernetes.io/managed-by": "trainctl"}},
            "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": storage.value}}}}
