"""What ``trainctl controller install --dry-run`` prints: complete, least-privilege, injection-safe, and
the same as the committed controller/manifests copy and the image it names."""

from __future__ import annotations

import subprocess
import sys

import yaml

from tests.conftest import REPO
from trainctl.controller.install import NAME, READ, manifests
from trainctl.core.trainer_crds import TRAINER_KINDS
from trainctl.frameworks import ALL

MANIFEST = REPO / "controller" / "manifests" / "trainctl-controller.yaml"


def dry_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainctl", "controller", "install", "--dry-run", *args],
                          capture_output=True, text=True, timeout=60, cwd=REPO)


def by_kind(documents: list[dict]) -> dict[str, list[dict]]:
    kinds: dict[str, list[dict]] = {}
    for document in documents:
        kinds.setdefault(document["kind"], []).append(document)
    return kinds


def test_dry_run_prints_every_object_in_creation_order():
    documents = list(yaml.safe_load_all(dry_run().stdout))
    kinds = [d["kind"] for d in documents]
    assert kinds == ["Namespace", *["CustomResourceDefinition"] * (len(ALL) + len(TRAINER_KINDS)), "ServiceAccount",
                     "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Role", "RoleBinding", "ConfigMap",
                     "Role", "RoleBinding", "Deployment", "Service"]
    assert {d["spec"]["names"]["kind"] for d in documents if d["kind"] == "CustomResourceDefinition"} == {
        *(f.kind for f in ALL), *TRAINER_KINDS}  # Trainer v2's too: the controller runs TrainJobs


def test_the_nodes_leases_are_only_read_and_only_in_kube_node_lease():
    """trainctl/controller/leases.py: get, list, watch of Leases in kube-node-lease, bound to the install's account."""
    documents = [d for d in manifests("team-a") if d["metadata"].get("namespace") == "kube-node-lease"]
    role, binding = documents
    assert role["kind"] == "Role" and role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch"]}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"] == "trainctl-controller-team-a"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": "team-a"}]


def test_the_committed_manifests_are_what_dry_run_prints():
    committed = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    assert committed == manifests(), "regenerate: trainctl controller install --dry-run > " + str(MANIFEST)


def test_rbac_has_no_wildcards_no_secret_reads_and_leases_only_by_name():
    kinds = by_kind(manifests())
    cluster_rules = kinds["ClusterRole"][0]["rules"]
    for rule in cluster_rules + kinds["Role"][0]["rules"]:
        assert "*" not in rule["apiGroups"] + rule["resources"] + rule["verbs"], rule
        assert not {"namespaces", "clusterroles"} & set(rule["resources"]), rule
        # nodes: read only, whether the nodes that run replicas are Ready (trainctl/core/nodes.py)
        assert "nodes" not in rule["resources"] or (rule["resources"], rule["verbs"]) == (["nodes"], READ), rule
        # Secrets: only created (an MPI TrainJob's SSH key pair), never read, listed or changed
        assert "secrets" not in rule["resources"] or (rule["resources"], rule["verbs"]) == (["secrets"], ["create"]), rule
        assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(rule["verbs"]), rule
    assert not any(g.startswith("coordination") for r in cluster_rules for g in r["apiGroups"])
    lease_rules = kinds["Role"][0]["rules"]
    assert [r.get("resourceNames") for r in lease_rules if set(r["verbs"]) & {"update", "get"}] == [[NAME]]


def test_the_trainer_sdks_version_configmap_is_readable_by_everyone_signed_in_and_nothing_more():
    """TrainerClient() reads kubeflow-trainer-public's kubeflow_trainer_version, as a notebook's identity."""
    documents = {(d["kind"], d["metadata"]["name"]): d for d in manifests(namespace="kubeflow-system")}
    configmap = documents["ConfigMap", "kubeflow-trainer-public"]
    assert configmap["metadata"]["namespace"] == "kubeflow-system"
    assert configmap["data"]["kubeflow_trainer_version"].startswith("trainctl ")
    assert documents["Role", "kubeflow-trainer-public"]["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"],
         "resourceNames": ["kubeflow-trainer-public"]}]
    binding = documents["RoleBinding", "kubeflow-trainer-public"]
    assert binding["roleRef"]["name"] == "kubeflow-trainer-public" and binding["metadata"]["namespace"] == \
        "kubeflow-system"
    assert binding["subjects"] == [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io",
                                    "name": "system:authenticated"}]


