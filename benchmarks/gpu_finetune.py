"""GPU: the fine-tuning recipe run directly against the same command as a one-replica job, and ZeRO-2/3.

    python -m benchmarks.gpu_finetune [--runs 3] [--sizes 86M,1B] [--steps 300,60]
    python -m benchmarks.gpu_finetune --device cpu        # smoke: tiny model, 3 steps, one run, nothing recorded

Reproduces the table of ../shared/docs/gpu-check.md (issue 40) on any machine with an NVIDIA GPU. For each
size, a GPT-2-shaped model with random weights is made from a config (``save_pretrained`` into a temporary
directory) with the tokenizer of examples/finetune/make_tiny.py, so nothing is downloaded: 86M is 12 layers x
768, 1B is 20 layers x 2048. The rows are about 450 tokens (30 of make_tiny's sentences joined),
``--max-length 512``, the recipe's default LoRA (r 8, all-linear), ``{"bf16": true,
"per_device_train_batch_size": 32}``. Interleaved run by run, so that drift hits each alike:

* direct: ``python -m trainctl.recipes.finetune ...``, no trainctl;
* trainctl: ``trainctl submit pytorch --local --workers 1 --gpus 1 --wait -- python -m trainctl.recipes.finetune ...``;
* ZeRO-2 (examples/finetune/ds_zero2.json) and ZeRO-3 (stage 3, 16-bit weights gathered on save), under trainctl,
  at the first size.

Steps/s is the Trainer's ``train_steps_per_second`` (start-up, model load and the final save excluded), the
median of ``--runs``. Peak GPU memory is the largest sample (every 0.5 s) of what ``nvidia-smi
--query-compute-apps`` lists, summed over the GPU's processes, with the most processes seen on the GPU at once:
run it on a GPU nothing else uses. Written to docs/benchmarks.md (section gpu-finetune) on a GPU only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from benchmarks.finetune import DEEPSPEED_CONFIG, TRAINCTL, trainer_figure
from benchmarks.gpu_launch import gpu_name
from benchmarks.record import Row, median, write_section
from tests import finetuning

SIZES = {"86M": (12, 768, 12), "1B": (20, 2048, 16), "tiny": (2, 64, 4)}  # layers, width, heads
SENTENCES_PER_ROW = 30
SAMPLE_S = 0.5


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: a smoke run of the whole script (tiny model, few steps, one run, not recorded)")
    parser.add_argument("--runs", type=int, help="interleaved runs of each way (default 3; 1 with --device cpu)")
    parser.add_argument("--sizes", help="model sizes, of " + ", ".join(SIZES) + " (default 86M,1B; tiny on cpu)")
    parser.add_argument("--steps", help="steps per size, comma-separated (default 300,60; 3 on cpu)")
    options = parser.parse_args(argv)
    cpu = options.device == "cpu"
    options.runs = options.runs or (1 if cpu else 3)
    options.sizes = (options.sizes or ("tiny" if cpu else "86M,1B")).split(",")
    options.steps = [int(steps) for steps in (options.steps or ("3" if cpu else "300,60")).split(",")]
    unknown = [size for size in options.sizes if size not in SIZES]
    if unknown or len(options.steps) != len(options.sizes):
        parser.error(f"--sizes takes {', '.join(SIZES)} ({', '.join(unknown)} is none) and --steps one number "
                     "per size" if unknown else "--steps: give one number per size in --sizes")
    return options


def make_model(work: Path, size: str) -> tuple[Path, Path]:
    """(model directory, data file): a GPT-2 of ``size`` with random weights and make_tiny's tokenizer, and rows
    of SENTENCES_PER_ROW of its sentences, made in one process."""
    layers, width, heads = SIZES[size]
    model, data = work / f"model-{size}", work / "rows.jsonl"
    work.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-c", MAKE_MODEL, str(finetuning.MAKE_TINY), str(model), str(data),
                    str(SENTENCES_PER_ROW), str(layers), str(width), str(heads)],
                   check=True, env=finetuning.environment(), capture_output=True)
    return model, data


MAKE_MODEL = '''
import importlib.util, json, sys, torch
make_tiny_path, model, data, per_row, layers, width, heads = sys.argv[1:4] + [*map(int, sys.argv[4:])]
spec = importlib.util.spec_from_file_location("make_tiny", make_tiny_path)
make_tiny = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_tiny)
torch.manual_seed(0)
lines = make_tiny.sentences(per_row * 64)
with open(data, "w") as file:
    for start in range(0, len(lines), per_row):
        file.write(json.dumps({"text": " ".join(lines[start:start + per_row])}) + "\\n")
make_tiny.write_model(make_tiny.Path(model), lines, layers, width=width, heads=heads, positions=512)
'''


class GpuMemory:
    """The peak, while it runs, of the memory nvidia-smi's compute apps hold (MiB, summed) and of their count."""

    def __init__(self, enabled: bool) -> None:
        self.enabled, self.peak_mib, self.peak_processes = enabled, 0, 0
        self.stopping = threading.Event()

    def __enter__(self) -> GpuMemory:
        if self.enabled:
            self.thread = threading.Thread(target=self.sample, daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *_) -> None:
        self.stopping.set()
        if self.enabled:
            self.thread.join()

    def sample(self) -> None:
        while not self.stopping.wait(SAMPLE_S):
            listed = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                                     "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
            used = [int(line.split(",")[1]) for line in listed.splitlines() if line.count(",") == 1
                    and line.split(",")[1].strip().isdigit()]
            self.peak_mib, self.peak_processes = max(self.peak_mib, sum(used)), max(self.peak_processes, len(used))


