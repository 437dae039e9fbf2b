"""What keeping records costs the controller: N PyTorchJobs run to their end, with records and without.

    python -m benchmarks.records [--sizes 100,1000] [--runs 2] [--log-kib 64]

For each N, in a fresh etcd + kube-apiserver, alternating runs of ``trainctl controller run`` as it is (it keeps
every replica's ended run: trainctl/controller/records.py) and with ``--no-keep-records`` (the baseline, measured
in the same run):

* N jobs (Master 1 + Worker 3, ``cleanPodPolicy: All``) are created; a node process (tests/cluster FakeNode) binds
  and starts every pod, writes its log (``--log-kib`` KiB of lines, a progress report every 20 lines), then ends
  it (workers first, then the master) with exit code 0.
* Measured: seconds until every job Succeeded and its pods are gone; the controller's API requests per job by
  verb (its /metrics); records and their stored bytes per job (the ConfigMaps' data and annotation as stored);
  the controller's CPU seconds and peak RSS.
"""

from __future__ import annotations

import argparse
import base64
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks import controller_scale as scale
from benchmarks.controller_scale import Counter, http_ok, process_usage, scrape, wait
from benchmarks.record import Row, median, write_section
from tests.cluster.server import TestCluster, cached_apiserver, free_port

ROOT = Path(__file__).resolve().parents[1]
REPLICAS = {"Master": 1, "Worker": 3}
PODS_PER_JOB = 4
TARGET_RSS_MB = 250


def job_body(name: str, namespace: str) -> dict:
    container = {"name": "pytorch", "image": "busybox", "command": ["python", "train.py"]}
    specs = {rtype: {"replicas": count, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}
             for rtype, count in REPLICAS.items()}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": namespace},
            "spec": {"pytorchReplicaSpecs": specs, "runPolicy": {"cleanPodPolicy": "All"}}}


def log_text(pod: str, kib: int) -> str:
    """About ``kib`` KiB of a training run's output: lines of numbers, a progress report every 20th."""
    lines, size, step = [], 0, 0
    while size < kib * 1024:
        step += 1
        line = (f'trainctl-progress:v1 [[{time.time():.3f},{step},100000,{{"loss":{1 / step:.6f}}}]]'
                if step % 20 == 0 else f"{pod} step {step} loss {1 / step:.6f} lr 0.001 throughput 1234.5 samples/s")
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) + "\n"


class Bench:
    """Runs in one cluster, each in a namespace of its own."""

    def __init__(self, cluster: TestCluster, log_kib: int) -> None:
        from trainctl.kube.client import connect

        self.cluster, self.log_kib = cluster, log_kib
        self.kubeconfig = str(cluster.kubeconfig("admin"))
        self.client = connect(kubeconfig=self.kubeconfig)
        self.env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def namespace(self, name: str) -> str:
        from trainctl.kube.client import NAMESPACES

        self.client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        return name

    def run(self, n: int, label: str, keep: bool) -> dict:
        from trainctl.frameworks import by_kind
        from trainctl.kube import job_resource

        namespace = self.namespace(label)
        counter = Counter(self.client, namespace)
        metrics_port, health_port = free_port(), free_port()
        controller = subprocess.Popen(
            [sys.executable, "-m", "trainctl", "controller", "run", "--kubeconfig", self.kubeconfig, "-n", namespace,
             "--metrics-addr", f"127.0.0.1:{metrics_port}", "--health-addr", f"127.0.0.1:{health_port}",
             *([] if keep else ["--no-keep-records"])], env=self.env, cwd=ROOT, stderr=subprocess.DEVNULL)
        wait(lambda: http_ok(f"http://127.0.0.1:{health_port}/readyz"), 60)
        node = subprocess.Popen([sys.executable, "-m", "benchmarks.records", "--node", namespace, "--cluster-dir",
                                 str(self.cluster.workdir), "--apiserver", str(self.cluster.apiserver),
                                 "--log-kib", str(self.log_kib)], env=self.env, cwd=ROOT)
        resource = job_resource(by_kind("PyTorchJob"))
        start = time.monotonic()
        for i in range(n):
            self.client.create(resource, job_body(f"j{i}", namespace), namespace)
        done = wait(lambda: succeeded(counter) >= n and not counter.pods.cache, 1800)
        time.sleep(2)  # the last records land before the counters are read
        requests = scrape(f"http://127.0.0.1:{metrics_port}/metrics", "trainctl_api_requests")
        cpu_s, peak_mb = process_usage(controller.pid)
        records, stored = self.stored(namespace)
        controller.send_signal(signal.SIGTERM)
        controller.wait(60)
        node.terminate()
        node.wait(30)
        counter.stop()
        return {"done_s": done - start, "requests": requests, "cpu_s": cpu_s, "peak_mb": peak_mb,
                "records": records, "stored": stored}

    def stored(self, namespace: str) -> tuple[int, int]:
        """The records in the namespace and the bytes they hold (data as stored, and the runs' annotation)."""
        from trainctl.backends.kube import records as fmt
        from trainctl.kube.client import CONFIGMAPS

        items = self.client.list(CONFIGMAPS, namespace, f"{fmt.RECORD_LABEL}={fmt.FORMAT}")["items"]
        size = sum(len(base64.b64decode(value)) for item in items for value in (item.get("binaryData") or {}).values())
        size += sum(len(item["metadata"]["annotations"][fmt.RECORD_ANNOTATION]) for item in items)
        return len(items), size


def succeeded(counter: Counter) -> int:
    return sum(1 for job in counter.jobs.items() if any(
        c["type"] == "Succeeded" and c["status"] == "True" for c in (job.get("status") or {}).get("conditions") or []))


