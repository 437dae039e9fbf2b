"""Generate trainctl/schemas/*.json from the Kubernetes client's models.

The job CRDs embed a core/v1 PodTemplateSpec in every replica spec; Kubeflow Trainer v2's
runtimes (trainctl/core/trainer_crds.py) embed batch/v1 JobSpecs, each with such a pod
template, and PersistentVolumeClaim templates. Rather than copying someone else's CRD, we
derive a structural OpenAPI v3 schema from the typed models of the official Python client
(``openapi_types`` gives every field's type), so the schemas track the Kubernetes version we
pin in pyproject.toml. Run after bumping the client:

    python tools/gen_pod_schema.py          # rewrite the files
    python tools/gen_pod_schema.py --check  # exit 1 if a committed file is stale
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

SCHEMAS = Path(__file__).resolve().parent.parent / "trainctl" / "schemas"
# file -> (the client's model, the properties left out: a pod's status is the kubelet's; a JobSpec's pod
# template is podtemplatespec.json, which the CRD generators put in its place rather than store it twice)
TARGETS = {
    "podtemplatespec.json": ("V1PodTemplateSpec", ("status",)),
    "jobspec.json": ("V1JobSpec", ("template",)),
    "persistentvolumeclaim.json": ("V1PersistentVolumeClaim", ()),
}

# Fields the client types as plain strings or string maps that Kubernetes actually
# accepts as resource quantities (``cpu: 1`` as well as ``cpu: "500m"``).
QUANTITY_MAPS = {"limits", "requests", "capacity", "overhead", "hard", "allocatedResources"}
QUANTITY_FIELDS = {"sizeLimit", "divisor"}
INT_OR_STRING = {"x-kubernetes-int-or-string": True}
# Kept opaque: server-set or free-form.
METADATA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
    },
}
SCALARS = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
    "datetime": {"type": "string", "format": "date-time"},
    "object": INT_OR_STRING,
}


def schema_for(type_name: str, field: str, models) -> dict:
    """Translate one client type annotation (``list[V1Container]``, ``dict(str, str)``...)."""
    if field in QUANTITY_FIELDS:
        return dict(INT_OR_STRING)
    if match := re.fullmatch(r"[Ll]ist\[(.+)\]", type_name):
        return {"type": "array", "items": schema_for(match[1], "", models)}
    if match := re.fullmatch(r"[Dd]ict[(\[]str, (.+)[)\]]", type_name):
        value = INT_OR_STRING if field in QUANTITY_MAPS else schema_for(match[1], "", models)
        return {"type": "object", "additionalProperties": dict(value)}
    if type_name in SCALARS:
        return dict(SCALARS[type_name])
    if type_name == "V1ObjectMeta":
        return json.loads(json.dumps(METADATA))
    return model_schema(getattr(models, type_name), models)


def model_schema(model, models) -> dict:
    properties = {
        model.attribute_map[attr]: schema_for(type_name, model.attribute_map[attr], models)
        for attr, type_name in sorted(model.openapi_types.items())
    }
    return {"type": "object", "properties": properties}


def generate(model: str, left_out: tuple[str, ...]) -> str:
    import kubernetes.client as models

    schema = model_schema(getattr(models, model), models)
    for name in left_out:
        schema["properties"].pop(name, None)
    return json.dumps(schema, sort_keys=True, separators=(",", ":")) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed schema is stale")
    args = parser.parse_args()
    stale = 0
    for name, (model, left_out) in TARGETS.items():
        target, text = SCHEMAS / name, generate(model, left_out)
        if not args.check:
            target.write_text(text)
            print(f"wrote {target} ({len(text)} bytes)")
        elif (target.read_text() if target.exists() else "") != text:
            print(f"{target} is stale: run python tools/gen_pod_schema.py", file=sys.stderr)
            stale = 1
    return stale


if __name__ == "__main__":
    sys.exit(main())
