"""Logs throughput: `trainctl logs` of a finished 2-replica job with 1M lines per replica, into a pipe.

    python -m benchmarks.logs_throughput [--lines 1000000] [--runs 5] [--skip-kubernetes]

Local backend: a real PyTorchJob (Master 1 + Worker 1) whose replicas each print --lines
training-log lines (~62 bytes) is run to completion; then `trainctl logs NAME` (all replicas,
prefixed, merged in time order) is timed into a pipe read by `cat > /dev/null`, against
`cat` of the same two log files into the same kind of pipe, alternating, median of --runs.

Kubernetes: the test API server of tests/cluster with its node fixture (a kubelet stand-in
serving the same two logs over HTTPS through the API server, as kubelet does); `trainctl logs`
against `cat` of the same text in files, against `kubectl logs -l <job> --prefix`, the
nearest kubectl equivalent (every pod, prefixed; no time-ordered merge), and against a bare
transfer of the same bytes through trainctl's REST client, unparsed (the server's share).

Wall seconds decide the targets; the writer's CPU seconds are shown too, since on a shared
2-core machine wall time also measures the neighbours.

Targets (issue 12): >= 500,000 lines/s, and <= 3x `cat` measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.record import Row, built_kubectl, installed_trainctl, median, write_section

ROOT = Path(__file__).resolve().parents[1]
TARGET_LINES_PER_S, TARGET_RATIO = 500_000, 3.0
STARTUP = "trainctl logs --tail 0 (start-up and job lookup only)"
RAW = "bare transfer, unparsed"
# What any client pays for the bytes alone: the same requests trainctl makes, output unprocessed.
RAW_TRANSFER = """
import sys
from trainctl.kube.client import PODS, connect
client, out = connect(), sys.stdout.buffer
for pod in sys.argv[1:]:
    query = {"container": "pytorch", "timestamps": "true"}
    for piece in client.stream(PODS.path("default", pod, "log"), query, timeout=60, chunks=True):
        out.write(piece)
"""
GENERATOR = """
import os, sys
rank, write = os.environ.get("RANK", "0"), sys.stdout.write
for step in range(int(sys.argv[1])):
    write(f"rank {rank} step {step:>7} loss {1.0 / (step + 1):.6f} lr 0.000100 samples/s 1234.5\\n")
