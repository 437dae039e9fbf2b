"""Talking to a Kubernetes API server without the official client (see client.py for why)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainctl import API_GROUP

if TYPE_CHECKING:
    from trainctl.kube.client import Resource

JOB_VERSION = "v1"


def job_resource(framework) -> Resource:
    """The REST collection of one job kind: /apis/kubeflow.org/v1/.../pytorchjobs."""
    from trainctl.kube.client import Resource  # here: the client's imports (http, ssl) stay out of the ground rules

    return Resource(API_GROUP, JOB_VERSION, framework.plural, kind=framework.kind)
