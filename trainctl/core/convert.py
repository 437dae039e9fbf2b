"""Converting a job between Kubeflow's two APIs: a ``kubeflow.org/v1`` job and a Trainer v2 TrainJob.

Trainer v2 (``trainer.kubeflow.org/v1alpha1``) runs a job as one ``node`` job of identical pods under a runtime,
whose ``mlPolicy`` gives each process its place; what a v1 kind calls its replicas, and which runtime stands
for it, each framework says (:class:`~trainctl.frameworks.base.TrainerV2`). A v1 job whose node replicas run
one plain container becomes a TrainJob on upstream's default ClusterTrainingRuntime of its kind; any other
becomes a TrainJob and the TrainingRuntime that holds its pod template. Back again, a TrainJob (on a default
runtime, or on a runtime given beside it) becomes the v1 kind of its policy.

What one side says and the other cannot (v1's cleanPodPolicy, a restart policy other than v2's ``OnFailure``,
a v2 initializer) is never dropped silently: each such field is named, and the conversion refuses unless the
caller allows the loss, which then lists each dropped field. What v2 does not need but a conversion back would
(v1's split of nodes into replica types, the container's name, a command put under a launcher) travels in one
annotation, so a v1 job comes back as it was. Pure: dicts in, dicts out (docs/trainer-v2.md has the table).
"""

from __future__ import annotations

import copy
import json
import shlex
from dataclasses import dataclass, field

from trainctl import API_VERSION, TRAINER_API_GROUP as V2_GROUP, TRAINER_API_VERSION as V2_VERSION
from trainctl.core.job import Job
from trainctl.core.trainer_crds import CLUSTER_RUNTIME, MANAGED_BY, RUNTIME, TRAINJOB
# JobSet's pod restartPolicy, which no runtime upstream ships changes
from trainctl.core.trainjob import POD_RESTART_POLICY as V2_RESTART_POLICY
from trainctl.core.validation import METADATA, STRING_MAP, Invalid, check_json, check_runtime_document, validate, walk
from trainctl.errors import UserError, setting
from trainctl.frameworks import ALL, Framework, by_name
# the node job and its container; the label on the job the TrainJob's trainer fields go to, and its value
from trainctl.frameworks.base import (ANCESTOR_TRAINER as TRAINER_STEP, LABEL_ANCESTOR_STEP as ANCESTOR_LABEL,
                                      LABEL_TRAINER_FRAMEWORK as FRAMEWORK_LABEL, NODE)

DEFAULT_MANAGER = MANAGED_BY[0]
#: what of the v1 job v2 does not need, kept for the conversion back (JSON)
V1_ANNOTATION = "trainctl.io/v1"
#: the container fields a TrainJob's ``trainer`` sets (resources as ``resourcesPerNode``)
TRAINER_FIELDS = {"image": "image", "command": "command", "args": "args", "env": "env", "resources": "resourcesPerNode"}
#: metadata the API server writes: a job read back from a cluster carries them, neither side's spec does
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink")
KEPT_METADATA = ("name", "namespace", "labels", "annotations")
#: v1 runPolicy fields v2 spells as spec fields of the TrainJob
SHARED_RUN_POLICY = ("suspend", "activeDeadlineSeconds")
#: the v1 runPolicy values that say nothing (the operator's defaults)
V1_RUN_POLICY_DEFAULTS = {"cleanPodPolicy": "None", "suspend": False, "managedBy": "kubeflow.org/training-operator"}
#: a managedBy both sides know
SHARED_MANAGERS = ("kueue.x-k8s.io/multikueue",)
#: JobSet's own default, which upstream's MPI runtimes spell out
DEFAULT_NETWORK = {"publishNotReadyAddresses": True}
DIRECTIONS = ("v1", "v2")


def typed(required: tuple[str, ...] = (), **properties: dict) -> dict:
    """A mapping whose ``properties`` have these types; other fields pass (the conversion names them)."""
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "required": list(required),
            "properties": properties}


STRING, INTEGER, BOOLEAN, MAPPING = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}, {"type": "object"}
STRINGS = {"type": "array", "items": STRING}
ENV = {"type": "array", "items": typed(("name",), name=STRING)}
RESOURCES = typed(limits=MAPPING, requests=MAPPING)
POD_TEMPLATE = typed(metadata=MAPPING, spec=typed(containers={"type": "array", "items": typed(
    name=STRING, image=STRING, command=STRINGS, args=STRINGS, env=ENV, resources=RESOURCES)}))
