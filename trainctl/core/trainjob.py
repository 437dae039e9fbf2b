"""A Kubeflow Trainer v2 TrainJob, read with its defaults, and the pods it becomes on its runtime.

Upstream's controller turns a TrainJob into a JobSet, JobSet into Indexed Jobs, and the Jobs into pods
(contract §3). trainctl skips the middle (docs/trainer-v2.md, "How a TrainJob runs"): :func:`plan` gives the
pods directly, each with the name, hostname, subdomain, labels, annotations, containers and env that the JobSet
path gives it, so neither the program in the pod nor the SDK v2 reading the pods can tell the difference.

Pure: no I/O and no clock. The runtime (a ClusterTrainingRuntime or TrainingRuntime) is handed in as a dict; what
its ``mlPolicy`` adds is the policy module's (trainctl/frameworks/policies/), which this module never names.
"""

from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cached_property

from trainctl.errors import UserError
from trainctl.frameworks import policies
from trainctl.frameworks.policies.base import ANCESTOR_TRAINER, COMPLETION_INDEX, COMPLETION_INDEX_FIELD, NODE
from trainctl.frameworks.policies.base import Info, PodSet, index_env, upsert_env
from trainctl.kube.quantities import format_quantity

TRAINER_GROUP = "trainer.kubeflow.org"
TRAINER_API_VERSION = f"{TRAINER_GROUP}/v1alpha1"
TRAINJOB_KIND = "TrainJob"
CLUSTER_RUNTIME_KIND, RUNTIME_KIND = "ClusterTrainingRuntime", "TrainingRuntime"
ANCESTOR_LABEL = f"{TRAINER_GROUP}/trainjob-ancestor-step"
# the initializers' replicatedJobs, containers and ancestor labels, by their field in spec.initializer
INITIALIZERS = {"dataset": "dataset-initializer", "model": "model-initializer"}
INITIALIZER_ANCESTORS = tuple(INITIALIZERS.values())
STORAGE_URI_ENV = "STORAGE_URI"  # jobset plugin constants.InitializerEnvStorageUri
# what JobSet's controller writes on every Job and pod, as label and annotation (jobset labelAndAnnotateObject)
JOBSET = "jobset.sigs.k8s.io"
JOBSET_NAME, JOBSET_UID, REPLICATED_JOB = f"{JOBSET}/jobset-name", f"{JOBSET}/jobset-uid", f"{JOBSET}/replicatedjob-name"
# what Kubernetes' Job controller writes on an Indexed Job's pods; the completion index is a label too (1.28+)
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"  # the Job controller's env of every container of an Indexed Job
DEFAULT_GROUP = "default"  # a replicatedJob's groupName unless it says otherwise
RESOURCE_KEYS = ("limits", "requests")


def whole(value: object, where: str) -> int:
    """A count as the SDK may send it: an int or an integral float (``2.0``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise UserError(f"{where} must be a whole number, not {value!r}")
    return int(value)


def quantity(value: object, where: str) -> str:
    """A resource amount as a string; numbers (the SDK sends ``2.0``) in Kubernetes' canonical form (``"2"``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise UserError(f"{where} must be a quantity such as 2, 500m or 4Gi, not {value!r}")
    return format_quantity(Decimal(repr(value))) if isinstance(value, (int, float)) else value


def normalized_resources(resources: object, where: str) -> dict:
    if not isinstance(resources, dict):
        raise UserError(f"{where} must be a mapping with limits and requests, not {resources!r}")
    found = dict(resources)
    for key in RESOURCE_KEYS:
        if found.get(key) is not None:
            found[key] = {name: quantity(amount, f"{where}.{key}.{name}") for name, amount in found[key].items()}
    return found


def merged_resources(base: dict, override: dict) -> dict:
    """MergeResourceRequirements (a strategic merge): limits and requests key by key, claims by name."""
    merged = copy.deepcopy(base)
    for key in RESOURCE_KEYS:
        if override.get(key):
            merged[key] = {**(merged.get(key) or {}), **override[key]}
    if override.get("claims"):
        claims = {claim["name"]: claim for claim in merged.get("claims") or []}
        merged["claims"] = list({**claims, **{claim["name"]: claim for claim in override["claims"]}}.values())
    return merged


