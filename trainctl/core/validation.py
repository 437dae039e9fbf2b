"""Check a kubeflow.org/v1 job before anything is applied.

Three layers, all run on every submit, apply and dry-run (and ``Client.submit``):

0. **JSON**: the resource must be plain JSON data, because that is what reaches the API
   server or the local store: mappings with string keys, lists, strings (valid Unicode),
   finite numbers, integers within int64, booleans and null; at most
   :data:`~trainctl.yamlsafe.MAX_NODES` values and :data:`~trainctl.yamlsafe.MAX_DEPTH`
   levels. The walk is iterative with that budget, so a cyclic or exponentially shared
   structure handed to the Python API is refused instead of hanging.
1. **Schema**: the resource is walked against the project's own CRD schema
   (:mod:`trainctl.core.crds`): unknown fields, types, enums, int-or-string values.
   A small walker of our own keeps the CLI fast (no jsonschema at run time) and
   names the exact field path in its message. Integers are held to their CRD
   ``format`` (int32 or int64), as the API server would.
2. **Admission**: the rules the Kubeflow webhooks enforce (contract section 3),
   plus the ones upstream forgets and that otherwise fail late or loop forever:
   replicas 0 or negative, restart policy values, env names, quantities,
   negative run-policy numbers, names too long for their pod names, namespaces that
   are not DNS-1123 labels (a namespace is also a directory of the local store),
   extended resources (``nvidia.com/gpu``) that are not whole numbers.
3. **Pods**: what the API server's own validation of a pod refuses, checked on each replica's
   template because the operator's pods would otherwise never appear (Kubernetes' rules, in
   :mod:`trainctl.kube.names`): labels and annotations of the job and of each template,
   container and volume names, unique names, ``containerPort`` 1..65535, port names and
   protocols, env names and ``value`` with ``valueFrom``, volume mounts of undeclared
   volumes, requests above limits. Plus one rule a node enforces only when it starts the
   container: no NUL character in what the process receives (command, args, env values,
   workingDir), since execve ends a C string there, and no word or env entry longer than Linux's
   MAX_ARG_STRLEN (kube.names); the local backend would fail to start it.

Every problem raises :class:`~trainctl.errors.UserError` with one line:
``pytorchjob "mnist": spec.pytorchReplicaSpecs.Worker.replicas: must be at least 1 (got 0)``.
"""

from __future__ import annotations

import functools
import math
import re
from typing import Any

from trainctl import API_VERSION, TRAINER_API_VERSION
from trainctl.core.trainer_crds import TRAINER_KINDS, TRAINJOB
from trainctl.core.trainjob import INITIALIZERS, MAX_PLANNED_PODS, check_trainjob, is_trainjob
from trainctl.errors import UserError, shortened
from trainctl.frameworks import ALL, KINDS, Framework, by_kind
from trainctl.kube.names import (
    TAINT_EFFECTS,
    dns_label_problem,
    env_name_problem,
    label_key_problem,
    label_value_problem,
    namespace_problem,
    port_name_problem,
    port_number_problem,
    process_strings_problem,
)
from trainctl.yamlsafe import MAX_DEPTH, MAX_NODES

DNS_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
WHOLE_NUMBER = re.compile(r"\d+")
SURROGATE = re.compile("[\ud800-\udfff]")  # what undecodable bytes become in Python strings
INTEGER_RANGES = {"int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1)}
QUANTITY = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[numkMGTPE]|[KMGTPE]i)?")
# Room left in a 63-character pod name for "-<replica type>-<index>" (up to 99 replicas of the longest type).
LONGEST_SUFFIX = max(len(f"-{rtype}-99") for framework in ALL for rtype in framework.replica_types)
JSON_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "number": (int, float)}
ANNOTATIONS_MAX_BYTES = 256 * 1024  # the API server's limit on an object's annotations, keys and values
PORT_PROTOCOLS = ("TCP", "UDP", "SCTP")