V2_METADATA = {**METADATA, "required": ["name"]}
#: what of the v2 resources the conversion reads, with the types it reads them as
TRAINJOB_SHAPE = typed(("metadata", "spec"), metadata=V2_METADATA, spec=typed(
    ("runtimeRef",), runtimeRef=typed(("name",), name=STRING, kind=STRING, apiGroup=STRING),
    trainer=typed(image=STRING, command=STRINGS, args=STRINGS, env=ENV, numNodes=INTEGER, numProcPerNode=INTEGER,
                  resourcesPerNode=RESOURCES),
    suspend=BOOLEAN, activeDeadlineSeconds=INTEGER, managedBy=STRING))
RUNTIME_SHAPE = typed(("metadata", "spec"), metadata=V2_METADATA, spec=typed(
    mlPolicy=typed(numNodes=INTEGER), template=typed(metadata=MAPPING, spec=typed(replicatedJobs={
        "type": "array", "items": typed(("name",), name=STRING, template=typed(
            metadata=typed(labels=STRING_MAP), spec=typed(template=POD_TEMPLATE)))}))))


def check_v2(document: dict, where: str) -> None:
    """One line naming the first field of a TrainJob or runtime that apply refuses (so convert and apply agree), or
    that is not what the conversion reads."""
    (validate if document["kind"] == TRAINJOB else check_runtime_document)(document, source=where)
    try:
        check_json(document)
        walk(document, TRAINJOB_SHAPE if document["kind"] == TRAINJOB else RUNTIME_SHAPE, "")
    except Invalid as problem:
        raise UserError(f"{where}: {document['kind']}: {problem}") from None
AUTO = "auto"  # v1's default processes per node, as the operator sets it


@dataclass
class Converted:
    """The documents a conversion made, the fields it dropped (``path (why)``) and what the caller should know."""

    documents: list[dict] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    where: str = ""  # the document being converted, as messages name it

    def lose(self, path: str, why: str) -> None:
        self.dropped.append(f"{self.where}{path} ({why})")

    def note(self, text: str) -> None:
        self.notes.append(f"{self.where}{text}")


def convert(documents: list, to: str | None = None, *, allow_lossy: bool = False, source: str = "-f -") -> Converted:
    """Each v1 job in ``documents`` as a TrainJob (and its runtime), or each TrainJob as a v1 job (the
    runtimes it references may be among ``documents``); ``to`` says which way every document must go."""
    if to is not None and to not in DIRECTIONS:
        raise UserError(f"{setting('to', to)}: use {' or '.join(DIRECTIONS)}")
    if not documents:
        raise UserError(f"{source}: no document to convert")
    result = Converted()
    runtimes = runtimes_in(documents, source)
    used: set[tuple[str, str]] = set()
    unchecked: dict[int, str] = {}  # the v1 jobs made, by position, and the document each came from
    for index, document in enumerate(documents):
        where = source if len(documents) == 1 else f"{source} (document {index + 1})"
        result.where = "" if len(documents) == 1 else f"document {index + 1}: "
        direction = direction_of(document, where)
        if direction is None:
            continue  # a runtime: converted with the TrainJob that references it
        if to is not None and direction != to:
            raise UserError(f"{where}: {document['kind']} is already a {to} resource: {setting('to', to)} converts "
                            f"{DIRECTIONS[DIRECTIONS.index(to) - 1]} resources")
        if direction == "v2":
            result.documents += to_v2(document, result, where)
        else:
            unchecked[len(result.documents)] = where
            result.documents.append(to_v1(document, runtimes, used, result, where))
    result.where = ""
    for key in sorted(set(runtimes) - used):
        result.lose(f"{key[0]} {key[1]}", "no TrainJob in the file runs on it")
    if result.dropped and not allow_lossy:
        raise UserError(f"{source}: cannot convert without losing {'; '.join(result.dropped)}: "
                        f"{setting('allow_lossy')} drops them")
    if not result.documents:
        raise UserError(f"{source}: no job to convert, only runtimes")
    for index, where in unchecked.items():  # after the losses: what cannot be said is the blocker, not its echo
        made = result.documents[index]
        result.documents[index] = validate(made, source=f"{where} as {made['kind']}")
    return result


def direction_of(document: object, where: str) -> str | None:
    """Which way ``document`` converts: "v2" for a v1 job, "v1" for a TrainJob, None for a runtime."""
    if not isinstance(document, dict):
        raise UserError(f"{where}: expected a job mapping, got {type(document).__name__}")
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if api_version == API_VERSION:
        return "v2"
    if api_version == V2_VERSION and kind == TRAINJOB:
        return "v1"
    if api_version == V2_VERSION and kind in (RUNTIME, CLUSTER_RUNTIME):
        return None
    raise UserError(f"{where}: {kind or 'a resource without a kind'} ({api_version}): convert takes "
                    f"{API_VERSION} jobs, and {V2_VERSION} TrainJobs with their runtimes")


