"""``trainctl controller install`` on the real API server (RBAC on, OwnerReferencesPermissionEnforcement
on), and the controller running under its ServiceAccount's token with only the installed permissions."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid

import pytest
import yaml

from tests.controller.conftest import ControllerProcess
from tests.controller.jobs import create, get_job, job, pods, services, wait_for, wait_state
from tests.conftest import REPO
from trainctl.controller.install import NAME
from trainctl.frameworks import by_kind
from trainctl.kube import job_resource, trainer_resource
from trainctl.kube.client import (
    CLUSTER_ROLE_BINDINGS,
    CLUSTER_ROLES,
    CONFIGMAPS,
    DEPLOYMENTS,
    LEASES,
    NAMESPACES,
    PODS,
    ROLE_BINDINGS,
    ROLES,
    SECRETS,
    SERVICE_ACCOUNTS,
    Resource,
    connect,
)

pytestmark = pytest.mark.k8s
TRAINJOBS = trainer_resource("TrainJob")
ACCESS_REVIEWS = Resource("authorization.k8s.io", "v1", "selfsubjectaccessreviews", namespaced=False)


def trainctl(kubeconfig, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "trainctl", *args], env=env, capture_output=True, text=True,
                          timeout=120, cwd=REPO)


@pytest.fixture(scope="module")
def installed(k8s_cluster):
    """The manifests of ``install --dry-run`` applied by ``install``; yields (namespace, first run's output)."""
    namespace = f"tc-system-{uuid.uuid4().hex[:6]}"
    result = trainctl(k8s_cluster.kubeconfig("admin"), "controller", "install", "--install-namespace", namespace)
    assert result.returncode == 0, result.stderr
    yield namespace, result.stdout
    rest = connect(kubeconfig=str(k8s_cluster.kubeconfig("admin")))
    rest.delete(CLUSTER_ROLE_BINDINGS, NAME)  # the ClusterRole stays: later installs apply the same one


def service_account_kubeconfig(k8s_cluster, rest, namespace: str, path) -> str:
    """A kubeconfig holding a token the API server issued for the controller's ServiceAccount (TokenRequest)."""
    request = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
    token = rest.request("POST", SERVICE_ACCOUNTS.path(namespace, NAME, "token"), request)["status"]["token"]
    config = yaml.safe_load(open(k8s_cluster.kubeconfig("admin")))
    config["users"] = [{"name": "controller", "user": {"token": token}}]
    for context in config["contexts"]:
        # the Lease goes to the context's namespace, as it goes to POD_NAMESPACE in the Deployment
        context["context"].update(user="controller", namespace=namespace)
    path.write_text(yaml.safe_dump(config))
    return str(path)


def pods_of_trainjob(rest, namespace: str, name: str) -> list[dict]:
    return rest.list(PODS, namespace, f"jobset.sigs.k8s.io/jobset-name={name}")["items"]


def allowed(client, verb: str, resource: str, group: str = "", namespace: str = "", subresource: str = "",
            name: str = "") -> bool:
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
              "spec": {"resourceAttributes": {"verb": verb, "group": group, "resource": resource, "name": name,
                                              "namespace": namespace, "subresource": subresource}}}
    return client.create(ACCESS_REVIEWS, review)["status"].get("allowed", False)


def test_install_creates_every_object_and_a_second_run_changes_nothing(k8s_cluster, installed, rest):
    namespace, first = installed
    dry_run = list(yaml.safe_load_all(trainctl(k8s_cluster.kubeconfig("admin"), "controller", "install",
                                               "--dry-run", "--install-namespace", namespace).stdout))
    for document in dry_run:
        line = f"{document['kind'].lower()}/{document['metadata']['name']}"
        assert f"{line} created" in first or f"{line} unchanged" in first, (line, first)
    assert rest.get(DEPLOYMENTS, NAME, namespace)["spec"]["template"]["spec"]["serviceAccountName"] == NAME
    again = trainctl(k8s_cluster.kubeconfig("admin"), "controller", "install", "--install-namespace", namespace)
    assert again.returncode == 0, again.stderr
    outcomes = [line.rsplit(" ", 1)[1] for line in again.stdout.splitlines() if "/" in line.split(" ")[0]]
    assert len(outcomes) == len(dry_run) and set(outcomes) == {"unchanged"}, again.stdout


def test_install_needs_cluster_admin_and_says_so(k8s_cluster, installed):
    result = trainctl(k8s_cluster.kubeconfig("bob"), "controller", "install", "--install-namespace", "tc-denied")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "forbidden" in result.stderr and "cluster-admin" in result.stderr and "namespace/tc-denied" in result.stderr


