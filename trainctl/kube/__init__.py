"""Kubernetes' own rules and its API, without the official client (see client.py for why).

The rules hold with no cluster at all: names (names.py: DNS labels, label keys and values, env
names, ports), label selectors (selectors.py), quantities (quantities.py) and the one reader of a
pod's status (pods.py). The REST client (client.py, config.py, errors.py) is imported only by what
talks to a cluster: ``import trainctl.kube`` loads no HTTP machinery. The package imports nothing of
trainctl's but the ground floor (errors); the core, the backends and the controller use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainctl import API_GROUP, TRAINER_API_VERSION

if TYPE_CHECKING:
    from trainctl.kube.client import Resource

JOB_VERSION = "v1"


def job_api_version(framework) -> str:
    """The apiVersion of a job kind: kubeflow.org/v1, or Trainer v2's for a TrainJob."""
    return getattr(framework, "api_version", None) or f"{API_GROUP}/{JOB_VERSION}"


def job_resource(framework) -> Resource:
    """The REST collection of one job kind: /apis/kubeflow.org/v1/.../pytorchjobs (a TrainJob's: Trainer v2's)."""
    from trainctl.kube.client import Resource  # here: the client's imports (http, ssl) stay out of the ground rules

    group, version = job_api_version(framework).split("/")
    return Resource(group, version, framework.plural, kind=framework.kind)


def trainer_resource(kind: str, namespaced: bool = True) -> Resource:
    """The REST collection of a Kubeflow Trainer v2 kind: /apis/trainer.kubeflow.org/v1alpha1/.../trainjobs."""
    from trainctl.kube.client import Resource

    group, version = TRAINER_API_VERSION.split("/")
    return Resource(group, version, kind.lower() + "s", namespaced=namespaced, kind=kind)
