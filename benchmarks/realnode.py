"""Real node (issue 14): submit to Running against kubectl apply, and training in pods against processes.

    python -m benchmarks.realnode [--runs 5]     # as root, with the real node up (tests/cluster/realnode.py)

Everything runs on the real single-node Kubernetes of tests/cluster/realnode.py (etcd, kube-apiserver,
scheduler, kubelet, containerd on this machine's cores), inside its network namespace, with
trainctl's controller running in-cluster as its Deployment. Two comparisons, runs interleaved so
that drift on a shared machine hits both sides alike:

* launch: `trainctl submit pytorch --workers 4` of a job that sleeps, against `kubectl apply` of the
  same 4 pods and 4 headless services (those the controller made for a warm-up job, stripped of what
  the server and admission fill in, renamed per run). Clock from starting the command to all 4 pods
  Running, seen by one watch of the namespace's pods (the same for both sides). The trainctl side
  includes the CLI's start-up, the job's creation and the controller's reaction; the kubectl side
  the creation of the same pods and services. Pods are deleted (grace 1 s) and gone between runs.
* training: examples/pytorch/train_ddp.py, 2 replicas (Master 1 + Worker 1), as pods from the
  python image against the local backend's processes (benchmarks/local_launch.py's run), same
  arguments; steps/s is what rank 0 reports for its training loop only (no start-up, no data set).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from benchmarks.controller_scale import Counter, wait
from benchmarks.local_launch import result_lines, run_trainctl
from benchmarks.record import ROOT, Row, median, write_section
from tests.cluster import realnode
from tests.cluster.images import EXAMPLES_IN_IMAGE
from trainctl.frameworks.base import LABEL_JOB_NAME

SLEEPER = ["python3", "-c", "import time; time.sleep(600)"]
LAUNCH_REPLICAS = 4
TRAIN_ARGS = ["--epochs", "6", "--samples", "16384"]  # a few seconds of training, then --output
TRAIN_TIMEOUT_S = 600
CONTROLLER_NAMESPACE = "trainctl-system"
TARGET_LAUNCH, TARGET_STEPS = 1.2, 0.95
TRAINING_CPU = "900m"  # each training pod's request (no limit)
SINGLE_CPU = "1800m"  # a lone training pod's: two threads, as a lone local process gets
# Filled in by the API server, the scheduler or the Priority admission plugin: a client never sends them.
SERVER_METADATA = ("uid", "resourceVersion", "ownerReferences", "creationTimestamp", "managedFields",
                   "generation", "selfLink", "namespace")
SERVER_POD_SPEC = ("nodeName", "priority", "preemptionPolicy")
# The ServiceAccount admission plugin adds a token volume mounted here, again for each pod it admits.
TOKEN_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


class Bench:
    """One namespace of the node, watched for the whole benchmark; the CLIs run against the node."""

    def __init__(self, node: realnode.RealNode, namespace: str) -> None:
        self.node, self.namespace = node, namespace
        self.trainctl = str(Path(sys.executable).with_name("trainctl"))
        self.env = {**os.environ, "KUBECONFIG": str(node.kubeconfig), "PYTHONPATH": str(ROOT)}
        self.env.pop("TRAINCTL_BACKEND", None)
        self.kubectl = ["kubectl", "--kubeconfig", str(node.kubeconfig), "-n", namespace]
        self.counter: Counter | None = None

    def watch(self) -> None:
        """Watch the namespace's pods, services and jobs (once the controller's CRDs are served)."""
        from trainctl.kube.client import connect

        self.counter = Counter(connect(kubeconfig=str(self.node.kubeconfig)), self.namespace)

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([self.trainctl, *args], env=self.env, cwd=ROOT, capture_output=True, text=True,
                              timeout=timeout, check=True)

    def submit_args(self, name: str, image: str, workers: int, command: list[str], flags: tuple = ()) -> list[str]:
        # --no-workdir: the image has what runs (code shipping would add a ConfigMap and an init step)
        return ["submit", "pytorch", "-n", self.namespace, "--name", name, "--workers", str(workers),
                "--image", image, "--no-workdir", *flags, "--", *command]

    def clear(self) -> None:
        """Delete the jobs first (so the controller recreates nothing), then their pods and services."""
        subprocess.run([*self.kubectl, "delete", "pytorchjobs", "--all"], check=True, capture_output=True)
        subprocess.run([*self.kubectl, "delete", "pods,services", "--all", "--grace-period=1"], check=True,
                       capture_output=True, timeout=120)
        wait(lambda: not self.counter.pods.cache and not self.counter.services.cache, 120)

    def time_to_running(self, argv: list[str]) -> dict:
        """Seconds from starting ``argv`` to its exit, to all pods and services existing, to all Running."""
        start = time.monotonic()
        subprocess.run(argv, env=self.env, cwd=ROOT, check=True, capture_output=True, timeout=120)
        exited = time.monotonic()
        created = wait(lambda: self.counter.created() >= LAUNCH_REPLICAS, 120)
        running = wait(lambda: self.counter.pods_running() >= LAUNCH_REPLICAS, 120)
        self.clear()
        return {"exit_s": exited - start, "created_s": created - start, "running_s": running - start}

    def children_as_applied(self, job: str) -> str:
        """The pods and services the controller made for ``job``, as a client would send them (JSON)."""
        listed = subprocess.run([*self.kubectl, "get", "pods,services", "-l", f"{LABEL_JOB_NAME}={job}",
                                 "-o", "json"], check=True, capture_output=True, text=True).stdout
        items = [client_side(item) for item in json.loads(listed)["items"]]
        assert len(items) == 2 * LAUNCH_REPLICAS, [item["metadata"]["name"] for item in items]
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})

    def train_in_pods(self, name: str, image: str, limited: bool = False, workers: int = 2) -> float:
        script = str(EXAMPLES_IN_IMAGE / "pytorch" / "train_ddp.py")
        # a core each, as the local backend gives each of 2 processes on 2 cores: a request of 900m (a whole core
        # each would not fit beside the controller's request), OMP_NUM_THREADS following it (rounded up to 1),
        # and no limit, as no local process has one: a CFS quota of 0.9 core (``limited``, --cpu) caps a pod at
        # 90% of a core that a local process may use whole (docs/benchmarks.md, real node)
        # one replica: the whole machine's share, as one local process gets both cores (2 threads either way)
        request = TRAINING_CPU if workers == 2 else SINGLE_CPU
        cpu = ("--cpu", request) if limited else tuple(
            f"--set=spec.pytorchReplicaSpecs.{rtype}.template.spec.containers[0].resources.requests.cpu={request}"
            for rtype in ("Master", "Worker")[:workers])
        self.cli(*self.submit_args(name, image, workers, ["python3", script, *TRAIN_ARGS, "--output",
                                                          "/tmp/bench-output"], cpu))
        self.cli("wait", name, "-n", self.namespace, "--timeout", str(TRAIN_TIMEOUT_S), timeout=TRAIN_TIMEOUT_S + 30)
        logs = self.cli("logs", name, "-n", self.namespace).stdout
        self.clear()
        return next(r for r in result_lines(logs) if r["rank"] == 0)["steps_per_second"]


def client_side(obj: dict) -> dict:
    """``obj`` without status and what the server, scheduler and admission plugins filled in."""
    meta = {key: value for key, value in obj["metadata"].items() if key not in SERVER_METADATA}
    spec = {key: value for key, value in obj["spec"].items() if key not in SERVER_POD_SPEC}
    if obj["kind"] == "Pod":
        token = {m["name"] for c in spec["containers"] for m in c.get("volumeMounts", [])
                 if m["mountPath"] == TOKEN_MOUNT}
        spec["volumes"] = [v for v in spec.get("volumes", []) if v["name"] not in token]
        for group in ("containers", "initContainers"):
            if group in spec:
                spec[group] = [{**c, "volumeMounts": [m for m in c.get("volumeMounts", []) if m["name"] not in token]}
                               for c in spec[group]]
    return {"apiVersion": "v1", "kind": obj["kind"], "metadata": meta, "spec": spec}


def ensure_controller(bench: Bench) -> str:
    """The in-cluster controller's image. One already deployed (by the test tier) is used as it is:
    installing the tree's current image would roll it over under other engineers' running tests."""
    deployed = subprocess.run(["kubectl", "--kubeconfig", str(bench.node.kubeconfig), "-n", CONTROLLER_NAMESPACE,
                               "get", "deployment/trainctl-controller", "-o",
                               "jsonpath={.spec.template.spec.containers[0].image}"], capture_output=True, text=True)
    image = deployed.stdout if deployed.returncode == 0 else bench.node.image("controller")
    if deployed.returncode != 0:  # as the test tier installs it: helper images the node has (it pulls nothing)
        bench.cli("controller", "install", "--image", image, "--pytorch-init-container-image",
                  bench.node.image("busybox"), "--mpi-kubectl-delivery-image", bench.node.image("kubectl-delivery"))
    subprocess.run(["kubectl", "--kubeconfig", str(bench.node.kubeconfig), "-n", CONTROLLER_NAMESPACE, "rollout",
                    "status", "deployment/trainctl-controller", "--timeout=180s"], check=True, capture_output=True)
    return image


def measure_launch(bench: Bench, image: str, runs: int, tag: str) -> tuple[list[dict], list[dict]]:
    warm = f"warm-{tag}"
    bench.cli(*bench.submit_args(warm, image, LAUNCH_REPLICAS, SLEEPER))
    try:
        wait(lambda: bench.counter.pods_running() >= LAUNCH_REPLICAS, 120)
    except TimeoutError:  # the status names what blocks them (an image the node cannot pull, ...)
        status = subprocess.run([bench.trainctl, "status", warm, "-n", bench.namespace], env=bench.env,
                                capture_output=True, text=True).stdout
        sys.exit(f"the warm-up job's pods did not all run within 120 s:\n{status}")
    template = bench.children_as_applied(warm)
    bench.clear()
    manifests = Path(tempfile.mkdtemp(prefix="bench-realnode-"))
    ours, theirs = [], []
    for index in range(runs):
        manifest = manifests / f"kb-{index}.json"
        manifest.write_text(template.replace(warm, f"kb-{index}-{tag}"))
        theirs.append(bench.time_to_running([*bench.kubectl, "apply", "-f", str(manifest)]))
        ours.append(bench.time_to_running([bench.trainctl, *bench.submit_args(f"tc-{index}-{tag}", image,
                                                                        LAUNCH_REPLICAS, SLEEPER)]))
        print(f"launch run {index}: kubectl apply {theirs[-1]}, trainctl submit {ours[-1]}", file=sys.stderr)
    return ours, theirs


def measure_training(bench: Bench, image: str, runs: int, tag: str) -> dict[str, list[float]]:
    """Steps/s of rank 0: 2 replicas in pods (a CPU request each), in pods with --cpu (request and limit), as local
    processes; and 1 replica in a pod and as a local process (no all-reduce: the compute alone)."""
    home = tempfile.mkdtemp(prefix="bench-home-")
    output = tempfile.mkdtemp(prefix="bench-output-")
    local_script = ["examples/pytorch/train_ddp.py", *TRAIN_ARGS, "--output", output]
    measured: dict[str, list[float]] = {name: [] for name in ("pods", "limited", "local", "pod1", "local1")}
    for index in range(runs):
        measured["pods"].append(bench.train_in_pods(f"train-{index}-{tag}", image))
        measured["limited"].append(bench.train_in_pods(f"limited-{index}-{tag}", image, limited=True))
        measured["local"].append(run_trainctl(bench.trainctl, sys.executable, home, index, local_script)[1])
        measured["pod1"].append(bench.train_in_pods(f"single-{index}-{tag}", image, workers=1))
        measured["local1"].append(run_trainctl(bench.trainctl, sys.executable, home, index, local_script, 1)[1])
        print(f"training run {index}: " + ", ".join(f"{name} {values[-1]}" for name, values in measured.items()),
              file=sys.stderr)
    return measured


def launch_rows(ours: list[dict], theirs: list[dict]) -> list[Row]:
    def of(runs: list[dict], key: str) -> float:
        return median([run[key] for run in runs])

    ratio = of(ours, "running_s") / of(theirs, "running_s")
    return [Row("kubectl apply, 4 pods + 4 headless services: command exited", of(theirs, "exit_s"), "s"),
            Row("kubectl apply: all 4 pods Running", of(theirs, "running_s"), "s"),
            Row("trainctl submit --workers 4: command exited", of(ours, "exit_s"), "s"),
            Row("trainctl submit: all 4 pods + 4 services exist", of(ours, "created_s"), "s", "kubectl apply: "
                f"{of(theirs, 'created_s'):.3f} s"),
            Row("trainctl submit: all 4 pods Running", of(ours, "running_s"), "s", "kubectl apply", ratio,
                f"<= {TARGET_LAUNCH} x kubectl apply", "met" if ratio <= TARGET_LAUNCH else "missed")]


def training_rows(measured: dict[str, list[float]]) -> list[Row]:
    of = {name: median(values) for name, values in measured.items()}
    ratio = of["pods"] / of["local"]
    return [Row("local backend, 2 processes: steps/s (rank 0)", of["local"], "steps/s"),
            Row(f"pods on the real node, 2 replicas, {TRAINING_CPU} CPU requested: steps/s (rank 0)", of["pods"],
                "steps/s", "local backend", ratio, f">= {TARGET_STEPS} x local",
                "met" if ratio >= TARGET_STEPS else "missed"),
            Row(f"pods with --cpu {TRAINING_CPU} (request and limit): steps/s (rank 0)", of["limited"], "steps/s",
                "local backend", of["limited"] / of["local"]),
            Row("local backend, 1 process: steps/s", of["local1"], "steps/s"),
            Row(f"1 pod ({SINGLE_CPU} CPU requested): steps/s", of["pod1"], "steps/s", "1 local process",
                of["pod1"] / of["local1"])]


def other_pods(bench: Bench) -> int:
    """Pods on the node outside this benchmark's namespace and the controller's: other engineers' tests."""
    listed = subprocess.run(["kubectl", "--kubeconfig", str(bench.node.kubeconfig), "get", "pods", "-A", "-o",
                             "json"], check=True, capture_output=True, text=True).stdout
    return sum(1 for pod in json.loads(listed)["items"]
               if pod["metadata"]["namespace"] not in (bench.namespace, CONTROLLER_NAMESPACE))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--training-runs", type=int, help="training runs, if fewer than --runs (time is short)")
    args = parser.parse_args()
    node = realnode.attached() or sys.exit("no real node is up: python -m tests.cluster up --real (as root)")
    tag, training_runs = uuid.uuid4().hex[:6], args.training_runs or args.runs
    namespace = f"bench-{tag}"
    with realnode.entered():
        node.kubectl("create", "namespace", namespace).check_returncode()
        bench = Bench(node, namespace)
        try:
            controller = ensure_controller(bench)
            bench.watch()
            image = node.image("python")
            busy_before = os.getloadavg(), other_pods(bench)
            ours, theirs = measure_launch(bench, image, args.runs, tag)
            training = measure_training(bench, image, training_runs, tag)
            busy_after = os.getloadavg(), other_pods(bench)
        finally:
            if bench.counter is not None:
                bench.counter.stop()
            node.kubectl("delete", "namespace", namespace, "--wait=false")
    rows = launch_rows(ours, theirs) + training_rows(training)
    command = f"python -m benchmarks.realnode --runs {args.runs}" + (
        f" --training-runs {args.training_runs}" if args.training_runs else "")
    write_section("realnode", "Real node: submit to Running against kubectl apply, training in pods against "
                  "local processes", command, rows, notes=notes(args.runs, training_runs, controller, image,
                                                                busy_before, busy_after))
    for row in rows:
        print(f"{row.what:60s} {row.median:8.3f} {row.unit}" + (f"  ({row.ratio:.2f}x)" if row.ratio else ""))


