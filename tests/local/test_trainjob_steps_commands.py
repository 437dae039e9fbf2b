"""A runtime step that relies on its image, in the shapes of upstream Trainer's own runtimes (issue 55, "upstream's
own examples"): an initializer step with no command (upstream's torchtune and data-cache runtimes, the multi-step
example), a runtime that labels no step the trainer. The local refusal names what reaches that step: never the
TrainJob's command or ``apply --entrypoint``, which reach only the trainer step (the YAML here is our own)."""

from __future__ import annotations

import yaml

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINJOB = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "tj"},
            "spec": {"runtimeRef": {"name": "steps", "kind": "TrainingRuntime"},
                     "trainer": {"numNodes": 1, "command": ["python3", "-c", "pass"]}}}


def step(name: str, ancestor: str | None, container: str) -> dict:
    labels = {"metadata": {"labels": {ANCESTOR: ancestor}}} if ancestor else {}
    return {"name": name, "template": {**labels, "spec": {"template": {"spec": {"containers": [
        {"name": container, "image": "example.com/step:1"}]}}}}}


def runtime(*steps: dict) -> dict:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime", "metadata": {"name": "steps"},
            "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": list(steps)}}}}


def refusal(cli, documents: list[dict], *args: str) -> str:
    (cli.cwd / "tj.yaml").write_text(yaml.safe_dump_all(documents))
    result = cli("apply", "-f", "tj.yaml", "--dry-run", *args)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr


def test_an_initializer_step_without_a_command_is_refused_naming_the_runtime_not_entrypoint(cli):
    documents = [TRAINJOB, runtime(step("dataset-initializer", "dataset-initializer", "dataset-initializer"),
                                   step("node", "trainer", "node"))]
    for args in ((), ("--entrypoint", "python3 train.py")):  # --entrypoint would not reach it: never a loop
        refused = refusal(cli, documents, *args)
        assert "replicatedJobs.dataset-initializer" in refused, refused
        assert "the runtime's trainer step" in refused and "in the runtime" in refused, refused
        assert "with apply --entrypoint" not in refused, refused


def test_a_runtime_that_labels_no_step_the_trainer_is_refused_naming_the_label(cli):
    refused = refusal(cli, [TRAINJOB, runtime(step("node", None, "node"))])
    assert "replicatedJobs.node" in refused and f"{ANCESTOR}: trainer" in refused, refused
    assert "labels no replicatedJob" in refused and "with apply --entrypoint" not in refused, refused
