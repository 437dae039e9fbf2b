"""``trainctl submit --api v2`` and ``Client.run(api="v2")``: the submit options laid out as a Trainer v2 TrainJob on
the kind's default ClusterTrainingRuntime (templates/trainjob.yaml.j2), and each option a TrainJob cannot say refused
in one line that names it (docs/trainer-v2.md, "Submitting a TrainJob")."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.fuzz.harness import all_strings
from tests.unit.test_injection import PAYLOADS
from trainctl.errors import UserError
from trainctl.frameworks import ALL, by_name
from trainctl.submit.options import OPTIONS, SubmitOptions
from trainctl.submit.pipeline import prepare

V2_KINDS = [framework.name for framework in ALL if framework.trainer_v2 and framework.trainer_v2.runtime]


def rendered(kind: str, backend: str = "local", **given) -> dict:
    return prepare(by_name(kind), SubmitOptions(command=given.pop("command", ["python", "train.py"]), api="v2",
                                                name="tj", **given), backend).resource


def test_a_pytorch_submit_is_a_trainjob_on_torch_distributed_with_the_command_under_torchrun():
    job = rendered("pytorch", workers=4, gpus=1, cpu="2", memory="4Gi", env=["LR=0.1"], label=["team=nlp"],
                   annotation=["note=x"], suspend=True, active_deadline=600, stall_after="5m", namespace="ml")
    assert job == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "ml", "labels": {"team": "nlp"},
                     "annotations": {"note": "x", "trainctl.io/stall-after": "300"}},
        "spec": {"runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                "name": "torch-distributed"},
                 "suspend": True, "activeDeadlineSeconds": 600,
                 # --workers 4 is v1's Master 1 + Worker 3: four nodes; python train.py under torchrun, one process
                 # per node as v1 ran it (v2 sets PET_*, not the MASTER_ADDR, RANK and WORLD_SIZE it reads)
                 "trainer": {"numNodes": 4, "numProcPerNode": 1,
                             "command": ["python", "-m", "torch.distributed.run", "train.py"],
                             "env": [{"name": "LR", "value": "0.1"}],
                             "resourcesPerNode": {"limits": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": 1},
                                                  "requests": {"cpu": "2", "memory": "4Gi"}}}}}


@pytest.mark.parametrize(("kind", "runtime", "nodes"), [("jax", "jax-distributed", 3),
                                                       ("xgboost", "xgboost-distributed", 3)])
def test_every_kind_with_a_default_runtime_names_it_and_keeps_its_command(kind, runtime, nodes):
    job = rendered(kind, workers=3, image="registry.local/team:1", command=["python", "train.py", "--epochs", "2"])
    assert job["spec"]["runtimeRef"]["name"] == runtime
    assert job["spec"]["trainer"] == {"numNodes": nodes, "image": "registry.local/team:1",
                                      "command": ["python", "train.py", "--epochs", "2"]}


def test_nproc_per_node_is_num_proc_per_node_and_a_command_under_torchrun_stays_as_it_is():
    job = rendered("pytorch", workers=2, nproc_per_node="4", command=["torchrun", "train.py"])
    assert job["spec"]["trainer"] == {"numNodes": 2, "numProcPerNode": 4, "command": ["torchrun", "train.py"]}


@pytest.mark.parametrize("payload", [*PAYLOADS, 'x"\n    numNodes: 99\n  evil: {{ name }}'])
@pytest.mark.parametrize("kind", V2_KINDS)
def test_a_user_value_lands_as_one_string_never_as_yaml(kind, payload):
    """As tests/unit/test_injection.py proves for the v1 templates: the TrainJob template writes each value as JSON."""
    job = rendered(kind, env=[f"SAFE={payload}"], annotation=[f"note={payload}"], image=payload,
                   command=["python", payload])
    trainer = job["spec"]["trainer"]
    assert trainer["env"] == [{"name": "SAFE", "value": payload}] and trainer["image"] == payload
    assert trainer["command"][-1] == payload and job["metadata"]["annotations"] == {"note": payload}
    assert trainer["numNodes"] == by_name(kind).default_workers and set(job["spec"]) == {"runtimeRef", "trainer"}
    assert not any("boomboom" in text or "49" in text for text in all_strings(job))


@pytest.mark.parametrize("option", [opt for opt in OPTIONS if opt.not_v2], ids=lambda opt: opt.name)
def test_each_option_a_trainjob_cannot_say_is_refused_naming_it(option):
    value = {bool: True, int: 1, list: ["pvc:data:/data" if option.name == "volume" else "a=b:NoSchedule"
                                        if option.name == "toleration" else "a=b"]}.get(option.type, "x")
    value = {"restart_policy": "OnFailure", "clean_pod_policy": "None", "shm_size": "1Gi"}.get(option.name, value)
    with pytest.raises(UserError) as refused:
        rendered("pytorch", **{option.name: value})
    assert refused.value.message.startswith(f"{option.name} cannot be said with api='v2': ")  # as Python spells it
    assert "\n" not in refused.value.message


@pytest.mark.parametrize("kind", ["tensorflow", "mpi", "paddle"])
def test_a_kind_without_a_default_runtime_is_one_line_naming_those_with_one(kind):
    with pytest.raises(UserError, match=rf"^api='v2': no default Trainer v2 runtime runs {kind} jobs \(one runs "
                                        r"pytorch, xgboost, jax\)"):
        rendered(kind)


def test_a_local_snapshot_cannot_travel_with_a_trainjob(tmp_path):
    with pytest.raises(UserError, match="^workdir cannot travel with api='v2' on the local backend: .*leave it out"):
        rendered("pytorch", workdir=str(tmp_path))


def test_packages_travel_with_a_trainjob_under_pips_wrapper_and_after_the_unpacker(tmp_path, monkeypatch):
    """--pip with --api v2 (issue 55): the trainer's command runs under pip's wrapper, whose emptyDir a runtime patch
    mounts into the node container; on a cluster the unpacker runs first and the wrapper after it, in the workspace.
    The abridged dry run leaves out both programs."""
    from trainctl.code.pods import GUARD, PIP_PATH, PIP_VOLUME, abridged, abridged_programs

    local = rendered("pytorch", pip=["einops"], requirements=None)
    command = local["spec"]["trainer"]["command"]
    assert command[:4] == ["sh", "-c", GUARD, "trainctl-pip"]
    assert command[5:] == ["--pip=einops", "--", "python", "-m", "torch.distributed.run", "train.py"]
    (patch,) = local["spec"]["runtimePatches"]
    pod = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod == {"volumes": [{"name": PIP_VOLUME, "emptyDir": {}}],
                   "containers": [{"name": "node", "volumeMounts": [{"name": PIP_VOLUME, "mountPath": PIP_PATH}]}]}
    (tmp_path / "train.py").write_text("print(1)\n")
    monkeypatch.chdir(tmp_path)
    remote = rendered("jax", backend="kubernetes", pip=["einops"])
    command = remote["spec"]["trainer"]["command"]
    assert command[3] == "trainctl-unpack" and command.count(GUARD) == 2
    inner = command.index("--") + 1
    assert command[inner + 3] == "trainctl-pip" and command[-4:] == ["--pip=einops", "--", "python", "train.py"]
    assert abridged_programs(abridged(remote)) == ["trainctl-pip", "trainctl-unpack"]


@pytest.mark.parametrize("procs", ["auto", "0", "\u00b2", "-1"])
def test_processes_per_node_are_a_count_of_1_or_more(procs):
    with pytest.raises(UserError, match=rf"^nproc_per_node {procs}: api='v2' takes a number of processes per node, "
                                        "1 or more"):
        rendered("pytorch", nproc_per_node=procs)


def test_the_working_directory_travels_to_a_cluster_in_a_runtime_patch_and_runs_the_command_unpacked(tmp_path):
    """A TrainJob has no pod template: its snapshot's volumes reach the runtime's node pods through a runtime patch
    (what upstream's API lets a client say), and the node container's command unpacks it, then runs the command in
    it (a patch can add no init container); jax keeps the command as given. Run here as the pod runs it, against
    the chunk files."""
    import base64
    import subprocess
    import sys

    from tests.unit.test_trainjob_plan import runtime
    from trainctl.code import pods
    from trainctl.core.trainjob import TrainJob, plan

    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("import os, sys\nprint('ran in', os.getcwd(), sys.argv[1:])\n")
    job = rendered("jax", backend="kubernetes", workdir=str(project), workers=2, env=["LR=0.1"],
                   command=["python3", "train.py", "--lr", "0.1"])
    trainer = job["spec"]["trainer"]
    digest = job["metadata"]["annotations"][pods.DIGEST]
    assert trainer["command"][:4] == ["sh", "-c", pods.GUARD, "trainctl-unpack"]
    assert trainer["command"][5:] == ["--chunks", pods.CHUNKS_PATH, "--digest", digest, "--into", "/workspace", "--",
                                      "python3", "train.py", "--lr", "0.1"]
    env = {item["name"]: item["value"] for item in trainer["env"]}
    assert (env["LR"], env["PYTHONPATH"], env["TRAINCTL_JOB"]) == ("0.1", "/workspace/.trainctl/lib", "tj")
    [patch] = job["spec"]["runtimePatches"]
    assert patch["manager"] == "trainctl.io/code"
    code = prepare(by_name("jax"), SubmitOptions(command=["python3", "train.py"], api="v2", name="tj",
                                                     workdir=str(project)), "kubernetes").code

    job_plan = plan(TrainJob({**job, "metadata": {**job["metadata"], "namespace": "ns", "uid": "u"}}),
                    runtime("jax-distributed"))
    for pod in job_plan.pods_of("node"):
        volumes = {volume["name"]: volume for volume in pod.spec["volumes"]}
        assert volumes[pods.WORKSPACE_VOLUME] == {"emptyDir": {}, "name": pods.WORKSPACE_VOLUME}
        sources = volumes[pods.CHUNKS_VOLUME]["projected"]["sources"]
        assert [source["configMap"]["name"] for source in sources] == pods.config_map_names(code.snapshot)
        assert pod.container()["volumeMounts"] == [
            {"name": pods.CHUNKS_VOLUME, "mountPath": pods.CHUNKS_PATH, "readOnly": True},
            {"name": pods.WORKSPACE_VOLUME, "mountPath": "/workspace"}]
        assert pod.container()["command"] == trainer["command"]

    chunks, workspace = tmp_path / "chunks", tmp_path / "workspace"
    chunks.mkdir()
    for index, body in enumerate(pods.config_maps(code.snapshot, None)):
        (chunks / f"{index:05d}").write_bytes(base64.b64decode(body["binaryData"]["chunk"]))
    swap = {pods.CHUNKS_PATH: str(chunks), "/workspace": str(workspace), "python3": sys.executable}
    ran = subprocess.run([swap.get(word, word) for word in trainer["command"]], capture_output=True, text=True,
                         timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == f"ran in {workspace} ['--lr', '0.1']\n"  # unpacked quietly: the log is the command's


def test_the_cli_prints_the_trainjob_and_refuses_a_flag_in_one_line(cli):
    (cli.cwd / "train.py").write_text("")
    shown = cli("submit", "--api", "v2", "pytorch", "--workers", "2", "--name", "tj", "--dry-run", "-o", "yaml",
                "--", "python", "train.py")
    assert shown.returncode == 0, shown.stderr
    job = yaml.safe_load(shown.stdout)
    assert (job["kind"], job["spec"]["trainer"]["numNodes"]) == ("TrainJob", 2)
    refused = cli("submit", "pytorch", "--api", "v2", "--backoff-limit", "0", "--", "python", "train.py")
    assert refused.returncode == 2 and refused.stdout == "", refused.stdout
    assert refused.stderr.startswith("error: --backoff-limit cannot be said with --api v2: ")
    assert refused.stderr.count("\n") == 1, refused.stderr


def test_templates_show_trainjob_prints_the_template_submit_renders(cli):
    shown = cli("templates", "show", "trainjob")
    assert shown.returncode == 0 and 'kind: "TrainJob"' in shown.stdout, shown.stderr


def returns_one() -> int:
    return 1


def test_run_takes_api_v2_and_refuses_what_a_trainjob_cannot_say_by_its_keyword():
    from trainctl.errors import InvalidArgument
    from trainctl.sdk.client import Client

    job = Client("local").run(returns_one, api="v2", workers=2, dry_run=True)
    assert job["kind"] == "TrainJob" and job["spec"]["trainer"]["numNodes"] == 2
    assert json.dumps(job).count("torch.distributed.run") == 1  # the function's runner under torchrun
    with pytest.raises(InvalidArgument, match="^backoff_limit cannot be said with api='v2': "):
        Client("local").run(returns_one, api="v2", backoff_limit=1, dry_run=True)


class Cluster:
    """A Kubernetes client stand-in holding only the objects given (by collection plural and name)."""

    def __init__(self, *present: tuple[str, str]) -> None:
        self.present = set(present)

    def get(self, resource, name, namespace=None):
        from trainctl.kube.client import ApiError

        if (resource.plural, name) not in self.present:
            raise ApiError(404, "NotFound")
        return {}


def preflight_of(trainjob: dict, *present: tuple[str, str]) -> str:
    """The one line a cluster holding ``present`` gives the create of ``trainjob`` (its CRD and runtime checked)."""
    from trainctl.backends.kube.backend import KubeBackend

    backend = KubeBackend.__new__(KubeBackend)  # no kubeconfig: the client is the stand-in
    backend.client = Cluster(*present)
    with pytest.raises(UserError) as refused:
        backend.preflight(trainjob)
    return refused.value.message


def test_the_cluster_preflight_of_a_trainjob_names_its_missing_crd_and_runtime_with_their_fix():
    job = rendered("pytorch", namespace="ml")
    crd, namespace = ("customresourcedefinitions", "trainjobs.trainer.kubeflow.org"), ("namespaces", "ml")
    assert preflight_of(job, namespace) == ("the TrainJob CRD is not installed in this cluster: run trainctl crds "
                                            "install --api v2")
    assert preflight_of(job, crd, namespace) == (
        "TrainJob tj runs on ClusterTrainingRuntime 'torch-distributed', which does not exist in this cluster: run "
        "trainctl runtimes install")
    job["spec"]["runtimeRef"] = {"kind": "TrainingRuntime", "name": "mine"}
    assert preflight_of(job, crd, namespace).endswith("which does not exist in namespace \"ml\": create it, or give "
                                                      "it in the file beside the TrainJob (trainctl apply -f)")
    assert preflight_of(job, crd).startswith('namespace "ml" does not exist')
