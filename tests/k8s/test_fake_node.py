"""The node fixture itself: what it does for one test's namespace never spills into the next test's."""

from __future__ import annotations

import uuid

import pytest

from tests.controller.jobs import wait_for

pytestmark = pytest.mark.k8s


def pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}}


def test_a_namespace_being_deleted_under_an_unbound_pod_does_not_break_the_next_namespace(k8s_cluster, kube_node):
    """Issue 40: a pod the controller made as the previous test's namespace was being deleted stayed unbound in
    the node's cache; the node's binding of it (403: the namespace is being terminated) then failed the next
    test's ``managed_namespace`` set-up, and every one after it. The race, made deterministic: the pod exists
    before the namespace is deleted, and the node takes the namespace on only after."""
    from kubernetes import client

    core = client.CoreV1Api(k8s_cluster.api_client())
    dying, fresh = f"t-dying-{uuid.uuid4().hex[:6]}", f"t-fresh-{uuid.uuid4().hex[:6]}"
    for name in (dying, fresh):
        core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    core.create_namespaced_pod(dying, pod("late-worker"))
    core.delete_namespace(dying)  # no namespace controller here: it stays Terminating, the pod with it
    try:
        kube_node.manage(dying)  # the kubelet's binding refused: the end of that pod's work, not an error
        kube_node.manage(fresh)
        core.create_namespaced_pod(fresh, pod("worker-0"))
        wait_for(lambda: core.read_namespaced_pod("worker-0", fresh).status.phase == "Running",
                 what="the next namespace's pod Running")
    finally:
        kube_node.release(dying)
        kube_node.release(fresh)
        core.delete_namespace(fresh)
