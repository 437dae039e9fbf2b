"""Fine-tuning (issue 17) on CPU: the recipe as one process against 2 replicas with DDP and with ZeRO-2.

    python -m benchmarks.finetune [--runs 3] [--steps 200]

The tiny model of examples/finetune/make_tiny.py (2-layer GPT-2, LoRA r=8), made once. Three ways,
interleaved run by run so that drift on a shared machine hits each alike:

* baseline: ``python -m trainctl.recipes.finetune`` as one process, no trainctl;
* ``trainctl submit pytorch --workers 2`` of the same recipe (DDP over gloo, local backend);
* the same with ``--deepspeed examples/finetune/ds_zero2.json`` (ZeRO stage 2, gloo).

Each run trains ``--steps`` steps of 8 rows per replica; what is compared is the Trainer's own
``train_samples_per_second`` (rows of every replica per second of the training loop, start-up
excluded), read from the trainer_state.json rank 0 writes. On a GPU machine the same command
measures NCCL instead (the recipe picks it); this record is CPU only (benchmarks/gpu_finetune.py is
the GPU one).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.record import ROOT, Row, median, write_section
from tests import finetuning

TRAINCTL = [sys.executable, "-m", "trainctl"]
DEEPSPEED_CONFIG = ROOT / "examples" / "finetune" / "ds_zero2.json"


def recipe_args(tiny: Path, output: Path, steps: int) -> list[str]:
    return ["--model", str(tiny / "model"), "--dataset", str(tiny / "data.jsonl"), "--text-column", "sentence",
            "--output-dir", str(output), "--training-args",
            json.dumps({"max_steps": steps, "save_steps": steps, "logging_steps": steps, "learning_rate": 5e-3})]


def trainer_figure(output: Path, key: str = "train_samples_per_second") -> float:
    """One of the Trainer's end-of-training figures, from the trainer_state.json rank 0 wrote."""
    state = json.loads((output / "trainer_state.json").read_text())
    return next(entry[key] for entry in reversed(state["log_history"]) if key in entry)


def run_alone(tiny: Path, work: Path, steps: int) -> float:
    output = work / "alone"
    subprocess.run([sys.executable, "-m", "trainctl.recipes.finetune", *recipe_args(tiny, output, steps)],
                   cwd=work, env=finetuning.environment(), check=True, capture_output=True)
    return trainer_figure(output)


def run_job(tiny: Path, work: Path, steps: int, name: str, *extra: str) -> float:
    output = work / name
    env = {**finetuning.environment(), "TRAINCTL_HOME": str(work / "home")}
    submitted = subprocess.run([*TRAINCTL, "submit", "pytorch", "--local", "--workers", "2", "--wait", "--name",
                                name, "--", sys.executable, "-m", "trainctl.recipes.finetune",
                                *recipe_args(tiny, output, steps), *extra],
                               cwd=work, env=env, capture_output=True, text=True)
    if submitted.returncode != 0:
        logs = subprocess.run([*TRAINCTL, "logs", name, "--local"], cwd=work, env=env, capture_output=True, text=True)
        raise SystemExit(f"{name} failed:\n{submitted.stderr}\n{logs.stdout[-3000:]}")
    subprocess.run([*TRAINCTL, "delete", name, "--local"], env=env, capture_output=True)
    return trainer_figure(output)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-finetune-") as temporary:
        root = Path(temporary)
        tiny = finetuning.make_tiny(root / "tiny")
        run_job(tiny, root, 8, "warmup", "--deepspeed", str(DEEPSPEED_CONFIG))  # builds DeepSpeed's op once
        samples: dict[str, list[float]] = {"alone": [], "ddp": [], "zero2": []}
        for index in range(options.runs):
            work = root / f"run-{index}"
            work.mkdir()
            samples["alone"].append(run_alone(tiny, work, options.steps))
            samples["ddp"].append(run_job(tiny, work, options.steps, "ddp"))
            samples["zero2"].append(run_job(tiny, work, options.steps, "zero2", "--deepspeed", str(DEEPSPEED_CONFIG)))
            shutil.rmtree(work / "home", ignore_errors=True)
            print({key: round(values[-1], 1) for key, values in samples.items()}, flush=True)
    alone = median(samples["alone"])
    rows = [Row("recipe alone, 1 process: rows/s", alone, "rows/s"),
            Row("trainctl, 2 replicas, DDP (gloo): rows/s", median(samples["ddp"]), "rows/s", "1 process",
                median(samples["ddp"]) / alone),
            Row("trainctl, 2 replicas, DeepSpeed ZeRO-2 (gloo): rows/s", median(samples["zero2"]), "rows/s",
                "1 process", median(samples["zero2"]) / alone)]
    per_run = "; ".join(f"{key}: {', '.join(f'{value:.0f}' for value in values)}" for key, values in samples.items())
    notes = (f"Medians of {options.runs} interleaved runs of {options.steps} steps, 8 rows per replica per step; "
             f"rows/s is the Trainer's train_samples_per_second (every replica's rows per second of the training "
             f"loop; start-up, model load and the final save excluded). Per run: {per_run}. The model is the "
             "2-layer GPT-2 of examples/finetune/make_tiny.py with LoRA r=8 (16k trainable parameters): a step is "
             "so small that the per-step all-reduce (and for ZeRO-2 its partitioned optimizer step) is what is "
             "measured, not arithmetic. This says what runs on CPU and what the distribution costs on 2 cores; "
             "it says nothing of GPU throughput (the GPU figures: the section \"GPU: the fine-tuning recipe "
             "directly and as a one-replica job\" below).")
    for row in rows:
        print(f"{row.what}: {row.median:.1f} {row.unit}" + (f" ({row.ratio:.2f}x)" if row.ratio else ""))
    write_section("finetune", "Fine-tuning on CPU: one process against 2 replicas with DDP and with DeepSpeed ZeRO-2",
                  f"python -m benchmarks.finetune --runs {options.runs} --steps {options.steps}", rows, notes)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
