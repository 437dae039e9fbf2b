"""A TrainJob on each of upstream's default runtimes becomes the pods upstream's controller would make, checked
variable by variable against the plugins' code (kubeflow/trainer 8c0f505, pkg/runtime/framework/plugins/...; the
line cited by each rule), and the TrainJob's own bad input is refused in one line.

The runtimes are read from ../shared/kubeflow-trainer-v2/runtimes, upstream's files as they ship.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from tests.conftest import REPO
from trainctl.core.job import Job
from trainctl.core.trainjob import NodePlan, TrainJob, plan, with_local_path, with_runtime_snapshot
from trainctl.errors import UserError

RUNTIMES = REPO.parent / "shared" / "kubeflow-trainer-v2" / "runtimes"
INDEX = ("fieldRef", "metadata.annotations['batch.kubernetes.io/job-completion-index']")
PORT = [{"containerPort": 29500}]


def runtime(name: str) -> dict:
    return yaml.safe_load((RUNTIMES / f"{name.replace('-', '_')}.yaml").read_text())


def trainjob(runtime_name: str, name: str = "tj", **trainer) -> TrainJob:
    spec = {"runtimeRef": {"name": runtime_name}}
    if trainer:
        spec["trainer"] = trainer
    return TrainJob({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                     "metadata": {"name": name, "namespace": "ns", "uid": "u-1"}, "spec": spec})


def planned(runtime_name: str, **trainer) -> NodePlan:
    return plan(trainjob(runtime_name, **trainer), runtime(runtime_name))


def env(pod, container: str = "node") -> dict:
    """A container's env as written into the pod: name -> value, or ("fieldRef", path)."""
    return {item["name"]: item["value"] if "value" in item else ("fieldRef", item["valueFrom"]["fieldRef"]["fieldPath"])
            for item in pod.container(container).get("env", [])}


def test_every_upstream_default_runtime_is_covered():
    assert sorted(path.stem for path in RUNTIMES.glob("*.yaml")) == [
        "deepspeed_distributed", "jax_distributed", "mlx_distributed", "torch_distributed", "xgboost_distributed"]