class Invalid(Exception):
    """A problem at one field path; turned into a UserError with the job's name."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")


def validate(resource: Any, *, source: str | None = None) -> dict:
    """Return ``resource`` unchanged if it is a valid job; raise UserError otherwise."""
    prefix = f"{source}: " if source else ""
    if not isinstance(resource, dict):
        raise UserError(f"{prefix}expected a kubeflow.org/v1 job mapping, got {type(resource).__name__}")
    if is_trainjob(resource):
        return _validated_trainjob(resource, prefix)
    framework = _framework_of(resource, prefix)
    try:
        check_json(resource)
        check_schema(resource, framework)
        check_admission(resource, framework)
    except Invalid as problem:
        raise UserError(f"{_label(resource, prefix, framework.singular)}{problem}") from None
    return resource


def _label(resource: dict, prefix: str, kind: str) -> str:
    """How a message names the resource: ``-f job.yaml: pytorchjob "mnist": ``."""
    name = (resource.get("metadata") or {}).get("name") if isinstance(resource.get("metadata"), dict) else None
    return f'{prefix}{kind} "{shortened(str(name))}": ' if name else f"{prefix}{kind}: "


def _validated_trainjob(resource: dict, prefix: str) -> dict:
    """A TrainJob, checked by the same layers as a v1 job against its own CRD's schema (trainer_crds), then what
    reading it needs (check_trainjob): nothing of it is planned before every number is known to be in bounds."""
    try:
        check_json(resource)
        decoded = _decoded(resource)
        walk(decoded, _trainjob_schema(), "")
        check_trainjob_admission(decoded)
    except Invalid as problem:
        raise UserError(f"{_label(resource, prefix, TRAINJOB)}{problem}") from None
    try:
        check_trainjob(resource)
    except UserError as problem:
        raise UserError(f"{prefix}{problem.message}") from None
    return resource


def _decoded(value: Any) -> Any:
    """``value`` as the API server decodes its JSON: a whole float is an integer (the SDK sends ``numNodes: 2.0``).
    Recursive: check_json bounded the depth and size first."""
    if isinstance(value, dict):
        return {key: _decoded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_decoded(item) for item in value]
    return int(value) if isinstance(value, float) and value.is_integer() else value


def check_runtime_document(runtime: dict, source: str | None = None) -> None:
    """A TrainingRuntime or ClusterTrainingRuntime given in a file, as apply and convert both take it: its CRD's
    schema, then at most one ML policy, one trainctl runs."""
    from trainctl.frameworks import policies

    prefix = f"{source}: " if source else ""
    try:
        check_json(runtime)
        walk(_decoded(runtime), _runtime_schema(), "")
    except Invalid as problem:
        raise UserError(f"{_label(runtime, prefix, str(runtime.get('kind')))}{problem}") from None
    try:
        policies.of(runtime["spec"].get("mlPolicy"), str(runtime["metadata"]["name"]))
    except UserError as problem:
        raise UserError(f"{prefix}{problem.message}") from None


def _framework_of(resource: dict, prefix: str) -> Framework:
    api_version, kind = resource.get("apiVersion"), resource.get("kind")
    if isinstance(kind, str) and kind.lower() in {known.lower() for known in TRAINER_KINDS}:
        _refuse_trainer_spelling(api_version, kind, prefix)
    if api_version != API_VERSION:
        raise UserError(f"{prefix}apiVersion: must be {API_VERSION} (got {api_version!r})")
    if not isinstance(kind, str):
        raise UserError(f"{prefix}kind: missing; use one of {', '.join(KINDS)}")
    try:
        return by_kind(kind)
    except UserError as err:
        raise UserError(f"{prefix}kind: {err.message}") from None


def _refuse_trainer_spelling(api_version: object, kind: str, prefix: str) -> None:
    """A Trainer v2 kind that is_trainjob did not take: its kind or its apiVersion misspelled (``Trainjob``)."""
    spelled = next(known for known in TRAINER_KINDS if known.lower() == kind.lower())
    if kind != spelled:
        raise UserError(f"{prefix}kind: {shortened(repr(kind))} is spelled {spelled} (kinds are case-sensitive)")
    if api_version != TRAINER_API_VERSION:
        raise UserError(f"{prefix}apiVersion: a {kind} is {TRAINER_API_VERSION} (got {shortened(repr(api_version))})")
    raise UserError(f"{prefix}kind: a {kind} runs the TrainJobs beside it in the same file; alone it is no job")


# ---- JSON -------------------------------------------------------------------

def check_json(resource: Any) -> None:
    """Refuse anything that is not plain JSON data; iterative and budgeted (see the module docstring)."""
    pending = [(resource, "", 0)]
    seen = 0
    while pending:
        value, path, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise Invalid(path, f"nested deeper than {MAX_DEPTH} levels (a structure that contains itself?)")
        if isinstance(value, dict):
            children = list(value.items())
            for key, _ in children:
                if not isinstance(key, str):
                    raise Invalid(_join(path, shortened(repr(key))), f"keys must be strings (got {_describe(key)})")
                _check_text(key, _join(path, key))
            pending.extend((item, _join(path, key), depth + 1) for key, item in children)
        elif isinstance(value, list):
            children = value
            pending.extend((item, f"{path}[{index}]", depth + 1) for index, item in enumerate(value))
        else:
            children = ()
            _check_scalar(value, path)
        seen += 1 + len(children)
        if seen > MAX_NODES:
            raise Invalid(path or "(resource)", f"more than {MAX_NODES:,} values (shared references count each time)")


def _check_scalar(value: Any, path: str) -> None:
    if isinstance(value, str):
        _check_text(value, path)
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        low, high = INTEGER_RANGES["int64"]
        if not low <= value <= high:
            raise Invalid(path, f"{shortened(str(value))} is outside the int64 range")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise Invalid(path, f"{value} is not a JSON number")
    else:
        raise Invalid(path, f"{_describe(value)} is not a JSON value: use a string, number, boolean, list or mapping")


def _check_text(text: str, path: str) -> None:
    bad = SURROGATE.search(text)
    if bad:
        raise Invalid(path, f"not valid Unicode (lone surrogate U+{ord(bad.group()):04X} at character {bad.start()}): "
                      "undecodable bytes cannot be stored")


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
    from trainctl.core.crds import job_schema

    schema = job_schema(by_kind(kind))
    schema["properties"]["metadata"] = METADATA
    return schema


@functools.cache
def _trainjob_schema() -> dict:
    from trainctl.core.trainer_crds import trainjob_schema

    schema = trainjob_schema()
    schema["properties"]["metadata"] = METADATA
    return schema


@functools.cache
def _runtime_schema() -> dict:
    from trainctl.core.trainer_crds import runtime_schema

    schema = runtime_schema()
    schema["properties"]["metadata"] = {**METADATA, "required": ["name"]}
    schema["required"] = ["metadata", "spec"]
    return schema


def walk(value: Any, schema: dict, path: str) -> None:
    """Check ``value`` against a structural schema node, recursively, with the bounds the API server enforces
    (minimum, maximum, maxLength, maxItems), as kubectl's strict field validation does."""
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
        raise Invalid(path, f"unsupported value {shortened(repr(value))}: use one of {', '.join(map(str, schema['enum']))}")
    if expected == "integer" and schema.get("format") in INTEGER_RANGES:
        low, high = INTEGER_RANGES[schema["format"]]
        if not low <= value <= high:
            raise Invalid(path, f"{value} is out of range: the field is an {schema['format']} (at most {high:,})")
    _check_bounds(value, schema, path)
    if expected == "object":
        _walk_object(value, schema, path)
    elif expected == "array":
        for index, item in enumerate(value):
            walk(item, schema.get("items", {}), f"{path}[{index}]")


