"""Controller scale: N PyTorchJobs (Master 1 + Worker 3) created at once on the test API server.

    python -m benchmarks.controller_scale [--sizes 100,500,1000] [--runs 3] [--concurrency 8]

For each N, in a fresh etcd + kube-apiserver, alternating runs of:
* ``controller``: create N jobs; `trainctl controller run` makes 4N pods and 4N headless
  services; once they all exist, a node process (tests/cluster FakeNode) binds every pod and
  marks it Running (started only then, so it does not compete with creation in either mode).
  Measured: seconds until every pod and service exists, until every job is Running, API
  requests per job by verb (from the controller's /metrics), controller CPU seconds and
  peak RSS (/proc).
* ``baseline``: a bare client (the same REST client, as many threads, no reconcile logic)
  creates the same 4N pods and 4N services as fast as it can: the API server's own limit.
* ``every write``: a bare client making every write the controller mode makes (the N jobs,
  then per job 4 pods, 4 services, 1 event and the Created status): the bound for any operator.
Throughput ratio = baseline seconds / controller seconds (1.0 = as fast as the bare client).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.record import Row, median, write_section
from tests.cluster.server import TestCluster, cached_apiserver, free_port

ROOT = Path(__file__).resolve().parents[1]
REPLICAS = {"Master": 1, "Worker": 3}
PODS_PER_JOB = 4
TARGET_THROUGHPUT, TARGET_RSS_MB, TARGET_STATUS_WRITES = 0.8, 250, 2


def job_body(name: str, namespace: str) -> dict:
    container = {"name": "pytorch", "image": "busybox", "command": ["python", "train.py"]}
    specs = {rtype: {"replicas": count, "template": {"spec": {"containers": [container]}}}
             for rtype, count in REPLICAS.items()}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": namespace},
            "spec": {"pytorchReplicaSpecs": specs}}


def child_bodies(name: str, namespace: str) -> list[tuple]:
    """The pods and services the reconcile core asks for, as the controller sends them."""
    from trainctl.core.actions import CreateReplica, CreateService
    from trainctl.core.network import ClusterNetwork
    from trainctl.core.reconcile import reconcile
    from trainctl.kube.client import PODS, SERVICES

    resource = {**job_body(name, namespace), "metadata": {"name": name, "namespace": namespace, "uid": "0"}}
    bodies = []
    for action in reconcile(resource, [], _now(), ClusterNetwork()).actions:
        if isinstance(action, CreateReplica):
            bodies.append((PODS, {"apiVersion": "v1", "kind": "Pod", "metadata": {
                **action.pod.get("metadata", {}), "name": action.name, "labels": action.labels},
                "spec": action.pod["spec"]}))
        elif isinstance(action, CreateService):
            bodies.append((SERVICES, {"apiVersion": "v1", "kind": "Service", "metadata": {
                "name": action.name, "labels": action.labels},
                "spec": {"clusterIP": "None", "selector": action.labels, "ports": action.ports}}))
    return bodies


def event_body(job: dict) -> dict:
    meta = job["metadata"]
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{meta['name']}.bench", "namespace":
            meta["namespace"]}, "involvedObject": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
            "type": "Normal", "reason": "PyTorchJobCreated", "message": "created", "count": 1,
            "firstTimestamp": _stamp(), "lastTimestamp": _stamp(), "source": {"component": "bench"}}


def _stamp() -> str:
    from trainctl.core.reconcile import rfc3339

    return rfc3339(_now())


class Counter:
    """Watches a namespace's pods, services and jobs; wakes waiters when counts reach targets."""

    def __init__(self, client, namespace: str) -> None:
        from trainctl.controller.informer import Informer
        from trainctl.frameworks import by_kind
        from trainctl.kube import job_resource
        from trainctl.kube.client import PODS, SERVICES

        self.pods, self.services = Informer(client, PODS, namespace), Informer(client, SERVICES, namespace)
        self.jobs = Informer(client, job_resource(by_kind("PyTorchJob")), namespace)
        for informer in (self.pods, self.services, self.jobs):
            informer.start().synced.wait(30)

    def stop(self) -> None:
        for informer in (self.pods, self.services, self.jobs):
            informer.stop()

    def created(self) -> int:
        return min(len(self.pods.cache), len(self.services.cache))

    def pods_running(self) -> int:
        return sum(1 for p in self.pods.items() if (p.get("status") or {}).get("phase") == "Running")

    def jobs_running(self) -> int:
        def is_running(job: dict) -> bool:
            conditions = (job.get("status") or {}).get("conditions") or []
            return any(c["type"] == "Running" and c["status"] == "True" for c in conditions)
        return sum(1 for job in self.jobs.items() if is_running(job))