def runtimes_in(documents: list, source: str) -> dict[tuple[str, str], dict]:
    """The runtimes among ``documents`` by (kind, name)."""
    found = {}
    for document in documents:
        if isinstance(document, dict) and document.get("apiVersion") == V2_VERSION \
                and document.get("kind") in (RUNTIME, CLUSTER_RUNTIME):
            check_v2(document, source)
            found[document["kind"], document["metadata"]["name"]] = document
    return found


# ---- v1 -> v2 -------------------------------------------------------------------------------------------

def to_v2(resource: dict, result: Converted, where: str) -> list[dict]:
    """A v1 job as a TrainJob, after the TrainingRuntime it needs when no default runtime fits."""
    validate(resource, source=where)
    job = Job(resource)
    shape = job.framework.trainer_v2
    if shape is None:
        raise UserError(f"{where}: kind {job.framework.kind} has no Trainer v2 spelling")
    path = f"spec.{job.framework.replica_spec_field}"
    nodes = [rtype for rtype in job.replica_types if rtype in shape.node_types]
    if not nodes:
        raise UserError(f"{where}: {path}: no {' or '.join(shape.node_types)} replicas: a TrainJob runs at least "
                        "one node")
    spec = {"runtimeRef": {}, **v2_run_policy(job, result)}
    lose_kind_fields(job, result)
    for rtype in job.replica_types:
        check_replica(job, rtype, nodes, result)
    record: dict = {}
    templates = {rtype: adapted_template(job, rtype, record, where) for rtype in (*nodes[:1], *launcher_of(job))}
    trainer = {"numNodes": sum(job.replicas(rtype) for rtype in nodes), **procs_per_node(job, record, result)}
    split = {rtype: job.replicas(rtype) for rtype in nodes}
    if split != node_split(job.framework, trainer["numNodes"]):
        record["replicas"] = split
    runtime = None
    container = plain_container(templates[nodes[0]]) if shape.runtime and not launcher_of(job) else None
    if container is not None:
        spec["runtimeRef"] = default_runtime_ref(job.framework)
        trainer.update({TRAINER_FIELDS[key]: value for key, value in container.items() if key in TRAINER_FIELDS})
    else:
        runtime = training_runtime(job, templates[nodes[0]], templates, trainer["numNodes"])
        spec["runtimeRef"] = {"apiGroup": V2_GROUP, "kind": RUNTIME, "name": job.name}
    spec["trainer"] = trainer
    metadata = kept_metadata(resource.get("metadata") or {}, result)
    if record:
        metadata.setdefault("annotations", {})[V1_ANNOTATION] = json.dumps(record, separators=(",", ":"))
    env_notes(job, templates[(*launcher_of(job), nodes[0])[0]], record, result)
    trainjob = {"apiVersion": V2_VERSION, "kind": TRAINJOB, "metadata": metadata, "spec": spec}
    return [runtime, trainjob] if runtime else [trainjob]


def default_runtime_ref(framework: Framework) -> dict:
    """The ``runtimeRef`` of a TrainJob on the default ClusterTrainingRuntime that stands for ``framework``'s kind."""
    return {"apiGroup": V2_GROUP, "kind": CLUSTER_RUNTIME, "name": framework.trainer_v2.runtime}


def node_command(framework: Framework, command: list[str], procs: int | None) -> tuple[list[str], int | None]:
    """What a v2 node of ``framework``'s kind runs for v1's ``command`` (under the launcher that stands in for v1's
    env, if one does) and its processes per node: put under a launcher, one unless ``procs`` says more."""
    wrapped = framework.v2_command(command, [])
    if wrapped is None or wrapped == command:
        return command, procs
    return wrapped, procs or 1


def launcher_of(job: Job) -> list[str]:
    launcher = job.framework.trainer_v2.launcher_type
    return [launcher] if launcher in job.replica_types else []


def kept_metadata(metadata: dict, result: Converted) -> dict:
    """The job's name, namespace, labels and annotations; other metadata but the server's is named."""
    for key in metadata:
        if key not in KEPT_METADATA and key not in SERVER_METADATA:
            result.lose(f"metadata.{key}", "not carried over")
    return {key: copy.deepcopy(metadata[key]) for key in KEPT_METADATA if metadata.get(key) not in (None, {})}


def v2_run_policy(job: Job, result: Converted) -> dict:
    """The TrainJob spec fields of the runPolicy (suspend, activeDeadlineSeconds, a shared managedBy)."""
    spec = {}
    for key, value in (job.spec.get("runPolicy") or {}).items():
        if key in SHARED_RUN_POLICY:
            if value not in (None, False):
                spec[key] = value
        elif key == "managedBy" and value in SHARED_MANAGERS:
            spec[key] = value
        elif value is not None and V1_RUN_POLICY_DEFAULTS.get(key, object()) != value:
            result.lose(f"spec.runPolicy.{key}", "a TrainJob has no such field")
    return spec