def _check_bounds(value: Any, schema: dict, path: str) -> None:
    """The schema's minimum and maximum of a number, maxLength of a string (in characters, as the API server
    counts them) and maxItems of a list."""
    if schema.get("minimum") is not None and value < schema["minimum"]:
        raise Invalid(path, f"must be at least {schema['minimum']} (got {value})")
    if schema.get("maximum") is not None and value > schema["maximum"]:
        raise Invalid(path, f"must be at most {schema['maximum']:,} (got {value:,})")
    for keyword, unit in (("maxLength", "characters"), ("maxItems", "items")):
        if schema.get(keyword) is not None and len(value) > schema[keyword]:
            raise Invalid(path, f"{len(value):,} {unit}, more than the {schema[keyword]:,} it may have")


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
            raise Invalid(child, f"unknown field (known fields here: {shortened(known)})")


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
            return f"{word} {shortened(repr(value))}" if python_type in (str, bool) else word
    return f"{type(value).__name__} {value!r}"


def _article(expected: str) -> str:
    return {"object": "a mapping", "array": "a list", "integer": "an integer"}.get(expected, f"a {expected}")


# ---- admission ----------------------------------------------------------------

def check_admission(resource: dict, framework: Framework) -> None:
    metadata = resource.get("metadata") or {}
    check_name(metadata)
    check_namespace(metadata)
    check_labels_and_annotations(metadata, "metadata")
    spec = resource.get("spec")
    if spec is None:
        raise Invalid("spec", f"required (with spec.{framework.replica_spec_field})")
    field = framework.replica_spec_field
    replica_specs = spec.get(field)
    if not replica_specs:
        raise Invalid(f"spec.{field}", f"must list at least one replica type ({', '.join(framework.replica_types)})")
    for key, replica_spec in replica_specs.items():
        check_replica_spec(framework, key, replica_spec or {}, f"spec.{field}.{key}")
    for path, problem in framework.admission_problems(spec):
        raise Invalid(path, problem)
    check_run_policy(spec.get("runPolicy") or {})


