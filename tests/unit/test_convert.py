"""trainctl convert: v1 jobs as Trainer v2 TrainJobs and back (trainctl/core/convert.py, docs/trainer-v2.md).

Upstream's v1 examples that v2 can express come back as they were (compared after the operator's defaults);
the others name the fields v2 cannot say. The command refuses with one line, and prints nothing, unless told
to drop them.
"""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from tests.conftest import REPO
from trainctl.core.convert import V1_ANNOTATION, convert
from trainctl.core.job import Job
from trainctl.core.trainjob import TrainJob, plan
from trainctl.errors import UserError

RUNTIMES = REPO.parent / "shared" / "kubeflow-trainer-v2" / "runtimes"
RESTART = "restartPolicy (Never (the {} default)"
# every upstream v1 example: () when v2 expresses it, else the fields it cannot
EXAMPLES = {
    "jax__cpu-demo__demo.yaml": (),
    "paddlepaddle__simple-cpu.yaml": (),
    "pytorch__simple.yaml": (),
    "tensorflow__simple.yaml": (),
    "mpi__tensorflow-mnist.yaml": ("spec.runPolicy.cleanPodPolicy", "spec.mpiReplicaSpecs.Launcher.restartPolicy",
                                   "spec.mpiReplicaSpecs.Worker.restartPolicy"),
    "pytorch__elastic__echo__echo.yaml": ("spec.elasticPolicy",),
    "tensorflow__distribution_strategy__multi_worker_tfjob.yaml": ("spec.tfReplicaSpecs.Worker.restartPolicy",),
    "xgboost__lightgbm-dist__xgboostjob_v1_lightgbm_dist_training.yaml": (
        "spec.xgbReplicaSpecs.Master.restartPolicy", "spec.xgbReplicaSpecs.Worker.restartPolicy"),
}


def defaulted(resource: dict) -> dict:
    """What a v1 job says, with the operator's defaults applied: two jobs that differ only in what the operator
    would have filled in are the same job."""
    job = Job(resource)
    metadata = {key: resource["metadata"].get(key) or None for key in ("name", "namespace", "labels", "annotations")}
    run_policy = {key: value for key, value in job.run_policy.items() if value not in (None, False)
                  and (key, value) != ("managedBy", "kubeflow.org/training-operator")}
    kind_fields = {key: value for key, value in job.spec.items()
                   if key not in (job.framework.replica_spec_field, "runPolicy")
                   and (key, value) not in (("nprocPerNode", "auto"), ("slotsPerWorker", 1))}
    replicas = {rtype: (job.replicas(rtype), job.restart_policy(rtype), spec.get("template"))
                for rtype, spec in job.replica_specs.items()}
    return {"kind": resource["kind"], "metadata": metadata, "runPolicy": run_policy, "spec": kind_fields,
            "replicas": replicas}


def round_trip(resource: dict) -> tuple[list[dict], dict]:
    """The v2 documents of ``resource``, and the v1 job they convert back to."""
    there = convert([copy.deepcopy(resource)], "v2").documents
    back = convert(copy.deepcopy(there), "v1").documents
    assert len(back) == 1
    return there, back[0]


def named_fields(error: UserError) -> list[str]:
    message = error.message
    assert message.count("\n") == 0
    return [part.split(" (")[0] for part in message.split("cannot convert without losing ")[1].split("; ")]


def test_every_upstream_example_is_classified(upstream):
    assert sorted(path.name for path in (upstream / "examples").glob("*.yaml")) == sorted(EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_upstream_examples_round_trip_or_name_the_fields(upstream, name):
    resource = yaml.safe_load((upstream / "examples" / name).read_text())
    if not EXAMPLES[name]:
        there, back = round_trip(resource)
        assert there[-1]["kind"] == "TrainJob" and defaulted(back) == defaulted(resource)
        return
    with pytest.raises(UserError) as refused:
        convert([resource], "v2")
    fields = named_fields(refused.value)
    assert fields == [f"{field}" for field in EXAMPLES[name]]
    lossy = convert([resource], "v2", allow_lossy=True)
    assert [entry.split(" (")[0] for entry in lossy.dropped] == list(EXAMPLES[name])


def plain_job(kind_field: str = "pytorchReplicaSpecs", kind: str = "PyTorchJob", **spec) -> dict:
    container = {"name": "pytorch", "image": "example.com/train:1", "command": ["python", "train.py"],
                 "args": ["--lr", "0.1"], "env": [{"name": "A", "value": "1"}],
                 "resources": {"limits": {"cpu": "2", "memory": "4Gi"}}}
    template = {"spec": {"containers": [container]}}
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": "mnist", "namespace": "ml"},
            "spec": {kind_field: {"Master": {"replicas": 1, "template": template},
                                  "Worker": {"replicas": 2, "template": copy.deepcopy(template)}}, **spec}}


