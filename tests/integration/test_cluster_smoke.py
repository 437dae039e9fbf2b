"""The test cluster is real: CRDs, pods bound to the node fixture, logs through the API server, RBAC."""

import time

import pytest

from trainctl.core.crds import all_crds

pytestmark = pytest.mark.k8s


def test_our_crds_install_and_a_job_is_stored(k8s_cluster, namespace):
    from kubernetes import client

    api = k8s_cluster.api_client()
    extensions = client.ApiextensionsV1Api(api)
    for crd in all_crds():
        try:
            extensions.create_custom_resource_definition(crd)
        except client.ApiException as error:
            assert error.status == 409  # installed by an earlier test
    custom = client.CustomObjectsApi(api)
    job = {"apiVersion": "kubeflow.org/v1", "kind": "JAXJob", "metadata": {"name": "smoke"},
           "spec": {"jaxReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {
               "containers": [{"name": "jax", "image": "img", "command": ["true"]}]}}}}}}
    deadline = time.monotonic() + 30
    while True:  # a new CRD takes a moment to be served
        try:
            custom.create_namespaced_custom_object("kubeflow.org", "v1", namespace, "jaxjobs", job)
            break
        except client.ApiException as error:
            if error.status != 404 or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    stored = custom.get_namespaced_custom_object("kubeflow.org", "v1", namespace, "jaxjobs", "smoke")
    assert stored["spec"] == job["spec"]
    custom.patch_namespaced_custom_object_status("kubeflow.org", "v1", namespace, "jaxjobs", "smoke",
                                                  {"status": {"conditions": [{"type": "Created", "status": "True"}]}})


def test_pod_bound_to_the_node_runs_and_its_logs_come_through_the_api_server(k8s_cluster, kube_node, namespace):
    from kubernetes import client

    core = client.CoreV1Api(k8s_cluster.api_client())
    core.create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                           "spec": {"containers": [{"name": "main", "image": "img"}]}})
    kube_node.bind(namespace, "p")
    kube_node.set_phase(namespace, "p", "Running")
    kube_node.write_log(namespace, "p", "main", "first\nsecond\n")
    pod = core.read_namespaced_pod("p", namespace)
    assert pod.spec.node_name == kube_node.name and pod.status.phase == "Running"
    assert core.read_namespaced_pod_log("p", namespace, container="main") == "first\nsecond\n"
    kube_node.restart(namespace, "p", exit_code=137, reason="OOMKilled")
    kube_node.write_log(namespace, "p", "main", "after restart\n")
    assert core.read_namespaced_pod_log("p", namespace, container="main", previous=True) == "first\nsecond\n"
    status = core.read_namespaced_pod("p", namespace).status.container_statuses[0]
    assert status.restart_count == 1 and status.last_state.terminated.reason == "OOMKilled"
    kube_node.set_phase(namespace, "p", "Failed", exit_code=2)
    assert core.read_namespaced_pod("p", namespace).status.container_statuses[0].state.terminated.exit_code == 2


def test_a_user_without_rights_is_forbidden(k8s_cluster, namespace):
    from kubernetes import client

    core = client.CoreV1Api(k8s_cluster.api_client("alice"))
    with pytest.raises(client.ApiException) as denied:
        core.list_namespaced_pod(namespace)
    assert denied.value.status == 403