def check_namespace(metadata: dict) -> None:
    namespace = metadata.get("namespace")
    if namespace is not None and (problem := namespace_problem(namespace)):
        raise Invalid("metadata.namespace", f"{shortened(repr(namespace))} is {problem}")


def check_trainjob_admission(resource: dict) -> None:
    """What check_admission checks of a v1 job, on a TrainJob's own fields (its schema checked first): labels and
    annotations, the trainer's and the initializers' env and what their processes receive, the trainer's resources
    and counts, and the number of pods it asks for before anything plans them."""
    metadata = resource.get("metadata") or {}
    check_namespace(metadata)
    check_labels_and_annotations(metadata, "metadata")
    spec = resource.get("spec") or {}
    trainer = spec.get("trainer")
    if trainer is not None:
        check_env(trainer.get("env") or [], "spec.trainer.env")
        check_process_text(trainer, "spec.trainer")
        check_resources(trainer.get("resourcesPerNode") or {}, "spec.trainer.resourcesPerNode")
        check_node_count(trainer.get("numNodes"))
    for field in INITIALIZERS:
        given = (spec.get("initializer") or {}).get(field)
        if given is not None:
            check_env(given.get("env") or [], f"spec.initializer.{field}.env")
            check_process_text(given, f"spec.initializer.{field}")


def check_node_count(nodes: int | None) -> None:
    """At least one node (none would "succeed" with nothing run), and no more than trainctl plans."""
    if nodes is not None and nodes < 1:
        raise Invalid("spec.trainer.numNodes", f"must be at least 1 (got {nodes}); leave it out for the runtime's")
    if nodes is not None and nodes > MAX_PLANNED_PODS:
        raise Invalid("spec.trainer.numNodes", f"{nodes:,} nodes: trainctl plans at most {MAX_PLANNED_PODS:,} pods "
                      "of a TrainJob")


