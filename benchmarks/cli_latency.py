"""CLI latency against a real API server: trainctl's reads against kubectl's.

    python -m benchmarks.cli_latency [--runs 11]

Starts the test cluster of tests/cluster (needs bash scripts/build-apiserver.sh once) and its node
fixture, installs the CRDs and makes two PyTorchJobs: ``bench`` (Master 1 + Worker 3, no pods, its
status written Running as an operator would) and ``logged`` (Master 1 + Worker 1, both pods
running on the node fixture with a few lines of log each). Then times, in turn, after a warm-up
round (which also fills kubectl's discovery cache and trainctl's kubeconfig cache):

    trainctl list                       against  kubectl get pytorchjobs
    trainctl status bench               against  kubectl get pytorchjob bench
    trainctl get pytorchjob/bench       against  kubectl get pytorchjob bench
    trainctl wait bench --for running   against  kubectl get pytorchjob bench
    trainctl logs logged                against  kubectl get pytorchjob bench

every command's output into a pipe, as scripts and ``watch`` read it (trainctl/cli/fast.py's path).
kubectl is the one scripts/build-node.sh builds from the same source as the API server. trainctl is
the copy ``pip install .`` makes (benchmarks.record.installed_trainctl: a wheel, byte-compiled, in a
venv of its own; ``python -c pass`` is that venv's python, the floor of any Python command).
Target (issue 28): <= 1.5 x kubectl get.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.logs_throughput import create_pods, wait_until, wait_until_ok
from benchmarks.record import Row, built_kubectl, installed_trainctl, interleaved, median, write_section
from tests.cluster.server import TestCluster, cached_apiserver

TARGET_RATIO = 1.5
KUBECTL = built_kubectl()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=11)
    args = parser.parse_args()
    binary = cached_apiserver()
    if binary is None or not KUBECTL.is_file():
        sys.exit("needs the cached kube-apiserver and kubectl: run bash scripts/build-apiserver.sh and "
                 "bash scripts/build-node.sh")
    work = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    trainctl = installed_trainctl(work)
    cluster = TestCluster(work / "cluster", binary).start()
    node = None
    load_before = os.getloadavg()
    try:
        env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig("admin")), "TRAINCTL_HOME": str(work / "home"),
               "HOME": str(work)}  # kubectl's discovery cache, trainctl's kubeconfig cache: the run's own
        env.pop("TRAINCTL_BACKEND", None)
        node = prepare(cluster, trainctl, env, work)
        samples = interleaved(commands(trainctl), args.runs, env)
    finally:
        if node is not None:
            node.stop()
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    rows = rows_for(samples)
    load = f"load average (1 min) {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after"
    write_section("cli-latency", "CLI latency against the test API server", f"python -m benchmarks.cli_latency "
                  f"--runs {args.runs}", rows, notes=f"Median of {args.runs} interleaved runs each after one warm-up "
                  "round, output into a pipe; kube-apiserver 1.20.2 + etcd on loopback, kubectl 1.20.2 built from the "
                  f"same source; trainctl installed from a wheel as `pip install .` installs it; {load}.")
    for row in rows:
        print(f"{row.what:40s} {row.median * 1000:8.1f} ms" + (f"  ({row.ratio:.2f}x {row.baseline})" if row.ratio
                                                                else ""))


def prepare(cluster, trainctl: str, env: dict, work: Path):
    """The CRDs, the two jobs, the node fixture running ``logged``'s pods; returns the node."""
    from tests.cluster.kubelet import FakeNode
    from trainctl.frameworks import by_kind
    from trainctl.kube import job_resource
    from trainctl.kube.client import connect

    wait_until_ok([trainctl, "crds", "install"], env)
    for name, workers in (("bench", "4"), ("logged", "2")):
        wait_until_ok([trainctl, "submit", "pytorch", "--name", name, "--workers", workers, "--", "python", "t.py"],
                      env)
    rest = connect(kubeconfig=env["KUBECONFIG"])
    resource = job_resource(by_kind("PyTorchJob"))
    job = rest.get(resource, "bench", "default")
    stamp = "2026-01-01T00:00:00Z"
    job["status"] = {"startTime": stamp, "conditions": [
        {"type": kind, "status": "True", "reason": f"PyTorchJob{kind}", "message": f"PyTorchJob bench is {kind.lower()}.",
         "lastUpdateTime": stamp, "lastTransitionTime": stamp} for kind in ("Created", "Running")]}
    rest.replace(resource, job, "default", subresource="status")
    (work / "node").mkdir()
    node = FakeNode(cluster, work / "node").start()
    node.manage("default")
    for pod, _ in create_pods(cluster, "logged"):
        node.write_log("default", pod, "pytorch", "".join(f"{pod} step {step}\n" for step in range(20)))
    wait_until(lambda: "step 19" in subprocess.run([trainctl, "logs", "logged", "--tail", "1"], env=env,
                                                   capture_output=True, text=True).stdout)
    return node


def commands(trainctl: str) -> dict[str, list[str]]:
    kubectl = str(KUBECTL)
    return {"python -c pass": [str(Path(trainctl).with_name("python")), "-c", "pass"],
            "trainctl --help": [trainctl, "--help"],
            "kubectl get pytorchjobs": [kubectl, "get", "pytorchjobs"],
            "kubectl get pytorchjob bench": [kubectl, "get", "pytorchjob", "bench"],
            "trainctl list": [trainctl, "list"],
            "trainctl status bench": [trainctl, "status", "bench"],
            "trainctl get pytorchjob/bench": [trainctl, "get", "pytorchjob/bench"],
            "trainctl wait bench --for running": [trainctl, "wait", "bench", "--for", "running"],
            "trainctl logs logged": [trainctl, "logs", "logged"],
            "kubectl logs logged-master-0": [kubectl, "logs", "logged-master-0"]}


BASELINES = {"trainctl list": "kubectl get pytorchjobs", "trainctl status bench": "kubectl get pytorchjob bench",
             "trainctl get pytorchjob/bench": "kubectl get pytorchjob bench",
             "trainctl wait bench --for running": "kubectl get pytorchjob bench",
             "trainctl logs logged": "kubectl get pytorchjob bench"}


def rows_for(samples: dict[str, list[float]]) -> list[Row]:
    medians = {name: median(values) for name, values in samples.items()}
    rows = []
    for name, value in medians.items():
        baseline = BASELINES.get(name)
        if baseline is None:
            rows.append(Row(name, value, "s"))
            continue
        ratio = value / medians[baseline]
        rows.append(Row(name, value, "s", baseline, ratio, f"<= {TARGET_RATIO} x kubectl get",
                        "met" if ratio <= TARGET_RATIO else "missed"))
    return rows


if __name__ == "__main__":
    main()
