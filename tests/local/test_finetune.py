"""Fine-tuning on the local backend (issue 17): the recipe as a 2-replica PyTorchJob, DDP over gloo.

The model is a 2-layer GPT-2 with random weights and the data 256 generated sentences
(examples/finetune/make_tiny.py): nothing is downloaded. What is asserted comes from what the
job wrote: the loss history rank 0 saved, the rows each rank's data loader handed out, the adapter
loaded back for generation, and after a killed replica or a SIGTERM, the step it resumed from.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import finetuning
from tests.conftest import CLI, REPO
from trainctl import Client, InvalidArgument

pytestmark = [pytest.mark.framework, pytest.mark.timeout(300),
              pytest.mark.skipif(importlib.util.find_spec("peft") is None,
                                 reason="the Hugging Face stack is not installed here "
                                        "(pip install -r requirements/finetune.txt)")]

FAST = {"logging_steps": 4, "learning_rate": 5e-3, "per_device_train_batch_size": 8}
# A replica's start (its imports) costs some 7 CPU-s, a step of it some 0.04 CPU-s: the restart tests train no
# more steps than their events need with a margin, the kill landing after checkpoint-40 with 80 steps to go, the
# suspension after step 50 with 100.
KILL_STEPS, TERM_STEPS = 120, 150


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return finetuning.make_tiny(tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="module")
def helper():
    """The tests that load their run's adapter back or run the recipe on bad input share one process for it (and
    its imports): finetuning.Helper."""
    with finetuning.Helper() as helper:
        yield helper


@pytest.fixture(scope="module")
def lora_run(tiny, tmp_path_factory) -> CLI:
    """The LoRA test's run (job "ft": two replicas, 2 epochs of 16 steps, checkpoints every 16), made once in a
    directory of its own: the resume test starts from a copy of what it left, as another run's output."""
    directory = tmp_path_factory.mktemp("lora")
    ran = CLI(directory / "home", directory)
    with pytest.MonkeyPatch.context() as patch:
        start(client_of(ran, patch), tiny, "ft", merge=True, backoff_limit=0,
              training_args={"max_steps": 32, "save_steps": 16}).wait(timeout=240, progress=False)
    return ran


def client_of(cli: CLI, patch: pytest.MonkeyPatch) -> Client:
    """Client("local") of ``cli``'s state directory, from its working directory, as the client fixture makes one."""
    patch.setenv("TRAINCTL_HOME", str(cli.home))
    patch.setenv("PATH", cli.env["PATH"])
    patch.chdir(cli.cwd)
    return Client("local")


def start(client: Client, tiny: Path, name: str, workers: int = 2, **keywords):
    training_args = {**FAST, **keywords.pop("training_args", {})}
    return client.finetune(str(tiny / "model"), str(tiny / "data.jsonl"), workers=workers, text_column="sentence",
                           output_dir="out", lora={"r": 8}, training_args=training_args, name=name,
                           env={**finetuning.OFFLINE, **finetuning.ONE_THREAD}, **keywords)


def printed(job) -> str:
    return "\n".join(str(line) for line in job.logs())


def replica_pid(cli, name: str, replica: str) -> int:
    runtime = json.loads((cli.home / "jobs" / "default" / name / "runtime.json").read_text())
    return runtime["replicas"][f"{name}-{replica}"]["pid"]


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} not reached in {timeout}s"
        time.sleep(0.1)