def check_name(metadata: dict) -> None:
    name = metadata.get("name")
    if not name:
        raise Invalid("metadata.name", "required: give the job a name (lower-case letters, digits and '-')")
    longest = 63 - LONGEST_SUFFIX
    if not DNS_1035.fullmatch(name):
        raise Invalid("metadata.name", f"{shortened(repr(name))} is not a DNS-1035 label: use lower-case letters, digits and '-', "
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
    template = replica_spec.get("template") or {}
    check_labels_and_annotations(template.get("metadata") or {}, f"{path}.template.metadata")
    pod_spec = template.get("spec") or {}
    containers = pod_spec.get("containers") or []
    if not containers:
        raise Invalid(f"{path}.template.spec.containers", f"must have at least one container named {framework.container!r}")
    check_pod_spec(pod_spec, f"{path}.template.spec")
    if not framework.wires_first_container and not any(c.get("name") == framework.container for c in containers):
        raise Invalid(f"{path}.template.spec.containers",
                      f"must have a container named {framework.container!r} (the one the operator wires)")


def check_labels_and_annotations(metadata: dict, path: str, field: str = "labels") -> None:
    """An object's labels and annotations as the API server's ObjectMeta validation takes them (and a pod's
    nodeSelector, a map of labels too, as ``field``)."""
    for key, value in (metadata.get("labels") or {}).items():
        if problem := label_key_problem(key):
            raise Invalid(f"{path}.{field}", f"{shortened(repr(key))} is {problem}")
        if problem := label_value_problem(value):
            raise Invalid(_join(f"{path}.{field}", key), f"{shortened(repr(value))} is {problem}")
    annotations = metadata.get("annotations") or {}
    for key in annotations:
        if problem := label_key_problem(key.lower()):  # the API server checks annotation keys lower-cased
            raise Invalid(f"{path}.annotations", f"{shortened(repr(key))} is {problem}")
    size = sum(len(key.encode()) + len(value.encode()) for key, value in annotations.items())
    if size > ANNOTATIONS_MAX_BYTES:
        raise Invalid(f"{path}.annotations", f"{size:,} bytes in all, more than the {ANNOTATIONS_MAX_BYTES:,} an "
                      "object may carry: put large data in a file or a ConfigMap")


def check_pod_spec(pod_spec: dict, path: str) -> None:
    """Containers, init containers, volumes, node selector and tolerations of one replica's pod."""
    check_labels_and_annotations({"labels": pod_spec.get("nodeSelector")}, path, field="nodeSelector")
    for index, toleration in enumerate(pod_spec.get("tolerations") or []):
        check_toleration(toleration, f"{path}.tolerations[{index}]")
    volumes = set()
    for index, volume in enumerate(pod_spec.get("volumes") or []):
        check_unique_dns_label(volume.get("name"), volumes, f"{path}.volumes[{index}].name", "volume")
    names: set[str] = set()
    for section in ("initContainers", "containers"):
        for index, container in enumerate(pod_spec.get(section) or []):
            check_container(container, f"{path}.{section}[{index}]", volumes)
            check_unique_dns_label(container["name"], names, f"{path}.{section}[{index}].name", "container")


def check_toleration(toleration: dict, path: str) -> None:
    """As the API server's validateTolerations: a key that is a label key (or none, with Exists), a value only
    with Equal, an effect it knows, tolerationSeconds only with NoExecute."""
    key, operator, value = toleration.get("key") or "", toleration.get("operator") or "Equal", toleration.get("value")
    if key and (problem := label_key_problem(key)):
        raise Invalid(f"{path}.key", f"{shortened(repr(key))} is {problem}")
    if operator not in ("Equal", "Exists"):
        raise Invalid(f"{path}.operator", f"unsupported value {shortened(repr(operator))}: use Equal or Exists")
    if not key and operator != "Exists":
        raise Invalid(f"{path}.operator", "must be Exists when the key is empty (a toleration of every taint)")
    if operator == "Exists" and value:
        raise Invalid(f"{path}.value", "must be empty when the operator is Exists")
    if operator == "Equal" and value and (problem := label_value_problem(value)):
        raise Invalid(f"{path}.value", f"{shortened(repr(value))} is {problem}")
    effect = toleration.get("effect") or ""
    if effect and effect not in TAINT_EFFECTS:
        raise Invalid(f"{path}.effect", f"unsupported value {shortened(repr(effect))}: use one of {', '.join(TAINT_EFFECTS)}")
    if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
        raise Invalid(f"{path}.tolerationSeconds", "only takes effect with effect NoExecute: set that effect or leave it out")


def check_unique_dns_label(name: str | None, seen: set[str], path: str, what: str) -> None:
    if not name:
        raise Invalid(path, "required")
    if problem := dns_label_problem(name):
        raise Invalid(path, f"{shortened(repr(name))} is {problem}")
    if name in seen:
        raise Invalid(path, f"{name!r} names another {what} of the pod too: {what} names must be unique")
    seen.add(name)


def check_container(container: dict, path: str, volumes: set[str]) -> None:
    for required in ("name", "image"):
        if not container.get(required):
            raise Invalid(f"{path}.{required}", "required")
    check_env(container.get("env") or [], f"{path}.env")
    check_process_text(container, path)
    check_ports(container.get("ports") or [], f"{path}.ports")
    check_volume_mounts(container.get("volumeMounts") or [], volumes, f"{path}.volumeMounts")
    check_resources(container.get("resources") or {}, f"{path}.resources")


def check_env(env_list: list[dict], path: str) -> None:
    """Env names as Kubernetes takes them; a value or a valueFrom, not both."""
    for index, env in enumerate(env_list):
        name = env.get("name", "")
        if problem := env_name_problem(name):
            raise Invalid(f"{path}[{index}].name", f"{shortened(repr(name))} is {problem}")
        if env.get("value") and env.get("valueFrom") is not None:
            raise Invalid(f"{path}[{index}].valueFrom", "must not be given with a non-empty value: use one")


def check_resources(resources: dict, path: str) -> None:
    for section in ("limits", "requests"):
        for resource_name, amount in (resources.get(section) or {}).items():
            check_quantity(resource_name, amount, f"{path}.{section}.{resource_name}")
    check_requests_within_limits(resources, path)


def check_process_text(container: dict, path: str) -> None:
    """No NUL in what the container's process receives: execve takes argv, the environment and the
    working directory as C strings, which end at the first NUL."""
    texts = [(f"{path}.{field}[{index}]", word) for field in ("command", "args")
             for index, word in enumerate(container.get(field) or [])]
    texts += [(f"{path}.env[{index}].value", env.get("value")) for index, env in enumerate(container.get("env") or [])]
    texts.append((f"{path}.workingDir", container.get("workingDir")))
    for where, text in texts:
        if isinstance(text, str) and "\x00" in text:
            raise Invalid(where, f"{shortened(repr(text))} contains a NUL character (\\x00), which no process can "
                          "receive: argv, the environment and paths end at the first NUL")
    if problem := process_strings_problem(container, path):  # and each at most MAX_ARG_STRLEN bytes
        raise Invalid(*problem)


def check_ports(ports: list[dict], path: str) -> None:
    names = set()
    for index, port in enumerate(ports):
        where = f"{path}[{index}]"
        if port.get("containerPort") is None:
            raise Invalid(f"{where}.containerPort", "required")
        for field, zero_means_none in (("containerPort", False), ("hostPort", True)):
            if port.get(field) is not None and (problem := port_number_problem(port[field], zero_means_none)):
                raise Invalid(f"{where}.{field}", f"{port[field]} is {problem}")
        name = port.get("name")
        if name and (problem := port_name_problem(name)):
            raise Invalid(f"{where}.name", f"{shortened(repr(name))} is {problem}")
        if name and name in names:
            raise Invalid(f"{where}.name", f"{name!r} names another port of the container too: port names must be unique")
        names.add(name)
        if port.get("protocol") is not None and port["protocol"] not in PORT_PROTOCOLS:
            raise Invalid(f"{where}.protocol", f"unsupported value {shortened(repr(port['protocol']))}: use one of "
                          f"{', '.join(PORT_PROTOCOLS)}")


def check_volume_mounts(mounts: list[dict], volumes: set[str], path: str) -> None:
    mount_paths = set()
    for index, mount in enumerate(mounts):
        if mount.get("name") not in volumes:
            raise Invalid(f"{path}[{index}].name", f"{shortened(repr(mount.get('name')))} is no volume of the pod: "
                          "declare it under the template's spec.volumes")
        if not mount.get("mountPath"):
            raise Invalid(f"{path}[{index}].mountPath", "required")
        if mount["mountPath"] in mount_paths:
            raise Invalid(f"{path}[{index}].mountPath", f"{shortened(repr(mount['mountPath']))} is mounted twice: "
                          "mount paths must be unique")
        mount_paths.add(mount["mountPath"])


def check_requests_within_limits(resources: dict, path: str) -> None:
    """A request above its limit is refused; an extended resource (vendor.com/gpu) is requested as much as
    its limit, as Kubernetes requires of resources it cannot overcommit."""
    from trainctl.kube.quantities import parse_quantity

    limits = resources.get("limits") or {}
    for resource_name, request in (resources.get("requests") or {}).items():
        extended = _is_extended(resource_name)
        if resource_name not in limits:
            if extended:
                raise Invalid(f"{path}.limits.{resource_name}", f"required: {resource_name} is set in limits, "
                              "requests follow (requests alone are refused)")
            continue
        requested, limit = parse_quantity(request), parse_quantity(limits[resource_name])
        if requested > limit or (extended and requested != limit):
            relation = "equal to" if extended else "at most"
            raise Invalid(f"{path}.requests.{resource_name}", f"{request} must be {relation} its limit {limits[resource_name]}")


def check_quantity(resource_name: str, amount: int | str, path: str) -> None:
    """A non-negative quantity; extended resources (``vendor.com/gpu``) are counted in whole units."""
    if not QUANTITY.fullmatch(str(amount)) or str(amount).startswith("-"):
        raise Invalid(path, f"{shortened(repr(amount))} is not a quantity of at least 0 (examples: 2, 500m, 4Gi)")
    if _is_extended(resource_name) and not WHOLE_NUMBER.fullmatch(str(amount)):
        raise Invalid(path, f"{shortened(repr(amount))} is not a whole number: {resource_name} is counted in units "
                      "(examples: 1, 2)")


def _is_extended(resource_name: str) -> bool:
    """A resource a vendor names (``nvidia.com/gpu``), not one of Kubernetes' own (``kubernetes.io/...``)."""
    domain = resource_name.partition("/")[0] if "/" in resource_name else None
    return bool(domain) and domain != "kubernetes.io" and not domain.endswith(".kubernetes.io")


def check_run_policy(run_policy: dict) -> None:
    for field in ("ttlSecondsAfterFinished", "activeDeadlineSeconds", "backoffLimit"):
        value = run_policy.get(field)
        if value is not None and value < 0:
            raise Invalid(f"spec.runPolicy.{field}", f"must not be negative (got {value})")
    managed_by = run_policy.get("managedBy")
    allowed = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")
    if managed_by is not None and managed_by not in allowed:
        raise Invalid("spec.runPolicy.managedBy", f"unsupported value {managed_by!r}: use one of {', '.join(allowed)}")