def wait(predicate, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark run did not finish")
        time.sleep(0.02)
    return time.monotonic()


class Bench:
    def __init__(self, cluster: TestCluster, concurrency: int) -> None:
        from trainctl.kube.client import connect

        self.cluster, self.concurrency = cluster, concurrency
        self.kubeconfig = str(cluster.kubeconfig("admin"))
        self.client = connect(kubeconfig=self.kubeconfig)
        self.env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def namespace(self, name: str) -> str:
        from trainctl.kube.client import NAMESPACES

        self.client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        return name

    def node(self, namespace: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "benchmarks.controller_scale", "--node", namespace,
                                 "--cluster-dir", str(self.cluster.workdir), "--apiserver", str(self.cluster.apiserver)],
                                env=self.env, cwd=ROOT)

    def parallel(self, calls: list) -> None:
        with ThreadPoolExecutor(self.concurrency) as pool:
            for future in [pool.submit(call) for call in calls]:
                future.result()

    def run_baseline(self, n: int, label: str) -> dict:
        namespace = self.namespace(label)
        counter = Counter(self.client, namespace)
        # the same pod and service bodies the controller sends, computed before the clock starts
        bodies = [body for i in range(n) for body in child_bodies(f"j{i}", namespace)]
        start = time.monotonic()
        self.parallel([lambda r=r, b=b: self.client.create(r, b, namespace) for r, b in bodies])
        created = wait(lambda: counter.created() >= PODS_PER_JOB * n, 600)
        node = self.node(namespace)
        running = wait(lambda: counter.pods_running() >= PODS_PER_JOB * n, 900)
        counter.stop()
        node.terminate()
        return {"created_s": created - start, "running_s": running - start}

    def run_every_write(self, n: int, label: str) -> dict:
        """A bare client making every write the controller mode makes: the bound for any operator.

        As many threads create the jobs as in the controller mode; as many more take each created
        job and write what the controller writes for it: 4 pods and 4 services (owned by the job),
        one event and the Created status.
        """
        from trainctl.frameworks import by_kind
        from trainctl.kube import job_resource
        from trainctl.kube.client import EVENTS

        namespace = self.namespace(label)
        counter = Counter(self.client, namespace)
        resource = job_resource(by_kind("PyTorchJob"))
        jobs = [job_body(f"j{i}", namespace) for i in range(n)]
        children = {f"j{i}": child_bodies(f"j{i}", namespace) for i in range(n)}
        created_jobs: queue.Queue = queue.Queue()

        def write_for(job: dict) -> None:
            name, uid = job["metadata"]["name"], job["metadata"]["uid"]
            owner = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": name, "uid": uid,
                     "controller": True, "blockOwnerDeletion": True}
            for kind_of, body in children[name]:
                self.client.create(kind_of, {**body, "metadata": {**body["metadata"], "ownerReferences": [owner]}},
                                   namespace)
            self.client.create(EVENTS, event_body(job), namespace)
            status = {"conditions": [{"type": "Created", "status": "True", "reason": "PyTorchJobCreated",
                                      "lastUpdateTime": _stamp(), "lastTransitionTime": _stamp()}]}
            self.client.replace(resource, {**job, "status": status}, namespace, subresource="status")

        def worker() -> None:
            while (job := created_jobs.get()) is not None:
                write_for(job)

        start = time.monotonic()
        with ThreadPoolExecutor(2 * self.concurrency) as pool:
            workers = [pool.submit(worker) for _ in range(self.concurrency)]
            creators = [pool.submit(lambda b=b: created_jobs.put(self.client.create(resource, b, namespace)))
                        for b in jobs]
            for future in creators:
                future.result()
            for _ in workers:
                created_jobs.put(None)
            for future in workers:
                future.result()
        created = wait(lambda: counter.created() >= PODS_PER_JOB * n, 600)
        counter.stop()
        return {"created_s": created - start}

    def run_controller(self, n: int, label: str) -> dict:
        from trainctl.frameworks import by_kind
        from trainctl.kube import job_resource

        namespace = self.namespace(label)
        counter = Counter(self.client, namespace)
        metrics_port, health_port = free_port(), free_port()
        controller = subprocess.Popen(
            [sys.executable, "-m", "trainctl", "controller", "run", "--kubeconfig", self.kubeconfig, "-n", namespace,
             "--concurrency", str(self.concurrency), "--metrics-addr", f"127.0.0.1:{metrics_port}",
             "--health-addr", f"127.0.0.1:{health_port}"], env=self.env, cwd=ROOT, stderr=subprocess.DEVNULL)
        wait(lambda: http_ok(f"http://127.0.0.1:{health_port}/readyz"), 60)
        resource = job_resource(by_kind("PyTorchJob"))
        start = time.monotonic()
        self.parallel([lambda i=i: self.client.create(resource, job_body(f"j{i}", namespace), namespace)
                       for i in range(n)])
        created = wait(lambda: counter.created() >= PODS_PER_JOB * n, 600)
        node = self.node(namespace)
        running = wait(lambda: counter.jobs_running() >= n, 900)
        time.sleep(1)  # let the last status writes land before reading the counters
        requests = scrape(f"http://127.0.0.1:{metrics_port}/metrics", "trainctl_api_requests")
        cpu_s, peak_mb = process_usage(controller.pid)
        controller.send_signal(signal.SIGTERM)
        controller.wait(60)
        counter.stop()
        node.terminate()
        return {"created_s": created - start, "running_s": running - start, "cpu_s": cpu_s, "peak_mb": peak_mb,
                "requests": requests}


