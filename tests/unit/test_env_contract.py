"""The env of every replica equals the contract's worked examples (section 2), in a cluster and locally."""

import json
import os

import pytest

from trainctl.core.actions import CreateReplica
from trainctl.core.job import Job
from trainctl.core.network import ClusterNetwork, LocalNetwork
from trainctl.core.reconcile import reconcile
from trainctl.frameworks import by_kind

NOW = __import__("datetime").datetime(2026, 11, 22, tzinfo=__import__("datetime").timezone.utc)


def job(kind, name, replicas, namespace="default", **spec):
    framework = by_kind(kind)
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace},
            "spec": {framework.replica_spec_field: {
                rtype: {"replicas": count, "template": {"spec": {"containers": [
                    {"name": framework.container, "image": "img", "command": ["run"]}]}}}
                for rtype, count in replicas.items()}, **spec}}


def created(resource, network=None):
    plan = reconcile(resource, [], NOW, network or ClusterNetwork())
    return {a.name: a for a in plan.actions if isinstance(a, CreateReplica)}


def env_line(action):
    return " ".join(f"{k}={v}" for k, v in action.env.items())


def test_pytorch_worked_example():
    pods = created(job("PyTorchJob", "mnist", {"Master": 1, "Worker": 2}))
    assert list(pods) == ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    assert env_line(pods["mnist-master-0"]) == (
        "PYTHONUNBUFFERED=1 MASTER_PORT=23456 PET_MASTER_PORT=23456 MASTER_ADDR=mnist-master-0 "
        "PET_MASTER_ADDR=mnist-master-0 WORLD_SIZE=3 RANK=0 PET_NODE_RANK=0 PET_NPROC_PER_NODE=auto PET_NNODES=3")
    worker = pods["mnist-worker-1"]
    assert worker.env["RANK"] == "2" and worker.env["PET_NODE_RANK"] == "2"
    (init,) = worker.pod["spec"]["initContainers"]
    assert init["name"] == "init-pytorch" and "nslookup mnist-master-0" in init["command"][2]
    assert pods["mnist-master-0"].labels["training.kubeflow.org/job-role"] == "master"
    assert "training.kubeflow.org/job-role" not in worker.labels
    assert worker.pod["spec"]["restartPolicy"] == "OnFailure"


def test_pytorch_nproc_per_node_multiplies_world_size():
    pods = created(job("PyTorchJob", "mnist", {"Master": 1, "Worker": 2}, nprocPerNode="4"))
    assert pods["mnist-master-0"].env["WORLD_SIZE"] == "12"
    assert pods["mnist-master-0"].env["PET_NPROC_PER_NODE"] == "4"


def test_pytorch_elastic_worker_only():
    pods = created(job("PyTorchJob", "el", {"Worker": 2}, elasticPolicy={"minReplicas": 1, "maxReplicas": 3}))
    assert env_line(pods["el-worker-1"]) == (
        "PYTHONUNBUFFERED=1 PET_NPROC_PER_NODE=auto PET_RDZV_ENDPOINT=el-worker-0:23456 PET_RDZV_BACKEND=c10d "
        "PET_NNODES=1:3")


def test_pytorch_elastic_pinned_table():
    elastic = {"minReplicas": 1, "maxReplicas": 3, "rdzvBackend": "c10d", "rdzvPort": 1234, "rdzvHost": "localhost",
               "rdzvId": "rdzv-id", "maxRestarts": 3,
               "rdzvConf": [{"key": "rdzv-conf-name", "value": "rdzv-conf-value"},
                            {"key": "rdzv-conf-name-1", "value": "rdzv-conf-value-1"}]}
    env = created(job("PyTorchJob", "el", {"Worker": 1}, elasticPolicy=elastic))["el-worker-0"].env
    assert {k: env[k] for k in ("PET_MAX_RESTARTS", "PET_RDZV_BACKEND", "PET_RDZV_ENDPOINT", "PET_RDZV_ID",
                                "PET_RDZV_CONF", "PET_NNODES")} == {
        "PET_MAX_RESTARTS": "3", "PET_RDZV_BACKEND": "c10d", "PET_RDZV_ENDPOINT": "localhost:1234",
        "PET_RDZV_ID": "rdzv-id", "PET_RDZV_CONF": "rdzv-conf-name=rdzv-conf-value,rdzv-conf-name-1=rdzv-conf-value-1",
        "PET_NNODES": "1:3"}