class TrainJob:
    """The read-only view of a TrainJob resource with the API's defaults (runtimeRef's kind and group)."""

    def __init__(self, resource: dict) -> None:
        self.resource = resource
        metadata = resource.get("metadata") or {}
        self.name: str = metadata["name"]
        self.namespace: str = metadata.get("namespace") or "default"
        self.uid: str = metadata.get("uid", "")
        self.spec: dict = resource.get("spec") or {}

    @cached_property
    def runtime_ref(self) -> dict:
        ref = self.spec.get("runtimeRef") or {}
        if not ref.get("name"):
            raise UserError(f"TrainJob {self.name!r} has no spec.runtimeRef.name: give the name of "
                            "its TrainingRuntime or ClusterTrainingRuntime")
        return {"apiGroup": TRAINER_GROUP, "kind": CLUSTER_RUNTIME_KIND, **ref}

    @cached_property
    def trainer(self) -> dict | None:
        """``spec.trainer`` with counts as ints and quantities as strings; None where the TrainJob has none."""
        trainer = self.spec.get("trainer")
        if trainer is None:
            return None
        trainer = dict(trainer)
        where = f"TrainJob {self.name!r}: spec.trainer"
        if trainer.get("numNodes") is not None:
            trainer["numNodes"] = whole(trainer["numNodes"], f"{where}.numNodes")
        if trainer.get("numProcPerNode") == "auto":  # Trainer v2.0-2.1's IntOrString: the same as none given
            del trainer["numProcPerNode"]
        elif trainer.get("numProcPerNode") is not None:
            trainer["numProcPerNode"] = whole(trainer["numProcPerNode"], f"{where}.numProcPerNode")
        if trainer.get("resourcesPerNode") is not None:
            trainer["resourcesPerNode"] = normalized_resources(trainer["resourcesPerNode"], f"{where}.resourcesPerNode")
        return trainer

    @property
    def suspended(self) -> bool:
        return bool(self.spec.get("suspend"))


@dataclass(frozen=True)
class PodPlan:
    """One pod of a TrainJob: what upstream's JobSet path would create, its name being its hostname."""

    replicated_job: str
    job_index: int
    index: int
    name: str
    labels: dict
    annotations: dict
    spec: dict = field(repr=False)

    def container(self, name: str = NODE) -> dict:
        return next(container for container in self.spec["containers"] if container.get("name") == name)

    def environment(self, container: str = NODE) -> dict[str, str]:
        """The container's env as its process sees it: values, fieldRefs of the pod's metadata, $(VAR) references."""
        found: dict[str, str] = {}
        for env in self.container(container).get("env") or []:
            if "valueFrom" in env:
                found[env["name"]] = self.field(env["valueFrom"], env["name"])
            else:
                found[env["name"]] = expanded(str(env.get("value", "")), found)
        return found

    def field(self, source: dict, name: str) -> str:
        path = (source.get("fieldRef") or {}).get("fieldPath", "")
        keyed = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
        if keyed:
            return (self.labels if keyed.group(1) == "labels" else self.annotations).get(keyed.group(2), "")
        if path == "metadata.name":
            return self.name
        raise UserError(f"env {name} of pod {self.name} reads {path or source}, which trainctl runs only on a "
                        "cluster: give it a value, or a fieldRef of metadata.name, labels or annotations")