def lose_kind_fields(job: Job, result: Converted) -> None:
    """The kind's own spec fields but the replica specs, runPolicy and the processes per node."""
    shape = job.framework.trainer_v2
    for key, value in job.spec.items():
        if key not in (job.framework.replica_spec_field, "runPolicy", shape.proc_field) and value is not None:
            result.lose(f"spec.{key}", "a TrainJob has no such field")


def check_replica(job: Job, rtype: str, nodes: list[str], result: Converted) -> None:
    """A replica type v2 has a role for, with the node template and v2's restart policy."""
    shape, path = job.framework.trainer_v2, f"spec.{job.framework.replica_spec_field}.{rtype}"
    if rtype not in (*shape.node_types, shape.launcher_type):
        result.lose(path, "v2 runs one kind of node: no role for this replica type")
        return
    if rtype in nodes[1:] and job.replica_specs[rtype].get("template") != job.replica_specs[nodes[0]].get("template"):
        result.lose(f"{path}.template", f"differs from {nodes[0]}'s: v2 runs every node from one template")
    policy = job.restart_policy(rtype)
    if policy != V2_RESTART_POLICY:
        written = "" if job.replica_specs[rtype].get("restartPolicy") else f" (the {job.framework.kind} default)"
        result.lose(f"{path}.restartPolicy", f"{policy}{written}: v2 restarts a failed pod in place "
                                             f"({V2_RESTART_POLICY}) up to its Job's backoffLimit")


def procs_per_node(job: Job, record: dict, result: Converted) -> dict:
    """The trainer's numProcPerNode from the kind's field (a whole number; v1's default says nothing)."""
    field_name = job.framework.trainer_v2.proc_field
    value = job.spec.get(field_name) if field_name else None
    if "command" in record:  # put under a launcher: one process per node, as v1 ran it, unless it said more
        record["procs"] = value
        value = value if value not in (None, AUTO) else 1
    if value in (None, AUTO):
        return {}
    if isinstance(value, int) or isinstance(value, str) and value.isdigit() and int(value) > 0:
        return {"numProcPerNode": int(value)}
    result.lose(f"spec.{field_name}", f"{value!r}: v2's numProcPerNode is a number")
    return {}


def adapted_template(job: Job, rtype: str, record: dict, where: str) -> dict:
    """Replica ``rtype``'s pod template with its wired container named ``node``, its command under the kind's
    v2 launcher where one stands in for v1's env."""
    template = copy.deepcopy(job.replica_specs[rtype].get("template") or {})
    containers = template.setdefault("spec", {}).setdefault("containers", [])
    main = job.main_container(containers)
    if main is None:
        raise UserError(f"{where}: spec.{job.framework.replica_spec_field}.{rtype}.template.spec.containers: "
                        "none to run")
    if any(other is not main and other.get("name") == NODE for other in containers):
        raise UserError(f"{where}: spec.{job.framework.replica_spec_field}.{rtype}.template: a container beside the "
                        f"framework's is named {NODE}, the name v2 gives the framework's: rename it")
    step = rtype.lower() if rtype == job.framework.trainer_v2.launcher_type else NODE
    if main.get("name") != job.framework.container:
        record.setdefault("containers", {})[step] = main.get("name")
    main["name"] = NODE
    if rtype in job.framework.trainer_v2.node_types and job.framework.trainer_v2.launcher_type is None:
        command = main.get("command") or []
        wrapped = job.framework.v2_command(command, main.get("args") or [])
        if wrapped is not None and wrapped != command:
            record["command"] = command
            main["command"] = wrapped
    return template


def node_split(framework: Framework, nodes: int) -> dict[str, int]:
    """How ``nodes`` v2 nodes are the kind's node replicas when nothing says otherwise."""
    node_types = framework.trainer_v2.node_types
    return {rtype: count for rtype, count in framework.topology(nodes).items() if rtype in node_types}


def plain_container(template: dict) -> dict | None:
    """The one container of a template that says nothing a TrainJob's trainer cannot (then a default runtime
    runs it), else None."""
    spec = template.get("spec") or {}
    containers = spec.get("containers") or []
    if template.get("metadata") or set(spec) != {"containers"} or len(containers) != 1:
        return None
    container = containers[0]
    if set(container) - {"name", *TRAINER_FIELDS} or not container.get("image"):
        return None
    return container


