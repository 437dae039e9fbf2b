"""What ``trainctl controller install`` puts in a cluster, and how it applies it.

The manifests are built as data (never by pasting user values into YAML text), so
``--image`` and ``--install-namespace`` cannot inject anything. The ClusterRole lists
exactly the requests the controller makes (see docs/controller.md, "Permissions"):
no wildcards, no Secrets, nothing it does not call.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

from trainctl import API_GROUP, TRAINER_API_GROUP, __version__
from trainctl.controller.leases import NODE_LEASE_NAMESPACE
from trainctl.controller.manager import check_image, check_rate_limit
from trainctl.core.conditions import reached
from trainctl.errors import UserError
from trainctl.frameworks import ALL, HELPER_IMAGES
from trainctl.kube import client as kube
from trainctl.kube.errors import api_errors

NAME = "trainctl-controller"
DEFAULT_NAMESPACE = "trainctl-system"
DEFAULT_IMAGE = f"ghcr.io/trainctl/trainctl:{__version__}"
METRICS_PORT, HEALTH_PORT = 8080, 8081
LABELS = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "trainctl",
          "app.kubernetes.io/version": __version__}
SELECTOR = {"app.kubernetes.io/name": NAME}
CRD_ESTABLISHED_TIMEOUT_S = 60
DNS_1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
DNS_1123_SUBDOMAIN = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
TRAINER_PUBLIC = "kubeflow-trainer-public"  # the ConfigMap Trainer v2's SDK reads the control plane's version from
ADMIN_HINT = "installing needs cluster-admin (it creates CRDs and a ClusterRole)"

READ = ["get", "list", "watch"]


def rule(group: str, resources: list[str], verbs: list[str], names: list[str] | None = None) -> dict:
    entry = {"apiGroups": [group], "resources": resources, "verbs": verbs}
    if names:
        entry["resourceNames"] = names
    return entry


def cluster_rules() -> list[dict]:
    """Every request the controller makes across namespaces, one rule per resource group."""
    jobs = [framework.plural for framework in ALL]
    return [
        # delete: ttlSecondsAfterFinished; patch: the progress annotation (trainctl.controller.progress)
        rule(API_GROUP, jobs, [*READ, "delete", "patch"]),
        rule(API_GROUP, [f"{plural}/status" for plural in jobs], ["update"]),
        # owner references with blockOwnerDeletion, where OwnerReferencesPermissionEnforcement is on
        rule(API_GROUP, [f"{plural}/finalizers" for plural in jobs], ["update"]),
        # get: an MPIJob's launcher Role grants it, and RBAC lets no one grant what they lack
        rule("", ["pods"], [*READ, "create", "delete"]),
        rule("", ["pods/exec"], ["create"]),  # likewise granted to MPIJob launchers
        rule("", ["pods/log"], ["get"]),  # progress reports and last output; the kept records of ended runs
        rule("", ["services"], ["list", "watch", "create", "delete"]),
        rule("", ["events"], ["create"]),
        # which nodes are Ready: a lost node's replicas restart (trainctl/core/nodes.py); read only, and cluster-scoped,
        # so a ClusterRole even for an install that watches one namespace
        rule("", ["nodes"], READ),
        # MPIJob wiring; deleted with the job by its owner reference, never by the controller
        rule("", ["configmaps", "serviceaccounts"], ["get", "create", "update"]),
        # an MPI TrainJob's SSH key pair: created only, never read (one of that name is used as it is), deleted with the
        # job by its owner reference (trainctl/controller/owned.py)
        rule("", ["secrets"], ["create"]),
        # the replicas' kept records (trainctl.controller.records): which runs are kept; a gone job's removed
        rule("", ["configmaps"], ["list", "delete"]),
        rule("rbac.authorization.k8s.io", ["roles", "rolebindings"], ["get", "create", "update"]),
        rule("autoscaling", ["horizontalpodautoscalers"], ["get", "create", "update", "delete"]),  # elastic PyTorch
        # a job's checkpoint claim (--checkpoints SIZE); deleted with the job by its owner reference
        rule("", ["persistentvolumeclaims"], ["get", "create"]),
        rule("scheduling.volcano.sh", ["podgroups"], ["list", "watch", "create", "update", "delete"]),
        rule("scheduling.x-k8s.io", ["podgroups"], ["list", "watch", "create", "update", "delete"]),
        rule("scheduling.k8s.io", ["priorityclasses"], ["get"]),  # PodGroup priority
        rule("apiextensions.k8s.io", ["customresourcedefinitions"], ["get"]),  # is a PodGroup (TrainJob) CRD installed?
        # TrainJobs as the v1 kinds, but deleted by none (they have no TTL); patch: the runtime snapshot and trainctl's
        # status annotations (trainctl/core/trainjob.py, conditions.py), the progress annotation
        rule(TRAINER_API_GROUP, ["trainjobs"], [*READ, "patch"]),
        rule(TRAINER_API_GROUP, ["trainjobs/status", "trainjobs/finalizers"], ["update"]),
        # a TrainJob's runtime, read once, when it is first reconciled (then kept in the TrainJob)
        rule(TRAINER_API_GROUP, ["trainingruntimes", "clustertrainingruntimes"], ["get"]),
    ]


def lease_rules() -> list[dict]:
    """Leader election, in the controller's own namespace only (create cannot be limited by name)."""
    return [rule("coordination.k8s.io", ["leases"], ["get", "update"], [NAME]),
            rule("coordination.k8s.io", ["leases"], ["create"])]


