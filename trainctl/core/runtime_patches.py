"""A TrainJob's ``spec.runtimePatches`` merged into its runtime, as upstream's controller merges them
(``TrainingRuntime.mergeRuntimePatches``: each patch, in order, a strategic merge patch of the JobSet spec)
before any plugin reads the runtime.

A patch targets replicatedJobs by name and may set, of each one's Job and pod template, labels and annotations,
and of the pod spec what upstream's ``PodSpecPatch`` allows: ``volumes``, ``imagePullSecrets`` and
``schedulingGates`` (merged by name), ``containers`` and ``initContainers`` (the runtime's, by name: their ``env``
merged by name, ``volumeMounts`` by mount path, ``securityContext`` field by field), ``nodeSelector`` (key by
key), ``affinity`` and ``securityContext`` (field by field), and ``tolerations``, ``serviceAccountName``,
``terminationGracePeriodSeconds`` (replaced). What upstream's admission refuses is refused here, in one line: a
replicatedJob or container the runtime does not have, ``env`` for the ``node`` and initializer containers (the
TrainJob's ``trainer`` and ``initializer`` set theirs).

Pure: the runtime comes in as a dict and a patched copy goes out.
"""

from __future__ import annotations

import copy

from trainctl.errors import UserError
from trainctl.frameworks.base import NODE
from trainctl.frameworks.policies.base import upsert_env

# containers whose env only the TrainJob's trainer and initializer set (upstream: constants.Node, *Initializer)
ENV_OWNED = (NODE, "dataset-initializer", "model-initializer")
MERGED_BY_NAME = ("volumes", "imagePullSecrets", "schedulingGates")
MERGED_FIELD_BY_FIELD = ("affinity", "securityContext", "nodeSelector")
CONTAINER_LISTS = ("containers", "initContainers")
# what a patch may set that the local backend, whose replicas are processes on this machine, cannot honour
NO_LOCAL_EFFECT = ("nodeSelector", "affinity", "tolerations", "schedulingGates", "serviceAccountName",
                   "imagePullSecrets", "securityContext")


def patched(runtime: dict, patches: list | None, job_name: str) -> dict:
    """``runtime`` with each of ``patches`` (a TrainJob's ``spec.runtimePatches``) merged in, a copy; ``runtime``
    itself when there are none."""
    if not patches:
        return runtime
    runtime = copy.deepcopy(runtime)
    replicated = {rj.get("name"): rj for rj in runtime["spec"]["template"]["spec"]["replicatedJobs"]}
    for number, patch in enumerate(patches):
        where = f"TrainJob {job_name!r} spec.runtimePatches[{number}] (manager {patch.get('manager')!r})"
        template = (patch.get("trainingRuntimeSpec") or {}).get("template") or {}
        for job_patch in (template.get("spec") or {}).get("replicatedJobs") or []:
            target = replicated.get(job_patch.get("name"))
            if target is None:
                raise UserError(f"{where}: the runtime has no replicatedJob {job_patch.get('name')!r}: "
                                f"patch one of {', '.join(map(repr, replicated))}")
            patch_replicated_job(target, job_patch.get("template") or {}, f"{where}, replicatedJob {target['name']!r}")
    return runtime


def patch_replicated_job(replicated_job: dict, job_patch: dict, where: str) -> None:
    job_template = replicated_job.setdefault("template", {})
    merge_metadata(job_template, job_patch.get("metadata"))
    pod_patch = (job_patch.get("spec") or {}).get("template") or {}
    pod_template = job_template.setdefault("spec", {}).setdefault("template", {})
    merge_metadata(pod_template, pod_patch.get("metadata"))
    merge_pod_spec(pod_template.setdefault("spec", {}), pod_patch.get("spec") or {}, where)


def merge_metadata(template: dict, metadata: dict | None) -> None:
    """Only labels and annotations of a patch's metadata apply (upstream's API says so)."""
    for key in ("labels", "annotations"):
        if (metadata or {}).get(key):
            template.setdefault("metadata", {}).setdefault(key, {}).update(metadata[key])


def merge_pod_spec(spec: dict, patch: dict, where: str) -> None:
    for key, value in patch.items():
        if key in CONTAINER_LISTS:
            merge_containers(spec.setdefault(key, []), value or [], f"{where}, {key}")
        elif key in MERGED_BY_NAME:
            merge_by(spec.setdefault(key, []), value or [], "name")
        elif key in MERGED_FIELD_BY_FIELD:
            spec[key] = merged(spec.get(key), value)
        else:  # tolerations (an atomic list), serviceAccountName, terminationGracePeriodSeconds
            spec[key] = copy.deepcopy(value)


def merge_containers(containers: list[dict], patches: list[dict], where: str) -> None:
    by_name = {container.get("name"): container for container in containers}
    for patch in patches:
        container = by_name.get(patch.get("name"))
        if container is None:
            raise UserError(f"{where}: the runtime's pod has no container {patch.get('name')!r}: "
                            f"patch one of {', '.join(map(repr, by_name)) or 'none'}")
        if patch.get("env") and container["name"] in ENV_OWNED:
            raise UserError(f"{where}: env of container {container['name']!r} cannot be patched: "
                            "set it in the TrainJob's trainer.env (initializer.*.env for an initializer)")
        upsert_env(container.setdefault("env", []), *(patch.get("env") or []))
        merge_by(container.setdefault("volumeMounts", []), patch.get("volumeMounts") or [], "mountPath")
        if patch.get("securityContext") is not None:
            container["securityContext"] = merged(container.get("securityContext"), patch["securityContext"])
        for key in ("env", "volumeMounts"):
            if not container[key]:
                del container[key]


def merge_by(items: list[dict], patches: list[dict], key: str) -> None:
    """A strategic merge of list-map items: an item of the same key merged into where it stands, a new one
    appended."""
    for patch in patches:
        same = next((item for item in items if item.get(key) == patch.get(key)), None)
        if same is None:
            items.append(copy.deepcopy(patch))
        else:
            same.update(merged(same, patch))


def merged(base: object, patch: object) -> object:
    """Maps merged key by key, all the way down; anything else (a list, a value) replaced by the patch's."""
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(base)
    for key, value in patch.items():
        result[key] = merged(base.get(key), value)
    return result


def without_local_effect(patches: object) -> list[str]:
    """The fields of :data:`NO_LOCAL_EFFECT` that ``patches`` (a TrainJob's ``spec.runtimePatches``) set on a pod or
    its containers, in the order first set: the local backend leaves them out."""
    found: list[str] = []
    for spec in patched_pod_specs(patches):
        containers = [c for key in CONTAINER_LISTS for c in spec.get(key) or [] if isinstance(c, dict)]
        found += [key for key in NO_LOCAL_EFFECT if spec.get(key) or any(c.get(key) for c in containers)]
    return list(dict.fromkeys(found))


def patched_pod_specs(patches: object) -> list[dict]:
    """The pod specs ``patches`` give, one per replicatedJob patched, in order."""
    specs = []
    for patch in patches if isinstance(patches, list) else []:
        template = ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}) if isinstance(patch, dict) else {}
        for job_patch in (template.get("spec") or {}).get("replicatedJobs") or []:
            specs.append((((job_patch.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {})
    return specs