def test_the_service_account_may_do_what_the_controller_does_and_nothing_more(k8s_cluster, installed, rest,
                                                                              tmp_path):
    namespace, _ = installed
    kubeconfig = service_account_kubeconfig(k8s_cluster, rest, namespace, tmp_path / "sa.kubeconfig")
    controller = connect(kubeconfig=kubeconfig)
    for verb in ("list", "watch", "delete"):
        assert allowed(controller, verb, "pytorchjobs", "kubeflow.org")  # every namespace
    assert allowed(controller, "update", "mpijobs", "kubeflow.org", "team-a", "status")
    for verb in ("list", "watch", "create", "delete"):
        assert allowed(controller, verb, "pods", namespace="team-a")
    assert allowed(controller, "get", "pods", namespace="team-a", subresource="log")  # progress reports (issue 25)
    for verb in ("get", "list", "create", "update", "delete"):  # the kept records (issue 26)
        assert allowed(controller, verb, "configmaps", namespace="team-a")
    assert allowed(controller, "patch", "pytorchjobs", "kubeflow.org", "team-a")  # their summary, an annotation
    for verb in ("list", "watch", "patch"):  # TrainJobs: their runtime snapshot and trainctl's status annotations
        assert allowed(controller, verb, "trainjobs", "trainer.kubeflow.org")
    assert allowed(controller, "update", "trainjobs", "trainer.kubeflow.org", "team-a", "status")
    assert allowed(controller, "get", "trainingruntimes", "trainer.kubeflow.org", "team-a")
    assert allowed(controller, "get", "clustertrainingruntimes", "trainer.kubeflow.org")
    for verb in ("get", "list", "watch"):  # which nodes are Ready: a lost node's replicas restart (issue 42)
        assert allowed(controller, verb, "nodes")
    assert allowed(controller, "create", "secrets", namespace="team-a")  # an MPI TrainJob's SSH keys, never read
    assert allowed(controller, "update", "leases", "coordination.k8s.io", namespace, name=NAME)
    assert not allowed(controller, "update", "leases", "coordination.k8s.io", namespace, name="someone-elses")
    denied = [("get", "secrets", ""), ("list", "secrets", ""), ("watch", "secrets", ""), ("update", "secrets", ""),
              ("delete", "secrets", ""), ("create", "pytorchjobs", "kubeflow.org"),
              ("update", "pytorchjobs", "kubeflow.org"), ("update", "pods", ""), ("create", "deployments", "apps"),
              ("create", "trainjobs", "trainer.kubeflow.org"), ("delete", "trainjobs", "trainer.kubeflow.org"),
              ("list", "clustertrainingruntimes", "trainer.kubeflow.org"),
              ("update", "nodes", ""), ("patch", "nodes", ""), ("delete", "nodes", ""),
              ("create", "clusterroles", "rbac.authorization.k8s.io"),
              ("delete", "namespaces", ""), ("escalate", "roles", "rbac.authorization.k8s.io"),
              ("bind", "roles", "rbac.authorization.k8s.io")]
    assert [d for d in denied if allowed(controller, d[0], d[1], d[2], "team-a")] == []
    assert not allowed(controller, "update", "leases", "coordination.k8s.io", "team-a", name=NAME)  # own namespace only
    granted = rest.get(CLUSTER_ROLES, NAME)["rules"]
    assert not [r for r in granted if "*" in r["verbs"] + r["resources"] + r["apiGroups"]]


def test_anyone_signed_in_reads_the_trainer_version_configmap_and_no_other(k8s_cluster, installed):
    """What Trainer v2's TrainerClient() reads first (kubeflow-trainer-public), as bob, who has no rights at all."""
    namespace, _ = installed
    bob = connect(kubeconfig=k8s_cluster.kubeconfig("bob"))
    for verb in ("get", "watch"):
        assert allowed(bob, verb, "configmaps", namespace=namespace, name="kubeflow-trainer-public")
    assert not allowed(bob, "get", "configmaps", namespace=namespace, name="trainctl-controller")
    assert not allowed(bob, "get", "configmaps", namespace="team-a", name="kubeflow-trainer-public")


