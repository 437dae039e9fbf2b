"""Every upstream default runtime under trainctl's controller (issue 41, second "Done when" line): the runtime file
from ../shared/kubeflow-trainer-v2/runtimes and a TrainJob on it are stored through the generated CRDs (nothing of
either pruned), and the controller reconciles the TrainJob into pods whose env is the one upstream's plugin gives,
variable by variable, with the Service, and on the MPI runtimes the hostfile ConfigMap and SSH key Secret.

The expected tables are written from upstream's code (kubeflow/trainer, the file named over each), not from
trainctl's: names, values, and which pods get them. ``RANK`` stands for upstream's fieldRef to the pod's
completion index (constants.JobCompletionIndexFieldPath), which the Job controller's JOB_COMPLETION_INDEX reads too.
"""

from __future__ import annotations

import base64

import pytest
import yaml

from tests.conftest import REPO
from tests.controller.jobs import wait_for
from tests.k8s.test_trainer_v2_resources import missing
from trainctl.core.trainer_crds import TRAINJOB
from trainctl.kube import trainer_resource
from trainctl.kube.client import CONFIGMAPS, PODS, SECRETS, SERVICES, ApiError

pytestmark = pytest.mark.k8s
RUNTIMES = REPO.parent / "shared" / "kubeflow-trainer-v2" / "runtimes"
TRAINJOBS = trainer_resource(TRAINJOB)
CLUSTER_RUNTIMES = trainer_resource("ClusterTrainingRuntime", namespaced=False)
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
LABELS = (JOBSET_NAME, "jobset.sigs.k8s.io/replicatedjob-name", "jobset.sigs.k8s.io/job-index",
          "batch.kubernetes.io/job-completion-index")
RANK = "fieldRef:metadata.annotations['batch.kubernetes.io/job-completion-index']"
USER_ENV = {"EPOCHS": "2"}  # the TrainJob's trainer.env: jobset builder.go Trainer() upserts it
JOB = "tj"
RANK0 = f"{JOB}-node-0-0.{JOB}"
INDEXED = {"JOB_COMPLETION_INDEX": RANK}  # Kubernetes' Job controller, on every container of an Indexed Job's pods

# pkg/runtime/framework/plugins/torch/torch.go (EnforceMLPolicy): PET_NNODES the trainer's pod count, PET_NPROC_PER_NODE
# the TrainJob's numProcPerNode, else "auto" with GPUs, else the cpu request rounded up (getNumCPUPerNode: 3),
# PET_NODE_RANK the completion index, PET_MASTER_ADDR/PORT "<job>-node-0-0.<job>" and ContainerTrainerPort
TORCH_ENV = {**USER_ENV, "PET_NNODES": "2", "PET_NPROC_PER_NODE": "3", "PET_NODE_RANK": RANK,
             "PET_MASTER_ADDR": RANK0, "PET_MASTER_PORT": "29500", **INDEXED,
             "OMP_NUM_THREADS": "3"}  # [deviation] not upstream's: trainctl's, from the cpu (docs/trainer-v2.md)
# pkg/runtime/framework/plugins/jax/jax.go (EnforceMLPolicy): the node count, the completion index, rank 0's
# "<job>-node-0-0.<job>:29500"
JAX_ENV = {**USER_ENV, "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": RANK, "JAX_COORDINATOR_ADDRESS": f"{RANK0}:29500",
           **INDEXED}
# pkg/runtime/framework/plugins/xgboost/xgboost.go (EnforceMLPolicy): the tracker on rank 0's pod, the completion
# index as task id, DMLC_NUM_WORKER = nodes x GPUs per node (GetNumGPUPerNode of resourcesPerNode: 2 x 2)
XGBOOST_ENV = {**USER_ENV, "DMLC_TRACKER_URI": RANK0, "DMLC_TRACKER_PORT": "29500", "DMLC_TASK_ID": RANK,
               "DMLC_NUM_WORKER": "4", **INDEXED}
