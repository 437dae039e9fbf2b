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
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from trainctl import TRAINER_API_GROUP, TRAINER_API_VERSION
from trainctl.core import runtime_patches
from trainctl.core.trainer_crds import CLUSTER_RUNTIME, MANAGED_BY, NAME_MAX, NAME_PATTERN, RUNTIME, TRAINJOB
from trainctl.core.trainer_runtimes import default_runtimes, runtime_names
from trainctl.errors import UserError
from trainctl.frameworks import policies
from trainctl.frameworks.base import ANCESTOR_TRAINER, LABEL_ANCESTOR_STEP, NODE, Framework
from trainctl.frameworks.policies.base import COMPLETION_INDEX, TRAINER_PORT
from trainctl.frameworks.policies.base import Addresses, Info, PodSet, index_env, upsert_env
from trainctl.kube.envvars import resolved
from trainctl.kube.names import process_strings_problem
from trainctl.kube.quantities import format_quantity

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
POD_RESTART_POLICY = "OnFailure"  # JobSet's default for its Jobs' pods
#: the core's restart policy for a pod template's: a Job replaces a failed pod of restartPolicy Never with a new one,
#: up to its backoffLimit, as kubelet restarts one of OnFailure in place: the core counts both alike (the pod itself
#: keeps Never: TrainerFramework.prepare_pod)
JOB_RESTARTS = {"Never": "OnFailure"}
# JobSet's dependsOn: a replicatedJob's Jobs are created once those it names are Ready or Complete
READY, COMPLETE_STATUS = "Ready", "Complete"
DEPENDENCY_STATUSES = (READY, COMPLETE_STATUS)
JOB_BACKOFF_LIMIT = 6  # the Job default for its pods' restarts, where a runtime's Job template sets none
RESOURCE_KEYS = ("limits", "requests")
#: the pods trainctl plans of one TrainJob at most, each held in memory on every reconcile: past it a count is a
#: typo or a generator's int32, not a plan, and planning it would only fill the memory
MAX_PLANNED_PODS = 10_000


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
    """The read-only view of a TrainJob resource with the API's defaults (runtimeRef's kind and group), its
    trainer's numbers read as the SDK may send them (``2.0``); a bad field is refused as it is read."""

    def __init__(self, resource: dict) -> None:
        self.resource = resource
        metadata = resource.get("metadata") or {}
        self.name: str = metadata["name"]
        self.namespace: str = metadata.get("namespace") or "default"
        self.uid: str = metadata.get("uid", "")
        self.spec: dict = resource.get("spec") or {}
        self.runtime_ref: dict = runtime_ref_of(self.spec, self.name)
        self.trainer: dict | None = trainer_of(self.spec, f"TrainJob {self.name!r}: spec.trainer")

    @property
    def suspended(self) -> bool:
        return bool(self.spec.get("suspend"))


def runtime_ref_of(spec: dict, name: str) -> dict:
    ref = spec.get("runtimeRef") or {}
    if not ref.get("name"):
        raise UserError(f"TrainJob {name!r} has no spec.runtimeRef.name: give the name of its TrainingRuntime or "
                        "ClusterTrainingRuntime")
    return {"apiGroup": TRAINER_API_GROUP, "kind": CLUSTER_RUNTIME, **ref}


def trainer_of(spec: dict, where: str) -> dict | None:
    """``spec.trainer`` with counts as ints and quantities as strings; None where the TrainJob has none."""
    trainer = spec.get("trainer")
    if trainer is None:
        return None
    trainer = dict(trainer)
    if trainer.get("numNodes") is not None:
        trainer["numNodes"] = whole(trainer["numNodes"], f"{where}.numNodes")
    if trainer.get("numProcPerNode") == "auto":  # Trainer v2.0-2.1's IntOrString: the same as none given
        del trainer["numProcPerNode"]
    elif trainer.get("numProcPerNode") is not None:
        trainer["numProcPerNode"] = whole(trainer["numProcPerNode"], f"{where}.numProcPerNode")
    if trainer.get("resourcesPerNode") is not None:
        trainer["resourcesPerNode"] = normalized_resources(trainer["resourcesPerNode"], f"{where}.resourcesPerNode")
    return trainer


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

    def container(self, name: str | None = None) -> dict:
        """The container named ``name``; without one, the pod's main container (:func:`main_container`)."""
        if name is None:
            return main_container(self.spec["containers"])
        return next(container for container in self.spec["containers"] if container.get("name") == name)

    def environment(self, container: str | None = None) -> dict[str, str]:
        """The container's env as its process sees it (values, fieldRefs of the pod's metadata, $(VAR) references)."""
        metadata = {"name": self.name, "labels": self.labels, "annotations": self.annotations}
        return resolved(self.container(container).get("env") or [], metadata)


