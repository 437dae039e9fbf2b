"""Local launch overhead: a 2-process PyTorch job through trainctl versus torchrun.

    python -m benchmarks.local_launch [--runs 5]

Same script, same machine, measured in the same run: wall time of
`trainctl submit pytorch --workers 2 --local --wait -- python examples/pytorch/train_ddp.py`
against `torchrun --nproc-per-node 2 examples/pytorch/train_ddp.py`, and the training
steps per second each run reports (rank 0's result line). Targets (issue 7): wall <= 1.2 x
torchrun, steps/s >= 0.98 x torchrun.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from benchmarks.record import ROOT, Row, median, write_section

SCRIPT = ["examples/pytorch/train_ddp.py", "--epochs", "2", "--samples", "4096"]


def result_lines(text: str) -> list[dict]:
    found = []
    for line in text.splitlines():
        start = line.find('{"event": "result"')
        if start >= 0:
            found.append(json.loads(line[start:]))
    return found


def run_torchrun(python: str) -> tuple[float, float]:
    torchrun = [python, "-m", "torch.distributed.run", "--nproc-per-node", "2", *SCRIPT]
    started = time.perf_counter()
    done = subprocess.run(torchrun, cwd=ROOT, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    rank0 = next(r for r in result_lines(done.stdout) if r["rank"] == 0)
    return wall, rank0["steps_per_second"]


def run_trainctl(trainctl: str, python: str, home: str, index: int,
                 script: list[str] = SCRIPT, workers: int = 2) -> tuple[float, float]:
    env = {**os.environ, "TRAINCTL_HOME": home}
    name = f"bench-{index}-{workers}"
    started = time.perf_counter()
    subprocess.run([trainctl, "submit", "pytorch", "--workers", str(workers), "--local", "--wait", "--name", name, "--",
                    python, *script], cwd=ROOT, env=env, capture_output=True, check=True)
    wall = time.perf_counter() - started
    logs = subprocess.run([trainctl, "logs", name, "--local"], cwd=ROOT, env=env, capture_output=True, text=True)
    rank0 = next(r for r in result_lines(logs.stdout) if r["rank"] == 0)
    subprocess.run([trainctl, "delete", name, "--local"], env=env, capture_output=True)
    return wall, rank0["steps_per_second"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    trainctl = shutil.which("trainctl") or sys.exit("trainctl is not on PATH: activate the venv")
    python = sys.executable
    home = tempfile.mkdtemp(prefix="bench-home-")
    torch_runs, our_runs = [], []
    for index in range(args.runs):  # interleaved, so drift on a shared machine hits both alike
        torch_runs.append(run_torchrun(python))
        our_runs.append(run_trainctl(trainctl, python, home, index))
    torch_wall, our_wall = median([w for w, _ in torch_runs]), median([w for w, _ in our_runs])
    torch_sps, our_sps = median([s for _, s in torch_runs]), median([s for _, s in our_runs])
    rows = [Row("torchrun --nproc-per-node 2: wall", torch_wall, "s"),
            Row("trainctl submit --workers 2 --wait: wall", our_wall, "s", "torchrun", our_wall / torch_wall,
                "<= 1.2 x torchrun", "met" if our_wall / torch_wall <= 1.2 else "missed"),
            Row("torchrun: steps/s (rank 0)", torch_sps, "steps/s"),
            Row("trainctl: steps/s (rank 0)", our_sps, "steps/s", "torchrun", our_sps / torch_sps,
                ">= 0.98 x torchrun", "met" if our_sps / torch_sps >= 0.98 else "missed")]
    write_section("local-launch", "Local launch overhead against torchrun",
                  f"python -m benchmarks.local_launch --runs {args.runs}", rows,
                  notes=f"Median of {args.runs} interleaved runs each; examples/pytorch/train_ddp.py, 2 CPU "
                        "processes (gloo), 2 epochs of 4096 synthetic samples.")
    for row in rows:
        print(f"{row.what:42s} {row.median:8.3f} {row.unit}" + (f"  ({row.ratio:.2f}x)" if row.ratio else ""))


if __name__ == "__main__":
    main()