def test_rdzv_conf_items_without_key_or_value_format_as_empty_strings_like_upstream():
    elastic = {"minReplicas": 1, "maxReplicas": 2, "rdzvConf": [{"value": "v"}, {"key": "k"}]}
    env = created(job("PyTorchJob", "el", {"Worker": 1}, elasticPolicy=elastic))["el-worker-0"].env
    assert env["PET_RDZV_CONF"] == "=v,k="


def test_tf_config_byte_for_byte():
    pods = created(job("TFJob", "dist", {"PS": 1, "Worker": 2}, namespace="kubeflow"))
    assert pods["dist-worker-1"].env["TF_CONFIG"] == (
        '{"cluster":{"ps":["dist-ps-0.kubeflow.svc:2222"],"worker":["dist-worker-0.kubeflow.svc:2222",'
        '"dist-worker-1.kubeflow.svc:2222"]},"task":{"type":"worker","index":1},"environment":"cloud"}')


def test_tf_config_custom_domain_chief_and_single_replica():
    pods = created(job("TFJob", "d", {"Chief": 1, "PS": 1}, namespace="ns2"), ClusterNetwork("tf.training.org"))
    config = json.loads(pods["d-chief-0"].env["TF_CONFIG"])
    assert config["task"] == {"type": "chief", "index": 0}
    assert config["cluster"]["ps"] == ["d-ps-0.ns2.svc.tf.training.org:2222"]
    assert "TF_CONFIG" not in created(job("TFJob", "one", {"Worker": 1}))["one-worker-0"].env


def test_tf_sparse_cluster_for_dynamic_workers():
    pods = created(job("TFJob", "d", {"PS": 1, "Worker": 2}, enableDynamicWorker=True))
    assert pods["d-worker-1"].env["TF_CONFIG"] == (
        '{"cluster":{"worker":{"1":"d-worker-1.default.svc:2222"},"ps":["d-ps-0.default.svc:2222"]},'
        '"task":{"type":"worker","index":1}}')


def test_xgboost_worked_example():
    pods = created(job("XGBoostJob", "xgb", {"Master": 1, "Worker": 2}))
    assert env_line(pods["xgb-worker-1"]) == (
        "MASTER_PORT=9999 MASTER_ADDR=xgb-master-0 WORLD_SIZE=3 RANK=2 PYTHONUNBUFFERED=1 WORKER_PORT=9999 "
        "WORKER_ADDRS=xgb-worker-0,xgb-worker-1")


