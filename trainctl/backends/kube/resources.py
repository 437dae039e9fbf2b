"""Which REST collection holds a job of a kind: shared by the backend and the code snapshot's owners."""

from __future__ import annotations

from trainctl.core.trainer_crds import TRAINJOB
from trainctl.frameworks import by_kind
from trainctl.kube import client as kube
from trainctl.kube import job_resource, trainer_resource


def collection_of(kind: str) -> kube.Resource:
    """The REST collection of the jobs of ``kind``: a kubeflow.org/v1 kind's, or the TrainJobs'."""
    return trainer_resource(TRAINJOB) if kind == TRAINJOB else job_resource(by_kind(kind))
