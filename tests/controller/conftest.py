"""The controller as it runs in production: a ``trainctl controller run`` process against the
real API server, with the node fixture playing kubelet for the test's namespace."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.cluster.server import free_port
from tests.conftest import REPO

READY_TIMEOUT_S = 30


class ControllerProcess:
    def __init__(self, kubeconfig, log_path, *args: str) -> None:
        self.metrics_port, self.health_port = free_port(), free_port()
        self.log_path = log_path
        env = {**os.environ, "PYTHONPATH": str(REPO), "TRAINCTL_LOG_LEVEL": "DEBUG"}
        argv = [sys.executable, "-m", "trainctl", "controller", "run", "--kubeconfig", str(kubeconfig),
                "--metrics-addr", f"127.0.0.1:{self.metrics_port}", "--health-addr", f"127.0.0.1:{self.health_port}",
                "--log-format", "json", *args]
        self.process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=open(log_path, "ab"),
                                        cwd=REPO)

    def get(self, path: str, port: int) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    def wait_ready(self) -> ControllerProcess:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process.poll() is None, f"controller exited {self.process.returncode}: {self.log()}"
            try:
                if self.get("/readyz", self.health_port)[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"controller not ready: {self.log()}")

    def metric(self, name: str) -> float:
        """Sum of one metric's samples (all label sets)."""
        _, text = self.get("/metrics", self.metrics_port)
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith(name + "{") or line.startswith(name + " "))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 40) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout)


@pytest.fixture
def start_controller(k8s_cluster, kubeflow_crds, tmp_path):
    """start_controller(namespace, *flags) -> a ready ControllerProcess; all are stopped after the test."""
    started: list[ControllerProcess] = []

    def start(namespace: str, *flags: str, ready: bool = True) -> ControllerProcess:
        log = tmp_path / f"controller-{len(started)}.log"
        process = ControllerProcess(k8s_cluster.kubeconfig("admin"), log, "--namespace", namespace, *flags)
        started.append(process)
        return process.wait_ready() if ready else process

    yield start
    for process in started:
        if process.process.poll() is None:
            process.stop(signal.SIGKILL)
        print(f"--- {process.log_path.name}\n{process.log()}")  # shown when the test failed


@pytest.fixture
def managed_namespace(namespace, kube_node):
    """A namespace whose pods the node fixture binds and starts (Running) as they appear, until the test ends
    (released before the namespace is deleted)."""
    kube_node.manage(namespace)
    yield namespace
    kube_node.release(namespace)


@pytest.fixture
def trainctl(k8s_cluster):
    """The CLI as a user runs it, as the cluster's admin: ``trainctl("status", "x", "-n", ns)``."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "KUBECONFIG": str(k8s_cluster.kubeconfig("admin")),
           "COLUMNS": "200"}
    env.pop("TRAINCTL_BACKEND", None)

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "trainctl", *args], env=env, capture_output=True, text=True,
                              timeout=60, cwd=REPO)
    return run
