"""The real-node tier: real pods on a real kubelet (containerd + runc + CNI), the controller running
in-cluster as its Deployment from its own image, and trainctl used as a user uses it.

One node per test session (tests/cluster/realnode.py), started by the first test that needs it and
torn down after the tier's last test: its fixtures are the package's, not the session's, so the node's
teardown (some 55 s, most of it waiting for pods to go) runs while the suite's other process still has
tests, instead of at the very end, where pytest charged it to whichever test the process ran last; a node already started by hand (``python -m tests.cluster up --real``) is
used as it is and left running. Every test here runs inside the node's network namespace, where the
API server listens on 127.0.0.1 (the ``_in_node_network`` fixture moves the test's thread there, so
the subprocesses it starts live there too).

Without root or the node's parts the tier is skipped with the reason, unless
TRAINCTL_REQUIRE_K8S=1 (scripts/test.sh sets it): then it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cluster import images, realnode
from tests.cluster.server import cached_apiserver
from tests.conftest import REPO

NODE_COMMANDS = ("containerd", "runc", "nsenter", "dnsmasq", "mmdebstrap", "kubectl", "iptables")
CONTROLLER_NAMESPACE = "trainctl-system"
JOB_TIMEOUT_S = 300


def missing_capability() -> str | None:
    if os.geteuid() != 0:
        return "the real node needs root (network namespace, containerd, mounts)"
    if cached_apiserver() is None:
        return "no cached kube-apiserver/etcd: run bash scripts/build-apiserver.sh"
    missing = [name for name in NODE_COMMANDS if shutil.which(name) is None]
    missing += [name for name in ("kubelet", "kube-proxy") if not (realnode.NODE_BINARIES / name).exists()]
    if missing:
        return f"missing for the real node: {', '.join(missing)}: run bash scripts/build-node.sh"
    return None


def require_real_node() -> None:
    """Skip the calling test or fixture, with the reason, where no real node can start (fail it instead under
    TRAINCTL_REQUIRE_K8S=1)."""
    reason = missing_capability()
    if reason:
        if os.environ.get("TRAINCTL_REQUIRE_K8S") == "1":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture(scope="package")
def real_node():
    require_real_node()
    realnode.wait_for_turn()  # another test session's node (a second checkout's suite) goes first
    node = realnode.attached()
    if node is not None:  # started by hand: use it, leave it running
        yield node
        return
    try:
        node = realnode.up()
    except images.SetupStepError as error:
        pytest.fail(f"real node: {error}")
    try:
        yield node
    finally:
        realnode.down()


@pytest.fixture(autouse=True)
def _in_node_network(real_node):
    with realnode.entered():
        yield


@dataclass
class Cli:
    """trainctl as a user runs it against the node: the node's admin kubeconfig, no backend override,
    from a directory of the user's own (not the repository, whose tree a job would otherwise ship)."""

    env: dict
    cwd: Path

    def __call__(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(*args), env=self.env, cwd=self.cwd, capture_output=True, text=True,
                              timeout=timeout)

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(self.argv(*args), env=self.env, cwd=self.cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    @staticmethod
    def argv(*args: str) -> list[str]:
        return [sys.executable, "-m", "trainctl", *args]


@pytest.fixture(scope="package")
def cli(real_node, tmp_path_factory) -> Cli:
    env = {**os.environ, "PYTHONPATH": str(REPO), "KUBECONFIG": str(real_node.kubeconfig), "COLUMNS": "200"}
    env.pop("TRAINCTL_BACKEND", None)
    return Cli(env, tmp_path_factory.mktemp("user"))


@pytest.fixture(scope="package")
def in_cluster_controller(real_node, cli):
    """``trainctl controller install --image <local controller image>`` and ``kubectl rollout status``:
    the controller runs as its Deployment (ServiceAccount, leader election, probes, metrics)."""
    with realnode.entered():
        image = real_node.image("controller")
        # nothing can be pulled here: busybox for the PyTorch workers' wait-for-master init container
        # (upstream: alpine), and a kubectl-delivery image of our own for the MPI launcher
        result = cli("controller", "install", "--image", image,
                     "--pytorch-init-container-image", real_node.image("busybox"),
                     "--mpi-kubectl-delivery-image", real_node.image("kubectl-delivery"))
        assert result.returncode == 0, result.stderr
        rollout = real_node.kubectl("rollout", "status", "deployment/trainctl-controller", "-n",
                                    CONTROLLER_NAMESPACE, "--timeout=180s", timeout=200)
        assert rollout.returncode == 0, (rollout.stdout + rollout.stderr
                                         + real_node.kubectl("describe", "pods", "-n", CONTROLLER_NAMESPACE).stdout)
    return image


@pytest.fixture
def trainctl(cli, in_cluster_controller) -> Cli:
    """The CLI against the node with the in-cluster controller running."""
    return cli


@pytest.fixture
def namespace(real_node):
    name = f"rn-{uuid.uuid4().hex[:8]}"
    assert real_node.kubectl("create", "namespace", name).returncode == 0
    yield name
    real_node.kubectl("delete", "namespace", name, "--wait=false")


@pytest.fixture(scope="package")
def python_image(real_node) -> str:
    return real_node.image("python")


@pytest.fixture(scope="package")
def frameworks_image(real_node) -> str:
    """XGBoost, Paddle and JAX (issue 33): imported into the node by the first test that asks for it."""
    return real_node.image("python-frameworks")


@pytest.fixture(scope="module")
def second_node(real_node, in_cluster_controller):
    """A second kubelet joined to the real node's cluster for the module's tests (tests/cluster/second_node.py),
    removed afterwards. The controller is installed (and running on the first node) before it joins, so losing
    the second node never takes the controller with it."""
    from tests.cluster import second_node as joining

    started = time.monotonic()
    node = joining.join(real_node)
    print(f"\nsecond node joined in {time.monotonic() - started:.1f} s")
    try:
        yield node
    finally:
        started = time.monotonic()
        joining.down()
        print(f"\nsecond node removed in {time.monotonic() - started:.1f} s")


@pytest.fixture
def project(tmp_path) -> Path:
    """A project directory with tests/checkpointed.py's DDP script as ddp.py (the restart and node-loss tests)."""
    from tests.checkpointed import SCRIPT

    directory = tmp_path / "project"
    directory.mkdir()
    (directory / "ddp.py").write_text(SCRIPT)
    return directory