@dataclass(frozen=True)
class NodePlan:
    """All pods of a TrainJob, the headless Service (``subdomain``) that names them, and the files a policy mounts
    into the pods of a replicatedJob (path in the pod -> content: MPI's hostfile).

    ``templates``: each replicatedJob's pod template as its pods share it (what differs per pod: name, hostname, the
    completion index in labels and annotations); ``counts``: its pods; ``trainer``: the trainer's replicatedJob;
    ``success``: JobSet's successPolicy, (operator, the replicatedJobs it looks at); ``idle``: the replicatedJobs
    whose pods only host what another starts in them, with the command a local process of theirs idles with."""

    job: str
    subdomain: str
    policy: str
    pods: tuple[PodPlan, ...]
    files: dict[str, dict[str, str]]
    templates: dict[str, dict] = field(default_factory=dict, repr=False)
    counts: dict[str, int] = field(default_factory=dict)
    trainer: str | None = None
    success: tuple[str, tuple[str, ...]] = ("All", ())
    idle: dict[str, dict] = field(default_factory=dict)
    backoff_limit: int = JOB_BACKOFF_LIMIT
    depends_on: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    pod_group_policy: dict = field(default_factory=dict)  # the runtime's: how its pods are gang-scheduled

    def pods_of(self, replicated_job: str) -> list[PodPlan]:
        return [pod for pod in self.pods if pod.replicated_job == replicated_job]

    def replica_specs(self) -> dict[str, dict]:
        """The replicatedJobs as the core's replica specs: their pod count, restart policy and shared template."""
        specs = {}
        for name, template in self.templates.items():
            template = copy.deepcopy(template)
            policy = template["spec"].pop("restartPolicy")
            specs[name] = {"replicas": self.counts[name], "restartPolicy": JOB_RESTARTS.get(policy, policy),
                           "template": template}
        return specs

    def unmet_dependency(self, replicated_job: str, observed: list) -> tuple[str, str] | None:
        """The first of the replicatedJob's ``dependsOn`` that the observed replicas do not meet yet, as (name, status);
        None when it may start (JobSet creates a replicatedJob's Jobs only then): ``Complete``, every pod of that
        replicatedJob succeeded; ``Ready``, every pod of it ready (running, its Ready condition true where the runtime
        has one) or succeeded."""
        for name, status in self.depends_on.get(replicated_job, ()):
            met = {replica.index for replica in observed if replica.rtype == name and not replica.deleting and (
                replica.phase == "Succeeded" or (status == READY and replica.ready))}
            if not met >= set(range(self.counts[name])):
                return name, status
        return None

    def pod(self, replicated_job: str, index: int) -> PodPlan:
        return next(pod for pod in self.pods if (pod.replicated_job, pod.index) == (replicated_job, index))


def main_container(containers: list[dict]) -> dict:
    """The container a pod runs its step in: the one named ``node``, which the TrainJob's trainer fills (upstream's
    jobset builder), else the first (an initializer's, a ``trainer`` container a runtime runs as it is written)."""
    return next((container for container in containers if container.get("name") == NODE),
                containers[0] if containers else {})


def ancestor_of(replicated_job: dict) -> str | None:
    return ((replicated_job.get("template") or {}).get("metadata") or {}).get("labels", {}).get(LABEL_ANCESTOR_STEP)


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
        trains = ancestor_of(replicated_job) == ANCESTOR_TRAINER and ml_policy is not None
        spec = pod_template(replicated_job).get("spec") or {}
        containers = copy.deepcopy(spec.get("containers") or [])
        node = next((container for container in containers if container.get("name") == NODE), None)
        if override is not None and node is not None and (trains or replicated_job["name"] in trainer_jobs):
            node["resources"] = merged_resources(node.get("resources") or {}, override)
        found.append(PodSet(replicated_job["name"], ancestor_of(replicated_job), pods_per_job(replicated_job, ml_policy),
                            containers, copy.deepcopy(spec.get("volumes") or []),
                            copy.deepcopy(spec.get("initContainers") or [])))
    return found