def test_torch_distributed_pods_names_labels_and_env():
    job_plan = planned("torch-distributed", numNodes=3, numProcPerNode=2, image="me/img:1",
                       command=["torchrun", "train.py"], args=["--lr", "0.1"], env=[{"name": "FOO", "value": "bar"}])
    pods = job_plan.pods
    # jobset.go L302 / contract §3: <job>-<replicatedJob>-<jobIndex>-<podIndex>, subdomain = the job's name
    assert [pod.name for pod in pods] == ["tj-node-0-0", "tj-node-0-1", "tj-node-0-2"]
    assert job_plan.subdomain == "tj" and job_plan.policy == "torch"
    for index, pod in enumerate(pods):
        assert pod.spec["hostname"] == pod.name and pod.spec["subdomain"] == "tj"
        # jobset labelAndAnnotateObject + the Indexed Job's completion index, label and annotation (contract §3)
        for marks in (pod.labels, pod.annotations):
            assert marks["jobset.sigs.k8s.io/jobset-name"] == "tj"
            assert marks["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
            assert marks["batch.kubernetes.io/job-completion-index"] == str(index)
            assert marks["jobset.sigs.k8s.io/job-index"] == "0"
        assert pod.labels["batch.kubernetes.io/job-name"] == "tj-node-0"
        node = pod.container("node")
        # builder.go L130-136: the TrainJob's image, command and args replace the node container's
        assert (node["image"], node["command"], node["args"]) == ("me/img:1", ["torchrun", "train.py"], ["--lr", "0.1"])
        assert env(pod) == {
            "FOO": "bar",  # torch.go L141: the trainer's env, upserted before the PET_ values
            "PET_NNODES": "3",  # torch.go L147: the trainer PodSet's count (TrainJob numNodes, L118)
            "PET_NPROC_PER_NODE": "2",  # torch.go L150, L123: the TrainJob's numProcPerNode
            "PET_NODE_RANK": INDEX,  # torch.go L153: the completion index fieldRef
            "PET_MASTER_ADDR": "tj-node-0-0.tj",  # torch.go L161: <job>-node-0-0.<job>
            "PET_MASTER_PORT": "29500",  # torch.go L164: constants.ContainerTrainerPort
            "JOB_COMPLETION_INDEX": INDEX,  # Kubernetes' Job controller, Indexed completion mode
        }
        assert list(env(pod))[:2] == ["FOO", "PET_NNODES"]  # trainer env first, then the plugin's (L141, L173)
        assert node["ports"] == PORT  # torch.go L203
        assert pod.environment()["PET_NODE_RANK"] == str(index)
        assert pod.spec["restartPolicy"] == "OnFailure"  # JobSet's webhook default (contract §3)


@pytest.mark.parametrize(("trainer", "expected"), [
    ({"numProcPerNode": 4}, "4"),  # torch.go L123: the TrainJob's value wins
    ({"resourcesPerNode": {"limits": {"nvidia.com/gpu": 2}}}, "auto"),  # L131: GPUs and no value: "auto"
    ({"resourcesPerNode": {"requests": {"cpu": "3"}}}, "3"),  # L134 + getNumCPUPerNode: the CPU request
    ({"resourcesPerNode": {"limits": {"cpu": "1500m"}}}, "2"),  # no request: the limit, rounded up (Quantity.Value)
    ({"resourcesPerNode": {"requests": {"cpu": "2"}, "limits": {"cpu": "4"}}}, "2"),  # requests before limits
    ({"resourcesPerNode": {"requests": {"cpu": 0.5}}}, "1"),  # rounded up, and max(1, ...) at L134
    ({"resourcesPerNode": {"limits": {"memory": "4Gi"}}}, "1"),  # no CPU at all: max(1, 0)
    ({}, "1"),  # no resources anywhere
    ({"numProcPerNode": "auto"}, "1"),  # Trainer v2.0-2.1's IntOrString "auto": the same as none on CPU
])
def test_torch_processes_per_node(trainer, expected):
    pod = planned("torch-distributed", numNodes=1, **trainer).pods[0]
    assert env(pod)["PET_NPROC_PER_NODE"] == expected


def test_torch_counts_the_trainjobs_resources_not_the_runtimes_when_it_has_some():
    rt = runtime("torch-distributed")
    node = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    node["resources"] = {"limits": {"nvidia.com/gpu": 8}}
    # torch.go L127-129: the TrainJob's resourcesPerNode, where given, replace the runtime's for the count ...
    pod = plan(trainjob("torch-distributed", resourcesPerNode={"limits": {"cpu": 6}}), rt).pods[0]
    assert env(pod)["PET_NPROC_PER_NODE"] == "6"
    # ... while the container's resources are the strategic merge of both (trainingruntime.go L226)
    assert pod.container()["resources"] == {"limits": {"nvidia.com/gpu": 8, "cpu": "6"}}
    # and without them the runtime's GPUs give "auto" (runtime.go L263 ExtractResourcePerNodeFromRuntime)
    assert env(plan(trainjob("torch-distributed", numNodes=2), rt).pods[0])["PET_NPROC_PER_NODE"] == "auto"


def test_float_quantities_from_the_sdk_are_accepted_and_rendered_as_kubernetes_writes_them():
    resources = {"limits": {"cpu": 2.0, "memory": "4Gi", "nvidia.com/gpu": 1.0},
                 "requests": {"cpu": 0.5, "memory": "4Gi", "nvidia.com/gpu": 1.0}}
    job_plan = planned("torch-distributed", numNodes=2.0, resourcesPerNode=resources)
    assert len(job_plan.pods) == 2
    assert job_plan.pods[0].container()["resources"] == {
        "limits": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "1"},
        "requests": {"cpu": "500m", "memory": "4Gi", "nvidia.com/gpu": "1"}}
    with pytest.raises(UserError, match=r"spec.trainer.numNodes must be a whole number, not 2.5"):
        planned("torch-distributed", numNodes=2.5)


