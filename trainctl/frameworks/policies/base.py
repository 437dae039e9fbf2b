"""The common shape of a Trainer v2 ML policy plugin: what a runtime's ``spec.mlPolicy`` adds to a TrainJob's pods.

Upstream's controller (kubeflow/trainer, ``pkg/runtime/framework/plugins/<policy>``) builds a ``runtime.Info`` from
the runtime's template, one ``PodSet`` per replicatedJob, and lets each ML policy plugin change it: how many pods a
replicatedJob gets, the env and ports of its containers, the files it needs (MPI's hostfile). :class:`Info` and
:class:`PodSet` are that, reduced to what the plugins touch, so each module of this package reads like the plugin it
mirrors. The engine that turns the result into pods is trainctl/core/trainjob.py; it knows no policy.

Names and values here are upstream's (``pkg/constants/constants.go``). This package imports nothing of trainctl's
but the ground floor, Kubernetes' quantities and, for what a policy's pods need as local processes, the v1 framework
module that already provides it (MPI's local launcher env, in trainctl/frameworks/mpi.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from trainctl.frameworks.base import ANCESTOR_TRAINER, NODE  # upstream's constants.AncestorTrainer, constants.Node
from trainctl.kube.quantities import parse_quantity

TRAINER_PORT = 29500  # constants.ContainerTrainerPort
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
# constants.JobCompletionIndexFieldPath: the env of a pod's rank reads its Indexed Job's completion index
COMPLETION_INDEX_FIELD = f"metadata.annotations['{COMPLETION_INDEX}']"
LOOPBACK = "127.0.0.1"


def value_env(name: str, value: object) -> dict:
    return {"name": name, "value": str(value)}


def index_env(name: str) -> dict:
    """An env var holding the pod's completion index (a fieldRef, as upstream writes it)."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX_FIELD}}}


def upsert_env(env: list[dict], *items: dict) -> None:
    """apply.UpsertEnvVars: a variable of the same name is replaced where it stands, a new one appended."""
    for item in items:
        names = [existing.get("name") for existing in env]
        if item["name"] in names:
            env[names.index(item["name"])] = dict(item)
        else:
            env.append(dict(item))


def upsert_port(ports: list[dict], port: int) -> None:
    """apply.UpsertPort: one containerPort entry per port number."""
    if all(existing.get("containerPort") != port for existing in ports):
        ports.append({"containerPort": port})


def whole_units(amount: object) -> int:
    """resource.Quantity.Value(): the amount rounded up to a whole number (``500m`` -> 1, ``1.5`` -> 2)."""
    return math.ceil(parse_quantity(amount))


def gpus(resources: dict) -> int:
    """runtime.GetNumGPUPerNode: the first resource whose name contains "gpu", requests before limits."""
    def first(amounts: dict) -> int:
        return next((whole_units(value) for name, value in (amounts or {}).items() if "gpu" in name.lower()), 0)

    return first(resources.get("requests")) or first(resources.get("limits"))


def cpus(resources: dict) -> int:
    """torch.getNumCPUPerNode: the cpu request rounded up, else the limit, else 0."""
    requested = whole_units((resources.get("requests") or {}).get("cpu") or 0)
    return requested or whole_units((resources.get("limits") or {}).get("cpu") or 0)


@dataclass(frozen=True)
class Addresses:
    """Where the job's pods are reached. In a cluster (``local_ports`` None): their DNS names and the trainer port,
    as upstream writes them. Locally, where every pod is a process on this machine: 127.0.0.1 and the port the
    local backend allocated to that pod, by (replicatedJob, index)."""

    job_name: str
    subdomain: str
    local_ports: Mapping[tuple[str, int], int] | None = None

    def rank0(self) -> str:
        """The first node's address (upstream: ``<job>-node-0-0.<job>``, the job's name as its subdomain)."""
        return LOOPBACK if self.local_ports is not None else f"{self.job_name}-{NODE}-0-0.{self.job_name}"

    def rank0_port(self) -> int:
        return TRAINER_PORT if self.local_ports is None else self.local_ports.get((NODE, 0), TRAINER_PORT)

    def endpoint(self, replicated_job: str, job_index: int, index: int) -> str:
        """A pod's DNS name under the job's subdomain (the MPI hostfile's entries)."""
        if self.local_ports is not None:
            return LOOPBACK
        return f"{self.job_name}-{replicated_job}-{job_index}-{index}.{self.subdomain}"


@dataclass
class PodSet:
    """One replicatedJob of the runtime (runtime.PodSet): its pods per Job (``count``), its containers, init containers
    and volumes (copies the plugins change) and, once counted, the DNS names of its pods (``endpoints``)."""

    name: str
    ancestor: str | None
    count: int
    containers: list[dict]
    volumes: list[dict] = field(default_factory=list)
    init_containers: list[dict] = field(default_factory=list)
    endpoints: list[str] = field(default_factory=list)

    def container(self, name: str) -> dict | None:
        return next((container for container in self.containers if container.get("name") == name), None)

    def any_container(self, name: str) -> dict | None:
        """info.FindContainerByPodSetName: a container of that name, else an init container."""
        return self.container(name) or next(
            (container for container in self.init_containers if container.get("name") == name), None)