def pods_per_job(replicated_job: dict, ml_policy: dict | None) -> int:
    """The trainer's: the runtime's mlPolicy.numNodes; any other's: its Job's parallelism; at least 1."""
    if ancestor_of(replicated_job) == ANCESTOR_TRAINER and ml_policy is not None:
        count = whole(ml_policy.get("numNodes") or 1, "the runtime's spec.mlPolicy.numNodes")
    else:
        count = ((replicated_job.get("template") or {}).get("spec") or {}).get("parallelism", 1)
    return max(count, 1)


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


def plan(job: TrainJob, runtime: dict, attempt: int = 0,
         local_ports: Mapping[tuple[str, int], int] | None = None) -> NodePlan:
    """The pods of ``job`` on ``runtime`` (``attempt``: how often the job was restarted whole, JobSet's restarts).

    ``local_ports``: for the local backend, the port of each pod by (replicatedJob, index): then pods reach each
    other at 127.0.0.1 on those ports instead of by their DNS names."""
    check_runtime(job, runtime)
    check_pod_count(job.name, pod_count(job, runtime), MAX_PLANNED_PODS, "trainctl plans")
    runtime = runtime_patches.patched(runtime, job.spec.get("runtimePatches"), job.name)
    name = runtime["metadata"]["name"]
    policy, section = policies.of(runtime["spec"].get("mlPolicy"), name)
    trainer_jobs = policy.trainer_jobs(section)
    template = runtime["spec"]["template"]["spec"]
    subdomain = (template.get("network") or {}).get("subdomain") or job.name
    sets = pod_sets(job, runtime, trainer_jobs)
    addresses = Addresses(job.name, subdomain, local_ports)
    info = Info(job.name, section, job.trainer, sets, node_resources(sets), addresses)
    problems = policy.problems(info)
    if problems:
        raise UserError(f"TrainJob {job.name!r} on runtime {name!r}: {'; '.join(problems)}")
    policy.enforce(info)
    replicated_jobs = template["replicatedJobs"]
    for pod_set, replicated_job in zip(info.pod_sets, replicated_jobs):
        pod_set.endpoints = [addresses.endpoint(pod_set.name, job_index, index)
                             for job_index in range(replicas_of(replicated_job)) for index in range(pod_set.count)]
    files = policy.files(info)
    apply_initializers(job, info)
    apply_trainer(job, info, trainer_jobs)
    layout = Layout(replicated_jobs, subdomain, attempt)
    pods = tuple(pod for pod_set, replicated_job in zip(info.pod_sets, replicated_jobs)
                 for pod in pods_of(job, pod_set, replicated_job, layout))
    templates = {pod_set.name: shared_template(replicated_job, pod_set)
                 for pod_set, replicated_job in zip(info.pod_sets, replicated_jobs)}
    trainer = next((pod_set.name for pod_set in info.pod_sets if pod_set.ancestor == ANCESTOR_TRAINER), None)
    success = template.get("successPolicy") or {}
    return NodePlan(job.name, subdomain, policy.key, pods, files, templates,
                    {pod_set.name: pod_set.count for pod_set in info.pod_sets}, trainer,
                    (success.get("operator", "All"), tuple(success.get("targetReplicatedJobs") or templates)),
                    policy.idle_jobs(info), backoff_limit(replicated_jobs, trainer, name),
                    dependencies(replicated_jobs, name), copy.deepcopy(runtime["spec"].get("podGroupPolicy") or {}))


def dependencies(replicated_jobs: list[dict], runtime_name: str) -> dict[str, tuple[tuple[str, str], ...]]:
    """Each replicatedJob's ``dependsOn`` as (name, status) pairs; what JobSet's API refuses (a name that is no
    replicatedJob before it or is named twice, a status but Ready or Complete) is named in one line."""
    found, before = {}, []
    for replicated_job in replicated_jobs:
        name, given = replicated_job.get("name"), replicated_job.get("dependsOn")
        where = f"runtime {runtime_name!r}: replicatedJob {name!r} has dependsOn"
        if given is not None and not isinstance(given, list):
            raise UserError(f"{where} {given!r}: give a list of {{name, status}}")
        pairs = []
        for entry in given or []:
            depends = entry.get("name") if isinstance(entry, dict) else None
            status = entry.get("status") if isinstance(entry, dict) else None
            if depends not in before or depends in dict(pairs) or status not in DEPENDENCY_STATUSES:
                raise UserError(f"{where} {entry!r}: each entry names a replicatedJob listed before it, once, and a "
                                f"status of {' or '.join(DEPENDENCY_STATUSES)}")
            pairs.append((depends, status))
        if pairs:
            found[name] = tuple(pairs)
        before.append(name)
    return found