@pytest.mark.parametrize("name", ["deepspeed-distributed", "mlx-distributed"])
def test_mpi_runtimes_launcher_as_node(name):
    job_plan = planned(name, numNodes=3, command=["mpirun", "python", "train.py"],
                       env=[{"name": "FOO", "value": "bar"}], resourcesPerNode={"limits": {"cpu": 2}})
    # mpi.go L121: runLauncherAsNode: numNodes-1 node pods; the launcher is the trainer ancestor, 1 pod
    assert [pod.name for pod in job_plan.pods] == ["tj-node-0-0", "tj-node-0-1", "tj-launcher-0-0"]
    nodes, (launcher,) = job_plan.pods_of("node"), job_plan.pods_of("launcher")
    # mpi.go L325: "<endpoint> slots=<n>" per pod of node, then launcher (runtime order; isNode with runLauncherAsNode)
    assert job_plan.files == {"launcher": {"/etc/mpi/hostfile": "tj-node-0-0.tj slots=1\ntj-node-0-1.tj slots=1\n"
                                                                "tj-launcher-0-0.tj slots=1\n"}}
    assert env(launcher) == {
        "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",  # mpi.go L213
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",  # mpi.go L216
        "OMPI_MCA_orte_set_default_slots": "1",  # mpi.go L219: the runtime's numProcPerNode
        "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",  # mpi.go L222
        "FOO": "bar",  # builder.go L142-148: the trainer's env, after the plugin's
        "JOB_COMPLETION_INDEX": INDEX,
    }
    for node in nodes:
        # builder.go L142: with runLauncherAsNode the node job's node container gets the trainer's env too ...
        assert env(node) == {"FOO": "bar", "JOB_COMPLETION_INDEX": INDEX}
        # ... but keeps its own command (sshd): builder.go L126-136 touches the trainer ancestor only
        assert node.container()["command"] == ["/usr/sbin/sshd"]
        # trainingruntime.go L209: resourcesPerNode also merged into the node job when the launcher is a node
        assert node.container()["resources"] == {"limits": {"cpu": "2"}}
        # mpi.go L197-198: the SSH key at sshAuthMountPath; no hostfile on nodes
        assert node.container()["volumeMounts"] == [{"name": "mpi-ssh-auth", "mountPath": "/home/mpiuser/.ssh"}]
        assert [volume["name"] for volume in node.spec["volumes"]] == ["mpi-ssh-auth"]
    assert launcher.container()["command"] == ["mpirun", "python", "train.py"]
    assert launcher.container()["volumeMounts"] == [{"name": "mpi-ssh-auth", "mountPath": "/home/mpiuser/.ssh"},
                                                    {"name": "mpi-hostfile", "mountPath": "/etc/mpi"}]  # L205-206
    volumes = {volume["name"]: volume for volume in launcher.spec["volumes"]}
    assert volumes["mpi-ssh-auth"]["secret"]["secretName"] == "tj-mpi-ssh-auth"  # L150 + MPISSHAuthSecretSuffix
    assert volumes["mpi-hostfile"]["configMap"]["name"] == "tj-mpi-hostfile"  # L178
    assert launcher.spec["securityContext"] == {"fsGroup": 1000}  # the runtime's template, kept


@pytest.mark.parametrize(("trainer", "slots", "node_pods"), [
    ({}, "1", 1),  # no numNodes: the node job keeps its parallelism (1); slots from the runtime
    ({"numNodes": 1}, "1", 1),  # mpi.go L121: max(numNodes-1, 1)
    ({"numNodes": 2, "numProcPerNode": 4}, "4", 1),  # mpi.go L129: the TrainJob's numProcPerNode
    ({"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}}}, "4", 1),  # L136: runtime 1, 4 GPUs
    ({"numNodes": 5, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 1}}}, "1", 4),  # one GPU: stays 1
])
def test_mpi_slots_and_node_counts(trainer, slots, node_pods):
    job_plan = planned("deepspeed-distributed", **trainer)
    assert len(job_plan.pods_of("node")) == node_pods and len(job_plan.pods_of("launcher")) == 1
    assert env(job_plan.pods_of("launcher")[0])["OMPI_MCA_orte_set_default_slots"] == slots
    assert job_plan.files["launcher"]["/etc/mpi/hostfile"].count(f"slots={slots}\n") == node_pods + 1


