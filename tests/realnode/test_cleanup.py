"""A process killed while its real node runs leaves nothing of it (issue 54): its reaper (tests/cluster/reaper.py)
runs ``python -m tests.cluster down --real``, which stops a second node joined to it first.

SIGKILL is what pytest-xdist sends a worker still tearing down 10 s after Ctrl-C: no ``finally``, atexit hook or
signal handler of the process runs. The starter is killed as soon as its node's kubelet started (every daemon
of the node runs by then, and nothing was imported into the kept containerd root yet, which a kill during an
import would discard), not after a full start. Meanwhile the test adds the pieces of a second node that cost
nothing to make (its namespace, the veth pair into the first node's, a process in it, its state file); its
daemons go the same way as the first node's (realnode.kill_namespace_processes). About 8 s in all.

One node per machine (the namespace's name, /var/lib/kubelet): this module runs before the tier's node starts,
first in the tier by its name, and does not use the ``real_node`` fixture.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from tests.cluster import realnode, second_node
from tests.conftest import REPO
from tests.k8s.test_cluster_cleanup import processes_mentioning
from tests.realnode.conftest import require_real_node

pytestmark = pytest.mark.realnode

STARTER = """
from tests.cluster import realnode
realnode.wait_for_turn(0)  # the test's own lock (TRAINCTL_REAL_NODE_LOCK): its reaper holds it until it is done
realnode.up()
"""
STARTED_TIMEOUT_S = 180  # the node's images checked (built if missing), its control plane up, its kubelet started
# the reaper's ``down --real``: some 3 s with no pods (realnode.RealNode._stop_processes)
REAPED_TIMEOUT_S = 120


@pytest.fixture(autouse=True)
def _in_node_network():
    """Not the tier's (which starts the tier's node): this test's node is its own."""
    yield


def state_once_started(daemon: str, starter: subprocess.Popen, log: Path) -> dict:
    """The node's state file once ``daemon`` started."""
    deadline = time.monotonic() + STARTED_TIMEOUT_S
    while daemon not in (state := written_state()).get("daemons", {}):
        assert starter.poll() is None, f"the starter exited {starter.returncode}:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {daemon} after {STARTED_TIMEOUT_S} s:\n{log.read_text()[-3000:]}"
        time.sleep(0.1)
    return state


def written_state() -> dict:
    """The node's state file as it is now ({} before its first write, or while one is half-way)."""
    try:
        return json.loads(realnode.STATE.read_text())
    except (OSError, ValueError):
        return {}


def add_a_second_node(first_workdir: Path) -> second_node.SecondNode:
    """What a second node leaves besides its daemons: its namespace (with the veth pair into the first node's and
    the route there), a process in it, its directory and state file."""
    node = second_node.SecondNode(Path(tempfile.mkdtemp(prefix="trainctl-real-node-2-")), first_workdir)
    node._save()
    node._network()
    process = subprocess.Popen(second_node.in_netns(["sleep", "600"]), start_new_session=True)
    # reaped the moment it ends, as a killed worker's children are by init: a zombie would be waited for as a
    # process that outlived its SIGTERM and SIGKILL (realnode.kill_namespace_processes)
    threading.Thread(target=process.wait, daemon=True).start()
    node.daemons["sleep"] = process.pid
    node._save()
    return node


def released(lock: Path, timeout: float) -> bool:
    """True once nobody holds ``lock`` (the reaper holds it until its cleanup is done), within ``timeout``."""
    deadline = time.monotonic() + timeout
    with lock.open("w") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.2)


def left_of(node: dict, second: second_node.SecondNode) -> list[str]:
    """Whatever of the two nodes is still there: its daemons (by the names the state files give them) and any
    other process naming its directory, its namespace, its state file and directory."""
    daemons = {pid: name for name, pid in node["daemons"].items()}
    daemons.update({pid: f"second node's {name}" for name, pid in second.daemons.items()})
    namespaces = realnode._run(["ip", "netns", "list"]).split()
    # alive, not /proc/PID: a killed daemon is a zombie until init reaps it, which holds nothing but its pid
    return ([f"{name} (pid {pid})" for pid, name in daemons.items() if realnode.alive(pid)]
            + [f"{cmdline[:120]} (pid {pid})" for directory in (node["workdir"], str(second.workdir))
               for pid, cmdline in processes_mentioning(directory, with_pids=True) if pid not in daemons]
            + [f"namespace {name}" for name in (realnode.NETNS, second_node.NETNS) if name in namespaces]
            + [f"{path}" for path in (realnode.STATE, second_node.STATE, Path(node["workdir"]), second.workdir)
               if path.exists()])


def test_a_process_killed_while_its_real_node_runs_leaves_nothing_of_it_or_of_a_second_node(tmp_path):
    require_real_node()
    realnode.wait_for_turn()  # this session's turn: the tier's node starts in it later
    if realnode.STATE.exists():
        assert realnode._reaper is None, "the tier's node is up: this module must run before the tier's first test"
        pytest.skip(f"a real node is up ({realnode.STATE}): this test needs the machine's one node for its own")
    log, lock = tmp_path / "starter.log", tmp_path / "turn.lock"
    with log.open("wb") as output:
        starter = subprocess.Popen([sys.executable, "-c", STARTER], cwd=REPO, stdin=subprocess.DEVNULL,
                                   stdout=output, stderr=subprocess.STDOUT,
                                   env={**os.environ, "PYTHONPATH": str(REPO), "TRAINCTL_REAL_NODE_LOCK": str(lock)})
    try:
        # the second node's pieces while the first node's control plane starts (they need only its namespace):
        # the starter is killed as soon as its kubelet started, before it imports anything into the kept root
        second = add_a_second_node(Path(state_once_started("containerd", starter, log)["workdir"]))
        node = state_once_started("kubelet", starter, log)
        assert realnode.RealNode.from_state(node).alive()
        starter.send_signal(signal.SIGKILL)
        starter.wait()
        started = time.monotonic()
        assert released(lock, REAPED_TIMEOUT_S), f"the reaper still runs after {REAPED_TIMEOUT_S} s"
        print(f"\nreaped in {time.monotonic() - started:.1f} s")
        left = left_of(node, second)
        assert left == [], "left behind:\n" + "\n".join(left)
    finally:  # a failure leaves nothing running either
        with contextlib.suppress(ProcessLookupError):
            starter.kill()
        if realnode.STATE.exists() or second_node.STATE.exists():
            subprocess.run([sys.executable, "-m", "tests.cluster", "down", "--real"], cwd=REPO,
                           stdin=subprocess.DEVNULL, capture_output=True)
