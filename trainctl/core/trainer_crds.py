"""The project's own CustomResourceDefinitions for Kubeflow Trainer v2 (``trainer.kubeflow.org/v1alpha1``):
TrainJob (namespaced, with a status subresource), TrainingRuntime (namespaced) and ClusterTrainingRuntime.

Built as the v1 CRDs are (crds.py): in Python, around the schemas ``tools/gen_pod_schema.py`` generates from
the Kubernetes client (the pod template, batch/v1 JobSpec, PersistentVolumeClaim) and the mlPolicy schemas
the framework modules declare for their Trainer plugins; never copied from upstream. They are
schema-compatible with upstream's: every property path of upstream's three CRDs is one of ours
(tests/unit/test_trainer_v2_crds.py), and upstream's default runtimes, a TrainJob of each and the SDK's
TrainJob bodies validate on a real API server (tests/k8s/test_trainer_v2_resources.py).

Where upstream states a rule in CEL that an OpenAPI keyword states as well (a minimum, an enum, the TrainJob
name's pattern), it is stated with the keyword: API servers before 1.25 drop CEL rules unread, and enforce
these. The CEL rules that have no such form (immutability, at most one mlPolicy) are kept as upstream words
them, for the servers that run them.
"""

from __future__ import annotations

import copy
import functools
import json
from importlib import resources

from trainctl import TRAINER_API_GROUP, TRAINER_API_VERSION
from trainctl.core.crds import INT64, all_crds, crd, pod_template_schema, with_format_ranges
from trainctl.errors import UserError
from trainctl.frameworks import ALL, by_name
from trainctl.frameworks._schema import BOOLEAN, INT32, STRING, obj

TRAINJOB, RUNTIME, CLUSTER_RUNTIME = "TrainJob", "TrainingRuntime", "ClusterTrainingRuntime"
TRAINER_KINDS = (TRAINJOB, RUNTIME, CLUSTER_RUNTIME)
#: who reconciles a TrainJob: upstream's controller by default (trainctl's controller answers to the same
#: name), or MultiKueue; the only two upstream's CEL rule allows
MANAGED_BY = ["trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue"]
#: a TrainJob's name is a DNS-1035 label (upstream: two CEL rules on the object; here the pattern enforces it
#: on every server version, the rules stay for the message)
NAME_PATTERN, NAME_MAX = "^[a-z]([-a-z0-9]*[a-z0-9])?$", 63
NAME_RULES = [
    {"rule": f"self.metadata.name.matches('{NAME_PATTERN}')", "message": "metadata.name must match RFC 1035 DNS "
                                                                         "label format"},
    {"rule": f"size(self.metadata.name) <= {NAME_MAX}", "message": f"metadata.name must be no more than {NAME_MAX} "
                                                                   "characters"},
]
#: a plugin that answers no kubeflow.org/v1 kind (Flux, for HPC jobs): its policy's schema is declared here
FLUX_POLICY = obj(numProcPerNode={**INT32, "default": 1, "minimum": 1})
DATE_TIME = {"type": "string", "format": "date-time"}


def immutable(schema: dict, message: str = "field is immutable") -> dict:
    return {**schema, "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": message}]}


def jobset_immutable(schema: dict) -> dict:
    """Immutable, in JobSet's words."""
    return immutable(schema, "Value is immutable")


def bounded(schema: dict, min_length: int | None = None, max_length: int | None = None) -> dict:
    limits = {"minLength": min_length, "maxLength": max_length}
    return {**schema, **{key: value for key, value in limits.items() if value is not None}}


def list_map(items: dict, key: str, max_items: int | None = None) -> dict:
    """A list whose items are merged by ``key`` (server-side apply), which each item must have."""
    schema = {"type": "array", "items": {**items, "required": sorted({*items.get("required", ()), key})},
              "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": [key]}
    return {**schema, "maxItems": max_items} if max_items else schema


def atomic_list(items: dict, max_items: int | None = None) -> dict:
    schema = {"type": "array", "items": items, "x-kubernetes-list-type": "atomic"}
    return {**schema, "maxItems": max_items} if max_items else schema


def with_required(schema: dict, *required: str) -> dict:
    return {**schema, "required": list(required)}


@functools.cache
def generated(name: str) -> dict:
    """One of the schemas tools/gen_pod_schema.py generates from the Kubernetes client (``jobspec``, ...)."""
    return json.loads(resources.files("trainctl").joinpath(f"schemas/{name}.json").read_text())


# ---- the Kubernetes parts ------------------------------------------------------------------

def metadata() -> dict:
    return copy.deepcopy(pod_template_schema()["properties"]["metadata"])