def pod_count(job: TrainJob, runtime: dict) -> int:
    """The pods :func:`plan` makes of ``job`` on ``runtime`` at most, from the numbers alone (nothing is planned):
    each replicatedJob's Jobs times its pods per Job, the TrainJob's numNodes for the trainer's and the nodes'."""
    spec = runtime["spec"]
    requested = (job.trainer or {}).get("numNodes")
    total = 0
    for replicated_job in spec["template"]["spec"]["replicatedJobs"]:
        pods = pods_per_job(replicated_job, spec.get("mlPolicy"))
        if requested is not None and (ancestor_of(replicated_job) == ANCESTOR_TRAINER or replicated_job["name"] == NODE):
            pods = max(pods, requested)
        total += replicas_of(replicated_job) * pods
    return total


def check_pod_count(name: str, count: int, limit: int, who: str) -> None:
    if count > limit:
        raise UserError(f"TrainJob {name!r} asks for {count:,} pods; {who} at most {limit:,}: lower its "
                        "spec.trainer.numNodes (or its runtime's counts)")


def planned_pods(resource: dict) -> int | None:
    """:func:`pod_count` of a TrainJob on the runtime it carries, else on the trainctl default it names (None: it
    names another, which nothing here holds)."""
    job = TrainJob(resource)
    if SNAPSHOT_ANNOTATION in ((resource.get("metadata") or {}).get("annotations") or {}):
        runtime = runtime_snapshot(resource)
    elif job.runtime_ref["kind"] == CLUSTER_RUNTIME and job.runtime_ref["name"] in runtime_names():
        runtime = default_runtimes([job.runtime_ref["name"]])[0]
    else:
        return None
    check_runtime(job, runtime)
    return pod_count(job, runtime)


def backoff_limit(replicated_jobs: list[dict], trainer: str | None, runtime_name: str) -> int:
    """The ``backoffLimit`` of the trainer's Job template (else the first replicatedJob's), else the Job default;
    one that is no whole number >= 0 (a runtime written by hand) is named in one line."""
    chosen = next((rj for rj in replicated_jobs if rj.get("name") == trainer), replicated_jobs[0])
    limit = ((chosen.get("template") or {}).get("spec") or {}).get("backoffLimit")
    if limit is None:
        return JOB_BACKOFF_LIMIT
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise UserError(f"runtime {runtime_name!r}: replicatedJob {chosen.get('name')!r} has template.spec."
                        f"backoffLimit {limit!r}: give a whole number >= 0 (the restarts its pods may use)")
    return limit


def shared_template(replicated_job: dict, pod_set: PodSet) -> dict:
    """The pod template all pods of a replicatedJob share: the runtime's labels and annotations, the plugins' spec."""
    metadata = pod_template(replicated_job).get("metadata") or {}
    spec = pod_spec(pod_template(replicated_job), pod_set, "", "")
    for per_pod in ("hostname", "subdomain"):
        del spec[per_pod]
    return {"metadata": copy.deepcopy(metadata), "spec": spec}


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
    spec.setdefault("restartPolicy", POD_RESTART_POLICY)
    for container in (*(spec.get("initContainers") or []), *spec["containers"]):
        if all(env.get("name") != COMPLETION_INDEX_ENV for env in container.get("env") or []):
            container.setdefault("env", []).append(index_env(COMPLETION_INDEX_ENV))
    return spec


# ---- a TrainJob as the reconcile core's job -------------------------------------------------------------------

