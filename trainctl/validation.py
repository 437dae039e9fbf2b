"""Check a kubeflow.org/v1 job before anything is applied.

Two layers, both run on every submit, apply and dry-run:

1. **Schema**: the resource is walked against the project's own CRD schema
   (:mod:`trainctl.crds`): unknown fields, types, enums, int-or-string values.
   A small walker of our own keeps the CLI fast (no jsonschema at run time) and
   names the exact field path in its message.
2. **Admission**: the rules the Kubeflow webhooks enforce (contract section 3),
   plus the ones upstream forgets and that otherwise fail late or loop forever:
   replicas 0 or negative, restart policy values, env names, quantities,
   negative run-policy numbers, names too long for their pod names.

Every problem raises :class:`~trainctl.errors.UserError` with one line:
``pytorchjob "mnist": spec.pytorchReplicaSpecs.Worker.replicas: must be at least 1 (got 0)``.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from trainctl import API_VERSION
from trainctl.errors import UserError
from trainctl.frameworks import Framework, by_kind

DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
QUANTITY = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?")
# Room left in a 63-character pod name for "-<replica type>-<index>".
LONGEST_SUFFIX = len("-evaluator-99")
JSON_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "number": (int, float)}


class Invalid(Exception):
    """A problem at one field path; turned into a UserError with the job's name."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")


def validate(resource: Any, *, source: str | None = None) -> dict:
    """Return ``resource`` unchanged if it is a valid job; raise UserError otherwise."""
    prefix = f"{source}: " if source else ""
    if not isinstance(resource, dict):
        raise UserError(f"{prefix}expected a kubeflow.org/v1 job mapping, got {type(resource).__name__}")
    framework = _framework_of(resource, prefix)
    name = (resource.get("metadata") or {}).get("name") if isinstance(resource.get("metadata"), dict) else None
    label = f'{prefix}{framework.singular} "{name}": ' if name else f"{prefix}{framework.singular}: "
    try:
        check_schema(resource, framework)
        check_admission(resource, framework)
    except Invalid as problem:
        raise UserError(f"{label}{problem}") from None
    return resource


def _framework_of(resource: dict, prefix: str) -> Framework:
    api_version, kind = resource.get("apiVersion"), resource.get("kind")
    if api_version != API_VERSION:
        raise UserError(f"{prefix}apiVersion: must be {API_VERSION} (got {api_version!r})")
    if not isinstance(kind, str):
        raise UserError(f"{prefix}kind: missing; use one of PyTorchJob, TFJob, XGBoostJob, MPIJob, PaddleJob, JAXJob")
    try:
        return by_kind(kind)
    except UserError as err:
        raise UserError(f"{prefix}kind: {err.message}") from None


# ---- schema -----------------------------------------------------------------

def check_schema(resource: dict, framework: Framework) -> None:
    walk(resource, _schema(framework.kind), "")


# The API server checks metadata itself (a CRD may only say "object"); we check the
# parts users write so that a bad label or annotation fails here, not at apply time.
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
METADATA = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
            "properties": {"name": {"type": "string"}, "namespace": {"type": "string"},
                           "labels": STRING_MAP, "annotations": STRING_MAP}}


@functools.cache
def _schema(kind: str) -> dict:
    from trainctl.crds import job_schema

    schema = job_schema(by_kind(kind))
    schema["properties"]["metadata"] = METADATA
    return schema


def walk(value: Any, schema: dict, path: str) -> None:
    """Check ``value`` against a structural schema node, recursively."""
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise Invalid(path, f"must be an integer or a string (got {_describe(value)})")
        return
    expected = schema.get("type")
    if expected is None:
        return
    if not _has_type(value, expected):
        raise Invalid(path, f"must be {_article(expected)} (got {_describe(value)})")
    if "enum" in schema and value not in schema["enum"]:
        raise Invalid(path, f"unsupported value {value!r}: use one of {', '.join(map(str, schema['enum']))}")
    if expected == "object":
        _walk_object(value, schema, path)
    elif expected == "array":
        for index, item in enumerate(value):
            walk(item, schema.get("items", {}), f"{path}[{index}]")


def _walk_object(value: dict, schema: dict, path: str) -> None:
    properties = schema.get("properties")
    extra = schema.get("additionalProperties")
    for key in schema.get("required", ()):
        if key not in value:
            raise Invalid(_join(path, key), "required field is missing")
    for key, item in value.items():
        child = _join(path, str(key))
        if properties is not None and key in properties:
            walk(item, properties[key], child)
        elif isinstance(extra, dict):
            walk(item, extra, child)
        elif properties is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
            known = ", ".join(sorted(properties)) or "none"
            raise Invalid(child, f"unknown field (known fields here: {_shorten(known)})")


def _has_type(value: Any, expected: str) -> bool:
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    python_type = JSON_TYPES.get(expected)
    return python_type is None or isinstance(value, python_type)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _describe(value: Any) -> str:
    kinds = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    for python_type, word in kinds.items():
        if isinstance(value, python_type):
            return f"{word} {_shorten(repr(value))}" if python_type in (str, bool) else word
    return f"{type(value).__name__} {value!r}"


def _article(expected: str) -> str:
    return {"object": "a mapping", "array": "a list", "integer": "an integer"}.get(expected, f"a {expected}")