def pod_spec() -> dict:
    return copy.deepcopy(pod_template_schema()["properties"]["spec"])


def container() -> dict:
    return pod_spec()["properties"]["containers"]["items"]


def env_list() -> dict:
    return list_map(container()["properties"]["env"]["items"], "name", max_items=128)


def job_template() -> dict:
    """A replicatedJob's template: a batch/v1 JobTemplateSpec."""
    spec = copy.deepcopy(generated("jobspec"))
    spec["properties"]["template"] = copy.deepcopy(pod_template_schema())
    return obj(metadata=metadata(), spec=with_required(spec, "template"))


def volume_claim_policy() -> dict:
    claim = copy.deepcopy(generated("persistentvolumeclaim"))
    return {**obj(templates=atomic_list(claim, max_items=50),
                  retentionPolicy=obj(whenDeleted={**STRING, "enum": ["Delete", "Retain"], "default": "Delete"})),
            "x-kubernetes-validations": [{
                "rule": "self.templates.all(t, !has(t.metadata.namespace) || size(t.metadata.namespace) == 0)",
                "message": "namespace cannot be set for VolumeClaimPolicies templates"}]}


# ---- TrainingRuntime and ClusterTrainingRuntime ------------------------------------------------

def ml_policy() -> dict:
    """numNodes and at most one plugin's policy: the frameworks' (torch, mpi, ...) and Flux's."""
    policies = {framework.trainer_v2.policy: framework.trainer_policy_schema for framework in ALL
                if framework.trainer_v2 and framework.trainer_v2.policy} | {"flux": FLUX_POLICY}
    present = ", ".join(f"has(self.{name})" for name in policies)
    return {**obj(numNodes=INT32, **copy.deepcopy(policies)), "x-kubernetes-validations": [
        {"rule": f"[{present}].filter(x, x).size() <= 1", "message": "Only one of the policy can be configured"}]}


def pod_group_policy() -> dict:
    return obj(
        coscheduling=obj(scheduleTimeoutSeconds={**INT32, "default": 60}),
        volcano=obj(networkTopology=obj(mode={**STRING, "enum": ["hard", "soft"], "default": "hard"},
                                        highestTierAllowed={"type": "integer", "default": 1})),
    )


def replicated_job() -> dict:
    depends_on = list_map(with_required(obj(name=STRING, status={**STRING, "enum": ["Ready", "Complete"]}),
                                        "status"), "name", max_items=5)
    return with_required(obj(
        name=STRING,
        groupName={**STRING, "default": "default"},
        replicas={**INT32, "default": 1},
        dependsOn=jobset_immutable(depends_on),
        template=job_template(),
    ), "name", "template")


def failure_policy() -> dict:
    actions = ["FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts", "RestartJob",
               "RestartJobAndIgnoreMaxRestarts"]
    rule = with_required(obj(name=STRING, action={**STRING, "enum": actions},
                             onJobFailureReasons={"type": "array", "items": STRING},
                             onJobFailureMessagePatterns={"type": "array", "items": STRING},
                             targetReplicatedJobs=atomic_list(STRING)), "action", "name")
    return jobset_immutable(obj(
        maxRestarts=INT32,
        restartStrategy={**STRING, "enum": ["Recreate", "BlockingRecreate", "InPlaceRestart"], "default": "Recreate"},
        rules={"type": "array", "items": rule},
    ))


def jobset_spec() -> dict:
    """A runtime's template spec: a JobSet (jobset.x-k8s.io/v1alpha2) spec, which names its replicated jobs."""
    exclusive = "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && " \
                "self.replicatedJobs.exists(x, has(x.dependsOn)))"
    return {**obj(
        replicatedJobs=list_map(replicated_job(), "name"),
        network=jobset_immutable(obj(enableDNSHostnames=BOOLEAN, subdomain=STRING, publishNotReadyAddresses=BOOLEAN)),
        successPolicy=jobset_immutable(with_required(
            obj(operator={**STRING, "enum": ["All", "Any"]}, targetReplicatedJobs=atomic_list(STRING)), "operator")),
        failurePolicy=failure_policy(),
        startupPolicy=jobset_immutable(with_required(
            obj(startupPolicyOrder={**STRING, "enum": ["AnyOrder", "InOrder"]}), "startupPolicyOrder")),
        suspend=BOOLEAN,
        coordinator=with_required(obj(replicatedJob=STRING, jobIndex={"type": "integer"},
                                      podIndex={"type": "integer"}), "replicatedJob"),
        managedBy=STRING,
        ttlSecondsAfterFinished={**INT32, "minimum": 0},
        volumeClaimPolicies=jobset_immutable(atomic_list(volume_claim_policy(), max_items=50)),
    ), "x-kubernetes-validations": [
        {"rule": exclusive, "message": "StartupPolicy and DependsOn APIs are mutually exclusive"}]}