def training_runtime(job: Job, node: dict, templates: dict, nodes: int) -> dict:
    """The TrainingRuntime a job needs whose pods no default runtime makes, named like the job."""
    shape = job.framework.trainer_v2
    launcher = launcher_of(job)
    node_job = {"name": NODE, "template": {"spec": {"template": node}}}
    replicated = [node_job]
    if launcher:
        replicated.append({"name": launcher[0].lower(), "dependsOn": [{"name": NODE, "status": "Ready"}],
                           "template": trainer_step({"spec": {"template": templates[launcher[0]]}})})
    else:
        node_job["template"] = trainer_step(node_job["template"])
    metadata = {"name": job.name, "labels": {FRAMEWORK_LABEL: shape.label}}
    if (job.resource.get("metadata") or {}).get("namespace"):
        metadata["namespace"] = job.resource["metadata"]["namespace"]
    # upstream sizes the trainer step by the runtime's numNodes and an MPI runtime's nodes by the TrainJob's: with
    # a launcher as the trainer step, N there would be N launchers, each running the whole mpirun
    policy = {"numNodes": 1 if launcher else nodes, **({shape.policy: {}} if shape.policy else {})}
    return {"apiVersion": V2_VERSION, "kind": RUNTIME, "metadata": metadata,
            "spec": {"mlPolicy": policy,
                     "template": {"spec": {"replicatedJobs": replicated, **jobset_extras(job.framework)}}}}


def trainer_step(template: dict) -> dict:
    return {"metadata": {"labels": {ANCESTOR_LABEL: TRAINER_STEP}}, **template}


def jobset_extras(framework: Framework) -> dict:
    """What a runtime of ``framework`` says besides its jobs: with a launcher, the job succeeds when it does."""
    launcher = framework.trainer_v2.launcher_type
    return {"successPolicy": {"operator": "All", "targetReplicatedJobs": [launcher.lower()]}} if launcher else {}


def env_notes(job: Job, template: dict, record: dict, result: Converted) -> None:
    """What the command no longer gets from the operator, or the launcher it now runs under."""
    shape = job.framework.trainer_v2
    if not shape.v1_env:
        return
    gone = ", ".join(shape.v1_env)
    if "command" in record:
        result.note(f"{job.framework.kind} {job.name}: v2 does not set {gone} as v1 did; the command now runs "
                    f"as {shlex.join(job.main_container(template['spec']['containers'])['command'])}, which sets "
                    f"them from v2's variables")
        return
    result.note(f"{job.framework.kind} {job.name}: v1 set {gone} in each replica, v2's {shape.policy or 'plain'} "
                f"runtime does not: {shape.v1_env_lost} (docs/trainer-v2.md)")


# ---- v2 -> v1 -------------------------------------------------------------------------------------------

TRAINJOB_FIELDS = ("runtimeRef", "trainer", "suspend", "activeDeadlineSeconds", "managedBy")


def to_v1(trainjob: dict, runtimes: dict, used: set, result: Converted, where: str) -> dict:
    """A TrainJob as the v1 job of its runtime's kind."""
    check_v2(trainjob, where)
    metadata, spec = trainjob["metadata"], trainjob["spec"]
    for key, value in spec.items():
        if key not in TRAINJOB_FIELDS and value not in (None, [], {}):
            result.lose(f"spec.{key}", "a v1 job has no such field")
    trainer = spec.get("trainer") or {}
    runtime, framework = runtime_of(spec, runtimes, used, where)
    record = v1_record(metadata)
    nodes = trainer.get("numNodes", ml_policy(runtime).get("numNodes", 1))
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
        raise UserError(f"{where}: spec.trainer.numNodes: {nodes!r}: a v1 job runs at least one replica")
    if spec.get("managedBy") not in (None, DEFAULT_MANAGER, *SHARED_MANAGERS):
        result.lose("spec.managedBy", "a v1 job knows no such manager")
    templates = v1_templates(framework, runtime, trainer, record, result, where)
    counts = recorded_split(framework, record, nodes) or node_split(framework, nodes)
    replica_specs = {rtype: replica_spec(framework, count, templates[NODE]) for rtype, count in counts.items()}
    launcher = framework.trainer_v2.launcher_type
    if launcher:
        replica_specs = {launcher: replica_spec(framework, 1, templates[launcher.lower()]), **replica_specs}
    v1_spec = {**v1_run_policy(spec), **v1_procs(framework, trainer, runtime, record, result),
               framework.replica_spec_field: replica_specs}
    v1_metadata = kept_metadata(metadata, result)
    (v1_metadata.get("annotations") or {}).pop(V1_ANNOTATION, None)
    if v1_metadata.get("annotations") == {}:
        del v1_metadata["annotations"]
    if framework.trainer_v2.v2_env:
        result.note(f"{TRAINJOB} {metadata['name']}: v2 set {', '.join(framework.trainer_v2.v2_env)} in each node, "
                    f"v1 does not for {framework.kind}s: a command that reads them needs changing (docs/trainer-v2.md)")
    return {"apiVersion": API_VERSION, "kind": framework.kind, "metadata": v1_metadata, "spec": v1_spec}