def test_a_plain_container_runs_on_the_default_runtime_under_torchrun_and_comes_back():
    resource = plain_job(runPolicy={"suspend": True, "activeDeadlineSeconds": 600})
    there, back = round_trip(resource)
    assert len(there) == 1
    spec = there[0]["spec"]
    assert spec["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                  "name": "torch-distributed"}
    assert spec["suspend"] is True and spec["activeDeadlineSeconds"] == 600
    assert spec["trainer"] == {
        "numNodes": 3, "numProcPerNode": 1, "image": "example.com/train:1",
        "command": ["python", "-m", "torch.distributed.run", "train.py"], "args": ["--lr", "0.1"],
        "env": [{"name": "A", "value": "1"}], "resourcesPerNode": {"limits": {"cpu": "2", "memory": "4Gi"}}}
    assert json.loads(there[0]["metadata"]["annotations"][V1_ANNOTATION])["command"] == ["python", "train.py"]
    assert defaulted(back) == defaulted(resource) and V1_ANNOTATION not in (back["metadata"].get("annotations") or {})


def test_what_v2_does_not_need_comes_back_from_the_annotation():
    """Worker-only, nprocPerNode given: v2 says neither, the job comes back."""
    resource = plain_job(nprocPerNode="2")
    del resource["spec"]["pytorchReplicaSpecs"]["Master"]
    there, back = round_trip(resource)
    assert there[0]["spec"]["trainer"]["numProcPerNode"] == 2
    assert defaulted(back) == defaulted(resource)


def test_an_edited_trainjob_keeps_its_edits_over_the_annotation():
    there = convert([plain_job()], "v2").documents
    there[0]["spec"]["trainer"].update(numNodes=5, command=["bash", "-c", "python train.py"])
    back = convert(there, "v1").documents[0]["spec"]["pytorchReplicaSpecs"]
    assert back["Master"]["replicas"] == 1 and back["Worker"]["replicas"] == 4
    assert back["Worker"]["template"]["spec"]["containers"][0]["command"] == ["bash", "-c", "python train.py"]


def test_the_env_v1_gave_and_v2_does_not_is_noted():
    resource = plain_job("jaxReplicaSpecs", "JAXJob")
    del resource["spec"]["jaxReplicaSpecs"]["Master"]
    resource["spec"]["jaxReplicaSpecs"]["Worker"]["restartPolicy"] = "OnFailure"
    resource["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["name"] = "jax"
    result = convert([resource], "v2")
    assert result.documents[0]["spec"]["runtimeRef"]["name"] == "jax-distributed"
    assert len(result.notes) == 1 and "COORDINATOR_ADDRESS" in result.notes[0]


def test_a_different_worker_template_is_named():
    resource = plain_job()
    resource["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"] = "other:2"
    with pytest.raises(UserError) as refused:
        convert([resource], "v2")
    assert named_fields(refused.value) == ["spec.pytorchReplicaSpecs.Worker.template"]


def sdk_trainjob(**trainer) -> dict:
    """A TrainJob as the SDK's TrainerClient().train(...) posts it (contract section 7.1)."""
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "v041e9dcb8fc"},
            "spec": {"runtimeRef": {"kind": "ClusterTrainingRuntime", "name": "torch-distributed"},
                     "trainer": {"command": ["bash", "-c", "torchrun train.py"],
                                 "env": [{"name": "FOO", "value": "bar"}],
                                 "numNodes": 2, "resourcesPerNode": {"limits": {"cpu": 2.0, "memory": "4Gi"}},
                                 **trainer}}}