def run_node(namespace: str, cluster_dir: str, apiserver: str, log_kib: int) -> None:
    """The node process: starts every pod of the namespace, writes its log, ends it (workers before masters)."""
    from tests.cluster.kubelet import FakeNode

    cluster = TestCluster(Path(cluster_dir), Path(apiserver))
    node = FakeNode(cluster, Path(tempfile.mkdtemp(prefix="bench-node-")), name=f"node-{namespace}").start()
    node.manage(namespace)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    ended: set[str] = set()
    while not stop.wait(0.2):
        running = {pod["metadata"]["name"]: pod for pod in node.pod_watch.items()
                   if (pod.get("status") or {}).get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")}
        for name in sorted(running, key=lambda pod: "master" in pod):  # workers first: the job ends with its master
            job = name.rsplit("-", 2)[0]
            if name in ended or ("master" in name and not all(f"{job}-worker-{i}" in ended for i in range(3))):
                continue
            node.write_log(namespace, name, "pytorch", log_text(name, log_kib))
            end(node, namespace, running[name])
            ended.add(name)
    node.stop()


def end(node, namespace: str, pod: dict) -> None:
    """The pod's container exits 0 (one status patch, as kubelet writes it)."""
    from tests.cluster.kubelet import now
    from trainctl.kube.client import PODS

    statuses = [{"name": c["name"], "image": c.get("image", ""), "imageID": "", "ready": False, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now(),
                                          "finishedAt": now()}}} for c in pod["spec"]["containers"]]
    node.rest.patch(PODS, pod["metadata"]["name"], {"status": {"phase": "Succeeded", "containerStatuses": statuses}},
                    namespace, "status")
    with node.lock:
        node.finished.add((namespace, pod["metadata"]["name"]))
        node.lock.notify_all()


def main() -> None:
    parser = scale.node_options(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--log-kib", type=int, default=64)
    args = parser.parse_args()
    if args.node:
        run_node(args.node, args.cluster_dir, args.apiserver, args.log_kib)
        return
    binary = cached_apiserver() or sys.exit("needs the cached kube-apiserver: run bash scripts/build-apiserver.sh")
    rows, notes = [], []
    for n in [int(size) for size in args.sizes.split(",")]:
        rows += measure(binary, n, args.runs, args.log_kib, notes)
    command = f"python -m benchmarks.records --sizes {args.sizes} --runs {args.runs} --log-kib {args.log_kib}"
    write_section("records", "Kept records: what they cost the controller", command, rows, notes="\n".join(notes))
    for row in rows:
        print(f"{row.what:70s} {row.median:12.2f} {row.unit:6s}" + (f" {row.ratio:.2f}x" if row.ratio else ""))


def measure(binary: Path, n: int, runs: int, log_kib: int, notes: list[str]) -> list[Row]:
    with scale.fresh_cluster(binary, f"bench-records-{n}-") as cluster:
        bench = Bench(cluster, log_kib)
        kept, bare = [], []
        for r in range(runs):  # alternate, so drift on a shared machine hits both alike
            bare.append(bench.run(n, f"bare-{n}-{r}", keep=False))
            kept.append(bench.run(n, f"kept-{n}-{r}", keep=True))
            print(f"N={n} run {r}: without records {bare[-1]}, with records {kept[-1]}", file=sys.stderr)
    return rows_for(n, kept, bare, notes)


def per_job(runs: list[dict], n: int) -> dict[str, float]:
    verbs: dict[str, list[float]] = {}
    for run in runs:
        for verb, count in run["requests"].items():
            verbs.setdefault(verb, []).append(count / n)
    return {verb: median(values) for verb, values in verbs.items()}


def rows_for(n: int, kept: list[dict], bare: list[dict], notes: list[str]) -> list[Row]:
    with_records, without = per_job(kept, n), per_job(bare, n)
    writes = with_records.get("create", 0) + with_records.get("update", 0) - without.get("create", 0) \
        - without.get("update", 0)
    done, done_bare = median([k["done_s"] for k in kept]), median([b["done_s"] for b in bare])
    peak, peak_bare = median([k["peak_mb"] for k in kept]), median([b["peak_mb"] for b in bare])
    cpu, cpu_bare = median([k["cpu_s"] for k in kept]), median([b["cpu_s"] for b in bare])
    stored = median([k["stored"] / n for k in kept]) / 1024
    final = n == 1000
    rows = [
        Row(f"N={n}: every job Succeeded and its pods removed, with records", done, "s",
            f"without: {done_bare:.2f} s", done / done_bare),
        Row(f"N={n}: API requests per job, all verbs, with records", sum(with_records.values()), "req",
            f"without: {sum(without.values()):.2f}", sum(with_records.values()) / sum(without.values())),
        Row(f"N={n}: API writes per job for records (creates and updates beyond the baseline's)", writes, "req"),
        Row(f"N={n}: records kept per job", median([k["records"] / n for k in kept]), ""),
        Row(f"N={n}: bytes the records of a job hold in etcd", stored, "KiB", "", None,
            "<= 8192 KiB (a job's bound)", "met" if stored <= 8192 else "missed"),
        Row(f"N={n}: controller CPU", cpu, "s", f"without: {cpu_bare:.2f} s", cpu / cpu_bare),
        Row(f"N={n}: controller peak RSS", peak, "MB", f"without: {peak_bare:.1f} MB", peak / peak_bare,
            f"<= {TARGET_RSS_MB} MB" if final else "", ("met" if peak <= TARGET_RSS_MB else "missed") if final else ""),
    ]
    notes.append(f"- N={n}: requests per job by verb, with records: "
                 + ", ".join(f"{verb} {value:.2f}" for verb, value in sorted(with_records.items()))
                 + "; without: " + ", ".join(f"{verb} {value:.2f}" for verb, value in sorted(without.items())))
    return rows


if __name__ == "__main__":
    main()