def notes(runs: int, training_runs: int, controller: str, image: str, before: tuple, after: tuple) -> str:
    def load(busy: tuple) -> str:
        return f"load average {' / '.join(f'{value:.2f}' for value in busy[0])}, {busy[1]} other pods on the node"

    return (f"Medians of {runs} interleaved runs for the launch, {training_runs} for training. The node "
            "(tests/cluster/realnode.py) runs etcd, kube-apiserver, scheduler, controller-manager, kube-proxy, "
            "kubelet and containerd on this machine's cores; trainctl's controller runs as its Deployment "
            f"(image `{controller}`); pods use `{image}`, already imported into containerd (a warm-up job ran "
            "first). Launch: each side's clock starts as its command starts and stops when one watch of the "
            "namespace sees all 4 pods Running; the trainctl side includes the CLI's start-up (Python), the "
            "PyTorchJob's creation and the controller's reaction; the kubectl side applies the 4 pods and 4 "
            "headless services the controller made for the warm-up job (server-filled fields and admission's "
            "token volume removed, names changed per run). Training: examples/pytorch/train_ddp.py "
            f"{' '.join(TRAIN_ARGS)}, gloo on CPU, steps/s of rank 0's training loop; each pod requests "
            f"{TRAINING_CPU} CPU with no limit (a local process has none either); pods run Debian's python3 "
            "from the image, the local backend this venv's python, both with the pinned torch. "
            f"Before: {load(before)}; after: {load(after)}.")


if __name__ == "__main__":
    main()