def test_an_sdk_trainjob_on_a_default_runtime_needs_its_image():
    with pytest.raises(UserError, match=r"spec\.trainer\.image: not given"):
        convert([sdk_trainjob()])
    job = convert([sdk_trainjob(image="pytorch/pytorch:2")]).documents[0]
    assert job["kind"] == "PyTorchJob"
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert {rtype: spec["replicas"] for rtype, spec in specs.items()} == {"Master": 1, "Worker": 1}
    assert specs["Master"]["template"]["spec"]["containers"] == [{
        "name": "pytorch", "image": "pytorch/pytorch:2", "command": ["bash", "-c", "torchrun train.py"],
        "env": [{"name": "FOO", "value": "bar"}], "resources": {"limits": {"cpu": 2, "memory": "4Gi"}}}]


def upstream_runtime(name: str) -> dict:
    path = RUNTIMES / f"{name}.yaml"
    if not path.exists():
        pytest.skip(f"the upstream reference data is not beside the clone ({path})")
    return yaml.safe_load(path.read_text())


@pytest.mark.parametrize("runtime, kind", [("torch_distributed", "PyTorchJob"), ("jax_distributed", "JAXJob"),
                                           ("xgboost_distributed", "XGBoostJob")])
def test_an_upstream_runtime_given_in_the_file_gives_the_image(runtime, kind):
    document = upstream_runtime(runtime)
    trainjob = sdk_trainjob()
    trainjob["spec"]["runtimeRef"]["name"] = document["metadata"]["name"]
    job = convert([document, trainjob]).documents[0]
    assert job["kind"] == kind
    containers = next(iter(job["spec"].values()))["Worker"]["template"]["spec"]["containers"]
    image = document["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"][0]["image"]
    assert containers[0]["image"] == image and containers[0]["command"] == ["bash", "-c", "torchrun train.py"]


@pytest.mark.parametrize("runtime", ["deepspeed_distributed", "mlx_distributed"])
def test_an_mpi_runtime_that_runs_its_launcher_as_a_node_names_it(runtime):
    document = upstream_runtime(runtime)
    trainjob = sdk_trainjob(image="x:1")
    trainjob["spec"]["runtimeRef"]["name"] = document["metadata"]["name"]
    with pytest.raises(UserError) as refused:
        convert([document, trainjob])
    fields = named_fields(refused.value)
    assert any(field.endswith("spec.mlPolicy.mpi.runLauncherAsNode") for field in fields), fields


def test_what_a_v1_job_cannot_say_of_a_trainjob_is_named():
    trainjob = sdk_trainjob(image="x:1")
    trainjob["spec"]["initializer"] = {"dataset": {"storageUri": "hf://x"}}
    trainjob["spec"]["runtimePatches"] = [{"manager": "m"}]
    with pytest.raises(UserError) as refused:
        convert([trainjob])
    assert named_fields(refused.value) == ["spec.initializer", "spec.runtimePatches"]


def test_a_runtime_no_trainjob_uses_is_named():
    with pytest.raises(UserError, match=r"TrainingRuntime lonely \(no TrainJob in the file runs on it\)"):
        convert([{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
                  "metadata": {"name": "lonely"}, "spec": {}}, sdk_trainjob(image="x:1")])


def test_an_mpi_job_becomes_a_launcher_and_nodes_and_comes_back():
    """The launcher's container may have any name (the first one is wired): it comes back too."""
    worker = {"spec": {"containers": [{"name": "mpi", "image": "horovod:1"}]}}
    launcher = {"spec": {"containers": [{"name": "main", "image": "horovod:1", "command": ["mpirun", "python", "a.py"]},
                                        {"name": "sidecar", "image": "busybox"}]}}
    resource = {"apiVersion": "kubeflow.org/v1", "kind": "MPIJob", "metadata": {"name": "hvd"},
                "spec": {"slotsPerWorker": 2, "mpiReplicaSpecs": {
                    "Launcher": {"replicas": 1, "restartPolicy": "OnFailure", "template": launcher},
                    "Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": worker}}}}
    there, back = round_trip(resource)
    runtime, trainjob = there
    assert "the nodes' image must run an ssh server" in convert([resource]).notes[0]
    # the runtime's numNodes sizes its trainer step, the launcher; the TrainJob's sizes the nodes (upstream's mpi)
    assert runtime["spec"]["mlPolicy"] == {"numNodes": 1, "mpi": {}}
    assert [job["name"] for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]] == ["node", "launcher"]
    assert trainjob["spec"]["trainer"] == {"numNodes": 3, "numProcPerNode": 2}
    assert defaulted(back) == defaulted(resource)


