"""A code snapshot's ConfigMaps on a cluster: uploaded once per hash, owned by every job using them.

Submit runs :func:`upload` (create the ConfigMaps that do not exist yet; existing ones are
found by a metadata-only read, so unchanged code is not sent again), creates the job, then
:func:`own` adds the job to each ConfigMap's ownerReferences, so the cluster's garbage
collector removes them with the last job. Uploading before the job exists means its pods
never wait for a volume; owning after it exists is the only way to know its uid. If any
step fails, :func:`undo` removes what this submit created and the job is deleted again.

``trainctl delete`` calls :func:`release`, which deletes a ConfigMap whose owners are all gone:
as it deletes pods itself, a cluster without a collector (or a slow one) keeps nothing.
Every write is conditional on the resourceVersion read, so a submit that adds itself as an
owner at the same moment wins over a delete.
"""

from __future__ import annotations

from trainctl.backends.kube.resources import collection_of
from trainctl.code import pods
from trainctl.code.snapshot import Snapshot
from trainctl.core.trainjob import is_trainjob
from trainctl.errors import UserError
from trainctl.frameworks import by_kind
from trainctl.kube import client as kube

RETRIES = 5


def upload(client: kube.Client, snapshot: Snapshot, namespace: str) -> list[tuple[str, str]]:
    """Create the snapshot's missing ConfigMaps; (name, resourceVersion) of those created now."""
    created = []
    for body in pods.config_maps(snapshot, namespace):
        name = body["metadata"]["name"]
        if read(client, name, namespace) is None and (version := create(client, body, namespace)):
            created.append((name, version))
    return created


def own(client: kube.Client, snapshot: Snapshot, namespace: str, job: dict) -> None:
    """Make ``job`` an owner of each of the snapshot's ConfigMaps (recreating one collected meanwhile)."""
    meta = job["metadata"]
    ref = {"apiVersion": job["apiVersion"], "kind": job["kind"], "name": meta["name"], "uid": meta["uid"]}
    for body in pods.config_maps(snapshot, namespace):
        for _ in range(RETRIES):
            if add_owner(client, body, namespace, ref):
                break
        else:
            raise UserError(f"ConfigMap {body['metadata']['name']} kept changing while job {meta['name']} was added "
                            "to its owners: submit again")


def add_owner(client: kube.Client, body: dict, namespace: str, ref: dict) -> bool:
    """One try; False when the ConfigMap changed (or went) under it."""
    name = body["metadata"]["name"]
    current = read(client, name, namespace)
    if current is None:
        return bool(create(client, {**body, "metadata": {**body["metadata"], "ownerReferences": [ref]}}, namespace))
    refs = current.get("ownerReferences") or []
    if any(r.get("uid") == ref["uid"] for r in refs):
        return True
    patch = {"metadata": {"resourceVersion": current["resourceVersion"], "ownerReferences": [*refs, ref]}}
    try:
        client.patch(kube.CONFIGMAPS, name, patch, namespace)
        return True
    except kube.ApiError as error:
        if error.status in (404, 409):
            return False
        raise


def undo(client: kube.Client, created: list[tuple[str, str]], namespace: str) -> None:
    """Delete what :func:`upload` created, unless another job took it meanwhile (its resourceVersion moved)."""
    for name, version in created:
        delete_if_present(client, name, namespace, version)


def release(client: kube.Client, job: dict) -> None:
    """After ``job`` is deleted: delete each of its ConfigMaps that no existing job owns any more."""
    namespace, uid = job["metadata"]["namespace"], job["metadata"].get("uid")
    for name in config_map_names(job):
        current = read(client, name, namespace)
        refs = (current or {}).get("ownerReferences") or []
        if current is None or not any(r.get("uid") == uid for r in refs):
            continue  # not one of ours (applied with kubectl, say): whoever made it removes it
        if not any(owner_exists(client, r, namespace) for r in refs if r.get("uid") != uid):
            delete_if_present(client, name, namespace, current["resourceVersion"])


def config_map_names(job: dict) -> list[str]:
    """The snapshot ConfigMaps the job's pod templates mount (a TrainJob's: those its runtime patches mount)."""
    names = []
    for pod in pod_specs(job):
        for volume in pod.get("volumes") or []:
            if volume.get("name") == pods.CHUNKS_VOLUME:
                names += [s["configMap"]["name"] for s in volume["projected"]["sources"] if "configMap" in s]
    return list(dict.fromkeys(names))


def pod_specs(job: dict) -> list[dict]:
    """The pod specs of a v1 job's replicas, or of a TrainJob's runtime patches."""
    if is_trainjob(job):
        return [(((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
                for patch in job.get("spec", {}).get("runtimePatches") or []
                for rj in (((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec") or {}).get(
                    "replicatedJobs") or []]
    framework = by_kind(job["kind"])
    return [spec.get("template", {}).get("spec") or {}
            for spec in (job.get("spec", {}).get(framework.replica_spec_field) or {}).values()]


def owner_exists(client: kube.Client, ref: dict, namespace: str) -> bool:
    try:
        resource = collection_of(ref.get("kind", ""))
    except (KeyError, UserError):
        return True  # an owner trainctl does not know: keep the ConfigMap for it
    try:
        return client.get(resource, ref.get("name", ""), namespace)["metadata"].get("uid") == ref.get("uid")
    except kube.ApiError as error:
        if error.status == 404:
            return False
        raise


def read(client: kube.Client, name: str, namespace: str) -> dict | None:
    """The ConfigMap's metadata, or None when it does not exist."""
    try:
        return client.get_metadata(kube.CONFIGMAPS, name, namespace)["metadata"]
    except kube.ApiError as error:
        if error.status == 404:
            return None
        raise


def create(client: kube.Client, body: dict, namespace: str) -> str | None:
    """The new ConfigMap's resourceVersion; None when another submit created it first."""
    try:
        return client.create(kube.CONFIGMAPS, body, namespace)["metadata"]["resourceVersion"]
    except kube.ApiError as error:
        if error.status == 409:
            return None
        raise


def delete_if_present(client: kube.Client, name: str, namespace: str, resource_version: str | None) -> None:
    try:
        client.delete(kube.CONFIGMAPS, name, namespace, resource_version=resource_version)
    except kube.ApiError as error:
        if error.status not in (404, 409):  # gone already, or just taken by another job: keep it
            raise