def _shorten(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---- admission ----------------------------------------------------------------

def check_admission(resource: dict, framework: Framework) -> None:
    check_name(resource.get("metadata") or {})
    spec = resource.get("spec")
    if spec is None:
        raise Invalid("spec", f"required (with spec.{framework.replica_spec_field})")
    field = framework.replica_spec_field
    replica_specs = spec.get(field)
    if not replica_specs:
        raise Invalid(f"spec.{field}", f"must list at least one replica type ({', '.join(framework.replica_types)})")
    for key, replica_spec in replica_specs.items():
        check_replica_spec(framework, key, replica_spec or {}, f"spec.{field}.{key}")
    check_roles(framework, replica_specs, f"spec.{field}")
    check_run_policy(spec.get("runPolicy") or {})
    if framework.kind == "PyTorchJob":
        check_pytorch(spec, replica_specs)


def check_name(metadata: dict) -> None:
    name = metadata.get("name")
    if not name:
        raise Invalid("metadata.name", "required: give the job a name (lower-case letters, digits and '-')")
    longest = 63 - LONGEST_SUFFIX
    if not DNS_1035.fullmatch(name):
        raise Invalid("metadata.name", f"{name!r} is not a DNS-1035 label: use lower-case letters, digits and '-', "
                      "starting with a letter and ending with a letter or digit")
    if len(name) > longest:
        raise Invalid("metadata.name", f"{len(name)} characters is too long: at most {longest}, so that pod "
                      "names <name>-<replica type>-<index> stay within 63")


def check_replica_spec(framework: Framework, key: str, replica_spec: dict, path: str) -> None:
    if key not in framework.replica_types:
        canonical = framework.canonical_replica_type(key)
        hint = f"write {canonical!r}" if canonical else f"use one of {', '.join(framework.replica_types)}"
        raise Invalid(path, f"unsupported replica type for {framework.kind} ({hint})")
    replicas = replica_spec.get("replicas")
    if replicas is not None and replicas < 1:
        raise Invalid(f"{path}.replicas", f"must be at least 1 (got {replicas}); remove the replica type instead")
    pod_spec = ((replica_spec.get("template") or {}).get("spec")) or {}
    containers = pod_spec.get("containers") or []
    if not containers:
        raise Invalid(f"{path}.template.spec.containers", f"must have at least one container named {framework.container!r}")
    for index, container in enumerate(containers):
        check_container(container, f"{path}.template.spec.containers[{index}]")
    if framework.kind != "MPIJob" and not any(c.get("name") == framework.container for c in containers):
        raise Invalid(f"{path}.template.spec.containers",
                      f"must have a container named {framework.container!r} (the one the operator wires)")


def check_container(container: dict, path: str) -> None:
    for required in ("name", "image"):
        if not container.get(required):
            raise Invalid(f"{path}.{required}", "required")
    for index, env in enumerate(container.get("env") or []):
        name = env.get("name", "")
        if not ENV_NAME.fullmatch(name):
            raise Invalid(f"{path}.env[{index}].name", f"{name!r} is not a valid variable name (letters, digits, '_', '-', '.')")
    for section in ("limits", "requests"):
        for resource_name, amount in ((container.get("resources") or {}).get(section) or {}).items():
            if not QUANTITY.fullmatch(str(amount)):
                raise Invalid(f"{path}.resources.{section}.{resource_name}",
                              f"{amount!r} is not a quantity (examples: 2, 500m, 4Gi)")


def check_roles(framework: Framework, replica_specs: dict, path: str) -> None:
    master = replica_specs.get("Master")
    if framework.kind in ("PyTorchJob", "XGBoostJob") and master is not None and (master or {}).get("replicas") != 1:
        raise Invalid(f"{path}.Master.replicas", f"must be 1 (got {(master or {}).get('replicas')})")
    if framework.kind == "XGBoostJob" and master is None:
        raise Invalid(f"{path}.Master", "must be present: XGBoost needs a Master replica to host the tracker")
    if framework.kind == "TFJob" and "Chief" in replica_specs and "Master" in replica_specs:
        raise Invalid(path, "must not have both Chief and Master (they are the same role)")
    if framework.kind == "TFJob":
        for role in ("Chief", "Master"):
            if (replica_specs.get(role) or {}).get("replicas", 1) > 1:
                raise Invalid(f"{path}.{role}.replicas", "must be 1")
    if framework.kind == "MPIJob":
        if "Launcher" not in replica_specs:
            raise Invalid(f"{path}.Launcher", "must be present: the launcher runs mpirun")
        if (replica_specs["Launcher"] or {}).get("replicas", 1) != 1:
            raise Invalid(f"{path}.Launcher.replicas", "must be 1 (there is exactly one launcher)")


def check_run_policy(run_policy: dict) -> None:
    for field in ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit"):
        value = run_policy.get(field)
        if value is not None and value < 0:
            raise Invalid(f"spec.runPolicy.{field}", f"must not be negative (got {value})")
    managed_by = run_policy.get("managedBy")
    allowed = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")
    if managed_by is not None and managed_by not in allowed:
        raise Invalid("spec.runPolicy.managedBy", f"unsupported value {managed_by!r}: use one of {', '.join(allowed)}")


def check_pytorch(spec: dict, replica_specs: dict) -> None:
    elastic = spec.get("elasticPolicy")
    if elastic is not None and "Worker" not in replica_specs:
        raise Invalid("spec.pytorchReplicaSpecs.Worker", "must be configured if elastic policy is used")
    if elastic and elastic.get("nProcPerNode") is not None and spec.get("nprocPerNode") is not None:
        raise Invalid("spec.elasticPolicy.nProcPerNode", "must not be used with spec.nprocPerNode")