def recipe_command(model: Path, data: Path, output: Path, steps: int, cpu: bool) -> list[str]:
    training = {"max_steps": steps, "save_steps": steps, "logging_steps": steps, "learning_rate": 5e-4,
                "per_device_train_batch_size": 2 if cpu else 32, **({} if cpu else {"bf16": True})}
    return [sys.executable, "-m", "trainctl.recipes.finetune", "--model", str(model), "--dataset", str(data),
            "--output-dir", str(output), "--max-length", "64" if cpu else "512", "--training-args",
            json.dumps(training)]


def run(work: Path, name: str, recipe: list[str], cpu: bool, *extra: str) -> tuple[float, GpuMemory]:
    """(steps/s, GPU memory) of the recipe run directly (``name`` "direct") or as a one-replica local job."""
    env = {**finetuning.environment(), "TRAINCTL_HOME": str(work / "home")}
    output = Path(recipe[recipe.index("--output-dir") + 1])
    gpus = [] if cpu else ["--gpus", "1"]
    argv = recipe if name == "direct" else [*TRAINCTL, "submit", "pytorch", "--local", "--workers", "1", *gpus,
                                            "--wait", "--name", name, "--", *recipe, *extra]
    with GpuMemory(not cpu) as memory:
        done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        logs = subprocess.run([*TRAINCTL, "logs", name, "--local"], cwd=work, env=env, capture_output=True, text=True)
        raise SystemExit(f"{name} failed ({done.returncode}):\n{done.stderr[-3000:]}\n{logs.stdout[-3000:]}")
    if name != "direct":
        subprocess.run([*TRAINCTL, "delete", name, "--local"], cwd=work, env=env, capture_output=True)
    return trainer_figure(output, "train_steps_per_second"), memory


def zero3_config(work: Path) -> Path:
    config = json.loads(DEEPSPEED_CONFIG.read_text())
    config["zero_optimization"] = {"stage": 3, "overlap_comm": True, "contiguous_gradients": True,
                                   "stage3_gather_16bit_weights_on_model_save": True}
    path = work / "ds_zero3.json"
    path.write_text(json.dumps(config))
    return path


def ways(work: Path, first: bool, cpu: bool) -> dict[str, tuple[str, ...]]:
    """The runs of one size: direct and under trainctl; ZeRO-2/3 at the first size on a GPU."""
    found = {"direct": (), "trainctl": ()}
    if first and not cpu:  # DeepSpeed on a CPU builds a C++ op for a minute: not for a smoke run
        found.update({"zero2": ("--deepspeed", str(DEEPSPEED_CONFIG)), "zero3": ("--deepspeed", str(zero3_config(work)))})
    return found


def measure(work: Path, size: str, steps: int, options: argparse.Namespace, first: bool) -> list[Row]:
    cpu = options.device == "cpu"
    model, data = make_model(work / size, size)
    runs = ways(work, first, cpu)
    rates: dict[str, list[float]] = {name: [] for name in runs}
    memory: dict[str, list[GpuMemory]] = {name: [] for name in runs}
    for index in range(options.runs):
        for name, extra in runs.items():
            recipe = recipe_command(model, data, work / f"out-{size}-{name}-{index}", steps, cpu)
            rate, used = run(work, "direct" if name == "direct" else f"{name}-{size.lower()}-{index}", recipe, cpu,
                             *extra)
            rates[name].append(rate)
            memory[name].append(used)
            print(f"{size} run {index} {name}: {rate:.3f} steps/s" + ("" if cpu else f", peak {used.peak_mib} MiB "
                  f"on the GPU in {used.peak_processes} process(es)"), flush=True)
    return rows(f"{size}, {steps} steps", rates, memory, sampled=not cpu)


def rows(run: str, rates: dict[str, list[float]], memory: dict[str, list[GpuMemory]], sampled: bool) -> list[Row]:
    direct = median(rates["direct"])
    found = []
    for name, values in rates.items():
        peak = max(used.peak_mib for used in memory[name])
        processes = max(used.peak_processes for used in memory[name])
        gpu = f"peak GPU {peak} MiB in {processes} process(es)" if sampled else "GPU not sampled"
        what = f"{run}, {name}: steps/s ({gpu})"
        found.append(Row(what, median(values), "steps/s", "" if name == "direct" else "direct",
                         None if name == "direct" else median(values) / direct))
    return found


def main(argv: list[str] | None = None) -> None:
    options = arguments(argv)
    cpu = options.device == "cpu"
    gpu = "" if cpu else gpu_name() or sys.exit("no NVIDIA GPU here (nvidia-smi found none): run this on a GPU "
                                                 "machine, or --device cpu for a smoke run")
    found: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-gpu-finetune-") as temporary:
        for index, (size, steps) in enumerate(zip(options.sizes, options.steps)):
            found += measure(Path(temporary), size, steps, options, first=index == 0)
    for row in found:
        print(f"{row.what}: {row.median:.3f} {row.unit}" + (f" ({row.ratio:.3f}x direct)" if row.ratio else ""))
    if not cpu:
        write_section("gpu-finetune", "GPU: the fine-tuning recipe directly and as a one-replica job, ZeRO-2/3",
                      "python -m benchmarks.gpu_finetune " + " ".join(argv if argv is not None else sys.argv[1:]),
                      found, notes=f"GPU: {gpu}. Median of {options.runs} interleaved runs; see the script's "
                      "docstring for the model, the data and what is sampled.")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