# Where a TrainJob keeps the runtime it was created on: upstream snapshots it at the first reconcile (a ConfigMap
# <job>-runtime-snapshot), so that a runtime edited later changes no running job; here the snapshot travels with the
# TrainJob itself, which keeps its view (trainctl/core/job.py) a function of the resource alone.
SNAPSHOT_ANNOTATION = "trainctl.io/runtime-snapshot"
DEFAULT_MANAGER = MANAGED_BY[0]  # spec.managedBy's default: trainctl's own controller
# in a local job's directory: the files a policy mounts into pods (MPI's hostfile), <replicatedJob>/<path in the pod>
LOCAL_FILES = "pod-files"
TRAINJOB_OPERATOR = f"{TRAINJOB.lower()}-controller"  # the operator-name label of its pods (a label value: no '/')


def is_trainjob(resource: dict) -> bool:
    return resource.get("apiVersion") == TRAINER_API_VERSION and resource.get("kind") == TRAINJOB


def check_trainjob(resource: dict) -> None:
    """What upstream's CRD and webhooks refuse of a TrainJob, as far as trainctl reads it: a bad name, no runtime,
    fields of the wrong type, reserved env (on the runtime it carries, if any)."""
    name = (resource.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN.strip("^$"), name) or len(name) > NAME_MAX:
        raise UserError(f"TrainJob name {name!r} must be at most {NAME_MAX} lowercase letters, digits and '-', "
                        "starting with a letter and ending with a letter or digit")
    check_process_strings(TrainJob(resource))  # reads the runtime's reference and the trainer, refusing what is wrong
    if SNAPSHOT_ANNOTATION in ((resource.get("metadata") or {}).get("annotations") or {}):
        node_plan_of(resource)


def check_process_strings(job: TrainJob) -> None:
    """The trainer's and the initializers' command words and env entries fit what execve takes (MAX_ARG_STRLEN)."""
    initializer = job.spec.get("initializer")
    given = [("spec.trainer", job.trainer), *((f"spec.initializer.{name}", initializer.get(name))
                                              for name in INITIALIZERS if isinstance(initializer, dict))]
    for path, fields in given:
        if isinstance(fields, dict) and (problem := process_strings_problem(fields, path)):
            raise UserError(f"TrainJob {job.name!r}: {problem[0]}: {problem[1]}")


def with_runtime_snapshot(resource: dict, runtime: dict) -> None:
    """Keep ``runtime`` in the TrainJob (checked: the TrainJob must plan on it)."""
    plan(TrainJob(resource), runtime)
    metadata = resource.setdefault("metadata", {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}),
                               SNAPSHOT_ANNOTATION: json.dumps(runtime, sort_keys=True, separators=(",", ":"))}


def is_runtime(document: object) -> bool:
    return isinstance(document, dict) and document.get("apiVersion") == TRAINER_API_VERSION and document.get(
        "kind") in (CLUSTER_RUNTIME, RUNTIME)


def with_runtimes_given(documents: list, where: str) -> tuple[list, list[dict]]:
    """The documents of a file but its runtimes, and its runtimes: each runtime named by a TrainJob of the file,
    which plans on it (checked here, so that a refusal names the file)."""
    runtimes = [doc for doc in documents if is_runtime(doc)]
    check_named_once(runtimes, where)
    named = set()
    for document in documents:
        if not (isinstance(document, dict) and is_trainjob(document)):
            continue
        try:
            runtime = runtime_given(document, runtimes)
            if runtime is not None:
                with_runtime_snapshot(copy.deepcopy(document), copy.deepcopy(runtime))
                named.add(id(runtime))
        except UserError as problem:
            raise UserError(f"{where}: {problem.message}") from None
    unused = [runtime for runtime in runtimes if id(runtime) not in named]
    if unused:
        raise UserError(f"{where}: {unused[0]['kind']} {unused[0]['metadata']['name']!r} is named by "
                        "no TrainJob of the file: a runtime given in a file runs the TrainJobs beside it that name it")
    return [document for document in documents if not is_runtime(document)], runtimes


def check_named_once(runtimes: list[dict], where: str) -> None:
    """Each runtime of a file has a name, no other runtime of its kind has."""
    nameless = next((runtime for runtime in runtimes if not isinstance(runtime.get("metadata"), dict)
                     or not isinstance(runtime["metadata"].get("name"), str)), None)
    if nameless:
        raise UserError(f"{where}: a {nameless['kind']} has no metadata.name: name it as its TrainJobs' runtimeRef does")
    keys = [(runtime["kind"], runtime["metadata"]["name"]) for runtime in runtimes]
    twice = next((key for index, key in enumerate(keys) if key in keys[:index]), None)
    if twice:
        raise UserError(f"{where}: {twice[0]} {twice[1]!r} is given twice: keep one")


