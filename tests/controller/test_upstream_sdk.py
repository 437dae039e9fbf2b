"""The Kubeflow Training Operator's own Python SDK (``kubeflow-training``, pinned in
requirements/upstream-sdk.txt) against trainctl's CRDs and controller on the real API server.

It asserts what upstream's e2e test ``test_sdk_e2e_managed_by`` (sdk/python/test/e2e, release-1.9)
means to assert, with the node fixture in place of a kubelet: a job managed by
``kubeflow.org/training-operator`` runs to Succeeded; one managed by ``kueue.x-k8s.io/multikueue`` is
created and never touched (no conditions, no pods); any other value is rejected at create, so exactly
two jobs exist. Upstream rejects it in a webhook; trainctl's CRDs do it with an enum.

The SDK runs in .venv-upstream-sdk (scripts/test.sh makes it; see tests/controller/upstream_sdk_e2e.py).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.conftest import REPO
from tests.controller.jobs import pods, wait_for

pytestmark = pytest.mark.k8s
SDK_PYTHON = REPO / ".venv-upstream-sdk" / "bin" / "python"
DRIVER = REPO / "tests" / "controller" / "upstream_sdk_e2e.py"
OURS, THEIRS, INVALID = (f"pytorchjob-e2e-{who}-controller" for who in ("default", "multikueue", "invalid"))


def sdk(k8s_cluster, namespace: str, step: str) -> dict:
    assert SDK_PYTHON.exists(), "no .venv-upstream-sdk: run bash scripts/test.sh (or see requirements/upstream-sdk.txt)"
    result = subprocess.run([str(SDK_PYTHON), str(DRIVER), str(k8s_cluster.kubeconfig("admin")), namespace, step],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_sdk_e2e_managed_by(k8s_cluster, rest, start_controller, managed_namespace, kube_node):
    ns = managed_namespace
    start_controller(ns)
    created = sdk(k8s_cluster, ns, "create")
    assert list(created["errors"]) == [INVALID]
    assert f"Failed to create PyTorchJob: {ns}/{INVALID}" in created["errors"][INVALID]
    assert "(422)" in created["errors"][INVALID] and "Unsupported value" in created["errors"][INVALID]
    assert '"field":"spec.runPolicy.managedBy"' in created["errors"][INVALID]
    assert created["listed"] == sorted([OURS, THEIRS])

    # both replicas run upstream's one epoch to its end, the master last: a master that succeeded while its
    # worker still ran would hold the job's success up to its trainctl.io/success-wait (60 s, issue 40)
    replicas = [f"{OURS}-worker-0", f"{OURS}-master-0"]
    wait_for(lambda: all((pods(rest, ns, OURS).get(pod) or {}).get("status", {}).get("phase") == "Running"
                         for pod in replicas), what="the master and worker pods running")
    for pod in replicas:
        kube_node.set_phase(ns, pod, "Succeeded", exit_code=0)
    seen = sdk(k8s_cluster, ns, "conditions")
    assert seen[OURS]["Created"] == seen[OURS]["Succeeded"] == "True"
    assert all(seen[OURS].get(c) != "True" for c in ("Running", "Restarting", "Failed"))
    assert seen[THEIRS] == {}
    assert not pods(rest, ns, THEIRS)