def test_paddle_worked_example_and_pod_ip_on_the_first_worker():
    resource = job("PaddleJob", "pd", {"Worker": 2})
    pods = created(resource)
    assert env_line(pods["pd-worker-1"]) == "PYTHONUNBUFFERED=1 PADDLE_JOB_ID=pd PADDLE_NNODES=2 PADDLE_MASTER=pd-worker-0:36543"
    container_env = pods["pd-worker-0"].pod["spec"]["containers"][0]["env"]
    assert {"name": "POD_IP_DUMMY", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in container_env
    assert {"name": "PADDLE_MASTER", "value": "$(POD_IP_DUMMY):36543"} in container_env
    local = created(resource, LocalNetwork({("Worker", 0): 41000, ("Worker", 1): 41001}))
    assert local["pd-worker-0"].env["PADDLE_MASTER"] == "127.0.0.1:41000"  # podIP and $(VAR) resolved as kubelet does


def test_jax_worked_example():
    pods = created(job("JAXJob", "jx", {"Worker": 2}))
    assert env_line(pods["jx-worker-1"]) == (
        "PYTHONUNBUFFERED=1 COORDINATOR_PORT=6666 COORDINATOR_ADDRESS=jx-worker-0 NUM_PROCESSES=2 PROCESS_ID=1")
    assert pods["jx-worker-0"].labels["training.kubeflow.org/job-role"] == "master"


def test_mpi_launcher_env_hostfile_and_idle_workers():
    resource = job("MPIJob", "mpi", {"Launcher": 1, "Worker": 2}, slotsPerWorker=2)
    pods = created(resource)
    launcher = pods["mpi-launcher"]
    assert launcher.env["OMPI_MCA_plm_rsh_agent"] == "/etc/mpi/kubexec.sh"
    assert launcher.env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert launcher.env["NVIDIA_VISIBLE_DEVICES"] == ""
    assert "training.kubeflow.org/replica-index" not in launcher.labels
    worker = pods["mpi-worker-1"].pod["spec"]["containers"][0]
    assert worker["command"] == ["run"]
    idle = job("MPIJob", "mpi", {"Launcher": 1, "Worker": 1})
    del idle["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"]
    assert created(idle)["mpi-worker-0"].pod["spec"]["containers"][0]["args"] == ["365d"]
    framework = by_kind("MPIJob")
    from trainctl.core.job import Job

    assert framework.hostfile(Job(resource), ClusterNetwork()) == "mpi-worker-0 slots=2\nmpi-worker-1 slots=2\n"
    assert framework.hostfile(Job(resource), LocalNetwork()) == "127.0.0.1 slots=4\n"


def test_mpi_launcher_init_container_image_is_the_controllers_setting():
    from trainctl.core.job import Job

    resource = job("MPIJob", "mpi", {"Launcher": 1, "Worker": 2})
    images = {}
    [helper] = by_kind("MPIJob").helper_images
    for network in (ClusterNetwork(), ClusterNetwork(helper_images={helper.key: "reg.example.com/kd:1"})):
        pod = {"spec": {"containers": [{"name": "mpi", "image": "x"}]}}
        by_kind("MPIJob").decorate_pod(Job(resource), "Launcher", pod, network)
        [init] = pod["spec"]["initContainers"]
        images[network.image(helper)] = init["image"]
    assert images == {"kubeflow/kubectl-delivery:latest": "kubeflow/kubectl-delivery:latest",
                      "reg.example.com/kd:1": "reg.example.com/kd:1"}


@pytest.mark.parametrize("kind, replicas, key, expected_local", [
    ("PyTorchJob", {"Master": 1, "Worker": 1}, "MASTER_ADDR", "127.0.0.1"),
    ("XGBoostJob", {"Master": 1, "Worker": 1}, "MASTER_PORT", "40000"),
    ("JAXJob", {"Worker": 2}, "COORDINATOR_PORT", "40000"),
])
def test_local_network_substitutes_loopback_and_allocated_ports(kind, replicas, key, expected_local):
    resource = job(kind, "j", replicas)
    ports = {("Master", 0): 40000, ("Worker", 0): 40000, ("Worker", 1): 40001}
    cluster, local = created(resource), created(resource, LocalNetwork(ports))
    for name in cluster:
        assert set(cluster[name].env) == set(local[name].env)  # same variables, only addresses differ
        assert local[name].env[key] == expected_local


def test_local_tf_config_has_one_port_per_replica():
    pods = created(job("TFJob", "t", {"Worker": 2}), LocalNetwork({("Worker", 0): 41000, ("Worker", 1): 41001}))
    assert json.loads(pods["t-worker-0"].env["TF_CONFIG"])["cluster"] == {
        "worker": ["127.0.0.1:41000", "127.0.0.1:41001"]}


def test_user_env_comes_first_and_services_mirror_ports():
    resource = job("PyTorchJob", "m", {"Master": 1})
    resource["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "MINE", "value": "1"}]
    plan = reconcile(resource, [], NOW, ClusterNetwork())
    pod = next(a for a in plan.actions if isinstance(a, CreateReplica))
    assert pod.pod["spec"]["containers"][0]["env"][0] == {"name": "MINE", "value": "1"}
    service = next(a for a in plan.actions if type(a).__name__ == "CreateService")
    assert service.ports == [{"name": "pytorchjob-port", "port": 23456}]
    assert "training.kubeflow.org/job-role" not in service.labels


def test_pods_get_omp_num_threads_from_their_cpu_limit_unless_they_set_it():
    from trainctl.core.reconcile import cpu_threads_env

    def threads(resources: dict, env=()) -> list:
        return cpu_threads_env({"name": "pytorch", "resources": resources, "env": list(env)})

    assert threads({"limits": {"cpu": "1500m"}, "requests": {"cpu": "4"}}) == [{"name": "OMP_NUM_THREADS", "value": "2"}]
    assert threads({"requests": {"cpu": "0.1"}}) == [{"name": "OMP_NUM_THREADS", "value": "1"}]
    assert threads({"limits": {"cpu": "2"}}, [{"name": "OMP_NUM_THREADS", "value": "8"}]) == []
    assert threads({}) == [] and threads({"limits": {"cpu": "nan"}}) == [] and threads({"limits": {"cpu": "2k"}}) == []


def test_a_cpu_limited_pod_carries_omp_num_threads_in_a_cluster_and_not_locally():
    resource = job("PyTorchJob", "cpu", {"Master": 1, "Worker": 1})
    for spec in resource["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "3"}}
    assert {action.env.get("OMP_NUM_THREADS") for action in created(resource).values()} == {"3"}
    assert {action.env.get("OMP_NUM_THREADS") for action in created(resource, LocalNetwork()).values()} == {None}


def test_local_paddle_workers_get_the_rank_a_cluster_gives_them():
    """On a cluster only worker-0's own IP is PADDLE_MASTER's, so its launcher serves the rendezvous and is rank 0;
    locally every replica is on 127.0.0.1, any launcher could win that race, and worker-1 was rank 0 about one
    run in three (issue 40). Locally each worker is told its rank, as its place on a cluster gives it."""
    framework = by_kind("PaddleJob")
    collective = Job(job("PaddleJob", "pd", {"Worker": 3}))
    assert [framework.local_env(collective, "Worker", index, "/state").get("PADDLE_RANK")
            for index in range(3)] == ["0", "1", "2"]


def test_the_wait_for_master_script_ends_on_sigterm_as_its_containers_pid_1(tmp_path):
    """A shell that is PID 1 ignores SIGTERM without a trap: a worker deleted while it waited for its master held
    its pod for the whole grace period. Run as PID 1 of a PID namespace of its own, as in a container."""
    import shutil
    import signal
    import subprocess
    import time

    if shutil.which("unshare") is None:
        pytest.fail("util-linux's unshare is missing: scripts/test.sh installs it")
    worker = created(job("PyTorchJob", "mnist", {"Master": 1, "Worker": 1}))["mnist-worker-0"]
    (init,) = worker.pod["spec"]["initContainers"]
    ready = tmp_path / "ready"
    # PID 1 (the shell) starts once unshare has forked; the file says its pid in the new namespace is 1
    command = ["unshare", "--pid", "--fork", "--kill-child", *(["--map-root-user"] if os.geteuid() else []),
               "sh", "-c", f'echo $$ > {ready}; exec sh -c "$0"', init["command"][2]]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not (ready.exists() and ready.read_text().strip() == "1"):
            assert time.monotonic() < deadline and process.poll() is None, "the script never started as PID 1"
            time.sleep(0.05)
        children = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split()
        os.kill(int(children[0]), signal.SIGTERM)  # the namespace's PID 1, seen from here
        assert process.wait(timeout=15) != 0  # without the trap it sleeps on through its 100 tries
    finally:
        process.kill()