def ml_policy(runtime: dict | None) -> dict:
    policy = ((runtime or {}).get("spec") or {}).get("mlPolicy")
    return policy if isinstance(policy, dict) else {}


def recorded_split(framework: Framework, record: dict, nodes: int) -> dict[str, int] | None:
    """The v1 job's node replicas as the conversion to v2 kept them, when they still add up to ``nodes``."""
    split = record.get("replicas")
    if not isinstance(split, dict) or not set(split) <= set(framework.trainer_v2.node_types) or \
            not all(isinstance(count, int) and count > 0 for count in split.values()) or sum(split.values()) != nodes:
        return None
    return split


def v1_record(metadata: dict) -> dict:
    """What the conversion to v2 kept of the v1 job (empty when there is none, or it is not ours to read)."""
    text = (metadata.get("annotations") or {}).get(V1_ANNOTATION)
    try:
        record = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def runtime_of(spec: dict, runtimes: dict, used: set, where: str) -> tuple[dict | None, Framework]:
    """The runtime the TrainJob references (None: a default one, not in the file) and the kind it is."""
    ref = spec["runtimeRef"]
    kind, name = ref.get("kind") or CLUSTER_RUNTIME, ref.get("name")
    if ref.get("apiGroup", V2_GROUP) != V2_GROUP or kind not in (RUNTIME, CLUSTER_RUNTIME):
        raise UserError(f"{where}: spec.runtimeRef: {ref.get('apiGroup')}/{kind} is no Trainer v2 runtime")
    if (kind, name) in runtimes:
        used.add((kind, name))
        return runtimes[kind, name], framework_of_runtime(runtimes[kind, name], where)
    defaults = {fw.trainer_v2.runtime: fw for fw in ALL if fw.trainer_v2 and fw.trainer_v2.runtime}
    if kind == CLUSTER_RUNTIME and name in defaults:
        return None, defaults[name]
    raise UserError(f"{where}: spec.runtimeRef.name: {kind} {name!r} is not in the file and not one of the "
                    f"defaults a v1 kind stands for ({', '.join(defaults)}): add it to the file as a document")


def framework_of_runtime(runtime: dict, where: str) -> Framework:
    """The v1 kind of a runtime: its mlPolicy's, or for a plain one, its framework label's."""
    policy = runtime["spec"].get("mlPolicy") or {}
    keys = [key for key in policy if key != "numNodes"] if isinstance(policy, dict) else []
    named = f"{runtime['kind']} {runtime['metadata']['name']}"
    if keys:
        found = [fw for fw in ALL if fw.trainer_v2 and fw.trainer_v2.policy == keys[0]]
        if not found:
            raise UserError(f"{where}: {named}: spec.mlPolicy.{keys[0]}: no v1 kind runs this policy")
        return found[0]
    label = ((runtime.get("metadata") or {}).get("labels") or {}).get(FRAMEWORK_LABEL)
    try:
        framework = by_name(str(label))
    except UserError:
        framework = None
    if framework is None or framework.trainer_v2 is None or framework.trainer_v2.policy is not None:
        raise UserError(f"{where}: {named}: metadata.labels[{FRAMEWORK_LABEL}]: {label!r} names no v1 kind that "
                        "runs without an mlPolicy")
    return framework


def v1_templates(framework: Framework, runtime: dict | None, trainer: dict, record: dict, result: Converted,
                 where: str) -> dict[str, dict]:
    """The pod templates by replicated job (``node``, and the launcher's), with the trainer's fields applied
    to the trainer job's node container, renamed to the kind's."""
    if runtime is None:
        if not trainer.get("image"):
            raise UserError(f"{where}: spec.trainer.image: not given, and the image of the cluster's default "
                            "runtime is unknown here: give it, or add the runtime to the file as a document")
        templates, step = {NODE: {"spec": {"containers": [{"name": NODE}]}}}, NODE
    else:
        templates, step = runtime_templates(framework, runtime, result)
    for key, value in trainer.items():
        if key not in ("numNodes", "numProcPerNode") and key not in TRAINER_FIELDS.values():
            result.lose(f"spec.trainer.{key}", "a v1 job has no such field")
    for name, template in templates.items():
        containers = (template.get("spec") or {}).get("containers") or []
        main = next((c for c in containers if isinstance(c, dict) and c.get("name") == NODE), None)
        if main is None:
            raise UserError(f"{where}: replicated job {name}: no container named {NODE}")
        if name == step:
            apply_trainer(main, trainer)
            restore_command(framework, main, record)
        kept = record.get("containers")
        main["name"] = (kept.get(name) if isinstance(kept, dict) else None) or framework.container
    return templates


