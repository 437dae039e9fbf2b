"""GPU: the PyTorch example on one GPU through the local backend versus a direct launch.

    python -m benchmarks.gpu_launch [--runs 5]

Needs a CUDA GPU (run on the device machine). Interleaved runs of
`trainctl submit pytorch --workers 1 --gpus 1 --local --wait -- python examples/pytorch/train_ddp.py ...`
and `python examples/pytorch/train_ddp.py ...` with the same arguments; compares the samples
per second each run reports, median of --runs. A launcher must not slow training down: target
ratio >= 0.98 (the same bar as the CPU steps-per-second target).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from benchmarks.local_launch import result_lines
from benchmarks.record import ROOT, Row, median, write_section

SCRIPT = ["examples/pytorch/train_ddp.py", "--epochs", "3", "--samples", "65536", "--global-batch", "512"]
TARGET = 0.98


def run_direct(python: str) -> float:
    done = subprocess.run([python, *SCRIPT], cwd=ROOT, capture_output=True, text=True, check=True)
    return result_lines(done.stdout)[0]["samples_per_second"]


def run_trainctl(trainctl: list[str], python: str, home: str, index: int) -> float:
    env = {**os.environ, "TRAINCTL_HOME": home}
    name = f"gpu-{index}"
    submitted = subprocess.run([*trainctl, "submit", "pytorch", "--workers", "1", "--gpus", "1", "--local", "--wait",
                                "--name", name, "--", python, *SCRIPT], cwd=ROOT, env=env, capture_output=True,
                               text=True)
    if submitted.returncode != 0:
        sys.exit(f"trainctl submit failed ({submitted.returncode}):\n{submitted.stdout}{submitted.stderr}")
    logs = subprocess.run([*trainctl, "logs", name, "--local"], cwd=ROOT, env=env, capture_output=True, text=True)
    return result_lines(logs.stdout)[0]["samples_per_second"]


def gpu_name() -> str:
    found = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                           text=True)
    return found.stdout.strip().splitlines()[0] if found.returncode == 0 and found.stdout.strip() else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    gpu = gpu_name() or sys.exit("no NVIDIA GPU here (nvidia-smi found none): run this on a GPU machine")
    trainctl = [shutil.which("trainctl")] if shutil.which("trainctl") else [sys.executable, "-m", "trainctl"]
    python, home = sys.executable, tempfile.mkdtemp(prefix="bench-gpu-")
    direct, ours = [], []
    for index in range(args.runs):  # interleaved, so drift hits both alike
        direct.append(run_direct(python))
        ours.append(run_trainctl(trainctl, python, home, index))
        print(f"run {index}: direct {direct[-1]} samples/s, trainctl {ours[-1]} samples/s", file=sys.stderr)
    base, measured = median(direct), median(ours)
    ratio = measured / base
    rows = [Row("python train_ddp.py (direct): samples/s", base, "samples/s"),
            Row("trainctl submit --gpus 1 --local: samples/s", measured, "samples/s", "direct", ratio,
                f">= {TARGET} x direct", "met" if ratio >= TARGET else "missed")]
    write_section("gpu-launch", "GPU: local backend against a direct launch", f"python -m benchmarks.gpu_launch "
                  f"--runs {args.runs}", rows, notes=f"GPU: {gpu}. Median of {args.runs} interleaved runs each; "
                  f"{' '.join(SCRIPT)} (one process, CUDA).")
    for row in rows:
        print(f"{row.what:45s} {row.median:10.1f} {row.unit}" + (f"  ({row.ratio:.3f}x)" if row.ratio else ""))


if __name__ == "__main__":
    main()