def test_deployment_runs_the_image_unprivileged_with_probes_and_requests():
    deployment = by_kind(manifests(image="registry.example.com/tc:1"))["Deployment"][0]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["image"] == "registry.example.com/tc:1"
    assert container["args"][:3] == ["controller", "run", "--leader-elect"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    assert pod["securityContext"]["runAsNonRoot"] and container["securityContext"]["readOnlyRootFilesystem"]
    dockerfile = (REPO / "controller" / "Dockerfile").read_text()
    assert f"USER {pod['securityContext']['runAsUser']}:" in dockerfile  # the uid the image runs as


def test_helper_images_reach_controller_run_and_bad_ones_are_one_line_errors():
    printed = dry_run("--pytorch-init-container-image", "reg.example.com/bb:1",
                      "--mpi-kubectl-delivery-image", "reg.example.com/kd:1")
    assert printed.returncode == 0, printed.stderr
    [deployment] = [d for d in yaml.safe_load_all(printed.stdout) if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-4:] == ["--pytorch-init-container-image", "reg.example.com/bb:1",
                         "--mpi-kubectl-delivery-image", "reg.example.com/kd:1"]
    assert "--mpi-kubectl-delivery-image" not in by_kind(manifests())["Deployment"][0]["spec"]["template"][
        "spec"]["containers"][0]["args"]  # upstream's default: no flag
    bad = dry_run("--mpi-kubectl-delivery-image", "kd:1 --privileged")
    assert bad.returncode == 2 and "--mpi-kubectl-delivery-image" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    run = subprocess.run([sys.executable, "-m", "trainctl", "controller", "run", "--mpi-kubectl-delivery-image", " "],
                         capture_output=True, text=True, cwd=REPO, timeout=60)
    assert run.returncode == 2 and "--mpi-kubectl-delivery-image" in run.stderr


def test_values_stay_data_and_bad_ones_are_one_line_errors():
    image = "evil:1\n  command: [sh]"
    assert dry_run("--image", image).returncode == 2
    injected = dry_run("--image", "reg.example.com/x:1 #")
    assert injected.returncode == 2 and len(injected.stderr.strip().splitlines()) == 1
    quoted = manifests(image="reg.example.com/x:1#--privileged")
    container = by_kind(quoted)["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "reg.example.com/x:1#--privileged" and "privileged" not in container["securityContext"]
    bad = dry_run("--install-namespace", "Kube System")
    assert bad.returncode == 2 and "--install-namespace" in bad.stderr and "Traceback" not in bad.stderr


def test_rate_limit_flags_reach_controller_run_and_bad_ones_are_one_line_errors():
    from trainctl.controller.manager import KUBE_API_BURST, KUBE_API_QPS, Options

    assert (KUBE_API_QPS, KUBE_API_BURST) == (20, 30)  # upstream's defaults
    assert (Options().kube_api_qps, Options().kube_api_burst) == (20, 30)
    default_args = by_kind(manifests())["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--kube-api-qps" not in default_args  # the controller's own default applies
    documents = yaml.safe_load_all(dry_run("--kube-api-qps", "50", "--kube-api-burst", "100").stdout)
    args = by_kind(list(documents))["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-4:] == ["--kube-api-qps", "50", "--kube-api-burst", "100"]
    for flags, culprit in ((["--kube-api-burst", "-1"], "--kube-api-burst -1"),
                           (["--kube-api-qps", "nan"], "--kube-api-qps nan"),
                           (["--kube-api-qps", "fast"], "'--kube-api-qps'")):
        result = dry_run(*flags)
        assert result.returncode == 2 and len(result.stderr.splitlines()) == 1 and culprit in result.stderr


def test_progress_pacing_flags_default_to_10s_and_30s_and_bad_ones_are_one_line_errors():
    from trainctl.controller.manager import Options, progress_pacing

    assert progress_pacing(Options()) == (10, 30)  # the watcher's round and the bound on a job's annotation writes
    assert progress_pacing(Options(progress_interval_s=1, progress_write_interval_s=15)) == (1, 15)
    assert_one_line_errors(((["--progress-interval", "0"], "--progress-interval 0"),
                            (["--progress-write-interval", "0s"], "--progress-write-interval 0"),
                            (["--progress-write-interval", "soon"], "--progress-write-interval 'soon'")))


def test_leader_election_timing_flags_default_to_kube_controller_managers_and_bad_ones_are_one_line_errors():
    from trainctl.cli.controller import lease_timing

    assert lease_timing(None, None, None) is None  # the elector's defaults: 15 s, 10 s, 2 s
    assert lease_timing("6s", "4s", "1s") == (6, 4, 1)
    assert lease_timing("1m", None, None) == (60, 10, 2)
    assert_one_line_errors(((["--leader-elect-lease-duration", "10s"], "--leader-elect-lease-duration 10s"),
                            (["--leader-elect-renew-deadline", "2s"], "--leader-elect-renew-deadline 2s"),
                            (["--leader-elect-retry-period", "0"], "--leader-elect-retry-period 0s"),
                            (["--leader-elect-retry-period", "often"], "--leader-elect-retry-period 'often'")))


def assert_one_line_errors(cases) -> None:
    """Each ``controller run`` with these flags refused in one line naming the culprit, with exit 2."""
    for flags, culprit in cases:
        result = subprocess.run([sys.executable, "-m", "trainctl", "controller", "run", *flags], capture_output=True,
                                text=True, timeout=60, cwd=REPO)
        assert result.returncode == 2 and len(result.stderr.splitlines()) == 1 and culprit in result.stderr, \
            result.stderr