"""


def log_text(rank: int, lines: int) -> str:
    """What GENERATOR prints for ``rank``: the Kubernetes run serves the same bytes."""
    return "".join(f"rank {rank} step {step:>7} loss {1.0 / (step + 1):.6f} lr 0.000100 samples/s 1234.5\n"
                   for step in range(lines))


def pipe_run(argv: list[str], env: dict) -> tuple[float, float]:
    """Wall seconds of ``argv`` writing into a pipe that `cat` drains to /dev/null, and its CPU seconds."""
    start = time.perf_counter()
    producer = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    consumer = subprocess.Popen(["cat"], stdin=producer.stdout, stdout=subprocess.DEVNULL)
    producer.stdout.close()  # the consumer holds the read end now
    _, status, usage = os.wait4(producer.pid, 0)
    producer.returncode = os.waitstatus_to_exitcode(status)
    if producer.returncode or consumer.wait():
        sys.exit(f"failed: {' '.join(argv)}")
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def compare(contenders: dict[str, list[str]], runs: int, env: dict) -> dict[str, tuple[float, float]]:
    """Median wall and CPU seconds of each command, run in turn (one untimed warm-up round) so drift
    on a shared machine hits all alike."""
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    for round_ in range(runs + 1):
        for name, argv in contenders.items():
            measured = pipe_run(argv, env)
            if round_:
                samples[name].append(measured)
    return {name: (median([wall for wall, _ in values]), median([cpu for _, cpu in values]))
            for name, values in samples.items()}


def rows_for(where: str, medians: dict[str, tuple[float, float]], lines: int, ours: str,
             baselines: list[str]) -> list[Row]:
    """Wall time of each command; ours as lines/s and as a ratio to each baseline; then CPU seconds."""
    rows = [Row(f"{where}: {name}", medians[name][0], "s") for name in baselines]
    wall, cpu = medians[ours]
    rate = lines / wall
    rows.append(Row(f"{where}: {ours} ({rate:,.0f} lines/s)", wall, "s", "", None,
                    f">= {TARGET_LINES_PER_S:,} lines/s", "met" if rate >= TARGET_LINES_PER_S else "missed"))
    for name in baselines:
        ratio = wall / medians[name][0]
        met = ratio <= TARGET_RATIO if name.startswith("cat") else None
        rows.append(Row(f"{where}: {ours} vs {name}", wall, "s", name, ratio,
                        f"<= {TARGET_RATIO:g}x cat" if met is not None else "",
                        "" if met is None else "met" if met else "missed"))
    rows += [Row(f"{where}: {name}, CPU of the writer", medians[name][1], "s") for name in [*baselines, ours]]
    return rows


def local_rows(trainctl: str, lines: int, runs: int) -> list[Row]:
    work = Path(tempfile.mkdtemp(prefix="bench-logs-"))
    env = {**os.environ, "TRAINCTL_HOME": str(work / "home"), "TRAINCTL_BACKEND": "local"}
    (work / "generate.py").write_text(GENERATOR)
    submit = [trainctl, "submit", "pytorch", "--name", "logs", "--workers", "2", "--", sys.executable,
              str(work / "generate.py"), str(lines)]
    subprocess.run(submit, env=env, check=True, capture_output=True, cwd=work)
    subprocess.run([trainctl, "wait", "logs", "--timeout", "10m"], env=env, check=True, capture_output=True)
    files = sorted(str(path) for path in (work / "home" / "jobs" / "default" / "logs" / "logs").glob("*.log"))
    medians = compare({"cat of the 2 log files": ["cat", *files], "trainctl logs": [trainctl, "logs", "logs"],
                       STARTUP: [trainctl, "logs", "logs", "--tail", "0"]}, runs, env)
    shutil.rmtree(work)
    return [Row(f"local: {STARTUP}", medians[STARTUP][0], "s"),
            *rows_for("local", medians, 2 * lines, "trainctl logs", ["cat of the 2 log files"])]


def kubernetes_rows(trainctl: str, lines: int, runs: int) -> list[Row]:
    from tests.cluster.kubelet import FakeNode
    from tests.cluster.server import TestCluster, cached_apiserver

    binary, kubectl = cached_apiserver(), str(built_kubectl())
    if binary is None or not built_kubectl().is_file():
        sys.exit("needs the cached kube-apiserver and kubectl: run bash scripts/build-apiserver.sh and "
                 "bash scripts/build-node.sh")
    work = Path(tempfile.mkdtemp(prefix="bench-logs-k8s-"))
    cluster = TestCluster(work / "cluster", binary).start()
    node = None
    try:
        env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig("admin"))}
        env.pop("TRAINCTL_BACKEND", None)
        wait_until_ok([trainctl, "crds", "install"], env)
        wait_until_ok([trainctl, "submit", "pytorch", "--name", "logs", "--workers", "2", "--", "python", "t.py"], env)
        (work / "node").mkdir()
        node = FakeNode(cluster, work / "node").start()
        node.manage("default")
        files, selector = [], None
        for rank, (pod, labels) in enumerate(create_pods(cluster)):
            text = log_text(rank, lines)
            node.write_log("default", pod, "pytorch", text)
            files.append(work / f"{pod}.log")
            files[-1].write_text(text)
            selector = f"training.kubeflow.org/job-name={labels['training.kubeflow.org/job-name']}"
        wait_until(lambda: "rank" in subprocess.run([trainctl, "logs", "logs", "--tail", "1"], env=env,
                                                    capture_output=True, text=True).stdout)  # pods bound
        medians = compare({"cat of the same 2 logs": ["cat", *map(str, files)],
                           "kubectl logs -l --prefix": [kubectl, "logs", "-l", selector, "--prefix", "--tail=-1"],
                           RAW: [sys.executable, "-c", RAW_TRANSFER, *(file.stem for file in files)],
                           "trainctl logs": [trainctl, "logs", "logs"]}, runs, env)
    finally:
        if node is not None:
            node.stop()
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    return rows_for("kubernetes", medians, 2 * lines, "trainctl logs", ["cat of the same 2 logs",
                                                                         "kubectl logs -l --prefix", RAW])


def create_pods(cluster, job_name: str = "logs") -> list[tuple[str, dict]]:
    """The job's pods as an operator would create them (the reconcile core's own bodies)."""
    from datetime import datetime, timezone

    from trainctl.core.actions import CreateReplica
    from trainctl.core.network import ClusterNetwork
    from trainctl.core.reconcile import reconcile
    from trainctl.frameworks import by_kind
    from trainctl.kube import job_resource
    from trainctl.kube.client import PODS, connect

    client = connect(kubeconfig=str(cluster.kubeconfig("admin")))
    job = client.get(job_resource(by_kind("PyTorchJob")), job_name, "default")
    pods = []
    for action in reconcile(job, [], datetime.now(timezone.utc), ClusterNetwork()).actions:
        if isinstance(action, CreateReplica):
            metadata = {**action.pod.get("metadata", {}), "name": action.name}
            client.create(PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
                                 "spec": {**action.pod["spec"], "automountServiceAccountToken": False}}, "default")
            pods.append((action.name, metadata.get("labels") or {}))
    return pods


def wait_until_ok(argv: list[str], env: dict) -> None:
    """CRDs take a moment to be served after install."""
    wait_until(lambda: subprocess.run(argv, env=env, capture_output=True).returncode == 0, what=" ".join(argv))


def wait_until(ready, what: str = "pods bound to the node") -> None:
    deadline = time.monotonic() + 60
    while not ready():
        if time.monotonic() > deadline:
            sys.exit(f"setup failed: {what}")
        time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000, help="lines per replica")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--skip-kubernetes", action="store_true")
    args = parser.parse_args()
    trainctl = installed_trainctl(Path(tempfile.mkdtemp(prefix="bench-logs-install-")))
    load_before = os.getloadavg()
    rows = local_rows(trainctl, args.lines, args.runs)
    if not args.skip_kubernetes:
        rows += kubernetes_rows(trainctl, args.lines, args.runs)
    write_section("logs-throughput", f"Logs throughput: 2 replicas x {args.lines:,} lines into a pipe",
                  f"python -m benchmarks.logs_throughput --lines {args.lines} --runs {args.runs}", rows,
                  notes=f"Median of {args.runs} alternating runs after one warm-up round; every command writes into "
                        "a pipe drained by `cat > /dev/null`; times include process start-up (trainctl's: the "
                        "`--tail 0` row). Kubernetes: kube-apiserver + etcd on loopback, pod logs served "
                        "over HTTPS by the tests/cluster node fixture (a Python stand-in for kubelet). trainctl "
                        f"installed from a wheel as `pip install .` installs it; load average (1 min) {load_before[0]:.2f} before, "
                        f"{os.getloadavg()[0]:.2f} after.")
    for row in rows:
        print(f"{row.what:60s} {row.median:7.3f} s" + (f"  ({row.ratio:.2f}x {row.baseline})" if row.ratio else ""))


if __name__ == "__main__":
    main()