# pkg/runtime/framework/plugins/mpi/mpi.go (EnforceMLPolicy, OpenMPI): only the launcher's node container, slots the
# TrainJob's numProcPerNode; builder.go Trainer(): with runLauncherAsNode the node replicatedJob gets trainer.env too
MPI_NODE_ENV = {**USER_ENV, **INDEXED}
MPI_LAUNCHER_ENV = {**USER_ENV, "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
                    "OMPI_MCA_orte_keep_fqdn_hostnames": "true", "OMPI_MCA_orte_set_default_slots": "2",
                    "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10", **INDEXED}
# mpi.go: numNodes 3 with runLauncherAsNode -> node Count 3 - 1, plus the launcher
MPI_PODS = {f"{JOB}-node-0-0": MPI_NODE_ENV, f"{JOB}-node-0-1": MPI_NODE_ENV, f"{JOB}-launcher-0-0": MPI_LAUNCHER_ENV}
# mpi.go buildHostFileConfigMap: every endpoint of node, then of the launcher (runLauncherAsNode), in the runtime's
# order of replicatedJobs, "<endpoint> slots=<numProcPerNode>"
HOSTFILE = "".join(f"{JOB}-{pod}.{JOB} slots=2\n" for pod in ("node-0-0", "node-0-1", "launcher-0-0"))

CASES = {  # runtime file: (the TrainJob's trainer besides env, {pod: env})
    "torch_distributed.yaml": ({"numNodes": 2, "resourcesPerNode": {"requests": {"cpu": "2500m"}}},
                               {f"{JOB}-node-0-0": TORCH_ENV, f"{JOB}-node-0-1": TORCH_ENV}),
    "jax_distributed.yaml": ({"numNodes": 2}, {f"{JOB}-node-0-0": JAX_ENV, f"{JOB}-node-0-1": JAX_ENV}),
    "xgboost_distributed.yaml": ({"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 2}}},
                                 {f"{JOB}-node-0-0": XGBOOST_ENV, f"{JOB}-node-0-1": XGBOOST_ENV}),
    "deepspeed_distributed.yaml": ({"numNodes": 3, "numProcPerNode": 2}, MPI_PODS),
    "mlx_distributed.yaml": ({"numNodes": 3, "numProcPerNode": 2}, MPI_PODS),
}


def applied_runtime(rest, path) -> dict:
    """The runtime file created (or, left by an earlier test, replaced) as a ClusterTrainingRuntime; what the API
    server stored keeps every field of the file (a structural schema would drop unknown ones silently)."""
    document = yaml.safe_load(path.read_text())
    name = document["metadata"]["name"]
    try:
        rest.create(CLUSTER_RUNTIMES, document)
    except ApiError as error:
        assert error.status == 409, error
        current = rest.get(CLUSTER_RUNTIMES, name)
        rest.replace(CLUSTER_RUNTIMES, {**document, "metadata": {**document["metadata"],
                                                                 "resourceVersion": current["metadata"]["resourceVersion"]}})
    stored = rest.get(CLUSTER_RUNTIMES, name)
    assert missing(document["spec"], stored["spec"]) == [], name
    return document


def env_of(container: dict) -> dict[str, str]:
    """A container's env as names and values, a fieldRef written ``fieldRef:<path>``."""
    def value(item: dict) -> str:
        if "valueFrom" in item:
            return f"fieldRef:{item['valueFrom']['fieldRef']['fieldPath']}"
        return item.get("value", "")

    env = container.get("env") or []
    assert len({item["name"] for item in env}) == len(env), f"a variable twice: {env}"
    return {item["name"]: value(item) for item in env}


def node_container(pod: dict) -> dict:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "node")


@pytest.fixture
def ns(start_controller, managed_namespace):
    start_controller(managed_namespace)
    return managed_namespace