def test_mpi_locally_one_hostfile_line_for_this_machine_and_the_nodes_idle():
    job, rt = trainjob("deepspeed-distributed", numNodes=3, numProcPerNode=2), runtime("deepspeed-distributed")
    local = plan(job, rt, local_ports={("node", 0): 5001, ("node", 1): 5002, ("launcher", 0): 5003})
    # 2 node pods and the launcher, all 127.0.0.1: one line with their slots together (Open MPI refuses a host twice)
    assert local.files == {"launcher": {"/etc/mpi/hostfile": "127.0.0.1 slots=6\n"}}
    assert plan(job, rt).files["launcher"]["/etc/mpi/hostfile"].count("slots=2\n") == 3  # a cluster's: one per pod
    assert local.idle == plan(job, rt).idle == {"node": {"command": ["sleep"], "args": ["365d"]}}  # no sshd locally
    assert planned("torch-distributed", numNodes=2).idle == {}


def test_a_pod_path_in_a_local_word_is_the_local_copy():
    files = {"/etc/mpi/hostfile": "/jobs/mj/pod-files/launcher/etc/mpi/hostfile"}
    assert [with_local_path(word, files) for word in ("/etc/mpi/hostfile", "--hostfile=/etc/mpi/hostfile",
                                                      "/etc/mpi/hostfile2", "cat /etc/mpi/hostfile", "python")] == [
        files["/etc/mpi/hostfile"], "--hostfile=" + files["/etc/mpi/hostfile"], "/etc/mpi/hostfile2",
        "cat /etc/mpi/hostfile", "python"]