def runtime_schema() -> dict:
    """The openAPIV3Schema both runtime kinds share."""
    spec = obj(mlPolicy=ml_policy(), podGroupPolicy=pod_group_policy(),
               template={**obj(metadata=metadata(), spec=jobset_spec()), "minProperties": 1})
    return obj(apiVersion=STRING, kind=STRING, metadata={"type": "object"}, spec={**spec, "minProperties": 1})


# ---- TrainJob ----------------------------------------------------------------------------

def initializer() -> dict:
    """Where a dataset or model initializer downloads from."""
    uri_rule = {"rule": "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')",
                "message": "storageUri may be empty, or it must be a valid URI (scheme://...)"}
    return obj(
        storageUri={**bounded(STRING, max_length=2048), "x-kubernetes-validations": [uri_rule]},
        env=env_list(),
        # upstream defaults name to "", which API servers before 1.21 refuse to store in a CRD ("null")
        secretRef={**obj(name=STRING), "x-kubernetes-map-type": "atomic"},
    )


def trainer() -> dict:
    """What a TrainJob sets of its runtime's ``node`` container and node count."""
    words = atomic_list(bounded(STRING, max_length=1 << 20), max_items=128)
    return immutable(obj(
        image=bounded(STRING, max_length=500),
        command=words,
        args=copy.deepcopy(words),
        env=env_list(),
        numNodes={**INT32, "minimum": 0},
        resourcesPerNode=container()["properties"]["resources"],
        numProcPerNode={**INT32, "minimum": 1},  # upstream: CEL self >= 1
    ))


def pod_spec_patch() -> dict:
    """What a runtime patch may set of a pod (upstream's PodSpecPatch, with its bounds): a few pod fields, and a
    few fields of containers named as the runtime's."""
    pod, fields = pod_spec()["properties"], container()["properties"]
    patched = obj(name=bounded(STRING, 1, 253), env=list_map(fields["env"]["items"], "name", max_items=128),
                  volumeMounts=list_map(fields["volumeMounts"]["items"], "name", max_items=128),
                  securityContext=fields["securityContext"])
    containers = list_map(patched, "name", max_items=64)
    return obj(
        containers=containers,
        initContainers=copy.deepcopy(containers),
        volumes=list_map(pod["volumes"]["items"], "name", max_items=128),
        imagePullSecrets={**pod["imagePullSecrets"], "maxItems": 64},
        schedulingGates=list_map(pod["schedulingGates"]["items"], "name", max_items=16),
        tolerations=atomic_list(pod["tolerations"]["items"], max_items=128),
        serviceAccountName=bounded(STRING, max_length=253),
        terminationGracePeriodSeconds={**INT64, "minimum": 0},
        **{field: pod[field] for field in ("affinity", "nodeSelector", "securityContext")},
    )


def runtime_patch() -> dict:
    """One manager's patch of the runtime (the SDK's, Kueue's): labels, annotations and pod fields."""
    job = obj(name=bounded(STRING, 1, 253), template=obj(
        metadata=metadata(), spec=obj(template=obj(metadata=metadata(), spec=pod_spec_patch()))))
    return obj(
        manager=immutable(bounded(STRING, 1, 253)),
        time=DATE_TIME,
        trainingRuntimeSpec=obj(template=obj(metadata=metadata(), spec=obj(
            replicatedJobs=list_map(job, "name", max_items=100)))),
    )


def trainjob_spec() -> dict:
    runtime_ref = with_required(obj(
        name=bounded(STRING, 1, 253),
        apiGroup={**bounded(STRING, max_length=253), "default": TRAINER_API_GROUP},
        kind={**bounded(STRING, max_length=253), "default": CLUSTER_RUNTIME},
    ), "name")
    return with_required(obj(
        runtimeRef=immutable(runtime_ref),
        initializer=immutable(obj(dataset=initializer(), model=initializer())),
        trainer=trainer(),
        runtimePatches=list_map(runtime_patch(), "manager", max_items=16),
        suspend={**BOOLEAN, "default": False},
        activeDeadlineSeconds=immutable({**INT64, "minimum": 1}),
        managedBy=immutable({**bounded(STRING, max_length=253), "enum": MANAGED_BY, "default": MANAGED_BY[0]}),
    ), "runtimeRef")


