"""Where the controller keeps the runtime each TrainJob runs on: a ConfigMap ``<job>-runtime-snapshot`` it writes and
the TrainJob owns (so it goes with the job), as upstream keeps its snapshot.

Why a snapshot: a TrainJob runs on its runtime as the first reconcile finds it, so that a runtime edited or deleted
later changes no job already started (docs/trainer-v2.md). Why not in the TrainJob: whoever may create a TrainJob
writes its annotations too, and a runtime taken from there would let them run pods of any template, past the
admin's runtimes. The TrainJob's ``trainctl.io/runtime-snapshot`` annotation is only a copy for its readers
(``trainctl status``, ``logs``), put back by the controller whenever it differs from the kept one. Who may write
ConfigMaps in the namespace could still change the kept copy, as upstream's: grant TrainJobs without ConfigMaps
where a user must not choose the pods' template.
"""

from __future__ import annotations

from trainctl import TRAINER_API_VERSION
from trainctl.controller.executor import JobKey
from trainctl.controller.pods import controller_uid
from trainctl.core.trainer_crds import TRAINJOB
from trainctl.kube.client import CONFIGMAPS, ApiError, Client

SUFFIX = "-runtime-snapshot"
DATA_KEY = "runtime"  # the runtime's JSON, as the TrainJob's annotation holds it


def config_map_name(trainjob: str) -> str:
    return trainjob + SUFFIX


class RuntimeSnapshots:
    """The kept runtime of each TrainJob, read from its ConfigMap once per job and controller."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.known: dict[JobKey, tuple[str, str]] = {}  # key -> (the TrainJob's uid, its runtime's JSON)

    def kept(self, key: JobKey, trainjob: dict) -> str | None:
        """The runtime kept for this TrainJob (this uid: not a gone one's of the same name); None if none is."""
        uid = trainjob["metadata"].get("uid")
        if key in self.known and self.known[key][0] == uid:
            return self.known[key][1]
        try:
            found = self.client.get(CONFIGMAPS, config_map_name(key[2]), key[1])
        except ApiError as error:
            if error.status == 404:
                return None
            raise
        text = (found.get("data") or {}).get(DATA_KEY)
        if controller_uid(found) != uid or not isinstance(text, str):
            return None  # a gone job's, which the garbage collector has not deleted yet, or not the controller's
        self.known[key] = (uid, text)
        return text

    def keep(self, key: JobKey, trainjob: dict, text: str) -> None:
        """Keep ``text`` as the TrainJob's runtime, in place of a ConfigMap of that name that is not its own."""
        metadata = trainjob["metadata"]
        owner = {"apiVersion": TRAINER_API_VERSION, "kind": TRAINJOB, "name": metadata["name"], "uid": metadata["uid"],
                 "controller": True, "blockOwnerDeletion": True}
        body = {"apiVersion": "v1", "kind": "ConfigMap", "data": {DATA_KEY: text},
                "metadata": {"name": config_map_name(key[2]), "namespace": key[1], "ownerReferences": [owner]}}
        try:
            self.client.create(CONFIGMAPS, body, key[1])
        except ApiError as error:
            if error.status != 409:
                raise
            existing = self.client.get(CONFIGMAPS, body["metadata"]["name"], key[1])
            body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
            self.client.replace(CONFIGMAPS, body, key[1])
        self.known[key] = (metadata["uid"], text)

    def forget(self, key: JobKey) -> None:
        """The TrainJob is gone: its ConfigMap goes with it (the garbage collector, its owner reference)."""
        self.known.pop(key, None)