def test_mpi_launcher_not_a_node_sizes_the_node_job_with_numnodes():
    rt = runtime("deepspeed-distributed")
    rt["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = False
    job_plan = plan(trainjob("deepspeed-distributed", numNodes=3, env=[{"name": "FOO", "value": "bar"}]), rt)
    assert len(job_plan.pods_of("node")) == 3  # mpi.go L123
    assert "tj-launcher-0-0.tj" not in job_plan.files["launcher"]["/etc/mpi/hostfile"]  # isNode: only node pods
    assert "FOO" not in env(job_plan.pods_of("node")[0])  # builder.go L142: the trainer ancestor only
    assert env(job_plan.pods_of("launcher")[0])["FOO"] == "bar"


def test_jax_distributed_env():
    job_plan = planned("jax-distributed", numNodes=2, env=[{"name": "FOO", "value": "bar"}])
    for pod in job_plan.pods:
        assert env(pod) == {
            "JAX_NUM_PROCESSES": "2",  # jax.go L79: the trainer PodSet's count
            "JAX_PROCESS_ID": INDEX,  # jax.go L84
            "JAX_COORDINATOR_ADDRESS": "tj-node-0-0.tj:29500",  # jax.go L91
            "FOO": "bar",  # builder.go L148: upserted after the plugin's (the JAX plugin upserts none)
            "JOB_COMPLETION_INDEX": INDEX,
        }
        assert pod.container()["ports"] == PORT  # jax.go L100
    assert [pod.environment()["JAX_PROCESS_ID"] for pod in job_plan.pods] == ["0", "1"]


@pytest.mark.parametrize(("resources", "workers"), [(None, "3"), ({"limits": {"nvidia.com/gpu": 2}}, "6")])
def test_xgboost_distributed_env(resources, workers):
    trainer = {"numNodes": 3, "env": [{"name": "FOO", "value": "bar"}]}
    if resources:
        trainer["resourcesPerNode"] = resources
    for pod in planned("xgboost-distributed", **trainer).pods:
        assert env(pod) == {
            "FOO": "bar",  # plainml.go L66 (plainml stands aside only for torch, mpi and jax)
            "DMLC_TRACKER_URI": "tj-node-0-0.tj",  # xgboost.go L123
            "DMLC_TRACKER_PORT": "29500",  # xgboost.go L127
            "DMLC_TASK_ID": INDEX,  # xgboost.go L131
            "DMLC_NUM_WORKER": workers,  # xgboost.go L113: numNodes x GPUs per node (1 on CPU)
            "JOB_COMPLETION_INDEX": INDEX,
        }
        assert pod.container()["ports"] == PORT  # xgboost.go L142


def test_plain_runtime_gets_the_count_and_the_trainers_env_only():
    rt = runtime("torch-distributed")
    rt["metadata"]["name"] = "plain"
    rt["spec"]["mlPolicy"] = {"numNodes": 2}
    job_plan = plan(trainjob("plain", env=[{"name": "TF_CONFIG_LIKE", "value": "{}"}]), rt)
    assert job_plan.policy == "" and len(job_plan.pods) == 2  # trainingruntime.go L202: mlPolicy.numNodes
    assert env(job_plan.pods[1]) == {"TF_CONFIG_LIKE": "{}", "JOB_COMPLETION_INDEX": INDEX}  # plainml.go L66


def test_a_trainjob_without_a_trainer_gets_no_plugin_env():
    # torch.go L139-143: the trainer container is looked up only when spec.trainer is set
    pod = plan(trainjob("torch-distributed"), runtime("torch-distributed")).pods[0]
    assert env(pod) == {"JOB_COMPLETION_INDEX": INDEX}
    assert pod.container()["image"] == "pytorch/pytorch:2.13.0-cuda13.0-cudnn9-runtime"


@pytest.mark.parametrize(("runtime_name", "name"), [
    ("torch-distributed", "PET_NNODES"), ("torch-distributed", "PET_MASTER_ADDR"),  # torch.go L69
    ("deepspeed-distributed", "OMPI_MCA_orte_set_default_slots"),  # mpi.go L99
    ("xgboost-distributed", "DMLC_TASK_ID"),  # xgboost.go L62
])
def test_reserved_env_names_are_refused_in_one_line(runtime_name, name):
    with pytest.raises(UserError) as refused:
        planned(runtime_name, env=[{"name": "OK", "value": "1"}, {"name": name, "value": "x"}])
    assert refused.value.exit_code == 2 and "\n" not in refused.value.message
    assert f"spec.trainer.env sets {name}" in refused.value.message and "remove it" in refused.value.message
    assert "'tj'" in refused.value.message and runtime_name in refused.value.message


def test_jax_reserves_no_names():  # jax.go Validate returns nothing; the plugin's values win (upsert)
    pod = planned("jax-distributed", numNodes=2, env=[{"name": "JAX_NUM_PROCESSES", "value": "9"}]).pods[0]
    assert env(pod)["JAX_NUM_PROCESSES"] == "9"  # builder.go L148 upserts the trainer's env last


def test_mpi_launcher_as_node_needs_both_jobs_for_several_nodes():
    rt = runtime("deepspeed-distributed")
    del rt["spec"]["template"]["spec"]["replicatedJobs"][0]  # no node job
    with pytest.raises(UserError, match="numNodes must be 1"):  # mpi.go L92
        plan(trainjob("deepspeed-distributed", numNodes=2), rt)


def test_the_runtime_must_be_the_one_named():
    with pytest.raises(UserError, match="names ClusterTrainingRuntime 'jax-distributed', not ClusterTrainingRuntime"):
        plan(trainjob("jax-distributed"), runtime("torch-distributed"))
    namespaced = trainjob("torch-distributed").resource
    namespaced["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    with pytest.raises(UserError, match="fix spec.runtimeRef"):
        plan(TrainJob(namespaced), runtime("torch-distributed"))
    del namespaced["spec"]["runtimeRef"]["name"]
    with pytest.raises(UserError, match="has no spec.runtimeRef.name"):
        TrainJob(namespaced)


def test_the_resource_is_left_as_written():
    job = trainjob("torch-distributed", numNodes=2.0, resourcesPerNode={"limits": {"cpu": 2.0}},
                   env=[{"name": "A", "value": "$(PET_NNODES)x"}, {"name": "B", "value": "$(A)-$$(A)"}])
    stored, rt = copy.deepcopy(job.resource), runtime("torch-distributed")
    runtime_stored = copy.deepcopy(rt)
    pod = plan(job, rt).pods[1]
    assert job.resource == stored and rt == runtime_stored
    assert job.runtime_ref == {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                               "name": "torch-distributed"}
    # Kubernetes expands $(VAR) only of variables defined before it: A comes first, so it stays as written
    assert pod.environment()["A"] == "$(PET_NNODES)x" and pod.environment()["B"] == "$(PET_NNODES)x-$(A)"


def test_torch_env_injection_reaches_the_named_sidecars_and_init_containers():
    rt = runtime("torch-distributed")
    spec = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    spec["initContainers"] = [{"name": "preflight", "image": "busybox"}]
    spec["containers"].append({"name": "monitor", "image": "busybox"})
    rt["spec"]["mlPolicy"]["torch"] = {"envInjection": {"targets": [{"jobName": "node",
                                                                     "containerNames": ["preflight", "monitor"]}]}}
    pod = plan(trainjob("torch-distributed", numNodes=2, env=[{"name": "FOO", "value": "bar"}]), rt).pods[1]
    injected = {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "1", "PET_NODE_RANK": INDEX,  # torch.go L218: petEnvs
                "PET_MASTER_ADDR": "tj-node-0-0.tj", "PET_MASTER_PORT": "29500",  # L219: and the rendezvous
                "JOB_COMPLETION_INDEX": INDEX}  # the Job controller's, init containers included; no trainer env
    assert env(pod, "monitor") == injected and "ports" not in pod.container("monitor")
    assert {item["name"] for item in pod.spec["initContainers"][0]["env"]} == set(injected)
    assert env(pod)["FOO"] == "bar"
    rt["spec"]["mlPolicy"]["torch"]["envInjection"]["targets"][0]["containerNames"] = ["absent"]
    with pytest.raises(UserError, match="names container 'absent' of replicatedJob 'node'"):  # torch.go L89-105
        plan(trainjob("torch-distributed"), rt)


def test_initializers_get_the_trainjobs_storage_uri_env_and_secret():
    rt = runtime("torch-distributed")
    jobs = rt["spec"]["template"]["spec"]["replicatedJobs"]
    jobs.insert(0, {"name": "dataset-initializer", "template": {
        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "dataset-initializer"}},
        "spec": {"template": {"spec": {"containers": [{"name": "dataset-initializer", "image": "init"}]}}}}})
    job = trainjob("torch-distributed", numNodes=2)
    job.spec["initializer"] = {"dataset": {"storageUri": "hf://tatsu-lab/alpaca", "env": [{"name": "A", "value": "1"}],
                                           "secretRef": {"name": "hf-token"}}}
    job_plan = plan(job, rt)
    (initializer,) = job_plan.pods_of("dataset-initializer")
    assert initializer.name == "tj-dataset-initializer-0-0"
    # builder.go L59-69: STORAGE_URI, the initializer's env, its secret as envFrom
    assert env(initializer, "dataset-initializer") == {"STORAGE_URI": "hf://tatsu-lab/alpaca", "A": "1",
                                                       "JOB_COMPLETION_INDEX": INDEX}
    assert initializer.container("dataset-initializer")["envFrom"] == [{"secretRef": {"name": "hf-token"}}]
    # jobset labelAndAnnotateObject: global indexes count the replicatedJobs before
    assert job_plan.pods_of("node")[1].labels["jobset.sigs.k8s.io/job-global-index"] == "1"
    assert job_plan.pods_of("node")[1].labels["jobset.sigs.k8s.io/global-replicas"] == "2"