def apply_trainer(container: dict, trainer: dict) -> None:
    """What upstream does with a TrainJob's trainer: replaces image, command and args, upserts env by name,
    merges resources."""
    for key in ("image", "command", "args"):
        if trainer.get(key) is not None:
            container[key] = copy.deepcopy(trainer[key])
    if trainer.get("env"):
        given = {entry.get("name") for entry in trainer["env"] if isinstance(entry, dict)}
        container["env"] = [e for e in container.get("env") or [] if e.get("name") not in given] + \
            copy.deepcopy(trainer["env"])
    if trainer.get("resourcesPerNode"):
        resources = container.setdefault("resources", {})
        for key, amounts in trainer["resourcesPerNode"].items():
            resources[key] = {**(resources.get(key) or {}), **quantities(amounts)} if isinstance(amounts, dict) \
                else amounts


def quantities(amounts: dict) -> dict:
    """Resource amounts as a v1 job takes them: the SDK sends whole numbers as floats (``cpu: 2.0``)."""
    return {name: (int(amount) if amount.is_integer() else str(amount)) if isinstance(amount, float) else amount
            for name, amount in amounts.items()}


def restore_command(framework: Framework, container: dict, record: dict) -> None:
    """The v1 command a conversion put under the kind's launcher, when the command is still that one."""
    original = record.get("command")
    if isinstance(original, list) and all(isinstance(word, str) for word in original) and \
            framework.v2_command(original, container.get("args") or []) == container.get("command"):
        container["command"] = original
        if not original:
            del container["command"]


def runtime_templates(framework: Framework, runtime: dict, result: Converted) -> tuple[dict[str, dict], str]:
    """The pod templates of a runtime's jobs, and the job the trainer's fields go to; what of the runtime a v1
    job cannot say is named."""
    spec, named = runtime["spec"], f"{runtime['kind']} {runtime['metadata']['name']}: "
    for key, value in spec.items():
        if key not in ("mlPolicy", "template") and value not in (None, {}):
            result.lose(f"{named}spec.{key}", "a v1 job has no such field")
    policy_problems(framework, spec.get("mlPolicy") or {}, named, result)
    template = spec.get("template") or {}
    if template.get("metadata"):
        result.lose(f"{named}spec.template.metadata", "the JobSet's: a v1 job makes none")
    jobset = template.get("spec") or {}
    jobset_problems(framework, jobset, named, result)
    wanted = {NODE, *([framework.trainer_v2.launcher_type.lower()] if framework.trainer_v2.launcher_type else [])}
    claimed = claimed_volumes(jobset)
    templates, step = {}, None
    for job in jobset.get("replicatedJobs") or []:
        name = job.get("name") if isinstance(job, dict) else None
        if name not in wanted:
            result.lose(f"{named}replicatedJobs[{name}]", f"{framework.kind}s have no such replica")
            continue
        templates[name] = replicated_template(framework, job, named, result)
        drop_claimed_mounts(templates[name], claimed, f"{named}replicatedJobs[{name}]", result)
        if ((job.get("template") or {}).get("metadata") or {}).get("labels", {}).get(ANCESTOR_LABEL) == TRAINER_STEP:
            step = name
    if set(templates) != wanted:
        raise UserError(f"{named}spec.template.spec.replicatedJobs: {framework.kind}s need "
                        f"{' and '.join(sorted(wanted))}")
    return templates, step or NODE


def jobset_problems(framework: Framework, jobset: dict, named: str, result: Converted) -> None:
    """The JobSet settings of a runtime but its jobs that a v1 job cannot say: any but what the kind's runtime
    says anyway (its success rule, JobSet's default network)."""
    expected = {**jobset_extras(framework), "network": DEFAULT_NETWORK}
    for key, value in jobset.items():
        if key != "replicatedJobs" and value != expected.get(key, value if value in (None, {}, []) else object()):
            result.lose(f"{named}spec.template.spec.{key}", "a v1 job has no such field")


def claimed_volumes(jobset: dict) -> set[str]:
    """The volumes JobSet's ``volumeClaimPolicies`` claim per job and adds to every pod, by the name they mount."""
    policies = jobset.get("volumeClaimPolicies")
    claims = [claim for policy in (policies if isinstance(policies, list) else []) if isinstance(policy, dict)
              for claim in (policy.get("templates") if isinstance(policy.get("templates"), list) else [])]
    return {claim["metadata"]["name"] for claim in claims if isinstance(claim, dict) and isinstance(
        claim.get("metadata"), dict) and isinstance(claim["metadata"].get("name"), str)}


