"""CLI latency against a real API server: trainctl versus kubectl for the same reads.

    python -m benchmarks.cli_latency [--runs 10]

Starts the test cluster of tests/cluster (needs bash scripts/build-apiserver.sh once),
installs the CRDs, submits one PyTorchJob, then times `trainctl list`, `trainctl status JOB`
against `kubectl get pytorchjobs` and `kubectl get pytorchjob JOB`, medians of --runs each,
measured in the same run. Target (issue 7): trainctl <= 1.5 x kubectl.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.record import Row, median, time_command, write_section
from tests.cluster.server import TestCluster, cached_apiserver

TARGET_RATIO = 1.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    binary, kubectl = cached_apiserver(), shutil.which("kubectl")
    if binary is None or kubectl is None:
        sys.exit("needs the cached kube-apiserver and kubectl: run bash scripts/build-apiserver.sh")
    trainctl = shutil.which("trainctl") or sys.exit("trainctl is not on PATH: activate the venv")
    cluster = TestCluster(Path(tempfile.mkdtemp(prefix="bench-cluster-")), binary).start()
    try:
        env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig("admin"))}
        env.pop("TRAINCTL_BACKEND", None)
        for setup in (["crds", "install"], ["submit", "pytorch", "--name", "bench", "--workers", "4", "--",
                                             "python", "train.py"]):
            wait_until_ok([trainctl, *setup], env)
        rows = [Row("trainctl --help", median(time_command([trainctl, "--help"], args.runs, env)), "s")]
        pairs = [("trainctl list", [trainctl, "list"], "kubectl get pytorchjobs", [kubectl, "get", "pytorchjobs"]),
                 ("trainctl status bench", [trainctl, "status", "bench"], "kubectl get pytorchjob bench",
                  [kubectl, "get", "pytorchjob", "bench"])]
        for ours, our_argv, theirs, their_argv in pairs:
            baseline = median(time_command(their_argv, args.runs, env))
            measured = median(time_command(our_argv, args.runs, env))
            ratio = measured / baseline
            rows += [Row(theirs, baseline, "s"),
                     Row(ours, measured, "s", theirs, ratio, f"<= {TARGET_RATIO} x kubectl",
                         "met" if ratio <= TARGET_RATIO else "missed")]
    finally:
        cluster.stop()
    write_section("cli-latency", "CLI latency against the test API server", f"python -m benchmarks.cli_latency "
                  f"--runs {args.runs}", rows, notes=f"Median of {args.runs} runs each after one warm-up; "
                  "kube-apiserver 1.20.2 + etcd on loopback, one PyTorchJob stored.")
    for row in rows:
        print(f"{row.what:32s} {row.median * 1000:8.1f} ms" + (f"  ({row.ratio:.2f}x {row.baseline})" if row.ratio else ""))


def wait_until_ok(argv: list[str], env: dict) -> None:
    """CRDs take a moment to be served after install."""
    import time

    deadline = time.monotonic() + 30
    while subprocess.run(argv, env=env, capture_output=True).returncode != 0:
        if time.monotonic() > deadline:
            sys.exit(f"setup failed: {' '.join(argv)}")
        time.sleep(0.5)


if __name__ == "__main__":
    main()