def runtime_given(resource: dict, runtimes: list[dict]) -> dict | None:
    """The runtime of ``runtimes`` (a file's) that the TrainJob names; None if none is."""
    ref = TrainJob(resource).runtime_ref
    return next((runtime for runtime in runtimes
                 if (runtime["kind"], runtime["metadata"]["name"]) == (ref["kind"], ref["name"])), None)


def without_snapshot(resource: dict) -> bool:
    """Drop the runtime snapshot a TrainJob was written with: trainctl takes it itself, from the runtime it resolves
    (locally) or its controller does (docs/trainer-v2.md), never from whoever wrote the TrainJob. Whether it had one."""
    metadata = resource.get("metadata") if isinstance(resource, dict) and is_trainjob(resource) else None
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if not (isinstance(annotations, dict) and SNAPSHOT_ANNOTATION in annotations):
        return False
    del annotations[SNAPSHOT_ANNOTATION]
    return True


def ignored_snapshot(resource: dict) -> str:
    """What :func:`without_snapshot` says of a TrainJob whose snapshot it dropped."""
    return (f"TrainJob {resource['metadata'].get('name')!r}: its {SNAPSHOT_ANNOTATION} annotation is ignored: "
            "trainctl takes the runtime its runtimeRef names")


def with_default_runtime(resource: dict) -> None:
    """A TrainJob that carries no runtime and names one of trainctl's default ClusterTrainingRuntimes gets it
    (core/trainer_runtimes.py: upstream's, built in), where no cluster holds runtimes (the local backend)."""
    if SNAPSHOT_ANNOTATION in ((resource.get("metadata") or {}).get("annotations") or {}):
        return
    ref = TrainJob(resource).runtime_ref
    if ref["kind"] == CLUSTER_RUNTIME and ref["name"] in runtime_names():
        with_runtime_snapshot(resource, default_runtimes([ref["name"]])[0])


def runtime_snapshot(resource: dict) -> dict:
    name = (resource.get("metadata") or {}).get("name")
    text = ((resource.get("metadata") or {}).get("annotations") or {}).get(SNAPSHOT_ANNOTATION)
    try:
        runtime = json.loads(text) if text else None
    except ValueError:
        runtime = None
    if not isinstance(runtime, dict):
        ref = TrainJob(resource).runtime_ref
        raise UserError(f"TrainJob {name!r} names {ref['kind']} {ref['name']!r}, which trainctl cannot find here: "
                        "give that runtime in the same file, as a second YAML document, or name one of trainctl's "
                        f"ClusterTrainingRuntimes ({', '.join(runtime_names())})")
    return runtime


def local_file(replicated_job: str, path: str) -> str:
    """Where a local job keeps the file a policy mounts at ``path`` into the pods of ``replicated_job``, relative to
    its directory."""
    return f"{LOCAL_FILES}/{replicated_job}/{path.lstrip('/')}"


def with_local_path(word: str, files: Mapping[str, str]) -> str:
    """``word`` with the pod path of one of ``files`` in it (the whole word, or after its last ``=``:
    ``--hostfile=/etc/mpi/hostfile``) replaced by that file's local path."""
    head, equals, tail = word.rpartition("=")
    return head + equals + files[tail] if tail in files else word


def node_plan_of(resource: dict, local_ports: Mapping[tuple[str, int], int] | None = None) -> NodePlan:
    """The plan of a stored TrainJob, on the runtime it carries."""
    return plan(TrainJob(resource), runtime_snapshot(resource), local_ports=local_ports)


# ---- a TrainJob's status in upstream's form (contract §1.3) -----------------------------------------------------

COMPLETE = "Complete"
COMPLETE_REASON = "AllJobsCompleted"  # what JobSet's Completed condition gives upstream's Complete
RUNTIME_NOT_FOUND = "TrainingRuntimeNotSupported"  # upstream's Failed reason for a runtime it cannot run on
UPSTREAM_SUSPENDED = {"True": ("Suspended", "TrainJob is suspended"), "False": ("Resumed", "TrainJob is resumed")}