def node_lease_documents(account: dict, namespace: str) -> list[dict]:
    """Read access to the nodes' Leases in ``kube-node-lease`` (trainctl/controller/leases.py: a node whose kubelet
    stopped renewing its Lease is judged by the job's own progress, trainctl/core/nodes.py): get, list and watch
    there, nothing more; named after the install's namespace, so two installs keep their own."""
    rbac, name = "rbac.authorization.k8s.io", f"{NAME}-{namespace}"
    return [
        {"apiVersion": f"{rbac}/v1", "kind": "Role", "metadata": metadata(name, NODE_LEASE_NAMESPACE),
         "rules": [rule("coordination.k8s.io", ["leases"], READ)]},
        {"apiVersion": f"{rbac}/v1", "kind": "RoleBinding", "metadata": metadata(name, NODE_LEASE_NAMESPACE),
         "roleRef": {"apiGroup": rbac, "kind": "Role", "name": name}, "subjects": [account]},
    ]


def trainer_version_documents(namespace: str) -> list[dict]:
    """What Trainer v2's SDK reads when a notebook makes a ``TrainerClient()``: the ConfigMap
    ``kubeflow-trainer-public`` in the control plane's namespace, readable by every signed-in identity (upstream's
    Helm chart creates the same three objects). Without it the SDK only warns; its namespace is
    ``$KUBEFLOW_SYSTEM_NAMESPACE``, ``kubeflow-system`` unless set (docs/trainer-v2.md)."""
    rbac = "rbac.authorization.k8s.io"
    return [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(TRAINER_PUBLIC, namespace),
         "data": {"kubeflow_trainer_version": f"trainctl {__version__} ({TRAINER_API_GROUP}/v1alpha1)"}},
        {"apiVersion": f"{rbac}/v1", "kind": "Role", "metadata": metadata(TRAINER_PUBLIC, namespace),
         "rules": [rule("", ["configmaps"], READ, [TRAINER_PUBLIC])]},
        {"apiVersion": f"{rbac}/v1", "kind": "RoleBinding", "metadata": metadata(TRAINER_PUBLIC, namespace),
         "roleRef": {"apiGroup": rbac, "kind": "Role", "name": TRAINER_PUBLIC},
         "subjects": [{"kind": "Group", "apiGroup": rbac, "name": "system:authenticated"}]},
    ]


def metadata(name: str, namespace: str | None = None) -> dict:
    meta = {"name": name, "labels": dict(LABELS)}
    if namespace:
        meta["namespace"] = namespace
    return meta


def deployment(namespace: str, image: str, gang_scheduler_name: str = "", kube_api_qps: float | None = None,
               kube_api_burst: int | None = None, **helper_images: str | None) -> dict:
    args = ["controller", "run", "--leader-elect", "--lease-name", NAME, "--log-format", "json",
            "--metrics-addr", f":{METRICS_PORT}", "--health-addr", f":{HEALTH_PORT}"]
    if gang_scheduler_name:
        args += ["--gang-scheduler-name", gang_scheduler_name]
    if kube_api_qps is not None:  # else the controller's own default (upstream's 20/30)
        args += ["--kube-api-qps", f"{kube_api_qps:g}"]
    if kube_api_burst is not None:
        args += ["--kube-api-burst", str(kube_api_burst)]
    for name, value in helper_images.items():
        if value:  # a cluster that cannot pull upstream's (air-gapped, a mirror) names its own
            args += [HELPER_IMAGES[name].flag, value]
    probe = {"httpGet": {"path": "/healthz", "port": "health"}, "periodSeconds": 10, "failureThreshold": 3}
    container = {
        "name": "controller", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["trainctl"], "args": args,
        # the Lease lives beside the controller, wherever it was installed
        "env": [{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT}, {"name": "health", "containerPort": HEALTH_PORT}],
        "livenessProbe": {**probe, "initialDelaySeconds": 15},
        # /readyz only reads a flag: probing it every 2 s costs nothing and ends a rollout soon after the caches sync
        "readinessProbe": {**probe, "httpGet": {"path": "/readyz", "port": "health"}, "periodSeconds": 2},
        # measured: 90 MB peak RSS with 500 jobs (2000 pods) cached; see docs/benchmarks.md
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
    }
    pod_spec = {
        "serviceAccountName": NAME,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        # SIGTERM drains in-flight reconciles (up to 30 s) and releases the Lease
        "terminationGracePeriodSeconds": 40,
        "containers": [container],
    }
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata(NAME, namespace),
            "spec": {"replicas": 1, "selector": {"matchLabels": dict(SELECTOR)},
                     "template": {"metadata": {"labels": dict(LABELS)}, "spec": pod_spec}}}


