"""Client.finetune builds the recipe's command line and refuses bad values before anything exists."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from trainctl import Client, InvalidArgument
from trainctl.recipes import finetune as recipe_module
from trainctl.sdk.finetuning import RECIPE_MODULE, SNAPSHOT_RECIPE


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TRAINCTL_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    (tmp_path / "data.jsonl").write_text('{"text": "a"}\n')
    return tmp_path


def command_of(resource: dict) -> list[str]:
    return resource["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]


def test_locally_the_installed_recipe_runs_with_every_value_as_its_own_flag(project):
    resource = Client("local").finetune("model", "data.jsonl", workers=2, text_column="-body", output_dir="out",
                                        lora={"r": 4, "target_modules": ("c_attn",)}, max_length=64, merge=True,
                                        training_args={"max_steps": 3}, name="ft", dry_run=True)
    assert command_of(resource) == [
        sys.executable, "-m", RECIPE_MODULE, "--model=model", "--dataset=data.jsonl", "--output-dir=out",
        "--text-column=-body",  # a value that starts with a dash stays a value
        "--max-length=64", '--lora={"r": 4, "target_modules": ["c_attn"]}', '--training-args={"max_steps": 3}',
        "--merge", "--resume=auto", "--run-name=ft"]  # the job's name: only its restarts continue its checkpoints
    assert set(resource["spec"]["pytorchReplicaSpecs"]) == {"Master", "Worker"}
    unnamed = Client("local").finetune("model", "data.jsonl", dry_run=True)
    assert re.fullmatch(r"finetune-[a-z0-9]{6}", unnamed["metadata"]["name"]), unnamed["metadata"]
    assert not (project / "home").exists()


@pytest.mark.k8s
def test_on_a_cluster_the_recipe_travels_in_the_code_snapshot(project, monkeypatch, k8s_cluster, kubeflow_crds):
    from trainctl.recipes import finetune as recipe
    from trainctl.sdk import running

    client = Client("kubernetes", kubeconfig=str(k8s_cluster.kubeconfig("admin")))  # a dry run makes its checks
    resource = client.finetune("model", "data.jsonl", name="ft", dry_run=True)
    assert command_of(resource)[:2] == ["python3", SNAPSHOT_RECIPE]
    # the archive that would become the ConfigMaps, taken where the job would be created
    handed = {}
    monkeypatch.setattr(running, "submitted", lambda client, resource, code, *rest: handed.update(code=code)
                        or {**resource, "metadata": {"name": "ft", "namespace": "default"}})
    client.finetune("model", "data.jsonl", name="ft")
    code = handed["code"]
    with tarfile.open(fileobj=io.BytesIO(bytes(code.snapshot.archive))) as archive:
        names = archive.getnames()
        assert archive.extractfile(SNAPSHOT_RECIPE).read() == Path(recipe.__file__).read_bytes()
    assert {"model", "data.jsonl"} <= {name.split("/")[0] for name in names}
    with pytest.raises(InvalidArgument, match="no_workdir: finetune's recipe travels"):
        client.finetune("model", "data.jsonl", no_workdir=True, dry_run=True)
    # absolute paths on a cluster belong to the image or a volume: not checked here
    assert client.finetune("/data/model", "/data/rows.jsonl", dry_run=True)


def test_your_own_copy_of_the_recipe_runs_instead(project):
    (project / "my_finetune.py").write_text("print('mine')\n")
    resource = Client("local").finetune("model", "data.jsonl", recipe="my_finetune.py", dry_run=True)
    assert command_of(resource)[:2] == [sys.executable, "my_finetune.py"]


@pytest.mark.parametrize(("keywords", "message"), [
    ({"model": "nope"}, "model='nope': no such file or directory (from {project}), and no Hub id such as org/name"),
    ({"dataset": ""}, "dataset='': give a non-empty string"),
    ({"lora": ["r"]}, "lora=['r']: give a dict of field names to values"),
    ({"training_args": {"output_dir": "x"}}, "training_args: 'output_dir' is the recipe's to set"),
    ({"training_args": {"resume_from_checkpoint": True}}, "'resume_from_checkpoint' is the recipe's to set"),
    ({"training_args": {"lr": float("inf")}}, "training_args: Out of range float values"),
    ({"lora": {"r": object()}}, "lora: cannot pass object"),
    ({"max_length": True}, "max_length=True: give a whole number of at least 1"),
    ({"merge": "yes"}, "merge='yes': give True or False"),
    ({"deepspeed": "missing.json"}, "deepspeed='missing.json': no such file"),
    ({"recipe": "missing.py"}, "recipe='missing.py': no such file"),
    ({"framework": "tensorflow"}, "unknown keyword 'framework'"),
    ({"gpu": 1}, "did you mean gpus?"),
])
def test_bad_values_are_one_line_and_nothing_is_created(project, keywords, message):
    call = {"model": "model", "dataset": "data.jsonl", **keywords}
    with pytest.raises(InvalidArgument) as refused:
        Client("local").finetune(**call)
    assert message.format(project=project) in str(refused.value) and "\n" not in str(refused.value)
    assert not (project / "home").exists()


# What looks like a path is one (issue 23): each of these passed as a Hub id and the job died downloading it.
MISTYPED_PATHS = [
    ("model", "./nope", "it starts with ./, so it is a path and not a Hub id"),
    ("model", "tiny/modle", "(did you mean tiny/model?); tiny is here, so it is a path and not a Hub id"),
    ("dataset", "tiny/missing.jsonl", "tiny is here, so it is a path and not a Hub id"),
    ("dataset", "~/no-such-rows.jsonl", "it starts with ~, so it is a path and not a Hub id"),
]


@pytest.fixture
def tiny_project(project) -> Path:
    (project / "tiny" / "model").mkdir(parents=True)
    (project / "tiny" / "model" / "config.json").write_text("{}")
    (project / "tiny" / "data.jsonl").write_text('{"text": "a"}\n')
    return project


@pytest.mark.parametrize(("keyword", "name", "why"), MISTYPED_PATHS)
@pytest.mark.parametrize("backend", ["local", "kubernetes"])
@pytest.mark.filterwarnings("ignore:output_dir=")
def test_a_mistyped_path_is_refused_not_taken_for_a_hub_id(tiny_project, keyword, name, why, backend):
    if backend == "kubernetes" and name.startswith("~"):
        return  # on a cluster ~ is the pod's home, not this one: tested below
    client = Client(backend, kubeconfig=None if backend == "local" else str(tiny_project / "none"))
    call = {"model": "tiny/model", "dataset": "tiny/data.jsonl", keyword: name}
    with pytest.raises(InvalidArgument) as refused:
        client.finetune(**call, dry_run=True)
    assert str(refused.value).startswith(f"{keyword}={name!r}: no such file or directory (from {tiny_project})")
    assert why in str(refused.value) and "\n" not in str(refused.value)
    assert not (tiny_project / "home").exists()


@pytest.mark.k8s
@pytest.mark.filterwarnings("ignore:output_dir=")
def test_hub_ids_and_a_clusters_own_paths_still_pass(tiny_project, k8s_cluster, kubeflow_crds):
    assert Client("local").finetune("org/model-1.5", "org/rows", dry_run=True)
    on_cluster = Client("kubernetes", kubeconfig=str(k8s_cluster.kubeconfig("admin")))  # a dry run makes its checks
    assert on_cluster.finetune("/models/base", "~/rows.jsonl", dry_run=True)


@pytest.mark.parametrize(("keyword", "name", "why"), MISTYPED_PATHS)
def test_the_recipe_refuses_a_mistyped_path_in_one_line_before_it_imports_transformers(tiny_project, keyword,
                                                                                        name, why):
    flags = {"model": "tiny/model", "dataset": "tiny/data.jsonl", keyword: name}
    done = subprocess.run([sys.executable, "-m", RECIPE_MODULE, f"--model={flags['model']}",
                           f"--dataset={flags['dataset']}", "--output-dir=out"], cwd=tiny_project,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    kind = "directory" if keyword == "model" else "file"
    expanded = os.path.expanduser(name)  # the recipe reads ~ as the shell would have
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"error: --{keyword} {expanded}: no such {kind} (from {tiny_project})"), line
    assert why.replace("with ~", "with /") in line and not (tiny_project / "out").exists()


def test_the_sdk_entry_imports_no_framework():
    code = ("import sys, trainctl.sdk.finetuning, trainctl.recipes.finetune; "
            "print(sorted(m for m in ('torch', 'transformers', 'peft', 'datasets') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.replace("'", '"')) == []


def test_the_pins_the_image_and_the_docs_use_are_the_requirements_file():
    from tests.cluster.images import PYTHON_IMAGE_FINETUNE, pinned_requirements

    pins = pinned_requirements(PYTHON_IMAGE_FINETUNE, "finetune.txt")
    docs = (Path(__file__).resolve().parents[2] / "docs" / "finetuning.md").read_text()
    for pin in pins:
        assert pin in docs, f"docs/finetuning.md does not give {pin}"


@pytest.mark.parametrize(("keywords", "warned"), [
    ({}, True),                                                          # the pod's emptyDir
    ({"output_dir": "/ckpt/run", "volume": ["pvc:ckpt:/ckpt"]}, False),
    ({"output_dir": "/ckpt", "volume": "pvc:ckpt:/ckpt"}, False),
    ({"output_dir": "/ckpt/run", "volume": ["pvc:ckpt:/ckpt:ro"]}, True),  # read-only
    ({"output_dir": "/ckptx/run", "volume": ["pvc:ckpt:/ckpt"]}, True),
    ({"output_dir": "ckpt/run", "volume": ["host:/data:/ckpt"]}, True),     # relative: the working directory
])
@pytest.mark.k8s
def test_on_a_cluster_an_output_dir_on_no_volume_is_warned_about(project, keywords, warned, k8s_cluster, kubeflow_crds):
    import warnings

    client = Client("kubernetes", kubeconfig=str(k8s_cluster.kubeconfig("admin")))  # a dry run makes its checks
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        client.finetune("model", "data.jsonl", dry_run=True, **keywords)
    messages = [str(warning.message) for warning in caught if "output_dir" in str(warning.message)]
    assert bool(messages) == warned, messages
    assert all("go with the pod; mount one" in message for message in messages)


def test_locally_the_output_dir_needs_no_volume(project):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Client("local").finetune("model", "data.jsonl", dry_run=True)


# ---- another run's checkpoints (issue 23): refused, not continued with its learning rate and schedule ----------

def checkpoint(project: Path, step: int, run: dict | None) -> Path:
    """``out/checkpoint-<step>`` as the Trainer leaves it complete, tagged as the recipe tags it."""
    path = project / "out" / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    if run is not None:
        (path / recipe_module.RUN_RECORD).write_text(json.dumps({"run": run}))
    return path


def identity_of(resource: dict) -> dict:
    """The run the recipe would record, from the command the job would run."""
    return recipe_module.run_identity(recipe_module.parse_args(command_of(resource)[3:]))


def finetune_into_out(name: str = "ft", **keywords):
    arguments = {"output_dir": "out", "training_args": {"learning_rate": 2e-4, "save_steps": 50}, **keywords}
    return Client("local").finetune("model", "data.jsonl", name=name, dry_run=True, **arguments)


def test_another_runs_checkpoint_is_refused_before_anything_is_created(project):
    shell_run = {**identity_of(finetune_into_out()), "job": None,
                 "training_args": {"learning_rate": 0.005, "save_steps": 16, "max_steps": 32}}
    checkpoint(project, 16, shell_run)
    checkpoint(project, 32, shell_run)
    with pytest.raises(InvalidArgument) as refused:
        Client("local").finetune("model", "data.jsonl", output_dir="out", name="ft",
                                 training_args={"learning_rate": 2e-4, "save_steps": 50})
    assert str(refused.value) == (
        "output_dir='out' holds checkpoint-32 of another run (job unset there, ft here; learning_rate 0.005 there, "
        "0.0002 here; save_steps 16 there, 50 here; max_steps 32 there, unset here): give another output directory, "
        "resume='never' to start over there (deleting its checkpoints), or resume='out/checkpoint-32' to continue "
        "from that checkpoint with these arguments")
    assert not (project / "home").exists()


def test_a_checkpoint_no_run_recorded_is_refused_too(project):
    checkpoint(project, 8, None)  # an older recipe's, or another script's
    with pytest.raises(InvalidArgument, match=r"^output_dir='out' holds checkpoint-8 that no run of this recipe "
                                              r"wrote \(it has no finetune-run.json\): give another output directory"):
        finetune_into_out()


def test_the_same_job_with_the_same_arguments_continues_its_own_checkpoints(project):
    checkpoint(project, 50, identity_of(finetune_into_out()))
    assert finetune_into_out()  # its restart, or the same name submitted again
    with pytest.raises(InvalidArgument, match="holds checkpoint-50 of another run .job ft there, ft-2 here.:"):
        finetune_into_out(name="ft-2")
    with pytest.raises(InvalidArgument, match=r"\(learning_rate 0.0002 there, 0.001 here\)"):
        finetune_into_out(training_args={"learning_rate": 1e-3, "save_steps": 50})
    assert finetune_into_out(merge=True)  # merging at the end changes nothing that was trained


@pytest.mark.parametrize("resume", ["never", "out/checkpoint-32", Path("out/checkpoint-32")])
def test_resume_never_or_a_checkpoint_is_the_way_on(project, resume):
    checkpoint(project, 32, None)
    resource = finetune_into_out(resume=resume)
    assert f"--resume={resume}" in command_of(resource)


@pytest.mark.parametrize(("resume", "message"), [
    ("out/checkpoint-9", "resume='out/checkpoint-9': no such file or directory; give auto or never, or a checkpoint "
                         "directory (output_dir/checkpoint-N)"),
    ("model", "resume='model': not a checkpoint (a checkpoint-N directory the Trainer wrote completely, with "
              "trainer_state.json); or give auto or never"),
    ("", "resume='': give a non-empty string"),
    (None, "resume=None: give a non-empty string"),
])
def test_a_bad_resume_is_one_line(project, resume, message):
    with pytest.raises(InvalidArgument) as refused:
        finetune_into_out(resume=resume)
    assert str(refused.value) == message
    assert not (project / "home").exists()


def test_the_recipe_refuses_another_runs_checkpoint_in_one_line_before_it_imports_transformers(project):
    checkpoint(project, 32, None)
    done = subprocess.run([sys.executable, "-m", RECIPE_MODULE, "--model=model", "--dataset=data.jsonl",
                           "--output-dir=out"], cwd=project, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: --output-dir out holds checkpoint-32 that no run of this recipe wrote (it has no finetune-run.json): "
        "give another output directory, --resume never to start over there (deleting its checkpoints), or "
        "--resume out/checkpoint-32 to continue from that checkpoint with these arguments"]


@pytest.mark.parametrize("environ, deepspeed, joins", [
    ({}, None, False),  # run directly
    ({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}, None, False),  # a job of one replica
    ({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1"}, None, True),
    ({"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}, "ds.json", True),  # DeepSpeed's engine wants one
])
def test_a_job_of_one_replica_runs_the_recipe_as_the_same_command_run_directly(environ, deepspeed, joins):
    """Issue 40: on one GPU, a one-replica job under trainctl peaked about 558 MiB above the same command run
    directly. Only the job had RANK/WORLD_SIZE (the operator's env), so the recipe set LOCAL_RANK, and with it the
    Trainer opened an NCCL process group of one rank that the recipe's gathers then used: NCCL's communicator on
    the GPU for nothing. Checked without a GPU: what the recipe hands the Trainer is what a direct run has."""
    env = dict(environ)
    assert recipe_module.replica_environment(env, deepspeed) == joins
    assert ("LOCAL_RANK" in env) == joins


@pytest.mark.parametrize("deepspeed, hidden", [(None, True), ("ds.json", False)])
def test_deepspeed_is_found_by_the_libraries_only_when_the_recipe_was_given_a_config(deepspeed, hidden):
    """Accelerate and Transformers import DeepSpeed (and MLflow with it) whenever importlib finds it: some 2 s of
    CPU in every replica of a job that never asked for it."""
    import importlib.util

    modules = {}
    recipe_module.without_unasked_deepspeed(deepspeed, modules)
    assert (modules.get("deepspeed", "absent") is None) == hidden
    if hidden:  # what the libraries ask: find_spec answers None for a module set to None
        real = sys.modules.pop("deepspeed", "absent")
        sys.modules["deepspeed"] = None
        try:
            assert importlib.util.find_spec("deepspeed") is None
        finally:
            del sys.modules["deepspeed"]
            if real != "absent":
                sys.modules["deepspeed"] = real