def upstream_status(status: dict, replicas: Mapping[str, int]) -> dict:
    """trainctl's status of a TrainJob (its core's: Created, Running ... conditions, replica counts) as upstream's
    controller writes it: only ``Suspended``, ``Complete`` and ``Failed`` conditions, each a full metav1.Condition
    (no condition at all while it runs: the SDK derives Running from the pods only then), and ``jobsStatus``, one
    entry per replicatedJob (``replicas``: its pods) counting its one Job as JobSet does."""
    conditions = []
    for condition in status.get("conditions") or []:
        ctype, truth = condition.get("type"), condition.get("status")
        if ctype == "Suspended":
            reason, message = UPSTREAM_SUSPENDED.get(truth, UPSTREAM_SUSPENDED["False"])
        elif ctype in ("Succeeded", "Failed") and truth == "True":
            reason, message = condition.get("reason") or ctype, condition.get("message") or ctype
            ctype, reason = (COMPLETE, COMPLETE_REASON) if ctype == "Succeeded" else (ctype, reason)
        else:
            continue
        conditions.append({"type": ctype, "status": truth, "reason": reason, "message": message,
                           "lastTransitionTime": condition.get("lastTransitionTime")})
    found = {"conditions": conditions} if conditions else {}
    suspended = any(c["type"] == "Suspended" and c["status"] == "True" for c in conditions)
    failed = any(c["type"] == "Failed" for c in conditions)
    counts = status.get("replicaStatuses") or {}
    found["jobsStatus"] = [job_status(name, counts.get(name) or {}, count, suspended, failed)
                           for name, count in replicas.items()]
    return found


def job_status(name: str, pods: dict, replicas: int, suspended: bool, failed: bool) -> dict:
    """JobSet's ReplicatedJobStatus of a replicatedJob whose one Job has ``replicas`` pods counted in ``pods``."""
    done = pods.get("succeeded", 0) >= replicas
    lost = failed and pods.get("failed", 0) > 0 and not done
    active = not (done or lost or suspended) and pods.get("active", 0) > 0
    ready = active and pods.get("active", 0) + pods.get("succeeded", 0) >= replicas
    return {"name": name, "ready": int(ready), "succeeded": int(done), "failed": int(lost), "active": int(active),
            "suspended": int(suspended)}