def test_two_replicas_fine_tune_with_lora_on_different_shards_and_save_one_adapter(lora_run, tiny, helper,
                                                                                    monkeypatch):
    client = client_of(lora_run, monkeypatch)
    job = client.job("ft")  # 2 epochs of 16 steps (256 rows / 2 ranks / 8)
    assert job.wait(timeout=240, progress=False).status == "Succeeded", printed(job)
    out = lora_run.cwd / "out"
    text = printed(job)
    assert "master-0 | rank 0 of 2: 256 rows, starting at step 0" in text, text
    assert "worker-0 | rank 1 of 2: 256 rows, starting at step 0" in text, text

    losses = finetuning.logged_losses(out)
    assert [step for step, _ in losses] == list(range(4, 33, 4))
    assert losses[-1][1] < losses[0][1] * 0.95, losses  # it learned, not just drifted

    seen = finetuning.rows_seen(out)
    assert sorted(seen) == [0, 1]
    for epoch in ("0", "1"):
        ranks = seen[0][epoch], seen[1][epoch]
        assert len(ranks[0]) >= 8 * 15 and len(ranks[1]) >= 8 * 15, epoch  # 16 steps of 8 rows each
        assert not ranks[0] & ranks[1], f"epoch {epoch}: both ranks trained on rows {sorted(ranks[0] & ranks[1])}"

    saved = [line for line in text.splitlines() if "saved the adapter" in line]
    assert saved == ["master-0 | saved the adapter to out/adapter and the merged model to out/merged"], saved
    assert {"adapter_config.json", "adapter_model.safetensors"} <= {path.name for path in (out / "adapter").iterdir()}
    assert {path.name for path in out.iterdir()} == {"adapter", "merged", "checkpoint-16", "checkpoint-32",
                                                     "rows-seen", "trainer_state.json"}  # no marker files left
    report = helper.generate(tiny / "model", out)
    assert report["new_tokens"] == 6 and report["text"].startswith("ana has 5"), report
    assert report["lora_b_nonzero"], "the adapter's B matrices are still zero: it was never trained"
    assert report["merged_max_diff"] < 1e-4, report

    progress = job.progress()  # issue 25: the recipe reports its steps and losses by itself
    assert (progress.step, progress.total) == (32, 32) and "loss" in progress.metrics, progress
    assert [p.replica for p in progress.replicas] == ["master-0", "worker-0"]
    reported = [(point.step, point.metrics["loss"]) for point in job.metrics() if "loss" in point.metrics]
    assert [step for step, _ in reported] == [step for step, _ in losses], (reported, losses)
    assert [loss for _, loss in reported] == pytest.approx([loss for _, loss in losses]), (reported, losses)

    # the docs' next block into the same directory: another run, refused before it exists (issue 23)
    with pytest.raises(InvalidArgument) as refused:
        start(client, tiny, "ft-docs", training_args={"max_steps": 200, "save_steps": 50, "learning_rate": 2e-4})
    assert str(refused.value).startswith("output_dir='out' holds checkpoint-32 of another run (job ft there, "
                                         "ft-docs here; learning_rate 0.005 there, 0.0002 here; "), refused.value
    assert "resume='never'" in str(refused.value) and "resume='out/checkpoint-32'" in str(refused.value)
    assert [job.name for job in client.jobs()] == ["ft"]


