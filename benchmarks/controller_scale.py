"""Controller scale: N PyTorchJobs (Master 1 + Worker 3) created at once on the test API server.

    python -m benchmarks.controller_scale [--sizes 5000] [--runs 1] [--concurrency 8] [--qps 20,unthrottled]

For each N, every mode runs in a fresh etcd + kube-apiserver of its own (an etcd already holding
another mode's 40,000 objects would slow the later modes), modes alternating when --runs > 1:

* ``bare client``: a bare client (trainctl's REST client, as many threads, no reconcile logic)
  creates the 4N pods and 4N headless services the controller would: the API server's own pace.
  Not in a paced run (--rate), which measures latency below that pace.
* ``same writes``: the N jobs created as in the controller mode, and a writer process (trainctl's REST
  client, a watch of the jobs, as many workers as the controller has, no reconcile logic) that makes
  every write the controller makes for each job it sees: its 4 pods and 4 services owned by it, one
  event and the Created status. The bound for any operator on this server: its time and its per-job
  latency.
* ``controller``: the N jobs are created the same way and ``trainctl controller run`` (with the
  --kube-api-qps/--kube-api-burst of --qps: a number is that QPS with upstream's burst ratio 1.5,
  ``unthrottled`` no client-side limit) makes the pods and services. Once they all exist a node
  process (tests/cluster FakeNode) binds every pod and marks it Running, and the controller writes
  each job's Running condition.

Measured: seconds until every pod and service exists (against the same-writes bound), each job's
latency from its creation (its create call answered) to its 4 pods seen created (p50, p99), seconds
until every job is Running, the controller's API requests per job by verb (its /metrics), status
writes per job per phase change, its CPU seconds and peak RSS (/proc), and the seconds its requests
waited for --kube-api-qps tokens. Progress is printed to stderr every PROGRESS_S while a mode runs.

Interrupting the benchmark (Ctrl-C, SIGTERM, SIGHUP, an error) stops everything it started: the
API server and etcd (tests/cluster/server.py), the controller and the node process. ``--controller-only``
runs the controller modes alone and records nothing (tests/k8s/test_cluster_cleanup.py interrupts one).
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
from tests.cluster.server import TestCluster, cached_apiserver, free_port, stop_when_interrupted

ROOT = Path(__file__).resolve().parents[1]
REPLICAS = {"Master": 1, "Worker": 3}
PODS_PER_JOB = 4
TARGET_BOUND_RATIO, TARGET_RSS_MB, TARGET_P99_S, TARGET_STATUS_WRITES = 1.05, 400, 5.0, 2
PROGRESS_S = 15
PHASE_CHANGES = 2  # Created, then Running
BURST_PER_QPS = 1.5  # upstream's 20/30
DEFAULT_QPS = "20,unthrottled"  # upstream's default, and none


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


def _now():
    from datetime import datetime, timezone

    return datetime.now(timezone.utc)


class Counter:
    """Watches a namespace's pods, services and jobs: counts, and when each job's pods were first seen."""

    def __init__(self, client, namespace: str) -> None:
        from trainctl.controller.informer import Informer
        from trainctl.frameworks import by_kind
        from trainctl.kube import job_resource
        from trainctl.kube.client import PODS, SERVICES

        self.pods, self.services = Informer(client, PODS, namespace), Informer(client, SERVICES, namespace)
        self.jobs = Informer(client, job_resource(by_kind("PyTorchJob")), namespace)
        self.pods_seen: dict[str, list[float]] = {}  # job name -> when each of its pods was first seen
        self.pods.handlers.append(self.on_pod)
        for informer in (self.pods, self.services, self.jobs):
            informer.start().synced.wait(30)

    def on_pod(self, event: str, pod: dict) -> None:
        if event == "ADDED":
            job = (pod["metadata"].get("labels") or {}).get("training.kubeflow.org/job-name", "")
            self.pods_seen.setdefault(job, []).append(time.monotonic())

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

    def latencies(self, created_at: dict[str, float]) -> list[float]:
        """Per job: from its creation to the last of its pods seen."""
        return [max(self.pods_seen[name]) - at for name, at in created_at.items()
                if len(self.pods_seen.get(name, ())) >= PODS_PER_JOB]


def wait(predicate, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("benchmark run did not finish")
        time.sleep(0.05)
    return time.monotonic()


class Progress:
    """A line on stderr every PROGRESS_S while a mode runs: how far it got."""

    def __init__(self, label: str, n: int, counter: Counter, created_jobs) -> None:
        self.label, self.n, self.counter, self.created_jobs = label, n, counter, created_jobs
        self.started, self.done = time.monotonic(), threading.Event()
        threading.Thread(target=self.run, daemon=True).start()

    def run(self) -> None:
        while not self.done.wait(PROGRESS_S):
            counter = self.counter
            print(f"[{time.monotonic() - self.started:6.0f}s] {self.label}: jobs {self.created_jobs()}/{self.n}, "
                  f"pods {len(counter.pods.cache)}/{PODS_PER_JOB * self.n}, services {len(counter.services.cache)}/"
                  f"{PODS_PER_JOB * self.n}, pods running {counter.pods_running()}, jobs running "
                  f"{counter.jobs_running()}", file=sys.stderr, flush=True)

    def stop(self) -> None:
        self.done.set()


class Bench:
    """One mode's run in a fresh cluster; every process it starts is stopped however the run ends."""

    def __init__(self, binary: Path, concurrency: int, label: str, rate: float | None = None,
                 profile_dir: str | None = None) -> None:
        self.binary, self.concurrency, self.label, self.rate = binary, concurrency, label, rate
        self.profile_dir = profile_dir
        self.children: list[subprocess.Popen] = []
        self.cluster: TestCluster | None = None
        self.stack = contextlib.ExitStack()  # the cluster, stopped and removed on exit
        self.env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def __enter__(self) -> Bench:
        from trainctl.kube.client import NAMESPACES, connect

        self.cluster = self.stack.enter_context(fresh_cluster(self.binary, "bench-scale-"))
        print(f"{self.label}: cluster in {self.cluster.workdir}", file=sys.stderr, flush=True)
        self.kubeconfig = str(self.cluster.kubeconfig("admin"))
        self.client = connect(kubeconfig=self.kubeconfig)
        self.client.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}})
        wait(self.crds_served, 30)
        self.counter = Counter(self.client, "bench")
        return self

    def crds_served(self) -> bool:
        from trainctl.frameworks import by_kind
        from trainctl.kube import job_resource
        from trainctl.kube.client import ApiError

        try:
            self.client.list(job_resource(by_kind("PyTorchJob")), "bench")
            return True
        except ApiError:
            return False

    def __exit__(self, *exc) -> None:
        for child in reversed(self.children):
            if child.poll() is None:
                child.terminate()
                try:
                    child.wait(60)
                except subprocess.TimeoutExpired:
                    child.kill()
        if getattr(self, "counter", None):
            self.counter.stop()
        self.stack.close()

    def profile(self, pid: int, label: str) -> subprocess.Popen | None:
        """With --profile DIR, py-spy samples the controller (every thread, waits included) into DIR as collapsed
        stacks (flamegraph.pl's input) until the pods and services all exist."""
        if not self.profile_dir:
            return None
        spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        output = Path(self.profile_dir) / f"controller-{label.replace(' ', '-')}.txt"
        return self.start([spy, "record", "--pid", str(pid), "--rate", "50", "--idle", "--threads", "--format", "raw",
                           "--output", str(output), "--nonblocking"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)

    def start(self, argv: list[str], **options) -> subprocess.Popen:
        self.children.append(subprocess.Popen(argv, env=self.env, cwd=ROOT, **options))
        return self.children[-1]

    def node(self) -> subprocess.Popen:
        return self.start([sys.executable, "-m", "benchmarks.controller_scale", "--node", "bench", "--cluster-dir",
                           str(self.cluster.workdir), "--apiserver", str(self.cluster.apiserver)])

    def create_jobs(self, n: int, created_at: dict[str, float]) -> None:
        """The N jobs, by ``concurrency`` threads, at once or (``rate``) that many a second; when each was created
        (its create answered)."""
        from trainctl.frameworks import by_kind
        from trainctl.kube import job_resource

        resource, begun = job_resource(by_kind("PyTorchJob")), time.monotonic()

        def create(i: int) -> None:
            if self.rate:
                time.sleep(max(0.0, begun + i / self.rate - time.monotonic()))
            job = self.client.create(resource, job_body(f"j{i}", "bench"), "bench")
            created_at[job["metadata"]["name"]] = time.monotonic()

        with ThreadPoolExecutor(self.concurrency) as pool:
            for future in [pool.submit(create, i) for i in range(n)]:
                future.result()

    # ---- the modes -------------------------------------------------------------------------------
    def bare_client(self, n: int) -> dict:
        bodies = [body for i in range(n) for body in child_bodies(f"j{i}", "bench")]  # before the clock starts
        progress = Progress(self.label, n, self.counter, lambda: 0)
        start = time.monotonic()
        try:
            with ThreadPoolExecutor(self.concurrency) as pool:
                for future in [pool.submit(self.client.create, r, b, "bench") for r, b in bodies]:
                    future.result()
            created = wait(lambda: self.counter.created() >= PODS_PER_JOB * n, 3600)
        finally:
            progress.stop()
        return {"created_s": created - start}

    def same_writes(self, n: int) -> dict:
        """The jobs created as in the controller mode; a writer process of its own (:func:`run_writer`), told of
        each job by a watch as an operator is, makes exactly the controller mode's writes for it, with no
        reconcile logic: the bound for any operator, its time and its per-job latency."""
        writer = self.start([sys.executable, "-m", "benchmarks.controller_scale", "--writer", "bench", "--jobs",
                             str(n), "--concurrency", str(self.concurrency), "--kubeconfig", self.kubeconfig],
                            stdout=subprocess.PIPE, text=True)
        assert writer.stdout.readline().strip() == "ready", "the writer process did not start"
        created_at: dict[str, float] = {}
        progress = Progress(self.label, n, self.counter, lambda: len(created_at))
        start = time.monotonic()
        try:
            self.create_jobs(n, created_at)
            created = wait(lambda: self.counter.created() >= PODS_PER_JOB * n, 4 * 3600)
        finally:
            progress.stop()
        return {"created_s": created - start, "latencies": self.counter.latencies(created_at)}

    def controller(self, n: int, qps: float | None) -> dict:
        metrics_port, health_port = free_port(), free_port()
        limits = ["--kube-api-qps", "-1"] if qps is None else \
            ["--kube-api-qps", f"{qps:g}", "--kube-api-burst", str(round(qps * BURST_PER_QPS))]
        controller = self.start([sys.executable, "-m", "trainctl", "controller", "run", "--kubeconfig",
                                 self.kubeconfig, "-n", "bench", "--concurrency", str(self.concurrency),
                                 "--metrics-addr", f"127.0.0.1:{metrics_port}", "--health-addr",
                                 f"127.0.0.1:{health_port}", *limits], stderr=subprocess.DEVNULL)
        wait(lambda: http_ok(f"http://127.0.0.1:{health_port}/readyz"), 60)
        created_at: dict[str, float] = {}
        progress = Progress(self.label, n, self.counter, lambda: len(created_at))
        profiler = self.profile(controller.pid, qps_label(qps))
        start = time.monotonic()
        try:
            self.create_jobs(n, created_at)
            created = wait(lambda: self.counter.created() >= PODS_PER_JOB * n, 4 * 3600)
            if profiler is not None:  # the creation phase only
                profiler.send_signal(signal.SIGINT)
                profiler.wait(60)
            self.node()
            running = wait(lambda: self.counter.jobs_running() >= n, 4 * 3600)
            time.sleep(1)  # let the last status writes land before reading the counters
        finally:
            progress.stop()
        metrics = f"http://127.0.0.1:{metrics_port}/metrics"
        requests, throttled = scrape(metrics, "trainctl_api_requests"), scrape(metrics, "trainctl_api_throttled_seconds")
        cpu_s, peak_mb = process_usage(controller.pid)
        controller.send_signal(signal.SIGTERM)
        controller.wait(60)
        return {"created_s": created - start, "running_s": running - start, "cpu_s": cpu_s, "peak_mb": peak_mb,
                "requests": requests, "throttled_s": throttled.get("", 0.0),
                "latencies": self.counter.latencies(created_at)}


def http_ok(url: str) -> bool:
    import urllib.request

    try:
        return urllib.request.urlopen(url, timeout=2).status == 200
    except OSError:
        return False


def scrape(url: str, name: str) -> dict[str, float]:
    """A gauge from a /metrics page: {verb label (or ""): value}."""
    import re
    import urllib.request

    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return {m[1] or "": float(m[2]) for m in re.finditer(rf'^{name}(?:{{verb="([^"]+)"}})? (\S+)$', text, re.M)}


def process_usage(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) and peak RSS in MB of a running process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    status = Path(f"/proc/{pid}/status").read_text()
    peak_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    return cpu, peak_kb / 1024


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else float("nan")


def run_writer(namespace: str, jobs: int, concurrency: int, kubeconfig: str) -> None:
    """The same-writes mode's process: for each job a watch shows, as ``concurrency`` workers of the controller
    would, 4 pods and 4 services owned by it, one event and the Created status; until terminated."""
    from trainctl.controller.informer import Informer
    from trainctl.frameworks import by_kind
    from trainctl.kube import job_resource
    from trainctl.kube.client import EVENTS, ApiError, connect

    client, resource = connect(kubeconfig=kubeconfig), job_resource(by_kind("PyTorchJob"))
    children = {f"j{i}": child_bodies(f"j{i}", namespace) for i in range(jobs)}  # before any job exists
    created: queue.Queue = queue.Queue()

    def write_for(job: dict) -> None:
        name, uid = job["metadata"]["name"], job["metadata"]["uid"]
        owner = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": name, "uid": uid,
                 "controller": True, "blockOwnerDeletion": True}
        made = [(kind_of, {**body, "metadata": {**body["metadata"], "ownerReferences": [owner]}})
                for kind_of, body in children[name]] + [(EVENTS, event_body(job))]
        for kind_of, body in made:
            try:
                client.create(kind_of, body, namespace)
            except ApiError as error:
                if error.status != 409:  # 409: already made by an earlier try
                    raise
        status = {"conditions": [{"type": "Created", "status": "True", "reason": "PyTorchJobCreated",
                                  "lastUpdateTime": _stamp(), "lastTransitionTime": _stamp()}]}
        client.replace(resource, {**job, "status": status}, namespace, subresource="status")

    def worker() -> None:  # as the controller's workers, a failed write is retried, never the end of a worker
        while True:
            job = created.get()
            try:
                write_for(job)
            except OSError as error:  # ApiError included: 409 when a retry finds what it made
                print(f"writer: {job['metadata']['name']}: {error}; again", file=sys.stderr, flush=True)
                created.put(job)

    informer = Informer(client, resource, namespace)
    informer.handlers.append(lambda event, job: created.put(job) if event == "ADDED" else None)
    for _ in range(concurrency):
        threading.Thread(target=worker, daemon=True).start()
    informer.start().synced.wait(30)
    print("ready", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()


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


@contextlib.contextmanager
def fresh_cluster(binary: Path, prefix: str) -> Iterator[TestCluster]:
    """A new etcd + kube-apiserver with trainctl's CRDs served; removed afterwards."""
    cluster = TestCluster(Path(tempfile.mkdtemp(prefix=prefix)), binary).start()
    try:
        subprocess.run([sys.executable, "-m", "trainctl", "crds", "install", "--kubeconfig",
                        str(cluster.kubeconfig("admin"))], check=True, capture_output=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
        crds_established(cluster)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(cluster.workdir, ignore_errors=True)


def crds_established(cluster: TestCluster) -> None:
    """New CRDs take a moment to be served: wait for each to be Established (up to a bound)."""
    from trainctl.controller.install import wait_established
    from trainctl.core.trainer_crds import project_crds
    from trainctl.kube.client import connect

    client = connect(kubeconfig=str(cluster.kubeconfig("admin")))
    wait_established(client, [crd["metadata"]["name"] for crd in project_crds("all")])


def qps_setting(text: str) -> float | None:
    return None if text == "unthrottled" else float(text)


def qps_label(qps: float | None) -> str:
    return "unthrottled" if qps is None else f"--kube-api-qps {qps:g}"


def main() -> None:
    parser = node_options(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    parser.add_argument("--sizes", default="5000")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--qps", default=DEFAULT_QPS, help="controller modes: QPS values or 'unthrottled'")
    parser.add_argument("--rate", type=float, help="create the jobs this many a second (default: all at once)")
    parser.add_argument("--profile", help="a directory: py-spy samples each controller mode into it")
    parser.add_argument("--controller-only", action="store_true", help=(
        "the controller modes alone, without the bare client and the same-writes bound: each mode's outcome is "
        "printed and nothing is written to docs/benchmarks.md (a quick run, e.g. to interrupt one)"))
    parser.add_argument("--writer", help=argparse.SUPPRESS)
    parser.add_argument("--jobs", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.node:
        run_node(args.node, args.cluster_dir, args.apiserver)
        return
    if args.writer:
        run_writer(args.writer, args.jobs, args.concurrency, args.kubeconfig)
        return
    stop_when_interrupted()
    binary = cached_apiserver() or sys.exit("needs the cached kube-apiserver: run bash scripts/build-apiserver.sh")
    settings = [qps_setting(text) for text in args.qps.split(",")]
    rows, notes = [], []
    for n in [int(size) for size in args.sizes.split(",")]:
        rows += measure(binary, n, args.runs, args.concurrency, settings, notes, args.rate, args.profile,
                        args.controller_only)
    if args.controller_only:
        return
    command = f"python -m benchmarks.controller_scale --sizes {args.sizes} --runs {args.runs} " \
              f"--concurrency {args.concurrency} --qps {args.qps}" + (f" --rate {args.rate:g}" if args.rate else "")
    # each set of controller modes is a section of its own: a throttled mode runs for most of an hour at 5,000
    # jobs (its requests / its QPS), so it may be measured apart from the unthrottled one
    modes = ", ".join(qps_label(qps) for qps in settings)
    suffix = "" if args.qps == DEFAULT_QPS else "-" + "-".join(args.qps.split(","))
    if args.rate:  # a paced run is a section of its own: it measures latency below the server's capacity
        write_section(f"controller-scale-paced{suffix}", f"Controller latency with jobs created {args.rate:g} a "
                      f"second ({modes})", command, rows, notes="\n".join(notes))
    else:
        write_section(f"controller-scale{suffix}", f"Controller scale against the same writes made by a bare client "
                      f"({modes})", command, rows, notes="\n".join(notes))
    for row in rows:
        print(f"{row.what:70s} {row.median:10.2f} {row.unit:6s}" + (f" {row.ratio:.2f}x" if row.ratio else ""))


def measure(binary: Path, n: int, runs: int, concurrency: int, settings: list, notes: list[str],
            rate: float | None = None, profile_dir: str | None = None, controller_only: bool = False) -> list[Row]:
    results: dict[str, list[dict]] = {}
    # a paced run measures latency below the server's capacity: the bare client's all-at-once time says nothing there
    modes = [] if rate or controller_only else [("bare client", lambda bench: bench.bare_client(n))]
    modes += [] if controller_only else [("same writes", lambda bench: bench.same_writes(n))]
    modes += [(qps_label(qps), lambda bench, qps=qps: bench.controller(n, qps)) for qps in settings]
    loads = []
    for r in range(runs):  # alternating, so drift on a shared machine hits every mode alike
        for label, run in modes:
            before = os.getloadavg()
            with Bench(binary, concurrency, f"N={n} run {r + 1}/{runs} {label}", rate, profile_dir) as bench:
                outcome = run(bench)
            results.setdefault(label, []).append(outcome)
            loads.append(f"{label} {before[0]:.1f} -> {os.getloadavg()[0]:.1f}")
            print(f"N={n} run {r + 1} {label}: " + ", ".join(f"{k} {v:.2f}" for k, v in outcome.items()
                                                            if isinstance(v, float)), file=sys.stderr, flush=True)
    notes.append(f"- N={n}: load average (1 min) before and after each mode: {'; '.join(loads)}")
    if controller_only:  # no bound to compare with: each mode's line above is the outcome
        return []
    return rows_for(n, results, [qps_label(qps) for qps in settings], notes, rate)


def rows_for(n: int, results: dict[str, list[dict]], controllers: list[str], notes: list[str],
             rate: float | None = None) -> list[Row]:
    size = f"N={n}" + (f" at {rate:g} jobs/s" if rate else "")
    bound = median([r["created_s"] for r in results["same writes"]])
    bound_latencies = [x for r in results["same writes"] for x in r["latencies"]]
    rows = [Row(f"{size}: bare client, all {PODS_PER_JOB * n} pods + services exist",
                median([r["created_s"] for r in results["bare client"]]), "s")] if "bare client" in results else []
    rows += [Row(f"{size}: same writes by a bare client (the bound), all pods + services exist", bound, "s"),
             Row(f"{size}: same writes, p50 job created -> its pods created", percentile(bound_latencies, 0.5), "s"),
             Row(f"{size}: same writes, p99 job created -> its pods created", percentile(bound_latencies, 0.99), "s")]
    for label in controllers:
        rows += controller_rows(n, size, label, results[label], bound, notes)
    return rows


def controller_rows(n: int, size: str, label: str, runs: list[dict], bound: float, notes: list[str]) -> list[Row]:
    unthrottled = label == "unthrottled"
    created = median([r["created_s"] for r in runs])
    latencies = [x for r in runs for x in r["latencies"]]
    p99 = percentile(latencies, 0.99)
    verbs: dict[str, list[float]] = {}
    for run in runs:
        for verb, count in run["requests"].items():
            verbs.setdefault(verb, []).append(count / n)
    per_job = {verb: median(values) for verb, values in verbs.items()}
    status_writes = per_job.get("update/status", 0) / PHASE_CHANGES
    peak = median([r["peak_mb"] for r in runs])
    ratio = created / bound
    notes.append(f"- {size}, controller {label}: requests per job by verb (median of runs): "
                 + ", ".join(f"{verb} {value:.2f}" for verb, value in sorted(per_job.items())))

    def verdict(ok: bool) -> str:
        return "met" if ok else "missed"

    return [
        Row(f"{size}: controller {label}, all pods + services exist", created, "s", "same writes (bound)", ratio,
            f"<= {TARGET_BOUND_RATIO} x bound" if unthrottled else "", verdict(ratio <= TARGET_BOUND_RATIO)
            if unthrottled else ""),
        Row(f"{size}: controller {label}, p50 job created -> its pods created", percentile(latencies, 0.5), "s"),
        Row(f"{size}: controller {label}, p99 job created -> its pods created", p99, "s", "", None,
            f"<= {TARGET_P99_S:g} s" if unthrottled else "", verdict(p99 <= TARGET_P99_S) if unthrottled else ""),
        Row(f"{size}: controller {label}, every job Running", median([r["running_s"] for r in runs]), "s"),
        Row(f"{size}: controller {label}, API requests per job (all verbs)", sum(per_job.values()), "req"),
        Row(f"{size}: controller {label}, status writes per job per phase change (Created, Running)", status_writes,
            "req", "", None, f"<= {TARGET_STATUS_WRITES}", verdict(status_writes <= TARGET_STATUS_WRITES)),
        Row(f"{size}: controller {label}, seconds its requests waited for a token",
            median([r["throttled_s"] for r in runs]), "s"),
        Row(f"{size}: controller {label}, CPU", median([r["cpu_s"] for r in runs]), "s"),
        Row(f"{size}: controller {label}, peak RSS", peak, "MB", "", None, f"<= {TARGET_RSS_MB} MB",
            verdict(peak <= TARGET_RSS_MB)),
    ]


if __name__ == "__main__":
    main()