def _now():
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)


def http_ok(url: str) -> bool:
    import urllib.request

    try:
        return urllib.request.urlopen(url, timeout=2).status == 200
    except OSError:
        return False


def scrape(url: str, name: str) -> dict[str, float]:
    """One labelled gauge from a /metrics page: {verb: value}."""
    import re
    import urllib.request

    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return {m[1]: float(m[2]) for m in re.finditer(rf'^{name}{{verb="([^"]+)"}} (\S+)$', text, re.M)}


def process_usage(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) and peak RSS in MB of a running process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    status = Path(f"/proc/{pid}/status").read_text()
    peak_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    return cpu, peak_kb / 1024


def run_node(namespace: str, cluster_dir: str, apiserver: str) -> None:
    """The node process: FakeNode binds and starts every pod of one namespace until terminated."""
    from tests.cluster.kubelet import FakeNode

    cluster = TestCluster(Path(cluster_dir), Path(apiserver))
    node = FakeNode(cluster, Path(tempfile.mkdtemp(prefix="bench-node-")), name=f"node-{namespace}").start()
    node.manage(namespace)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()
    node.stop()


def node_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The hidden options a benchmark's node process is started with (``--node NAMESPACE``)."""
    for name in ("--node", "--cluster-dir", "--apiserver"):
        parser.add_argument(name, help=argparse.SUPPRESS)
    return parser