def drop_claimed_mounts(template: dict, claimed: set[str], path: str, result: Converted) -> None:
    """The mounts of a claimed volume the pod does not declare itself: with volumeClaimPolicies gone (named), they
    would mount nothing, which a v1 job refuses; named, and dropped with it."""
    spec = template.get("spec") if isinstance(template.get("spec"), dict) else {}
    volumes = spec.get("volumes") if isinstance(spec.get("volumes"), list) else []
    unbacked = claimed - {volume.get("name") for volume in volumes if isinstance(volume, dict)}
    dropped: list[str] = []
    for container in pod_containers(spec):
        mounts = container.get("volumeMounts")
        if not isinstance(mounts, list):
            continue
        kept = [mount for mount in mounts if not (isinstance(mount, dict) and mount.get("name") in unbacked)]
        dropped += [mount["name"] for mount in mounts if mount not in kept and mount["name"] not in dropped]
        container["volumeMounts"] = kept
        if not kept:
            del container["volumeMounts"]
    for name in dropped:
        result.lose(f"{path}.volumeMounts[{name}]", "its volume comes from volumeClaimPolicies")


def pod_containers(spec: dict) -> list[dict]:
    """A pod spec's init containers and containers, those that are mappings."""
    lists = [spec.get(key) for key in ("initContainers", "containers") if isinstance(spec.get(key), list)]
    return [container for containers in lists for container in containers if isinstance(container, dict)]


def replicated_template(framework: Framework, job: dict, named: str, result: Converted) -> dict:
    """The pod template of one replicated job; its Job's own settings are named."""
    path = f"{named}replicatedJobs[{job['name']}]"
    launcher = framework.trainer_v2.launcher_type
    depends = [{"name": NODE, "status": "Ready"}] if launcher and job["name"] == launcher.lower() else None
    for key, value in job.items():
        if key in ("name", "template") or key == "replicas" and value == 1 or key == "dependsOn" and value == depends:
            continue
        result.lose(f"{path}.{key}", "a v1 replica has no such field")
    job_template = job.get("template") or {}
    labels = ((job_template.get("metadata") or {}).get("labels") or {})
    if set(labels) - {ANCESTOR_LABEL} or (job_template.get("metadata") or {}).get("annotations"):
        result.lose(f"{path}.template.metadata", "the Job's: a v1 job makes none")
    job_spec = job_template.get("spec") or {}
    for key in job_spec:
        if key != "template":
            result.lose(f"{path}.template.spec.{key}", "the Job's: a v1 job makes none")
    return copy.deepcopy(job_spec.get("template") or {})


def policy_problems(framework: Framework, policy: dict, named: str, result: Converted) -> None:
    """The policy's fields a v1 job cannot say: any but its number of processes away from its default."""
    shape = framework.trainer_v2
    settings = policy.get(shape.policy) or {} if shape.policy else {}
    defaults = dict(shape.policy_defaults)
    for key, value in (settings.items() if isinstance(settings, dict) else ()):
        if key != "numProcPerNode" and value != defaults.get(key, object()):
            result.lose(f"{named}spec.mlPolicy.{shape.policy}.{key}", "a v1 job has no such field")


def v1_procs(framework: Framework, trainer: dict, runtime: dict | None, record: dict, result: Converted) -> dict:
    """The kind's processes-per-node field from the trainer's (or the runtime policy's) numProcPerNode."""
    shape = framework.trainer_v2
    policy = ml_policy(runtime).get(shape.policy) or {} if shape.policy else {}
    value = trainer.get("numProcPerNode", policy.get("numProcPerNode") if isinstance(policy, dict) else None)
    if "procs" in record and "command" in record and value == (record["procs"] or 1):
        value = record["procs"]
    if value is None or value == dict(shape.policy_defaults).get("numProcPerNode"):
        return {}
    if shape.proc_field is None:
        result.lose("spec.trainer.numProcPerNode", f"{framework.kind}s run one process per replica")
        return {}
    kind_type = framework.spec_properties.get(shape.proc_field, {}).get("type")
    return {shape.proc_field: str(value) if kind_type == "string" else value}


def v1_run_policy(spec: dict) -> dict:
    policy = {key: spec[key] for key in SHARED_RUN_POLICY if spec.get(key) not in (None, False)}
    if spec.get("managedBy") in SHARED_MANAGERS:
        policy["managedBy"] = spec["managedBy"]
    return {"runPolicy": policy} if policy else {}


def replica_spec(framework: Framework, count: int, template: dict) -> dict:
    restart = {} if framework.restart_policy == V2_RESTART_POLICY else {"restartPolicy": V2_RESTART_POLICY}
    return {"replicas": count, **restart, "template": copy.deepcopy(template)}