def condition() -> dict:
    """A metav1.Condition, as its own CRD validation states it."""
    return with_required(obj(
        type={**bounded(STRING, max_length=316), "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*"
                                                             r"[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"},
        status={**STRING, "enum": ["True", "False", "Unknown"]},
        observedGeneration={**INT64, "minimum": 0},
        lastTransitionTime=DATE_TIME,
        reason={**bounded(STRING, 1, 1024), "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
        message=bounded(STRING, max_length=32768),
    ), "lastTransitionTime", "message", "reason", "status", "type")


def trainjob_status() -> dict:
    count = {**INT32, "minimum": 0}
    jobs = with_required(obj(name=bounded(STRING, 1, 253), ready=count, succeeded=count, failed=count, active=count,
                             suspended=count), "active", "failed", "name", "ready", "succeeded", "suspended")
    metric = with_required(obj(name=bounded(STRING, 1, 64), value=bounded(STRING, 1, 64)), "name", "value")
    trainer_status = {**obj(
        progressPercentage={**INT32, "minimum": 0, "maximum": 100},
        estimatedRemainingSeconds={**INT32, "minimum": 0},
        metrics=atomic_list(metric, max_items=256),
        lastUpdatedTime=DATE_TIME,
    ), "x-kubernetes-validations": [{"rule": "has(self.lastUpdatedTime)",
                                     "message": "lastUpdatedTime is required when trainerStatus is present"}]}
    return {**obj(conditions=list_map(condition(), "type", max_items=8), jobsStatus=list_map(jobs, "name", 100),
                  trainerStatus=trainer_status), "minProperties": 1}


def trainjob_schema() -> dict:
    name = {**STRING, "pattern": NAME_PATTERN, "maxLength": NAME_MAX}
    return {**obj(apiVersion=STRING, kind=STRING, metadata=obj(name=name), spec=trainjob_spec(),
                  status=trainjob_status()), "x-kubernetes-validations": NAME_RULES}


# ---- the CRDs ------------------------------------------------------------------------------

def trainer_crd(kind: str, schema: dict, cluster: bool = False, job: bool = False) -> dict:
    """The apiextensions.k8s.io/v1 CRD of one Trainer kind; ``job``: TrainJob's status and columns."""
    plural = kind.lower() + "s"
    version: dict = {"name": TRAINER_API_VERSION.split("/")[1], "served": True, "storage": True,
                     "schema": {"openAPIV3Schema": with_format_ranges(copy.deepcopy(schema))}}
    names = {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()}
    if job:
        version["subresources"] = {"status": {}}
        version["additionalPrinterColumns"] = [
            {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
        names["categories"] = ["kubeflow", "trainctl"]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{TRAINER_API_GROUP}", "labels": {"app.kubernetes.io/part-of": "trainctl"}},
        "spec": {"group": TRAINER_API_GROUP, "names": names, "scope": "Cluster" if cluster else "Namespaced",
                 "versions": [version]},
    }


def kind_crd(kind: str) -> dict:
    """The CRD of one of :data:`TRAINER_KINDS`."""
    if kind == TRAINJOB:
        return trainer_crd(TRAINJOB, trainjob_schema(), job=True)
    return trainer_crd(kind, runtime_schema(), cluster=kind == CLUSTER_RUNTIME)


def all_trainer_crds() -> list[dict]:
    """TrainJob, TrainingRuntime and ClusterTrainingRuntime."""
    return [kind_crd(kind) for kind in TRAINER_KINDS]


def crd_named(name: str) -> dict:
    """The CRD of one kind, in any of kubectl's spellings: a job kind (``pytorch``, ``tfjobs``, as
    :func:`trainctl.frameworks.by_name` reads it) or a Trainer v2 kind (``trainjob``, ``ClusterTrainingRuntimes``,
    ``trainjobs.trainer.kubeflow.org``)."""
    wanted = name.lower().removesuffix(f".{TRAINER_API_GROUP}")
    for kind in TRAINER_KINDS:
        if wanted in (kind.lower(), kind.lower() + "s"):
            return kind_crd(kind)
    try:
        return crd(by_name(name))
    except UserError as error:
        raise UserError(f"{error.message}, or a Trainer v2 kind: {', '.join(k.lower() for k in TRAINER_KINDS)}") \
            from None


def project_crds(api: str = "all") -> list[dict]:
    """The CRDs ``trainctl crds`` prints and installs for ``api``: the six kubeflow.org/v1 job kinds (``v1``),
    Trainer v2's three kinds (``v2``), or both (``all``)."""
    return [*(all_crds() if api in ("v1", "all") else ()), *(all_trainer_crds() if api in ("v2", "all") else ())]