def test_a_killed_replica_restarts_and_the_job_resumes_from_the_last_checkpoint(client, cli, tiny):
    job = start(client, tiny, "ft-kill", restart_policy="OnFailure", backoff_limit=4,
                training_args={"max_steps": KILL_STEPS, "save_steps": 20, "logging_steps": 10})
    out = cli.cwd / "out"
    wait_for(lambda: (out / "checkpoint-40" / "trainer_state.json").is_file(), 180, "checkpoint-40")
    os.kill(replica_pid(cli, "ft-kill", "worker-0"), signal.SIGKILL)
    assert job.wait(timeout=240, progress=False).status == "Succeeded", printed(job)

    replicas = {replica.name: replica for replica in client.get("ft-kill").replicas}
    assert replicas["ft-kill-worker-0"].restarts >= 1, replicas  # the kill really cost a restart
    text = printed(job)
    resumed = finetuning.RESUME_LINE.search(text, text.index("master-0 | rank 0 of 2: 256 rows, resuming"))
    assert resumed, text
    step = int(resumed.group(2))
    assert 40 <= step < KILL_STEPS and step % 20 == 0, step
    after = finetuning.step_lines(text[resumed.end():])
    assert after[0] == (step // 10 + 1) * 10, (step, after)  # the count goes on from the checkpoint
    assert after[-1] == KILL_STEPS
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == KILL_STEPS


def test_sigterm_saves_a_checkpoint_on_every_rank_and_resume_continues_from_it(client, cli, tiny):
    job = start(client, tiny, "ft-term", training_args={"max_steps": TERM_STEPS, "save_steps": 1000,
                                                           "logging_steps": 10})
    wait_for(lambda: any(step >= 50 for step in finetuning.step_lines(printed(job))), 180, "step 50")
    client.suspend("ft-term")  # the replicas get SIGTERM, as pods of a suspended or preempted job
    out = cli.cwd / "out"
    wait_for(lambda: job.status == "Suspended" and all(replica.state != "Running" for replica in
                                                          client.get("ft-term").replicas), 60, "suspended")
    checkpoints = [path.name for path in out.glob("checkpoint-*") if (path / "trainer_state.json").is_file()]
    assert len(checkpoints) == 1, checkpoints  # save_steps never came: this one is the SIGTERM's
    step = int(checkpoints[0].split("-")[1])
    text = printed(job)
    for replica in ("master-0", "worker-0"):  # both ranks stopped at the same step
        assert f"{replica} | SIGTERM: saving a checkpoint at step {step}, then stopping" in text, text

    client.resume("ft-term")
    assert job.wait(timeout=240, progress=False).status == "Succeeded", printed(job)
    text = printed(job)  # the lines before the suspension, then the resumed run's
    resumed = f"master-0 | rank 0 of 2: 256 rows, resuming from out/checkpoint-{step} (step {step})"
    assert resumed in text, text
    assert finetuning.step_lines(text[text.index(resumed):])[0] == (step // 10 + 1) * 10
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == TERM_STEPS


def test_resume_never_starts_over_and_resume_a_checkpoint_continues_it_with_new_arguments(client, cli, tiny,
                                                                                          lora_run):
    # another run's output, the LoRA test's (job ft), copied: its checkpoints are to be deleted or continued
    out = cli.cwd / "out"
    shutil.copytree(lora_run.cwd / "out", out, symlinks=True)
    assert sorted(path.name for path in out.glob("checkpoint-*")) == ["checkpoint-16", "checkpoint-32"]
    over = start(client, tiny, "ft-b", backoff_limit=0, resume="never",
                 training_args={"max_steps": 8, "save_steps": 4, "learning_rate": 1e-3})
    assert over.wait(timeout=240, progress=False).status == "Succeeded", printed(over)
    assert "master-0 | rank 0 of 2: 256 rows, starting at step 0" in printed(over)
    assert sorted(path.name for path in out.glob("checkpoint-*")) == ["checkpoint-4", "checkpoint-8"]  # ft's gone
    assert json.loads((out / "checkpoint-8" / "finetune-run.json").read_text())["run"]["job"] == "ft-b"
    on = start(client, tiny, "ft-c", backoff_limit=0, resume="out/checkpoint-8",
               training_args={"max_steps": 12, "save_steps": 4, "learning_rate": 2e-3})
    assert on.wait(timeout=240, progress=False).status == "Succeeded", printed(on)
    assert "master-0 | rank 0 of 2: 256 rows, resuming from out/checkpoint-8 (step 8)" in printed(on)
    assert finetuning.step_lines(printed(on))[-1] == 12


def recipe(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trainctl.recipes.finetune", *args], cwd=cwd, text=True,
                          capture_output=True, env={**finetuning.environment(), **finetuning.ONE_THREAD}, timeout=180)


@pytest.mark.parametrize(("args", "message"), [
    (["--text-column", "body"], "error: --text-column 'body': {data} has the columns id, sentence, source; "
                                "name the one holding the text"),
    (["--training-args", '{"output_dir": "x"}'], "error: --training-args: 'output_dir' is set by --output-dir; "
                                                 "leave it out"),
    (["--training-args", '{"max_stepz": 3}'], "error: --training-args: TrainingArguments.__init__() got an "
                                              "unexpected keyword argument 'max_stepz'"),
    (["--lora", '{"r": 8, "rank": 4}'], "error: --lora: LoraConfig.__init__() got an unexpected keyword "
                                         "argument 'rank'"),
    (["--lora", "[8]"], "argument --lora: give a JSON object such as"),
])
def test_bad_recipe_input_is_one_line_and_exit_2(tiny, tmp_path, helper, args, message):
    """Run through the recipe's main() in the helper's process: those refused only after the recipe's imports pay
    them once. That a real ``python -m`` process ends such a refusal with its one line last on stderr and exit
    code 2, after the imports too, the tests below show with processes of their own."""
    code, stderr = helper.recipe("--model", str(tiny / "model"), "--dataset", str(tiny / "data.jsonl"), "--output-dir",
                                 str(tmp_path / "out"), "--text-column", "sentence", *args, cwd=tmp_path)
    assert code == 2, stderr[-2000:]
    last = stderr.strip().splitlines()[-1]
    assert message.format(data=tiny / "data.jsonl") in last, stderr[-2000:]
    assert "Traceback" not in stderr
    assert not (tmp_path / "out" / "adapter").exists()


def test_a_dataset_of_another_format_is_named_with_the_ones_it_reads(tiny, tmp_path):
    (tmp_path / "data.xml").write_text("<rows/>")
    done = recipe("--model", str(tiny / "model"), "--dataset", "data.xml", "--output-dir", "out", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == ("error: --dataset data.xml: cannot read .xml; give one of "
                                                    ".jsonl, .json, .csv, .parquet, .txt or a save_to_disk directory")


@pytest.mark.parametrize(("flag", "kind"), [("--model", "directory"), ("--dataset", "file")])
def test_a_missing_model_or_dataset_is_named_before_anything_loads(tiny, tmp_path, flag, kind):
    given = {"--model": str(tiny / "model"), "--dataset": str(tiny / "data.jsonl"), flag: "missing"}
    done = recipe(*[word for pair in given.items() for word in pair], "--output-dir", "out", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (f"error: {flag} missing: no such {kind} (from {tmp_path}), "
                                                    "and no Hub id such as org/name")


def test_a_model_directory_without_a_model_is_one_line(tiny, tmp_path):
    (tmp_path / "empty").mkdir()
    done = recipe("--model", "empty", "--dataset", str(tiny / "data.jsonl"), "--output-dir", "out", cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == ("error: --model empty: no config.json in it; give a directory "
                                                    "that save_pretrained wrote (the model's config, weights and "
                                                    "tokenizer)")
    (tmp_path / "empty" / "config.json").write_text('{"model_type": "gpt2"}')  # a config, but no weights
    done = recipe("--model", "empty", "--dataset", str(tiny / "data.jsonl"), "--output-dir", "out",
                  "--text-column", "sentence", cwd=tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1].startswith("error: --model empty: cannot load its "), done.stderr


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None,
                    reason="DeepSpeed is not installed here (pip install -r requirements/deepspeed.txt)")
def test_deepspeed_zero2_config_trains_the_same_recipe_on_cpu(client, cli, tiny, helper):
    from tests.conftest import REPO

    job = start(client, tiny, "ft-ds", deepspeed=str(REPO / "examples" / "finetune" / "ds_zero2.json"),
                backoff_limit=0, training_args={"max_steps": 16, "save_steps": 16})
    assert job.wait(timeout=280, progress=False).status == "Succeeded", printed(job)  # the first run builds an op
    text = printed(job)
    for replica, rank in (("master-0", 0), ("worker-0", 1)):
        assert f"{replica} | rank {rank}: DeepSpeed ZeRO stage 2" in text, text  # what the engine ran
    out = cli.cwd / "out"
    assert (out / "checkpoint-16" / "global_step16").is_dir()  # DeepSpeed's own optimizer shards
    losses = finetuning.logged_losses(out)
    assert losses[-1][1] < losses[0][1] * 0.95, losses
    assert helper.generate(tiny / "model", out)["new_tokens"] == 6


def test_the_gpu_benchmark_runs_whole_on_cpu_and_records_nothing():
    """benchmarks/gpu_finetune.py (issue 40), so that the next GPU run is one command: its smoke mode runs the
    same steps (a model made from a config, the recipe directly and as a one-replica job) on a tiny model."""
    from benchmarks.record import RECORD

    before = RECORD.read_text()
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu_finetune", "--device", "cpu"], cwd=REPO,
                          env={**finetuning.environment(), **finetuning.ONE_THREAD}, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert re.search(r"^tiny, 3 steps, direct: steps/s \(GPU not sampled\): [\d.]+ steps/s$", done.stdout, re.M), \
        done.stdout
    assert re.search(r"^tiny, 3 steps, trainctl: steps/s \(GPU not sampled\): [\d.]+ steps/s \([\d.]+x direct\)$",
                     done.stdout, re.M), done.stdout
    assert RECORD.read_text() == before