@pytest.mark.parametrize("runtime_file", sorted(CASES))
def test_a_trainjob_on_each_upstream_runtime_gets_upstreams_env_per_pod(rest, ns, runtime_file):
    runtime = applied_runtime(rest, RUNTIMES / runtime_file)
    trainer, expected = CASES[runtime_file]
    body = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": TRAINJOB, "metadata": {"name": JOB},
            "spec": {"runtimeRef": {"name": runtime["metadata"]["name"]},
                     "trainer": {**trainer, "command": ["train"],
                                 "env": [{"name": name, "value": value} for name, value in USER_ENV.items()]}}}
    rest.create(TRAINJOBS, body, ns)
    assert missing(body["spec"], rest.get(TRAINJOBS, JOB, ns)["spec"]) == []
    pods = wait_for(lambda: (found := {p["metadata"]["name"]: p for p in rest.list(
        PODS, ns, f"{JOBSET_NAME}={JOB}")["items"]}) and set(found) == set(expected) and found,
        what=f"the pods {sorted(expected)}")
    found = {name: env_of(node_container(pod)) for name, pod in pods.items()}
    assert found == expected, {name: sorted(set(env.items()) ^ set(expected[name].items())) for name, env in found.items()}
    wait_for(lambda: JOB in {s["metadata"]["name"] for s in rest.list(SERVICES, ns)["items"]},
             what="the headless Service")
    for name, pod in pods.items():  # JobSet's and the Job controller's labels, the pod's DNS name under <job>
        replicated_job, index = name.removeprefix(f"{JOB}-").split("-0-")
        assert [pod["metadata"]["labels"].get(key) for key in LABELS] == [JOB, replicated_job, "0", index], name
        assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == (name, JOB)
    policy = runtime["spec"]["mlPolicy"]
    ports = {name: [port["containerPort"] for port in node_container(pod).get("ports") or []]
             for name, pod in pods.items()}
    if "mpi" in policy:  # mpi.go adds no port
        assert set(map(tuple, ports.values())) == {()}
        assert_mpi_wiring(rest, ns, pods, policy["mpi"]["sshAuthMountPath"])
    else:  # the trainer's node container exposes ContainerTrainerPort (apply.UpsertPort in each plugin)
        assert set(map(tuple, ports.values())) == {(29500,)}


def assert_mpi_wiring(rest, ns: str, pods: dict[str, dict], ssh_path: str) -> None:
    """mpi.go: the hostfile ConfigMap on the launcher at /etc/mpi; the immutable ssh-auth Secret (its pair:
    ssh-privatekey, ssh-publickey) on node and launcher at sshAuthMountPath; both owned by the TrainJob."""
    from cryptography.hazmat.primitives import serialization

    hostfile = wait_for(lambda: {c["metadata"]["name"]: c for c in rest.list(CONFIGMAPS, ns)["items"]}.get(
        f"{JOB}-mpi-hostfile"), what="the hostfile ConfigMap")
    assert hostfile["data"] == {"hostfile": HOSTFILE}
    secret = wait_for(lambda: {s["metadata"]["name"]: s for s in rest.list(SECRETS, ns)["items"]}.get(
        f"{JOB}-mpi-ssh-auth"), what="the SSH key Secret")
    assert (secret["type"], secret["immutable"], sorted(secret["data"])) == (
        "kubernetes.io/ssh-auth", True, ["ssh-privatekey", "ssh-publickey"])
    private = serialization.load_ssh_private_key(base64.b64decode(secret["data"]["ssh-privatekey"]), None)
    assert private.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH) \
        == base64.b64decode(secret["data"]["ssh-publickey"]).strip()
    for owned in (hostfile, secret):
        assert [(o["kind"], o["name"], o["controller"]) for o in owned["metadata"]["ownerReferences"]] == [
            (TRAINJOB, JOB, True)]
    for name, pod in pods.items():
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        mounts = {m["name"]: m["mountPath"] for m in node_container(pod)["volumeMounts"]}
        assert volumes["mpi-ssh-auth"]["secret"]["secretName"] == f"{JOB}-mpi-ssh-auth"
        assert mounts["mpi-ssh-auth"] == ssh_path
        launcher = "launcher" in name
        assert ("mpi-hostfile" in volumes, mounts.get("mpi-hostfile")) == (
            (True, "/etc/mpi") if launcher else (False, None)), name
        if launcher:
            assert volumes["mpi-hostfile"]["configMap"]["name"] == f"{JOB}-mpi-hostfile"
