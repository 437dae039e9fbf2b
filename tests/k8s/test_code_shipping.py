"""Code shipping against the real API server: ConfigMaps uploaded once per hash, owned by every job
using them, removed after the last; what --dry-run prints creates as is; a failed submit leaves nothing.

There is no garbage collector in this cluster (nor kubelet): the ownerReferences it would follow are
checked as written, and ``trainctl delete`` removes a snapshot whose owners are all gone by itself.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import sys

import pytest
import yaml

from tests.k8s.test_kube_backend import kube  # noqa: F401  (the fixture)

pytestmark = pytest.mark.k8s
LABEL = "app.kubernetes.io/managed-by=trainctl"


@pytest.fixture
def project(tmp_path):
    (tmp_path / "train.py").write_text("import helper\nhelper.main()\n")
    (tmp_path / "helper.py").write_text("def main():\n    print('trained')\n")
    (tmp_path / ".trainctlignore").write_text("outputs/\n")
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "big.ckpt").write_bytes(b"x" * 1000)
    return tmp_path


def submit_in(kube, directory, *args):  # noqa: F811
    """``trainctl submit`` run from ``directory``, as a user in their project."""
    return subprocess.run([sys.executable, "-m", "trainctl", "submit", *args], env=kube.env, capture_output=True,
                          text=True, timeout=60, cwd=directory)


def config_maps(k8s_cluster, namespace):
    from kubernetes import client

    core = client.CoreV1Api(k8s_cluster.api_client())
    return {m.metadata.name: m for m in core.list_namespaced_config_map(namespace, label_selector=LABEL).items}


def job(kube, name):  # noqa: F811
    return json.loads(kube("status", name, "-n", kube.namespace, "-o", "json").stdout)


def test_unchanged_code_is_uploaded_once_owned_by_each_job_and_removed_after_the_last(k8s_cluster, kube, project):  # noqa: F811
    (project / ".env").write_text("HF_TOKEN=hf_secret\n")  # held back: in no ConfigMap
    first = submit_in(kube, project, "pytorch", "--name", "ship-1", "-n", kube.namespace, "--workers", "3", "--",
                      "python", "train.py")
    assert first.returncode == 0, first.stderr
    assert "code: 3 files" in first.stdout and f"from {project}" in first.stdout  # outputs/ and .env stayed home
    assert "held back 1 credential-like file (never shipped by default): .env;" in first.stderr
    uploaded = config_maps(k8s_cluster, kube.namespace)
    assert len(uploaded) == 1 and b"hf_secret" not in gzip.decompress(
        base64.b64decode(next(iter(uploaded.values())).binary_data["chunk"]))
    second = kube("submit", "jax", "--name", "ship-2", "-n", kube.namespace, "--workdir", str(project), "--",
                  "python", "train.py")
    assert second.returncode == 0, second.stderr
    reused = config_maps(k8s_cluster, kube.namespace)
    assert list(reused) == list(uploaded)
    assert reused[next(iter(reused))].metadata.uid == uploaded[next(iter(uploaded))].metadata.uid  # not recreated

    jobs = [job(kube, "ship-1"), job(kube, "ship-2")]
    owners = reused[next(iter(reused))].metadata.owner_references
    assert [(o.api_version, o.kind, o.name, o.uid) for o in owners] == \
        [("kubeflow.org/v1", j["kind"], j["metadata"]["name"], j["metadata"]["uid"]) for j in jobs]
    assert all(not o.controller and not o.block_owner_deletion for o in owners)
    assert "code: sha256:" in kube("status", "ship-2", "-n", kube.namespace).stdout

    assert kube("delete", "ship-1", "-n", kube.namespace).returncode == 0
    assert list(config_maps(k8s_cluster, kube.namespace)) == list(uploaded)  # ship-2 still uses it
    assert kube("delete", "ship-2", "-n", kube.namespace).returncode == 0
    assert config_maps(k8s_cluster, kube.namespace) == {}


def test_every_replica_gets_the_snapshot_as_the_api_server_stores_it(k8s_cluster, kube, project):  # noqa: F811
    result = kube("submit", "tf", "--name", "ship-tf", "-n", kube.namespace, "--workers", "2", "--ps", "1",
                  "--workdir", str(project), "--workdir-mount", "/code", "--pip", "einops", "--", "python", "train.py")
    assert result.returncode == 0, result.stderr
    stored = job(kube, "ship-tf")
    (name,) = config_maps(k8s_cluster, kube.namespace)
    for spec in stored["spec"]["tfReplicaSpecs"].values():
        pod = spec["template"]["spec"]
        (init,) = pod["initContainers"]
        assert init["image"] == pod["containers"][0]["image"] and "--into" in init["command"]
        assert pod["containers"][0]["workingDir"] == "/code"
        assert pod["containers"][0]["command"][-3:] == ["--", "python", "train.py"]
        chunks = next(v for v in pod["volumes"] if v["name"] == "trainctl-code-chunks")
        assert [s["configMap"]["name"] for s in chunks["projected"]["sources"]] == [name]


def test_what_dry_run_prints_creates_on_the_server_as_is(k8s_cluster, kube, project):  # noqa: F811
    from kubernetes import utils

    printed = kube("submit", "xgboost", "--name", "ship-dry", "-n", kube.namespace, "--workdir", str(project),
                   "--dry-run", "-o", "yaml", "--", "python", "train.py")
    assert printed.returncode == 0, printed.stderr
    documents = list(yaml.safe_load_all(printed.stdout))
    assert [d["kind"] for d in documents] == ["ConfigMap", "XGBoostJob"]
    assert config_maps(k8s_cluster, kube.namespace) == {}  # a dry run uploads nothing
    api = k8s_cluster.api_client()
    utils.create_from_dict(api, documents[0], namespace=kube.namespace)
    from kubernetes import client

    client.CustomObjectsApi(api).create_namespaced_custom_object("kubeflow.org", "v1", kube.namespace,
                                                                 "xgboostjobs", documents[1])
    assert list(config_maps(k8s_cluster, kube.namespace)) == [documents[0]["metadata"]["name"]]
    again = kube("submit", "xgboost", "--name", "ship-dry", "-n", kube.namespace, "--workdir", str(project),
                 "--dry-run", "--", "python", "train.py")  # the submit's checks: the name is taken now
    assert again.returncode == 2 and 'xgboostjob "ship-dry" already exists' in again.stderr, again.stderr
    listed = json.loads(kube("submit", "xgboost", "--name", "ship-dry-json", "-n", kube.namespace, "--workdir",
                             str(project), "--dry-run", "-o", "json", "--", "python", "train.py").stdout)
    assert listed["kind"] == "List" and [i["kind"] for i in listed["items"]] == ["ConfigMap", "XGBoostJob"]


def test_a_job_the_server_refuses_leaves_no_configmap(k8s_cluster, kube, project):  # noqa: F811
    from kubernetes import client

    from tests.k8s.test_kube_backend import KubeCLI

    # bob may handle ConfigMaps here but not create jobs: the refusal comes after the upload, which is undone
    rbac = client.RbacAuthorizationV1Api(k8s_cluster.api_client())
    rbac.create_namespaced_role(kube.namespace, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "maps-only"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "create", "patch", "delete"]},
                  {"apiGroups": ["kubeflow.org"], "resources": ["paddlejobs"], "verbs": ["get"]}]})
    rbac.create_namespaced_role_binding(kube.namespace, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "bob-maps"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "maps-only"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]})
    bob = KubeCLI(k8s_cluster.kubeconfig("bob"), kube.namespace)
    refused = bob("submit", "paddle", "--name", "ship-refused", "-n", kube.namespace, "--workdir", str(project),
                  "--", "python", "train.py")
    assert refused.returncode == 2 and "create paddlejob ship-refused" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "forbidden" in refused.stderr
    assert config_maps(k8s_cluster, kube.namespace) == {}


def test_an_over_limit_snapshot_is_refused_before_anything_is_sent(k8s_cluster, kube, project):  # noqa: F811
    (project / "weights.bin").write_bytes(os.urandom(200_000))  # random: it does not compress
    refused = kube("submit", "pytorch", "--name", "ship-big", "-n", kube.namespace, "--workdir", str(project),
                   "--workdir-limit", "100Ki", "--", "python", "train.py")
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "weights.bin" in refused.stderr and ".trainctlignore" in refused.stderr
    assert config_maps(k8s_cluster, kube.namespace) == {}
    assert kube("status", "ship-big", "-n", kube.namespace).returncode != 0


def test_trainctl_apply_of_the_dry_run_uploads_and_owns_as_submit_does(k8s_cluster, kube, project):  # noqa: F811
    printed = kube("submit", "pytorch", "--name", "ship-applied", "-n", kube.namespace, "--workdir", str(project),
                   "--dry-run", "-o", "yaml", "--", "python", "train.py")
    assert printed.returncode == 0, printed.stderr
    applied = kube("apply", "-f", "-", input=printed.stdout)
    assert applied.returncode == 0, applied.stderr
    (stored_map,) = config_maps(k8s_cluster, kube.namespace).values()
    stored = job(kube, "ship-applied")
    assert [o.uid for o in stored_map.metadata.owner_references] == [stored["metadata"]["uid"]]
    assert kube("delete", "ship-applied", "-n", kube.namespace).returncode == 0
    assert config_maps(k8s_cluster, kube.namespace) == {}