def mpi_job(workers: int, worker_command: list[str] | None = None) -> dict:
    """The usual MPIJob: the Launcher runs mpirun, the Workers name no command (their image serves sshd)."""
    worker = {"name": "mpi-worker", "image": "mpi:1", **({"command": worker_command} if worker_command else {})}
    launcher = {"name": "mpi-launcher", "image": "mpi:1", "command": ["mpirun", "-n", str(workers), "hostname"]}
    return {"apiVersion": "kubeflow.org/v1", "kind": "MPIJob", "metadata": {"name": "pi"},
            "spec": {"mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "OnFailure",
                             "template": {"spec": {"containers": [launcher]}}},
                "Worker": {"replicas": workers, "restartPolicy": "OnFailure",
                           "template": {"spec": {"containers": [worker]}}}}}}


@pytest.mark.parametrize("workers", [2, 4])
def test_an_mpi_job_of_n_workers_plans_one_launcher_and_n_nodes(workers):
    """Upstream sizes the trainer step (the launcher) by the runtime's mlPolicy.numNodes and the nodes by the
    TrainJob's: N launchers would each run the whole mpirun."""
    runtime, trainjob = convert([mpi_job(workers)], "v2").documents
    pods = plan(TrainJob(trainjob), runtime).pods
    assert [pod.name for pod in pods] == [f"pi-node-0-{index}" for index in range(workers)] + ["pi-launcher-0-0"]
    assert pods[-1].container()["command"] == ["mpirun", "-n", str(workers), "hostname"]
    assert "command" not in pods[0].container()  # the Workers' own: their image's entrypoint (sshd)


def tune_runtime() -> dict:
    """A runtime shaped as upstream's torchtune ones: a volume claimed per job (JobSet's volumeClaimPolicies), filled
    by an initializer, mounted by the trainer; neither is a v1 field."""
    def job(name: str, step: str, **container) -> dict:
        mounts = [{"name": "workspace", "mountPath": "/workspace"}]
        container = {"name": step, "image": f"{step}:1", "volumeMounts": mounts, **container}
        labels = {"trainer.kubeflow.org/trainjob-ancestor-step": step}
        return {"name": name, "template": {"metadata": {"labels": labels},
                                           "spec": {"template": {"spec": {"containers": [container]}}}}}

    trainer = job("node", "trainer", command=["tune", "run", "recipe"])
    trainer["template"]["spec"]["template"]["spec"]["containers"][0]["name"] = "node"
    trainer["dependsOn"] = [{"name": "dataset-initializer", "status": "Complete"}]
    claim = {"metadata": {"name": "workspace"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                         "resources": {"requests": {"storage": "1Gi"}}}}
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
            "metadata": {"name": "tune-small", "labels": {"trainer.kubeflow.org/framework": "torchtune"}},
            "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {
                "volumeClaimPolicies": [{"templates": [claim]}],
                "replicatedJobs": [job("dataset-initializer", "dataset-initializer"), trainer]}}}}


