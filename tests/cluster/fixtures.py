"""pytest fixtures for the real API server: k8s_cluster (session), kube_node, namespace.

Tests that need them are marked ``@pytest.mark.k8s``. Without the cached binary they
are skipped with the reason, unless TRAINCTL_REQUIRE_K8S=1 (scripts/test.sh sets it),
in which case a missing server is an error.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.cluster.kubelet import FakeNode
from tests.cluster.server import TestCluster, cached_apiserver

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def k8s_cluster(tmp_path_factory):
    binary = cached_apiserver()
    if binary is None:
        message = "no cached kube-apiserver/etcd: run bash scripts/build-apiserver.sh"
        if os.environ.get("TRAINCTL_REQUIRE_K8S") == "1":
            pytest.fail(message)
        pytest.skip(message)
    cluster = TestCluster(tmp_path_factory.mktemp("cluster"), binary).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def kube_node(k8s_cluster, tmp_path_factory):
    node = FakeNode(k8s_cluster, tmp_path_factory.mktemp("node")).start()
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture
def namespace(k8s_cluster):
    from kubernetes import client

    name = f"t-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(k8s_cluster.api_client())
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


@pytest.fixture(scope="session")
def kubeflow_crds(k8s_cluster):
    """trainctl's CRDs installed by ``trainctl crds install`` and served for every kind."""
    from trainctl.frameworks import ALL
    from trainctl.kube import job_resource
    from trainctl.kube.client import ApiError, connect

    env = {**os.environ, "KUBECONFIG": str(k8s_cluster.kubeconfig("admin")), "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "trainctl", "crds", "install"], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    rest = connect(kubeconfig=str(k8s_cluster.kubeconfig("admin")))
    deadline = time.monotonic() + 30
    for framework in ALL:  # a new CRD takes a moment to be served
        while True:
            try:
                rest.list(job_resource(framework))
                break
            except ApiError:
                assert time.monotonic() < deadline, f"{framework.plural} never served"
                time.sleep(0.2)


@pytest.fixture
def rest(k8s_cluster):
    """trainctl's REST client as the cluster admin."""
    from trainctl.kube.client import connect

    return connect(kubeconfig=str(k8s_cluster.kubeconfig("admin")))