# ---- a TrainJob as the reconcile core's job (trainctl/core/job.py) ------------------------------------------------

def stored(runtime_name: str, **trainer) -> dict:
    """A TrainJob as the local backend stores it: with the snapshot of its runtime."""
    resource = trainjob(runtime_name, **trainer).resource
    with_runtime_snapshot(resource, runtime(runtime_name))
    return resource


def test_the_core_reads_a_stored_trainjob_as_its_runtimes_pods():
    job = Job(stored("torch-distributed", numNodes=3, command=["torchrun", "t.py"]))
    assert job.replica_types == ["node"] and job.replicas("node") == 3 and job.framework.kind == "TrainJob"
    assert job.restart_policy("node") == "OnFailure"  # JobSet's default
    assert [job.pod_name("node", index) for index in range(3)] == ["tj-node-0-0", "tj-node-0-1", "tj-node-0-2"]
    assert job.replica_id("node", 2) == "node-0-2"
    assert job.labels("node", 2)["batch.kubernetes.io/job-completion-index"] == "2"
    assert job.annotations("node", 2)["batch.kubernetes.io/job-completion-index"] == "2"
    assert job.main_container(job.template("node")["spec"]["containers"])["command"] == ["torchrun", "t.py"]
    assert job.run_policy == {"suspend": False, "cleanPodPolicy": "Running", "backoffLimit": 6}
    assert not job.managed_externally  # managedBy's default is trainctl's controller


