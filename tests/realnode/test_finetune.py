"""Fine-tuning on the real node (issue 17): ``client.finetune`` from a project directory holding the tiny
model and its data, the recipe travelling in the code snapshot (the python image has the Hugging Face
packages but neither trainctl nor examples/finetune: tests/cluster/images.py leaves them out).

Two pods train with DDP over gloo through the operator's env and the node's DNS and Services. The first
test writes to a hostPath volume (shared by both pods, as a PVC would be); the second keeps each pod's
checkpoints in its own working directory, kills one rank's container from outside, and both ranks
resume from the newest checkpoint both have after the kubelet restarts it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests import finetuning
from tests.realnode.conftest import JOB_TIMEOUT_S

pytestmark = pytest.mark.realnode

TRAINING = {"logging_steps": 4, "learning_rate": 5e-3, "per_device_train_batch_size": 8}


@pytest.fixture
def project(tmp_path, monkeypatch):
    """The user's directory: the tiny model and data.jsonl, nothing else (what travels with the job)."""
    directory = finetuning.make_tiny(tmp_path / "project")
    monkeypatch.chdir(directory)
    return directory


@pytest.fixture
def client(real_node):
    from trainctl import Client

    return Client("kubernetes", kubeconfig=str(real_node.kubeconfig))


def finetune(client, namespace: str, image: str, name: str, **keywords):
    training_args = {**TRAINING, **keywords.pop("training_args")}
    return client.finetune("model", "data.jsonl", workers=2, text_column="sentence", lora={"r": 8},
                           training_args=training_args, image=image, namespace=namespace, name=name,
                           env=finetuning.OFFLINE, cpu="900m", **keywords)


def kill_replica(pod: str) -> None:
    """SIGKILL the recipe's process in ``pod`` (both pods run the same command line: told apart by the
    HOSTNAME the runtime gives each container)."""
    found = subprocess.run(["pgrep", "-f", "finetune.py --model=model"], capture_output=True, text=True).stdout
    for pid in found.split():
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"HOSTNAME={pod}".encode() in environ:
            os.kill(int(pid), signal.SIGKILL)
            return
    raise AssertionError(f"no training process of {pod} among {found.split()}")


def printed(job) -> str:
    return "\n".join(str(line) for line in job.logs())


def test_the_recipe_fine_tunes_in_two_pods_with_shipped_code(real_node, in_cluster_controller, namespace,
                                                            python_image, project, client, tmp_path):
    output = tmp_path / "output"
    output.mkdir()
    job = finetune(client, namespace, python_image, "ft", output_dir="/output/run", backoff_limit=0,
                   volume=[f"host:{output}:/output"], training_args={"max_steps": 24, "save_steps": 12})
    command = job.resource["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["python3", ".trainctl/recipes/finetune.py"], command  # from the snapshot, not the image
    assert job.wait(timeout=JOB_TIMEOUT_S, progress=False).status == "Succeeded", printed(job)

    text = printed(job)
    assert "master-0 | rank 0 of 2: 256 rows, starting at step 0" in text, text
    assert "worker-0 | rank 1 of 2: 256 rows, starting at step 0" in text, text
    assert [line for line in text.splitlines() if "saved the adapter" in line] == [
        "master-0 | saved the adapter to /output/run/adapter"]
    run = output / "run"
    losses = finetuning.logged_losses(run)
    assert losses[-1][1] < losses[0][1] * 0.95, losses
    seen = finetuning.rows_seen(run)
    assert sorted(seen) == [0, 1] and seen[0]["0"] and not seen[0]["0"] & seen[1]["0"], seen
    report = finetuning.generate(project / "model", run)  # the adapter the pods wrote, loaded back here
    assert report["new_tokens"] == 6 and report["lora_b_nonzero"], report

    progress = job.progress()  # issue 25: the recipe reports by itself, from an image without trainctl
    assert (progress.step, progress.total) == (24, 24) and "loss" in progress.metrics, progress
    reported = [(point.step, point.metrics["loss"]) for point in job.metrics() if "loss" in point.metrics]
    assert [step for step, _ in reported] == [step for step, _ in losses], (reported, losses)
    assert [loss for _, loss in reported] == pytest.approx([loss for _, loss in losses]), (reported, losses)


def test_pods_without_a_shared_volume_resume_together_after_a_container_is_killed(
        real_node, in_cluster_controller, namespace, python_image, project, client):
    with pytest.warns(UserWarning, match="'out' is on no writable volume of the job"):  # this is the case it means
        job = finetune(client, namespace, python_image, "ft-own", output_dir="out", restart_policy="OnFailure",
                       backoff_limit=4, training_args={"max_steps": 480, "save_steps": 40, "logging_steps": 20})
    deadline = time.monotonic() + JOB_TIMEOUT_S
    # checkpoint-80 is saved by step 100; the 380 steps after it (some 5 s at the 80 steps a second measured on the
    # node) leave over ten times what a look takes (0.25 s and a read of the logs) to kill the worker before the
    # end (720 steps and a look a second made each run train some 4 s longer after the restart)
    while not any(step >= 100 for step in finetuning.step_lines(printed(job))):
        assert time.monotonic() < deadline and job.status != "Failed", printed(job)
        time.sleep(0.25)
    kill_replica("ft-own-worker-0")  # from outside, as the OOM killer or a crash would end it
    assert job.wait(timeout=JOB_TIMEOUT_S, progress=False).status == "Succeeded", printed(job)

    restarts = {replica.name: replica.restarts for replica in job.replicas}
    assert restarts["ft-own-worker-0"] >= 1, restarts
    text = printed(job)
    resumed = [finetuning.RESUME_LINE.search(line) for line in text.splitlines()]
    steps = {match.group(3) for match in resumed if match}
    assert len(steps) == 1 and int(steps.pop()) >= 80, text  # both ranks, from the same step
    for replica in ("master-0", "worker-0"):
        assert f"{replica} | rank" in text and "resuming from out/checkpoint-" in text
    assert finetuning.step_lines(text)[-1] == 480