def test_the_controller_runs_jobs_under_its_service_account_token(k8s_cluster, installed, rest, kube_node,
                                                                   managed_namespace, tmp_path):
    install_namespace, _ = installed
    kubeconfig = service_account_kubeconfig(k8s_cluster, rest, install_namespace, tmp_path / "sa.kubeconfig")
    controller = ControllerProcess(kubeconfig, tmp_path / "controller.log", "--leader-elect",
                                   "--lease-name", NAME, "--namespace", managed_namespace)
    try:
        controller.wait_ready()
        # pods, services, status, events, TTL deletion of the job itself
        create(rest, job("PyTorchJob", "rbac", managed_namespace, {"Master": 1, "Worker": 1},
                         run_policy={"ttlSecondsAfterFinished": 1}))
        # the MPIJob launcher's ServiceAccount, ConfigMap, Role (with pods/exec) and RoleBinding
        create(rest, job("MPIJob", "mpi", managed_namespace, {"Launcher": 1, "Worker": 2}))
        # a TrainJob: its runtime looked for (none here), its status and annotation written, an event
        rest.create(TRAINJOBS, {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                "metadata": {"name": "v2", "namespace": managed_namespace},
                                "spec": {"runtimeRef": {"kind": "TrainingRuntime", "name": "absent"}}},
                    managed_namespace)
        # an MPI TrainJob (upstream's deepspeed runtime, as a TrainingRuntime here): its hostfile ConfigMap and its
        # SSH key Secret, which the controller may create but not read
        runtime = yaml.safe_load((REPO.parent / "shared" / "kubeflow-trainer-v2" / "runtimes" /
                                  "deepspeed_distributed.yaml").read_text())
        rest.create(trainer_resource("TrainingRuntime"), {**runtime, "kind": "TrainingRuntime"}, managed_namespace)
        rest.create(TRAINJOBS, {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                "metadata": {"name": "ds", "namespace": managed_namespace},
                                "spec": {"runtimeRef": {"kind": "TrainingRuntime", "name": "deepspeed-distributed"},
                                         "trainer": {"numNodes": 2}}}, managed_namespace)
        wait_for(lambda: "ds-mpi-ssh-auth" in {secret["metadata"]["name"] for secret in rest.list(
            SECRETS, managed_namespace)["items"]}, what="the MPI TrainJob's Secret")
        assert rest.get(CONFIGMAPS, "ds-mpi-hostfile", managed_namespace)["data"]["hostfile"]
        # one whose Secret exists already (made by someone else, or before the controller restarted): used as it
        # is, unread, and the job's pods still made
        premade = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/ssh-auth",
                   "metadata": {"name": "ds2-mpi-ssh-auth"}, "data": {"ssh-privatekey": "cHJlbWFkZQ=="}}
        rest.create(SECRETS, premade, managed_namespace)
        rest.create(TRAINJOBS, {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                "metadata": {"name": "ds2", "namespace": managed_namespace},
                                "spec": {"runtimeRef": {"kind": "TrainingRuntime", "name": "deepspeed-distributed"},
                                         "trainer": {"numNodes": 2}}}, managed_namespace)
        wait_for(lambda: len(pods_of_trainjob(rest, managed_namespace, "ds2")) == 2, what="the pods of TrainJob ds2")
        assert rest.get(SECRETS, "ds2-mpi-ssh-auth", managed_namespace)["data"] == premade["data"]
        wait_for(lambda: len(pods(rest, managed_namespace, "rbac")) == 2, what="PyTorchJob pods")
        wait_state(rest, "PyTorchJob", managed_namespace, "rbac", "Running")
        assert set(services(rest, managed_namespace, "rbac")) == {"rbac-master-0", "rbac-worker-0"}
        wait_for(lambda: len(pods(rest, managed_namespace, "mpi")) == 3, what="MPIJob pods")
        assert rest.get(ROLES, "mpi-launcher", managed_namespace)["rules"][1]["resources"] == ["pods/exec"]
        assert rest.get(ROLE_BINDINGS, "mpi-launcher", managed_namespace)
        assert rest.get(CONFIGMAPS, "mpi-config", managed_namespace)["data"]["hostfile"]
        kube_node.write_log(managed_namespace, "rbac-master-0", "pytorch", "done\n")
        kube_node.set_phase(managed_namespace, "rbac-worker-0", "Succeeded", exit_code=0)
        kube_node.set_phase(managed_namespace, "rbac-master-0", "Succeeded", exit_code=0)
        wait_for(lambda: rest.list(CONFIGMAPS, managed_namespace, "trainctl.io/record=v1")["items"],
                 what="the master's run kept")
        wait_for(lambda: not any(j["metadata"]["name"] == "rbac" for j in rest.list(
            job_resource(by_kind("PyTorchJob")), managed_namespace)["items"]), what="TTL deletion")
        assert get_job(rest, "MPIJob", managed_namespace, "mpi")["status"]["conditions"][0]["type"] == "Created"
        wait_for(lambda: (rest.get(TRAINJOBS, "v2", managed_namespace).get("status") or {}).get("conditions"),
                 what="the TrainJob failed for its missing runtime")
        lease = rest.get(LEASES, NAME, install_namespace)
        assert lease["spec"]["holderIdentity"]
    finally:
        controller.stop(signal.SIGTERM)
    log = (tmp_path / "controller.log").read_text()
    assert "forbidden" not in log.lower() and '"level": "error"' not in log, log[-3000:]
    assert rest.get(NAMESPACES, install_namespace)
