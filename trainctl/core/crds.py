"""The project's own CustomResourceDefinitions for the six kubeflow.org/v1 job kinds.

Generated from the per-framework fact modules plus the pod template schema in
``schemas/podtemplatespec.json`` (itself generated from the Kubernetes client by
tools/gen_pod_schema.py), never copied from upstream. The same schemas drive
:mod:`trainctl.core.validation`, so what ``trainctl crds`` installs and what the CLI
checks before applying are one thing.
"""

from __future__ import annotations

import copy
import functools
import json
from importlib import resources

from trainctl import API_GROUP, API_VERSION
from trainctl.frameworks import ALL, Framework
from trainctl.frameworks._schema import BOOLEAN, INT32, STRING, obj
from trainctl.frameworks.base import CLEAN_POD_POLICIES, RESTART_POLICIES

INT64 = {"type": "integer", "format": "int64"}
#: the API server stores a CRD's ``format`` but does not enforce an integer format's range (tested on
#: 1.20: an int32 field takes 300000000000), so int32 nodes also state it as minimum/maximum. int64 needs
#: none: a larger number decodes as a float and fails "must be of type integer"; and an explicit
#: maximum of 2**63 - 1 is read as a float64 that wraps to -2**63, rejecting every value.
INT32_RANGE = (-2**31, 2**31 - 1)
#: the controllers upstream's webhooks accept (contract section 3); an enum lets the API server itself
#: reject anything else, as upstream's webhooks do, with no webhook to run. Its immutability is a CEL
#: rule: enforced from Kubernetes 1.25; older API servers (1.20 in the tests) drop the rule unread.
MANAGED_BY = ["kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"]
STRING_MAP = {"type": "object", "additionalProperties": STRING}
QUANTITY_MAP = {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": True}}

RUN_POLICY = obj(
    cleanPodPolicy={"type": "string", "enum": list(CLEAN_POD_POLICIES)},
    ttlSecondsAfterFinished=INT32,
    activeDeadlineSeconds=INT64,
    backoffLimit=INT32,
    schedulingPolicy=obj(
        minAvailable=INT32,
        queue={**STRING, "x-kubernetes-validations": [
            {"rule": "self == oldSelf", "message": "spec.runPolicy.schedulingPolicy.queue is immutable"}
        ]},
        minResources=QUANTITY_MAP,
        priorityClass=STRING,
        scheduleTimeoutSeconds=INT32,
    ),
    suspend={**BOOLEAN, "default": False},
    managedBy={**STRING, "enum": MANAGED_BY, "x-kubernetes-validations": [
        {"rule": "self == oldSelf", "message": "spec.runPolicy.managedBy is immutable"}
    ]},
)

CONDITION = obj(
    type=STRING, status=STRING, reason=STRING, message=STRING,
    lastUpdateTime={"type": "string", "format": "date-time"},
    lastTransitionTime={"type": "string", "format": "date-time"},
)
# upstream's fields only: what trainctl keeps of restarts is in the job's annotation trainctl.io/restarts
# (trainctl/core/restarts.py), so a status it writes validates against upstream's CRD as well
REPLICA_STATUS = obj(active=INT32, succeeded=INT32, failed=INT32, selector=STRING,
                     labelSelector={"type": "object", "x-kubernetes-preserve-unknown-fields": True})
STATUS = obj(
    conditions={"type": "array", "items": {**CONDITION, "required": ["type", "status"]}},
    replicaStatuses={"type": "object", "additionalProperties": REPLICA_STATUS},
    startTime={"type": "string", "format": "date-time"},
    completionTime={"type": "string", "format": "date-time"},
    lastReconcileTime={"type": "string", "format": "date-time"},
)


@functools.cache
def pod_template_schema() -> dict:
    text = resources.files("trainctl").joinpath("schemas/podtemplatespec.json").read_text()
    return json.loads(text)


def replica_spec_schema() -> dict:
    return obj(
        replicas=INT32,
        restartPolicy={"type": "string", "enum": list(RESTART_POLICIES)},
        template=pod_template_schema(),
    )


def job_schema(framework: Framework) -> dict:
    """The openAPIV3Schema of one job kind."""
    spec = obj(
        runPolicy=RUN_POLICY,
        **{framework.replica_spec_field: {"type": "object", "additionalProperties": replica_spec_schema()}},
        **framework.spec_properties,
    )
    spec["required"] = [framework.replica_spec_field]
    return obj(
        apiVersion=STRING,
        kind=STRING,
        metadata={"type": "object"},
        spec=spec,
        status=STATUS,
    )


def with_format_ranges(schema: dict) -> dict:
    """``schema`` with every int32 node bounded by the int32 range where it states no bound of its own (changed
    in place)."""
    if schema.get("type") == "integer" and schema.get("format") == "int32":
        schema.setdefault("minimum", INT32_RANGE[0])
        schema.setdefault("maximum", INT32_RANGE[1])
    for child in (schema.get("properties") or {}).values():
        with_format_ranges(child)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            with_format_ranges(schema[key])
    return schema


def crd(framework: Framework) -> dict:
    """The apiextensions.k8s.io/v1 CRD of one job kind."""
    version: dict = {
        "name": API_VERSION.split("/")[1],
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": with_format_ranges(copy.deepcopy(job_schema(framework)))},
        "subresources": {"status": {}},
        "additionalPrinterColumns": [
            {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
    }
    if framework.scalable:
        field = framework.replica_spec_field
        version["subresources"]["scale"] = {
            "specReplicasPath": f".spec.{field}.Worker.replicas",
            "statusReplicasPath": ".status.replicaStatuses.Worker.active",
            "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
        }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{framework.plural}.{API_GROUP}",
            "labels": {"app.kubernetes.io/part-of": "trainctl"},
        },
        "spec": {
            "group": API_GROUP,
            "names": {
                "kind": framework.kind,
                "listKind": f"{framework.kind}List",
                "plural": framework.plural,
                "singular": framework.singular,
                "categories": ["kubeflow", "trainctl"],
            },
            "scope": "Namespaced",
            "versions": [version],
        },
    }


def all_crds() -> list[dict]:
    return [crd(framework) for framework in ALL]