def expanded(value: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: a variable defined before it is replaced, $$ escapes, anything else stays."""
    return re.sub(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)",
                  lambda found: "$" if found.group(0) == "$$" else env.get(found.group(1), found.group(0)), value)


@dataclass(frozen=True)
class NodePlan:
    """All pods of a TrainJob, the headless Service (``subdomain``) that names them, and the files a policy mounts
    into the pods of a replicatedJob (path in the pod -> content: MPI's hostfile)."""

    job: str
    subdomain: str
    policy: str
    pods: tuple[PodPlan, ...]
    files: dict[str, dict[str, str]]

    def pods_of(self, replicated_job: str) -> list[PodPlan]:
        return [pod for pod in self.pods if pod.replicated_job == replicated_job]


def ancestor_of(replicated_job: dict) -> str | None:
    return ((replicated_job.get("template") or {}).get("metadata") or {}).get("labels", {}).get(ANCESTOR_LABEL)


def pod_template(replicated_job: dict) -> dict:
    return ((replicated_job.get("template") or {}).get("spec") or {}).get("template") or {}


def replicas_of(replicated_job: dict) -> int:
    """The trainer's and initializers' replicatedJobs run one Job (jobset builder Trainer/Initializer)."""
    if ancestor_of(replicated_job) in (ANCESTOR_TRAINER, *INITIALIZER_ANCESTORS):
        return 1
    return replicated_job.get("replicas", 1)


def check_runtime(job: TrainJob, runtime: dict) -> None:
    ref = job.runtime_ref
    name = (runtime.get("metadata") or {}).get("name")
    if runtime.get("kind") != ref["kind"] or name != ref["name"]:
        raise UserError(f"TrainJob {job.name!r} names {ref['kind']} {ref['name']!r}, "
                        f"not {runtime.get('kind')} {name!r}: fix spec.runtimeRef or give that runtime")
    if not ((runtime.get("spec") or {}).get("template") or {}).get("spec", {}).get("replicatedJobs"):
        raise UserError(f"runtime {name!r} has no spec.template.spec.replicatedJobs: give it a node replicatedJob")


def pod_sets(job: TrainJob, runtime: dict, trainer_jobs: tuple[str, ...]) -> list[PodSet]:
    """One PodSet per replicatedJob (newRuntimeInfo): the trainer's sized by mlPolicy.numNodes, the others by their
    parallelism; the TrainJob's resourcesPerNode merged into the node container of the trainer's and of
    ``trainer_jobs``."""
    ml_policy = runtime["spec"].get("mlPolicy")
    override = (job.trainer or {}).get("resourcesPerNode")
    found = []
    for replicated_job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        ancestor = ancestor_of(replicated_job)
        trains = ancestor == ANCESTOR_TRAINER and ml_policy is not None
        count = whole(ml_policy.get("numNodes") or 1, "the runtime's spec.mlPolicy.numNodes") if trains else \
            ((replicated_job.get("template") or {}).get("spec") or {}).get("parallelism", 1)
        spec = pod_template(replicated_job).get("spec") or {}
        containers = copy.deepcopy(spec.get("containers") or [])
        node = next((container for container in containers if container.get("name") == NODE), None)
        if override is not None and node is not None and (trains or replicated_job["name"] in trainer_jobs):
            node["resources"] = merged_resources(node.get("resources") or {}, override)
        found.append(PodSet(replicated_job["name"], ancestor, max(count, 1), containers,
                            copy.deepcopy(spec.get("volumes") or []), copy.deepcopy(spec.get("initContainers") or [])))
    return found


def node_resources(sets: list[PodSet]) -> dict | None:
    """runtime.ExtractResourcePerNodeFromRuntime: the first node container's resources, of ``node`` or the trainer."""
    for pod_set in sets:
        node = pod_set.container(NODE)
        if (pod_set.name == NODE or pod_set.ancestor == ANCESTOR_TRAINER) and node and node.get("resources"):
            return node["resources"]
    return None


def apply_trainer(job: TrainJob, info: Info, trainer_jobs: tuple[str, ...]) -> None:
    """jobset builder Trainer(): the TrainJob's image, command and args replace the trainer's node container's; its
    env is upserted there and into the node containers of ``trainer_jobs``."""
    trainer = job.trainer
    if trainer is None:
        return
    for pod_set in info.pod_sets:
        node = pod_set.container(NODE)
        if node is None:
            continue
        if pod_set.ancestor == ANCESTOR_TRAINER:
            node.update({key: copy.deepcopy(trainer[key]) for key in ("image", "command", "args")
                         if trainer.get(key) is not None})
        if pod_set.ancestor == ANCESTOR_TRAINER or pod_set.name in trainer_jobs:
            upsert_env(node.setdefault("env", []), *(trainer.get("env") or []))


def apply_initializers(job: TrainJob, info: Info) -> None:
    """jobset builder Initializer(): the TrainJob's dataset and model initializers' storageUri (as STORAGE_URI), env
    and secretRef (as envFrom) go into the container named like its initializer."""
    for field_name, ancestor in INITIALIZERS.items():
        given = (job.spec.get("initializer") or {}).get(field_name)
        pod_set = info.by_ancestor(ancestor)
        container = pod_set.container(ancestor) if pod_set and given is not None else None
        if container is None:
            continue
        env = container.setdefault("env", [])
        if given.get("storageUri") is not None:
            upsert_env(env, {"name": STORAGE_URI_ENV, "value": given["storageUri"]})
        upsert_env(env, *(given.get("env") or []))
        if given.get("secretRef") is not None:
            container.setdefault("envFrom", []).append({"secretRef": {"name": given["secretRef"]["name"]}})


def plan(job: TrainJob, runtime: dict, attempt: int = 0) -> NodePlan:
    """The pods of ``job`` on ``runtime`` (``attempt``: how often the job was restarted whole, JobSet's restarts)."""
    check_runtime(job, runtime)
    name = runtime["metadata"]["name"]
    policy, section = policies.of(runtime["spec"].get("mlPolicy"), name)
    trainer_jobs = policy.trainer_jobs(section)
    sets = pod_sets(job, runtime, trainer_jobs)
    info = Info(job.name, section, job.trainer, sets, node_resources(sets))
    problems = policy.problems(info)
    if problems:
        raise UserError(f"TrainJob {job.name!r} on runtime {name!r}: {'; '.join(problems)}")
    policy.enforce(info)
    template = runtime["spec"]["template"]["spec"]
    subdomain = (template.get("network") or {}).get("subdomain") or job.name
    replicated_jobs = template["replicatedJobs"]
    for pod_set, replicated_job in zip(info.pod_sets, replicated_jobs):
        pod_set.endpoints = [f"{job.name}-{pod_set.name}-{job_index}-{index}.{subdomain}"
                             for job_index in range(replicas_of(replicated_job)) for index in range(pod_set.count)]
    files = policy.files(info)
    apply_initializers(job, info)
    apply_trainer(job, info, trainer_jobs)
    pods = tuple(pod for pod_set, replicated_job in zip(info.pod_sets, replicated_jobs)
                 for pod in pods_of(job, pod_set, replicated_job, Layout(replicated_jobs, subdomain, attempt)))
    return NodePlan(job.name, subdomain, policy.key, pods, files)


@dataclass(frozen=True)
class Layout:
    """What a pod's JobSet labels count across the runtime's replicatedJobs."""

    replicated_jobs: list[dict]
    subdomain: str
    attempt: int

    def global_index(self, name: str, job_index: int, group: str | None = None) -> int:
        before = 0
        for replicated_job in self.replicated_jobs:
            if group is not None and replicated_job.get("groupName", DEFAULT_GROUP) != group:
                continue
            if replicated_job["name"] == name:
                return before + job_index
            before += replicas_of(replicated_job)
        return before

    def replicas(self, group: str | None = None) -> int:
        return sum(replicas_of(replicated_job) for replicated_job in self.replicated_jobs
                   if group is None or replicated_job.get("groupName", DEFAULT_GROUP) == group)


def jobset_marks(job: TrainJob, replicated_job: dict, job_index: int, layout: Layout) -> dict[str, str]:
    """The keys JobSet writes on a Job and its pods, as labels and as annotations alike."""
    name, group = replicated_job["name"], replicated_job.get("groupName", DEFAULT_GROUP)
    job_name = f"{job.name}-{name}-{job_index}"
    return {JOBSET_NAME: job.name, JOBSET_UID: job.uid, REPLICATED_JOB: name,
            f"{JOBSET}/restart-attempt": str(layout.attempt),
            f"{JOBSET}/replicatedjob-replicas": str(replicas_of(replicated_job)),
            f"{JOBSET}/global-replicas": str(layout.replicas()), f"{JOBSET}/job-index": str(job_index),
            f"{JOBSET}/job-key": hashlib.sha1(f"{job.namespace}/{job_name}".encode()).hexdigest(),
            f"{JOBSET}/job-global-index": str(layout.global_index(name, job_index)),
            f"{JOBSET}/group-name": group, f"{JOBSET}/group-replicas": str(layout.replicas(group)),
            f"{JOBSET}/job-group-index": str(layout.global_index(name, job_index, group))}


def pods_of(job: TrainJob, pod_set: PodSet, replicated_job: dict, layout: Layout) -> list[PodPlan]:
    template = pod_template(replicated_job)
    metadata = template.get("metadata") or {}
    found = []
    for job_index in range(replicas_of(replicated_job)):
        marks = jobset_marks(job, replicated_job, job_index, layout)
        for index in range(pod_set.count):
            name = f"{job.name}-{pod_set.name}-{job_index}-{index}"
            indexed = {COMPLETION_INDEX: str(index)}
            labels = {**(metadata.get("labels") or {}), **marks, **indexed,
                      **dict.fromkeys(JOB_NAME_LABELS, f"{job.name}-{pod_set.name}-{job_index}")}
            annotations = {**(metadata.get("annotations") or {}), **marks, **indexed}
            found.append(PodPlan(pod_set.name, job_index, index, name, labels, annotations,
                                 pod_spec(template, pod_set, name, layout.subdomain)))
    return found


def pod_spec(template: dict, pod_set: PodSet, hostname: str, subdomain: str) -> dict:
    """The pod template's spec with the plugins' containers and volumes, the pod's DNS name, JobSet's restart policy
    default and the Job controller's completion index variable in every container."""
    spec = copy.deepcopy(template.get("spec") or {})
    spec["containers"] = copy.deepcopy(pod_set.containers)
    if pod_set.init_containers:
        spec["initContainers"] = copy.deepcopy(pod_set.init_containers)
    if pod_set.volumes:
        spec["volumes"] = copy.deepcopy(pod_set.volumes)
    spec.update(hostname=hostname, subdomain=subdomain)
    spec.setdefault("restartPolicy", "OnFailure")
    for container in (*(spec.get("initContainers") or []), *spec["containers"]):
        if all(env.get("name") != COMPLETION_INDEX_ENV for env in container.get("env") or []):
            container.setdefault("env", []).append(index_env(COMPLETION_INDEX_ENV))
    return spec


__all__ = ["COMPLETION_INDEX_FIELD", "NodePlan", "PodPlan", "TrainJob", "plan"]