def test_a_runtime_claiming_volumes_names_volume_claim_policies_and_drops_their_mounts_when_allowed():
    """The mount of a claimed volume has no volume in a v1 pod: the refusal names volumeClaimPolicies, not the mount
    that v1's validation would refuse; --allow-lossy drops both and the v1 job is valid."""
    trainjob = sdk_trainjob(image="tune:2")
    trainjob["spec"]["runtimeRef"]["name"] = "tune-small"
    with pytest.raises(UserError) as refused:
        convert([tune_runtime(), trainjob], "v1")
    fields = named_fields(refused.value)
    for field in ("spec.template.spec.volumeClaimPolicies", "replicatedJobs[node].volumeMounts[workspace]"):
        assert any(named.endswith(f"ClusterTrainingRuntime tune-small: {field}") for named in fields), fields
    lossy = convert([tune_runtime(), trainjob], "v1", allow_lossy=True)
    assert [entry.split(" (")[0] for entry in lossy.dropped] == fields
    master = lossy.documents[0]["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    assert master["image"] == "tune:2" and "volumeMounts" not in master


def test_a_v1_job_the_conversion_would_make_invalid_is_named_after_the_fields_it_loses():
    """What cannot be said is the blocker; v1's own check of the result comes after it."""
    trainjob = sdk_trainjob(image="tune:2")
    trainjob["spec"]["runtimeRef"]["name"] = "tune-small"
    runtime = tune_runtime()
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    node["containers"][0]["volumeMounts"].append({"name": "nowhere", "mountPath": "/x"})  # wrong on both sides
    with pytest.raises(UserError, match="cannot convert without losing .*volumeClaimPolicies"):
        convert([runtime, trainjob], "v1")
    with pytest.raises(UserError, match="'nowhere' is no volume of the pod"):
        convert([runtime, trainjob], "v1", allow_lossy=True)


# ---- the command ---------------------------------------------------------------------------------------

def one_line_error(result) -> str:
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize("text, expected", [
    ("", "no job in the file"),
    ("[1, 2]", "expected a job mapping"),
    ("apiVersion: v1\nkind: Pod\n", "convert takes kubeflow.org/v1 jobs"),
    ("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: x}\nspec: {pytorchReplicaSpecs: {Master: "
     "{replicas: 2}}}\n", "must have at least one container named"),
    ("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: x}\n"
     "spec: {runtimeRef: {name: mine}}\n", "spec.runtimeRef.name: ClusterTrainingRuntime 'mine' is not in the file"),
    ("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: x}\nspec: {runtimeRef: "
     "{name: torch-distributed}, trainer: {numNodes: 0, image: i}}\n", "spec.trainer.numNodes: must be at least 1"),
    ("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: x}\nspec: {runtimeRef: "
     "{name: torch-distributed}, trainer: {command: python, image: i}}\n", "spec.trainer.command: must be a list"),
    ("apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainingRuntime\nmetadata: {name: r}\n"
     "spec: {template: {spec: {replicatedJobs: [{name: node, template: []}]}}}\n",
     "spec.template.spec.replicatedJobs[0].template: must be a mapping"),
])
def test_bad_input_is_one_line(cli, text, expected):
    assert expected in one_line_error(cli("convert", "-f", "-", input=text))


def test_a_field_v2_cannot_say_is_one_line_and_no_output_unless_allowed(cli, upstream):
    path = str(upstream / "examples" / "mpi__tensorflow-mnist.yaml")
    line = one_line_error(cli("convert", "-f", path))
    assert "spec.runPolicy.cleanPodPolicy" in line and line.endswith("--allow-lossy drops them")
    lossy = cli("convert", "-f", path, "--allow-lossy", "-o", "json")
    assert lossy.returncode == 0, lossy.stderr
    assert [json.loads(lossy.stdout)["items"][index]["kind"] for index in (0, 1)] == ["TrainingRuntime", "TrainJob"]
    dropped = [line for line in lossy.stderr.splitlines() if line.startswith("dropped: ")]
    assert [line.split(" (")[0] for line in dropped] == [f"dropped: {field}" for field in EXAMPLES[
        "mpi__tensorflow-mnist.yaml"]]


def test_the_command_converts_both_ways(cli, upstream):
    path = upstream / "examples" / "pytorch__simple.yaml"
    there = cli("convert", "-f", str(path), "--to", "v2")
    assert there.returncode == 0 and "note: " in there.stderr, there.stderr
    back = cli("convert", "-f", "-", "--to", "v1", input=there.stdout)
    assert back.returncode == 0, back.stderr
    assert defaulted(yaml.safe_load(back.stdout)) == defaulted(yaml.safe_load(path.read_text()))
    assert "already a v1 resource" in one_line_error(cli("convert", "-f", "-", "--to", "v1", input=path.read_text()))
