"""What a newcomer to Trainer v2 tries first (issue 55, "Newcomer paths"), on the local backend as a user runs it:
``apply --entrypoint`` for a TrainJob whose runtime relies on its image, ``submit --api v2 --pip``."""

from __future__ import annotations

import yaml

TRAINJOB = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "tj"},
            "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 1}}}


def unlabelled_runtime() -> dict:
    """A runtime of our own whose replicatedJob lacks the trainer's ancestor label (the TrainJob's trainer fields
    then go nowhere)."""
    pod = {"spec": {"containers": [{"name": "node", "image": "python:3.12"}]}}
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime", "metadata": {"name": "bare"},
            "spec": {"mlPolicy": {"numNodes": 1, "torch": {}},
                     "template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {
                         "template": pod}}}]}}}}


def test_apply_entrypoint_runs_a_trainjob_on_a_default_runtime(cli):
    (cli.cwd / "x.py").write_text("print('entrypoint ran', flush=True)\n")
    (cli.cwd / "tj.yaml").write_text(yaml.safe_dump(TRAINJOB))
    applied = cli("apply", "-f", "tj.yaml", "--entrypoint", "python3 x.py")
    assert applied.returncode == 0, applied.stderr
    waited = cli("wait", "tj", "--timeout", "60", timeout=90)
    assert waited.returncode == 0, waited.stdout + waited.stderr + cli("logs", "tj").stdout
    assert "entrypoint ran" in cli("logs", "tj").stdout


def test_apply_entrypoint_on_a_runtime_without_a_trainer_step_is_one_line(cli):
    job = {**TRAINJOB, "spec": {"runtimeRef": {"name": "bare", "kind": "TrainingRuntime"}}}
    (cli.cwd / "tj.yaml").write_text(yaml.safe_dump_all([job, unlabelled_runtime()]))
    refused = cli("apply", "-f", "tj.yaml", "--entrypoint", "python3 x.py", "--dry-run")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert "--entrypoint" in refused.stderr and "trainer.kubeflow.org/trainjob-ancestor-step" in refused.stderr


def test_submit_api_v2_installs_pip_packages_before_the_trainers_command(cli):
    """``--pip`` with ``--api v2``: pip's wrapper runs in front of the trainer's command (a TrainJob has no pod
    template of its own), here with the xgboost runtime's two nodes sharing the job's cache."""
    from tests.local.test_code_local import WHEEL, build_wheel, offline

    build_wheel(cli.cwd / "dist")
    result = offline(cli)("submit", "--api", "v2", "xgboost", "--workers", "2", "--name", "pipv2", "--pip",
                          f"./dist/{WHEEL}", "--wait", "--", "python", "-c",
                          "import tinypkg; print('got', tinypkg.VALUE)")
    assert result.returncode == 0, (result.stdout, result.stderr)
    logs = cli("logs", "pipv2").stdout
    assert logs.count("got tiny 1.0") == 2, logs
    assert logs.count("Successfully installed tinypkg-1.0") == 1, logs


# ---- the docs' promises (issue 55, "Docs"): each kept, or refused in one line ---------------------------------

def one_line_refusal(result) -> str:
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr


def test_a_flux_runtime_is_refused_in_one_line(cli):
    runtime = unlabelled_runtime()
    runtime["spec"]["mlPolicy"] = {"numNodes": 1, "flux": {"numProcPerNode": 1}}
    job = {**TRAINJOB, "spec": {"runtimeRef": {"name": "bare", "kind": "TrainingRuntime"},
                                "trainer": {"command": ["python3", "-c", "pass"]}}}
    (cli.cwd / "tj.yaml").write_text(yaml.safe_dump_all([job, runtime]))
    assert "spec.mlPolicy.flux is not supported by trainctl" in one_line_refusal(
        cli("apply", "-f", "tj.yaml", "--dry-run"))


def test_a_trainjob_queued_for_kueue_is_refused_locally_naming_its_own_suspend_field(cli):
    job = {**TRAINJOB, "metadata": {"name": "tj", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
           "spec": {**TRAINJOB["spec"], "suspend": True, "trainer": {"command": ["python3", "-c", "pass"]}}}
    (cli.cwd / "tj.yaml").write_text(yaml.safe_dump(job))
    refused = one_line_refusal(cli("apply", "-f", "tj.yaml", "--dry-run"))
    assert "spec.suspend: true" in refused and "runPolicy" not in refused


def test_runtimes_list_on_the_local_backend_lists_the_runtimes_it_runs(cli):
    """Offline, the refusal of ``runtimes list`` suggests the local backend: there it lists trainctl's runtimes."""
    listed = cli("runtimes", "list")
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()[1:]] == [
        "torch-distributed", "xgboost-distributed", "deepspeed-distributed", "mlx-distributed", "jax-distributed"]
    assert "apply -f" in listed.stderr  # where a runtime of one's own goes locally


def test_runtime_patch_fields_without_effect_locally_and_initializers_without_a_step_are_one_note(cli):
    patch = {"manager": "example.com/m", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [
        {"name": "node", "template": {"spec": {"template": {"spec": {
            "nodeSelector": {"gpu": "a100"}, "tolerations": [{"key": "k", "operator": "Exists"}]}}}}}]}}}}
    job = {**TRAINJOB, "spec": {**TRAINJOB["spec"], "runtimePatches": [patch],
                                "initializer": {"dataset": {"storageUri": "hf://org/data"}},
                                "trainer": {"command": ["python3", "-c", "pass"]}}}
    (cli.cwd / "tj.yaml").write_text(yaml.safe_dump(job))
    applied = cli("apply", "-f", "tj.yaml", "--dry-run")
    assert applied.returncode == 0, applied.stderr
    notes = [line for line in applied.stderr.splitlines() if line.startswith("note:")]
    assert len(notes) == 2, applied.stderr
    assert "nodeSelector" in notes[0] and "tolerations" in notes[0] and "local" in notes[0]
    assert "spec.initializer.dataset" in notes[1] and "dataset-initializer" in notes[1]
