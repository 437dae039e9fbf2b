"""What the controller creates for each kind, checked against the contract's worked examples
(../shared/docs/kubeflow-v1-contract.md section 2): pod and service names, labels, owner
references, ports and the exact env values."""

from __future__ import annotations

import json

import pytest

from tests.controller.jobs import create, env_of, job, pods, services, wait_for
from trainctl.kube.client import CONFIGMAPS, ROLE_BINDINGS, ROLES, SERVICE_ACCOUNTS

pytestmark = pytest.mark.k8s


@pytest.fixture
def controller_in(start_controller, namespace):
    start_controller(namespace)
    return namespace


def wait_pods(rest, namespace, name, expected):
    return wait_for(lambda: (found := pods(rest, namespace, name)) and set(found) == set(expected) and found,
                    what=f"pods {sorted(expected)}")


def test_pytorch_worked_example(rest, controller_in):
    ns = controller_in
    created = create(rest, job("PyTorchJob", "mnist", ns, {"Master": 1, "Worker": 2}))
    found = wait_pods(rest, ns, "mnist", ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"])
    assert env_of(found["mnist-master-0"]) == {
        "PYTHONUNBUFFERED": "1", "MASTER_PORT": "23456", "PET_MASTER_PORT": "23456", "MASTER_ADDR": "mnist-master-0",
        "PET_MASTER_ADDR": "mnist-master-0", "WORLD_SIZE": "3", "RANK": "0", "PET_NODE_RANK": "0",
        "PET_NPROC_PER_NODE": "auto", "PET_NNODES": "3"}
    worker = found["mnist-worker-1"]
    assert env_of(worker)["RANK"] == env_of(worker)["PET_NODE_RANK"] == "2"
    assert [c["name"] for c in worker["spec"]["initContainers"]] == ["init-pytorch"]
    assert "nslookup mnist-master-0" in worker["spec"]["initContainers"][0]["command"][-1]
    assert found["mnist-master-0"]["spec"]["restartPolicy"] == "OnFailure"
    assert found["mnist-master-0"]["metadata"]["labels"] == {
        "training.kubeflow.org/operator-name": "pytorchjob-controller", "training.kubeflow.org/job-name": "mnist",
        "training.kubeflow.org/replica-type": "master", "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/job-role": "master"}
    assert found["mnist-worker-0"]["metadata"]["ownerReferences"] == [{
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "mnist", "uid": created["metadata"]["uid"],
        "controller": True, "blockOwnerDeletion": True}]
    service = wait_for(lambda: services(rest, ns, "mnist").get("mnist-worker-1"), what="service")
    assert service["spec"]["clusterIP"] == "None"
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("pytorchjob-port", 23456)]
    assert "training.kubeflow.org/job-role" not in service["spec"]["selector"]
    assert service["spec"]["selector"]["training.kubeflow.org/replica-index"] == "1"