def test_a_runtimes_job_backoff_limit_is_the_trainjobs_restart_budget():
    """JobSet copies the replicatedJob's Job template, backoffLimit included: 0 fails at the first restart."""
    resource = trainjob("torch-distributed", numNodes=2).resource
    strict = copy.deepcopy(runtime("torch-distributed"))
    strict["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = 0
    with_runtime_snapshot(resource, strict)
    assert Job(resource).run_policy["backoffLimit"] == 0


@pytest.mark.parametrize("limit", ["x", -1, 1.5, True])
def test_a_runtimes_backoff_limit_that_is_no_count_is_named_in_one_line(limit):
    resource = trainjob("torch-distributed", numNodes=2).resource
    odd = copy.deepcopy(runtime("torch-distributed"))
    odd["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = limit
    with pytest.raises(UserError) as refused:
        with_runtime_snapshot(resource, odd)
    assert str(refused.value) == (f"runtime 'torch-distributed': replicatedJob 'node' has template.spec.backoffLimit "
                                  f"{limit!r}: give a whole number >= 0 (the restarts its pods may use)")


def test_a_trainjob_pod_from_the_core_resolves_its_rank_and_reaches_rank_0_locally():
    from datetime import datetime, timezone

    from trainctl.core.actions import CreateReplica
    from trainctl.core.network import LocalNetwork
    from trainctl.core.reconcile import reconcile

    network = LocalNetwork({("node", 0): 41000, ("node", 1): 41001})
    actions = reconcile(stored("torch-distributed", numNodes=2), [], datetime.now(timezone.utc), network).actions
    created = {action.index: action for action in actions if isinstance(action, CreateReplica)}
    assert sorted(created) == [0, 1]
    for index, action in created.items():
        assert action.env["PET_NODE_RANK"] == action.env["JOB_COMPLETION_INDEX"] == str(index)  # fieldRef, resolved
        assert (action.env["PET_MASTER_ADDR"], action.env["PET_MASTER_PORT"]) == ("127.0.0.1", "41000")
        assert action.pod["spec"]["hostname"] == f"tj-node-0-{index}" and action.pod["spec"]["subdomain"] == "tj"
        assert action.pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == str(index)


@pytest.mark.parametrize(("done", "succeeded"), [({"launcher": 1}, True), ({"node": 1}, False), ({}, False)])
def test_success_follows_the_runtimes_success_policy(done, succeeded):
    from types import SimpleNamespace

    resource = trainjob("deepspeed-distributed", numNodes=2).resource
    rt = runtime("deepspeed-distributed")
    rt["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = False
    with_runtime_snapshot(resource, rt)
    job = Job(resource)
    observed = [SimpleNamespace(rtype=rtype, phase="Succeeded") for rtype, count in done.items() for _ in range(count)]
    # successPolicy {operator: All, targetReplicatedJobs: [launcher]}: the launcher's one pod decides (contract §3)
    assert job.framework.succeeded(job, job.framework.status_role(job.replica_types), {}, observed) is succeeded
    assert job.framework.status_role(job.replica_types) == "launcher"


def test_kubelets_env_rules():
    from trainctl.kube.envvars import resolved

    metadata = {"name": "p", "namespace": "ns", "labels": {"a": "1"}, "annotations": {"b": "2"}}
    entries = [{"name": "A", "value": "x"}, {"name": "B", "value": "$(A)-$$(A)-$(C)-$$"},
               {"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
               {"name": "L", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['a']"}}},
               {"name": "AN", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['b']"}}},
               {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
               {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},  # only in a cluster
               {"name": "C", "value": "late"}]
    assert resolved(entries, metadata, "10.0.0.1") == {"A": "x", "B": "x-$(A)-$(C)-$", "N": "p", "L": "1", "AN": "2",
                                                       "IP": "10.0.0.1", "C": "late"}


# ---- the status trainctl's controller writes: upstream's form of the core's (contract §1.3) ---------------------

STAMP = "2026-11-29T04:00:00Z"


def core_condition(ctype: str, status: str = "True", reason: str = "", message: str = "m") -> dict:
    return {"type": ctype, "status": status, "reason": reason or f"TrainJob{ctype}", "message": message,
            "lastUpdateTime": STAMP, "lastTransitionTime": STAMP}


@pytest.mark.parametrize("conditions, counts, expected, job", [
    # running: Created and Running are trainctl's alone, so no condition at all; the node Job active and ready
    ([core_condition("Created"), core_condition("Running")], {"active": 2, "succeeded": 0, "failed": 0}, [],
     {"ready": 1, "active": 1, "succeeded": 0, "failed": 0, "suspended": 0}),
    # one rank still starting: active, not ready
    ([core_condition("Created")], {"active": 1, "succeeded": 0, "failed": 0}, [],
     {"ready": 0, "active": 1, "succeeded": 0, "failed": 0, "suspended": 0}),
    ([core_condition("Created"), core_condition("Suspended")], {}, [("Suspended", "True", "Suspended",
                                                                     "TrainJob is suspended")],
     {"ready": 0, "active": 0, "succeeded": 0, "failed": 0, "suspended": 1}),
    ([core_condition("Created"), core_condition("Suspended", "False", "TrainJobResumed"), core_condition("Running")],
     {"active": 2}, [("Suspended", "False", "Resumed", "TrainJob is resumed")],
     {"ready": 1, "active": 1, "succeeded": 0, "failed": 0, "suspended": 0}),
    ([core_condition("Created"), core_condition("Running", "False"), core_condition("Succeeded", message="done")],
     {"active": 0, "succeeded": 2, "failed": 0}, [("Complete", "True", "AllJobsCompleted", "done")],
     {"ready": 0, "active": 0, "succeeded": 1, "failed": 0, "suspended": 0}),
    ([core_condition("Created"), core_condition("Failed", message="node-0-1 exited with code 1")],
     {"active": 0, "succeeded": 1, "failed": 1}, [("Failed", "True", "TrainJobFailed", "node-0-1 exited with code 1")],
     {"ready": 0, "active": 0, "succeeded": 0, "failed": 1, "suspended": 0}),
])
def test_upstream_status_has_only_suspended_complete_and_failed_as_full_conditions(conditions, counts, expected, job):
    from trainctl.core import conditions as cond
    from trainctl.core.trainjob import upstream_status

    written = upstream_status({"conditions": conditions, "replicaStatuses": {"node": counts}}, {"node": 2})
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in written.get("conditions", [])] == expected
    assert all(c["lastTransitionTime"] == STAMP for c in written.get("conditions", []))
    assert written["jobsStatus"] == [{"name": "node", **job}]
    # trainctl's readers take upstream's form: Complete is Succeeded; a running one, without conditions, Pending
    true = [ctype for ctype, status, _, _ in expected if status == "True"]
    assert cond.state_of({"status": written}) == ({"Complete": "Succeeded"}.get(true[-1], true[-1]) if true
                                                  else "Pending")


def test_readers_prefer_trainctls_status_in_the_annotation_to_upstreams_form():
    from trainctl.core import conditions as cond

    resource = {"metadata": {"annotations": {cond.STATUS_ANNOTATION: '{"conditions": [{"type": "Running", '
                                                                      '"status": "True"}]}'}},
                "status": {"jobsStatus": []}}
    assert cond.state_of(resource) == "Running"
    resource["metadata"]["annotations"][cond.STATUS_ANNOTATION] = "not json"  # edited by hand: the field is read
    assert cond.state_of({**resource, "status": {"conditions": [core_condition("Complete")]}}) == "Succeeded"