@dataclass
class Info:
    """What the plugins see of a TrainJob resolved against its runtime (runtime.Info).

    ``section`` is the policy's own part of ``mlPolicy`` (a copy: MPI sets its numProcPerNode there, as upstream
    does); ``trainer`` is the TrainJob's ``spec.trainer`` or None; ``runtime_resources`` the runtime's node container
    resources once the TrainJob's were merged in (runtime.ExtractResourcePerNodeFromRuntime); ``addresses`` where
    the pods are reached."""

    job_name: str
    section: dict
    trainer: dict | None
    pod_sets: list[PodSet]
    runtime_resources: dict | None
    addresses: Addresses

    def by_ancestor(self, ancestor: str) -> PodSet | None:
        return next((pod_set for pod_set in self.pod_sets if pod_set.ancestor == ancestor), None)

    def by_name(self, name: str) -> PodSet | None:
        return next((pod_set for pod_set in self.pod_sets if pod_set.name == name), None)

    def trainer_container(self) -> dict | None:
        """info.FindContainerByPodSetAncestorContainerName(AncestorTrainer, Node), only for a TrainJob with a trainer."""
        pod_set = self.by_ancestor(ANCESTOR_TRAINER)
        return pod_set.container(NODE) if pod_set and self.trainer is not None else None

    def requested_nodes(self) -> int | None:
        return (self.trainer or {}).get("numNodes")

    def set_trainer_count(self) -> None:
        """The trainer's numNodes, where the TrainJob gives one, sizes the trainer's replicatedJob."""
        pod_set = self.by_ancestor(ANCESTOR_TRAINER)
        if pod_set and self.requested_nodes() is not None:
            pod_set.count = self.requested_nodes()

    def trainer_count(self) -> int:
        pod_set = self.by_ancestor(ANCESTOR_TRAINER)
        return pod_set.count if pod_set else 1

    def resources_per_node(self) -> dict:
        """The TrainJob's resourcesPerNode where it has them, else the runtime's (merged) node resources."""
        if (self.trainer or {}).get("resourcesPerNode") is not None:
            return self.trainer["resourcesPerNode"]
        return self.runtime_resources or {}

    def upsert_trainer_env(self) -> None:
        """apply.UpsertEnvVars(trainerContainer.Env, trainJob.Spec.Trainer.Env): the plugins that do it first."""
        container = self.trainer_container()
        if container is not None:
            upsert_env(container.setdefault("env", []), *(self.trainer.get("env") or []))


class Policy:
    """One ML policy: a subclass sets the facts and overrides what its plugin does differently."""

    #: the mlPolicy field that selects it ("" for the plugin that runs when none of the others does)
    key: ClassVar[str] = ""
    #: env names a TrainJob's trainer.env must not set (the plugin's Validate)
    reserved_env: ClassVar[frozenset[str]] = frozenset()

    def trainer_jobs(self, section: dict) -> tuple[str, ...]:
        """replicatedJobs besides the trainer's whose node container gets the trainer's env and resourcesPerNode."""
        return ()

    def problems(self, info: Info) -> list[str]:
        """What the plugin's Validate rejects in the TrainJob, one phrase each."""
        found = sorted({env.get("name") for env in (info.trainer or {}).get("env") or []} & self.reserved_env)
        return [f"spec.trainer.env sets {', '.join(found)}, which the runtime's {self.key or 'plain'} policy sets "
                f"itself: remove {'them' if len(found) > 1 else 'it'}"] if found else []

    def enforce(self, info: Info) -> None:
        """EnforceMLPolicy: pod counts, env and ports."""

    def files(self, info: Info) -> dict[str, dict[str, str]]:
        """What the plugin's components put into pods besides env: replicatedJob -> {path in the pod: content}."""
        return {}

    def cluster_objects(self, job_name: str, files: Mapping[str, Mapping[str, str]]) -> list[dict]:
        """What the plugin's components create beside the pods in a cluster, without namespace or owner; ``files``:
        what :meth:`files` gave. A Secret of type ``kubernetes.io/ssh-auth`` comes without data: its key pair is
        made where it is created (trainctl/controller/owned.py), nothing random being made here."""
        return []

    # ---- locally (the local backend: every pod a process on this machine) -----------------------------------
    def idle_jobs(self, info: Info) -> dict[str, dict]:
        """replicatedJobs whose pods only host processes another pod starts in them, each with the command and args
        a local process of theirs idles with in place of its pod's program (which a process here cannot be)."""
        return {}

    def local_env(self, replicated_job: str, files: Mapping[str, str]) -> list[dict]:
        """What a local process of ``replicated_job`` needs besides its pod's env; ``files``: where each file
        :meth:`files` mounts into its pods is on this machine (path in the pod -> local path)."""
        return []