class TrainerFramework(Framework):
    """What the reconcile core asks of a job's kind, answered for one TrainJob by its plan: the replica types are
    its runtime's replicatedJobs, each replica a pod of the plan, already wired (env, ports, files), so the core adds
    nothing but the attempt; success is JobSet's successPolicy. Not in the frameworks' registry: a TrainJob is no
    kubeflow.org/v1 kind, and each has its own runtime."""

    kind = TRAINJOB
    api_version = TRAINER_API_VERSION
    name = "trainjob"
    replica_spec_field = "replicatedJobs"
    container = NODE
    port_name = None
    port = TRAINER_PORT  # locally, each pod gets a port of its own for it
    restart_policy = POD_RESTART_POLICY
    workers_help = default_image = ""
    services = False  # one headless Service names them all (the plan's subdomain), not one per pod

    #: the headless Service that names the pods (Framework.cluster_objects); it outlives no change of the plan
    pruned_kinds = ("Service",)

    operator_name = TRAINJOB_OPERATOR

    def __init__(self, node_plan: NodePlan) -> None:
        self.plan = node_plan
        self.replica_types = tuple(node_plan.templates)  # its runtime's replicatedJobs (pods read back by them)

    def cluster_objects(self, job, pods: list[dict]) -> list[dict]:
        """JobSet's headless Service ``<subdomain>``: selects every pod of the job, ready or not, so that
        ``<job>-node-0-0.<job>`` resolves before rank 0 is ready (contract §3); then what the policy's components
        create (MPI's hostfile ConfigMap and SSH key Secret), labelled as the Service is."""
        service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": self.plan.subdomain},
                   "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": {JOBSET_NAME: job.name}}}
        found = [service, *policies.named(self.plan.policy).cluster_objects(job.name, self.plan.files)]
        for obj in found:
            obj["metadata"]["labels"] = job.selector_labels()
        return found

    def pod_name(self, job_name: str, rtype: str, index: int) -> str:
        return f"{job_name}-{rtype}-0-{index}"

    def run_policy(self, spec: dict) -> dict:
        """TrainJob has suspend and activeDeadlineSeconds; a finished job's running pods go, as JobSet deletes its
        active Jobs; each pod is restarted up to its Job's backoffLimit (the runtime's, else the Job default 6)."""
        policy = {"suspend": bool(spec.get("suspend")), "cleanPodPolicy": "Running",
                  "backoffLimit": self.plan.backoff_limit}
        if spec.get("activeDeadlineSeconds") is not None:
            policy["activeDeadlineSeconds"] = spec["activeDeadlineSeconds"]
        if spec.get("managedBy") not in (None, DEFAULT_MANAGER):
            policy["managedBy"] = spec["managedBy"]
        return policy

    def master_role(self, replica_types: list[str]) -> str | None:
        return None

    def status_role(self, replica_types: list[str]) -> str:
        return self.plan.trainer if self.plan.trainer in replica_types else replica_types[0]

    def unmet_dependency(self, job, rtype: str, observed: list) -> tuple[str, str] | None:
        return self.plan.unmet_dependency(rtype, observed)

    def succeeded(self, job, rtype: str, counts: dict, observed: list) -> bool:
        """JobSet's successPolicy: every (operator All) or any (Any) of its replicatedJobs has all pods succeeded."""
        operator, targets = self.plan.success
        done = [sum(1 for replica in observed if replica.rtype == target and replica.phase == "Succeeded")
                >= job.replicas(target) for target in targets]
        return all(done) if operator == "All" else any(done)

    def env(self, job, rtype: str, index: int, network) -> list[dict]:
        """Nothing in a cluster (the plan's env is in the template); locally, the plan's env again with every pod
        at 127.0.0.1 on its own port and the files mounted into it at their local paths, which the template's DNS
        names and pod paths give way to (a later variable wins), then what the policy adds for a local process."""
        if network.cluster:
            return []
        local = node_plan_of(job.resource, local_ports=network.ports)
        files = self.local_paths(rtype, network.files_dir)
        env = [{**entry, "value": with_local_path(entry["value"], files)} if isinstance(entry.get("value"), str)
               else entry for entry in local.pod(rtype, index).container().get("env") or []]
        return env + policies.named(self.plan.policy).local_env(rtype, files)

    def local_paths(self, rtype: str, files_dir: str) -> dict[str, str]:
        """Each file the policy mounts into the pods of ``rtype``: its path in the pod -> its local copy's."""
        return {path: os.path.join(files_dir, local_file(rtype, path)) for path in self.plan.files.get(rtype, {})}

    def local_files(self, job, network) -> dict[str, str]:
        """The files the policy mounts into pods, as the local plan gives them (every host 127.0.0.1)."""
        local = node_plan_of(job.resource, local_ports=network.ports)
        return {local_file(name, path): text for name, files in local.files.items() for path, text in files.items()}

    def local_command(self, job, rtype: str, command: list[str], files_dir: str) -> list[str]:
        """A pod that only hosts what another starts in it idles (MPI's nodes: no sshd here, mpirun starts every
        rank itself); any other runs its own command, a word naming a file mounted into its pod naming the local
        copy."""
        idle = self.plan.idle.get(rtype)
        if idle is not None:
            return [*(idle.get("command") or []), *(idle.get("args") or [])]
        files = self.local_paths(rtype, files_dir)
        return [with_local_path(word, files) for word in command]

    def wired_containers(self, job, rtype: str, containers: list[dict]) -> list[dict]:
        """The container the step runs in (the plan's env is in every container's template already: locally the
        one that becomes the process gets it again for this machine)."""
        main = self.main_container(containers)
        return [main] if main is not None else []

    def prepare_pod(self, job, rtype: str, index: int, spec: dict, network) -> None:
        spec.update(hostname=self.plan.pod(rtype, index).name, subdomain=self.plan.subdomain)
        if self.plan.templates[rtype]["spec"].get("restartPolicy") in JOB_RESTARTS:
            spec["restartPolicy"] = self.plan.templates[rtype]["spec"]["restartPolicy"]  # the core recreates it
        container = self.main_container(spec["containers"])
        if not network.cluster and container is not None:
            command = [*(container.get("command") or []), *(container.get("args") or [])]
            container.update(command=self.local_command(job, rtype, command, network.files_dir), args=[])


__all__ = ["NodePlan", "PodPlan", "TrainJob", "TrainerFramework", "is_trainjob", "node_plan_of", "plan", "upstream_status"]