def main() -> None:
    parser = node_options(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--sizes", default="100,500,1000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    if args.node:
        run_node(args.node, args.cluster_dir, args.apiserver)
        return
    binary = cached_apiserver() or sys.exit("needs the cached kube-apiserver: run bash scripts/build-apiserver.sh")
    rows, notes = [], []
    for n in [int(size) for size in args.sizes.split(",")]:
        rows += measure(binary, n, args.runs, args.concurrency, notes)
    command = f"python -m benchmarks.controller_scale --sizes {args.sizes} --runs {args.runs} " \
              f"--concurrency {args.concurrency}"
    write_section("controller-scale", "Controller scale against a bare client", command, rows,
                  notes="\n".join(notes))
    for row in rows:
        print(f"{row.what:55s} {row.median:10.2f} {row.unit:8s}" + (f" {row.ratio:.2f}x" if row.ratio else ""))


@contextlib.contextmanager
def fresh_cluster(binary: Path, prefix: str) -> Iterator[TestCluster]:
    """A new etcd + kube-apiserver with trainctl's CRDs served; removed afterwards."""
    cluster = TestCluster(Path(tempfile.mkdtemp(prefix=prefix)), binary).start()
    try:
        subprocess.run([sys.executable, "-m", "trainctl", "crds", "install", "--kubeconfig",
                        str(cluster.kubeconfig("admin"))], check=True, capture_output=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
        time.sleep(2)  # new CRDs take a moment to be served
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(cluster.workdir, ignore_errors=True)


def measure(binary: Path, n: int, runs: int, concurrency: int, notes: list[str]) -> list[Row]:
    with fresh_cluster(binary, f"bench-scale-{n}-") as cluster:
        bench = Bench(cluster, concurrency)
        base, every, ours = [], [], []
        for r in range(runs):  # alternate, so drift on a shared machine hits every mode alike
            base.append(bench.run_baseline(n, f"base-{n}-{r}"))
            every.append(bench.run_every_write(n, f"all-{n}-{r}"))
            ours.append(bench.run_controller(n, f"ctl-{n}-{r}"))
            print(f"N={n} run {r}: baseline {base[-1]}, every write {every[-1]}, controller {ours[-1]}",
                  file=sys.stderr)
    return rows_for(n, base, every, ours, notes)


def rows_for(n: int, base: list[dict], every: list[dict], ours: list[dict], notes: list[str]) -> list[Row]:
    base_created = median([b["created_s"] for b in base])
    every_created = median([e["created_s"] for e in every])
    created = median([o["created_s"] for o in ours])
    throughput = base_created / created
    verbs: dict[str, float] = {}
    for run in ours:
        for verb, count in run["requests"].items():
            verbs.setdefault(verb, []).append(count / n)
    per_job = {verb: median(values) for verb, values in verbs.items()}
    status_writes = per_job.get("update/status", 0)
    peak = median([o["peak_mb"] for o in ours])
    final = n == 1000
    rows = [
        Row(f"N={n}: bare client, all {PODS_PER_JOB * n} pods + services exist", base_created, "s"),
        Row(f"N={n}: controller, all pods + services exist", created, "s", "bare client", 1 / throughput,
            f"throughput >= {TARGET_THROUGHPUT} x bare client" if final else "",
            ("met" if throughput >= TARGET_THROUGHPUT else "missed") + f" ({throughput:.2f}x)" if final else ""),
        Row(f"N={n}: bare client making every write of the controller mode, all pods + services exist",
            every_created, "s"),
        Row(f"N={n}: controller against that bound", created, "s", "every write, bare", created / every_created),
        Row(f"N={n}: controller, every job Running", median([o["running_s"] for o in ours]), "s", "bare client: "
            f"all pods Running {median([b['running_s'] for b in base]):.2f} s"),
        Row(f"N={n}: controller API requests per job (all verbs)", sum(per_job.values()), "req"),
        Row(f"N={n}: status writes per job (Created, then Running)", status_writes, "req", "", None,
            f"<= {TARGET_STATUS_WRITES} per phase change",
            "met" if status_writes <= 2 * TARGET_STATUS_WRITES else "missed"),
        Row(f"N={n}: controller CPU", median([o["cpu_s"] for o in ours]), "s"),
        Row(f"N={n}: controller peak RSS", peak, "MB", "", None, f"<= {TARGET_RSS_MB} MB" if final else "",
            ("met" if peak <= TARGET_RSS_MB else "missed") if final else ""),
    ]
    notes.append(f"- N={n}: requests per job by verb (median of runs): "
                 + ", ".join(f"{verb} {value:.2f}" for verb, value in sorted(per_job.items())))
    return rows


if __name__ == "__main__":
    main()