def test_tfjob_tf_config_byte_for_byte(rest, controller_in):
    ns = controller_in
    create(rest, job("TFJob", "dist", ns, {"PS": 1, "Worker": 2}))
    found = wait_pods(rest, ns, "dist", ["dist-ps-0", "dist-worker-0", "dist-worker-1"])
    assert env_of(found["dist-worker-1"], "tensorflow")["TF_CONFIG"] == (
        '{"cluster":{"ps":["dist-ps-0.%(ns)s.svc:2222"],"worker":["dist-worker-0.%(ns)s.svc:2222",'
        '"dist-worker-1.%(ns)s.svc:2222"]},"task":{"type":"worker","index":1},"environment":"cloud"}' % {"ns": ns})
    assert found["dist-worker-0"]["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    # the services come in the same pass as the pods, but after them: wait for the last one (seen missing under load)
    wait_for(lambda: set(services(rest, ns, "dist")) == set(found), what="a service per pod")


def test_tfjob_custom_cluster_domain(rest, start_controller, namespace):
    start_controller(namespace, "--cluster-domain", "tf.training.org")
    create(rest, job("TFJob", "dom", namespace, {"PS": 1, "Worker": 1}))
    found = wait_pods(rest, namespace, "dom", ["dom-ps-0", "dom-worker-0"])
    config = json.loads(env_of(found["dom-worker-0"])["TF_CONFIG"])
    assert config["cluster"]["ps"] == [f"dom-ps-0.{namespace}.svc.tf.training.org:2222"]


def test_xgboost_worked_example(rest, controller_in):
    ns = controller_in
    create(rest, job("XGBoostJob", "xgb", ns, {"Master": 1, "Worker": 2}))
    found = wait_pods(rest, ns, "xgb", ["xgb-master-0", "xgb-worker-0", "xgb-worker-1"])
    assert env_of(found["xgb-worker-1"]) == {
        "MASTER_PORT": "9999", "MASTER_ADDR": "xgb-master-0", "WORLD_SIZE": "3", "RANK": "2",
        "PYTHONUNBUFFERED": "1", "WORKER_PORT": "9999", "WORKER_ADDRS": "xgb-worker-0,xgb-worker-1"}


def test_paddle_worked_example(rest, controller_in):
    ns = controller_in
    create(rest, job("PaddleJob", "pd", ns, {"Worker": 2}))
    found = wait_pods(rest, ns, "pd", ["pd-worker-0", "pd-worker-1"])
    assert env_of(found["pd-worker-1"]) == {
        "PYTHONUNBUFFERED": "1", "PADDLE_JOB_ID": "pd", "PADDLE_NNODES": "2", "PADDLE_MASTER": "pd-worker-0:36543"}
    first = next(c for c in found["pd-worker-0"]["spec"]["containers"])["env"]
    assert {"name": "POD_IP_DUMMY", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}} \
        in first


def test_jax_worked_example(rest, controller_in):
    ns = controller_in
    create(rest, job("JAXJob", "jx", ns, {"Worker": 2}))
    found = wait_pods(rest, ns, "jx", ["jx-worker-0", "jx-worker-1"])
    assert env_of(found["jx-worker-1"]) == {
        "PYTHONUNBUFFERED": "1", "COORDINATOR_PORT": "6666", "COORDINATOR_ADDRESS": "jx-worker-0",
        "NUM_PROCESSES": "2", "PROCESS_ID": "1"}


def test_mpijob_launcher_hostfile_and_kubectl_exec_wiring(rest, controller_in):
    ns = controller_in
    create(rest, job("MPIJob", "mpi", ns, {"Launcher": 1, "Worker": 2}, slotsPerWorker=2))
    found = wait_pods(rest, ns, "mpi", ["mpi-launcher", "mpi-worker-0", "mpi-worker-1"])
    assert services(rest, ns, "mpi") == {}  # MPIJob gets no services
    config = wait_for(lambda: rest.list(CONFIGMAPS, ns)["items"], what="configmap")
    config = next(c for c in config if c["metadata"]["name"] == "mpi-config")
    assert config["data"]["hostfile"] == "mpi-worker-0 slots=2\nmpi-worker-1 slots=2\n"
    assert config["data"]["kubexec.sh"].endswith('/opt/kube/kubectl exec ${POD_NAME} -- /bin/sh -c "$*"')
    launcher = found["mpi-launcher"]
    assert launcher["spec"]["serviceAccountName"] == "mpi-launcher"
    assert [c["name"] for c in launcher["spec"]["initContainers"]] == ["kubectl-delivery"]
    env = env_of(launcher)
    assert env["OMPI_MCA_plm_rsh_agent"] == "/etc/mpi/kubexec.sh"
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert {v["name"] for v in launcher["spec"]["volumes"]} == {"mpi-job-kubectl", "mpi-job-config"}
    worker = found["mpi-worker-0"]
    assert worker["spec"]["containers"][0]["command"] == ["train"]  # the template's command is kept
    assert worker["spec"]["volumes"][0]["configMap"]["items"] == [{"key": "kubexec.sh", "path": "kubexec.sh",
                                                                   "mode": 0o555}]
    role = rest.get(ROLES, "mpi-launcher", ns)
    assert role["rules"][1] == {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"],
                                "resourceNames": ["mpi-worker-0", "mpi-worker-1"]}
    assert rest.get(ROLE_BINDINGS, "mpi-launcher", ns)["subjects"][0]["name"] == "mpi-launcher"
    assert rest.get(SERVICE_ACCOUNTS, "mpi-launcher", ns)["metadata"]["labels"] == {"app": "mpi"}