def manifests(namespace: str = DEFAULT_NAMESPACE, image: str | None = None, gang_scheduler_name: str = "",
              kube_api_qps: float | None = None, kube_api_burst: int | None = None,
              **helper_images: str | None) -> list[dict]:
    """Everything the controller needs, in the order it must be created; ``helper_images`` are the kinds'
    helper images by key (trainctl.frameworks.HELPER_IMAGES; None: upstream's default), ``kube_api_qps``/
    ``kube_api_burst`` the controller's rate limit (None: its default)."""
    from trainctl.core.crds import all_crds
    from trainctl.core.trainer_crds import all_trainer_crds

    if not DNS_1123_LABEL.fullmatch(namespace):
        raise UserError(f"--install-namespace {namespace!r}: use lower-case letters, digits and '-' "
                        "(at most 63, starting and ending with a letter or digit)")
    image = check_image(image or DEFAULT_IMAGE, "--image")
    for name, value in helper_images.items():
        if value is not None:
            check_image(value, HELPER_IMAGES[name].flag)
    if gang_scheduler_name and not DNS_1123_SUBDOMAIN.fullmatch(gang_scheduler_name):
        raise UserError(f"--gang-scheduler-name {gang_scheduler_name!r}: a scheduler's name, e.g. volcano or "
                        "yunikorn (lower-case letters, digits, '-' and '.')")
    check_rate_limit(0.0 if kube_api_qps is None else kube_api_qps, kube_api_burst or 0)
    account = {"kind": "ServiceAccount", "name": NAME, "namespace": namespace}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata(namespace)},
        *all_crds(), *all_trainer_crds(),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata(NAME, namespace)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": metadata(NAME),
         "rules": cluster_rules()},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": metadata(NAME),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
         "subjects": [account]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": metadata(NAME, namespace),
         "rules": lease_rules()},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": metadata(NAME, namespace),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME}, "subjects": [account]},
        *node_lease_documents(account, namespace),
        *trainer_version_documents(namespace),
        deployment(namespace, image, gang_scheduler_name, kube_api_qps, kube_api_burst, **helper_images),
        {"apiVersion": "v1", "kind": "Service", "metadata": metadata(f"{NAME}-metrics", namespace),
         "spec": {"selector": dict(SELECTOR),
                  "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics"}]}},
    ]


RESOURCES = {r.kind: r for r in (kube.NAMESPACES, kube.CRDS, kube.SERVICE_ACCOUNTS, kube.CLUSTER_ROLES,
                                  kube.CLUSTER_ROLE_BINDINGS, kube.ROLES, kube.ROLE_BINDINGS, kube.CONFIGMAPS, kube.DEPLOYMENTS,
                                  kube.SERVICES)}


def apply_manifests(documents: list[dict], context: str | None = None,
                    kubeconfig: str | None = None) -> Iterator[str]:
    """Create or update each document in order; yields one progress line per object."""
    client = kube.connect(context, kubeconfig)
    yield f"installing the trainctl controller on {client.config.context} ({client.config.server})"
    for document in documents:
        resource = RESOURCES[document["kind"]]
        meta = document["metadata"]
        what = f"{resource.kind.lower()}/{meta['name']}"
        with api_errors(f"apply {what}", client, ADMIN_HINT):
            outcome = client.apply(resource, document, meta.get("namespace"))
        yield f"{what} {outcome}"
    crd_names = [d["metadata"]["name"] for d in documents if d["kind"] == "CustomResourceDefinition"]
    with api_errors("wait for the CRDs", client, ADMIN_HINT):
        wait_established(client, crd_names)
    namespace = next(d["metadata"]["namespace"] for d in documents if d["kind"] == "Deployment")
    yield (f"done: the CRDs are served; watch the controller start with "
           f"kubectl -n {namespace} rollout status deployment/{NAME}")


def wait_established(client: kube.Client, names: list[str]) -> None:
    """A new CRD takes a moment before its kind is served; jobs applied right after would fail."""
    deadline = time.monotonic() + CRD_ESTABLISHED_TIMEOUT_S
    for name in names:
        while not established(client.get(kube.CRDS, name)):
            if time.monotonic() > deadline:
                raise UserError(f"CRD {name} not Established after {CRD_ESTABLISHED_TIMEOUT_S} s: "
                                f"kubectl describe crd {name} says why")
            time.sleep(0.2)


def established(crd: dict) -> bool:
    return reached(crd, "Established")

