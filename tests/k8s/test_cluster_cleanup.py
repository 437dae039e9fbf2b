"""Whatever ends a test or benchmark process, the etcd and kube-apiserver it started go with it (and a benchmark's
controller and node processes): SIGTERM, SIGINT, SIGHUP, a signal taken by a thread other than the main one, SIGKILL,
an uncaught exception (tests/cluster/server.py, tests/cluster/reaper.py)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.k8s

STARTER = """
import faulthandler, sys, threading, time
from pathlib import Path
faulthandler.enable()  # SIGABRT prints where it is, should it outlive its ending (see ended_or_why_not)
from tests.cluster.server import TestCluster, cached_apiserver
cluster = TestCluster(Path(sys.argv[1]), cached_apiserver()).start()
other = threading.Thread(target=time.sleep, args=(600,), daemon=True)  # as a test's client or fake kubelet has
other.start()
print("up", other.native_id, flush=True)
sys.stdin.readline()  # the test has seen the cluster's processes (a raise would stop them at once)
if sys.argv[2] == "raise":
    raise RuntimeError("a bug after the cluster started")
time.sleep(600)
"""


def processes_mentioning(text: str, with_pids: bool = False) -> list:
    """Command lines of running processes that name ``text`` (a cluster's directory); ``with_pids``: (pid,
    command line) pairs."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmdline and int(entry.name) != os.getpid():
                found.append((int(entry.name), cmdline) if with_pids else cmdline)
    return found


def process_state(pid: int) -> str:
    """What the kernel says a process is doing: its state, the call it waits in, its signal masks."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return f"{pid}: gone"
    fields = [line for line in status if line.split(":")[0] in ("Name", "State", "SigBlk", "SigIgn", "SigCgt")]
    return f"{pid}: {' '.join(' '.join(line.split()) for line in fields)} wchan={wchan}"


def ended_or_why_not(process: subprocess.Popen, workdir: Path, timeout: float = 60) -> str:
    """"" once the starter exited within ``timeout``; else what it and its cluster's processes were doing (its
    Python stack from faulthandler, the kernel's view of each), and it is ended."""
    try:
        process.wait(timeout)
        return ""
    except subprocess.TimeoutExpired:
        pids = dict.fromkeys([process.pid, *(pid for pid, _ in processes_mentioning(str(workdir), with_pids=True))])
        states = "\n".join(process_state(pid) for pid in pids)
        process.send_signal(signal.SIGABRT)  # faulthandler prints the stack, then it ends
        try:
            stderr = process.communicate(timeout=10)[1]
        except subprocess.TimeoutExpired:  # it does not run at all, or SIGABRT is blocked too
            process.kill()
            stderr = process.communicate()[1]
        return f"still running {timeout:.0f} s after its ending:\n{states}\n{stderr}"


def gone(text: str, timeout: float = 30) -> list[str]:
    deadline = time.monotonic() + timeout
    while (left := processes_mentioning(text)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


@pytest.fixture
def apiserver(k8s_cluster):
    """Only where the cached kube-apiserver exists (k8s_cluster fails or skips otherwise)."""
    return k8s_cluster.apiserver


def signal_thread(pid: int, thread: int, signum: int) -> None:
    """``signum`` to one thread of another process (tgkill(2)): its C-level handler runs there, not in the main
    thread, which Python alone runs handlers in and which sleeps on, as it does when a signal lands just before
    its sleep starts (the race behind the SIGHUP and SIGINT cases' rare failures: 4 in 1,500 tries)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.tgkill(pid, thread, signum) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill {pid} {thread}")


@pytest.mark.parametrize("ending", ["SIGTERM", "SIGINT", "SIGHUP", "SIGHUP to a thread", "SIGKILL", "raise"])
def test_a_process_that_started_a_cluster_stops_it_however_it_ends(apiserver, tmp_path, ending):
    workdir = tmp_path / "cluster"
    process = subprocess.Popen([sys.executable, "-c", STARTER, str(workdir), ending], cwd=REPO, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    up, other_thread = (process.stdout.readline().split() + [""])[:2]
    assert up == "up", process.stderr.read()
    assert any("etcd" in line for line in processes_mentioning(str(workdir)))
    assert any("kube-apiserver" in line for line in processes_mentioning(str(workdir)))
    process.stdin.write("seen\n")
    process.stdin.flush()
    if ending == "SIGHUP to a thread":
        signal_thread(process.pid, int(other_thread), signal.SIGHUP)
    elif ending != "raise":
        process.send_signal(getattr(signal, ending))  # SIGKILL: no teardown of its own; its reaper's is checked
    try:
        assert ended_or_why_not(process, workdir) == ""
        assert gone(str(workdir)) == []
    finally:  # a failure leaves nothing running either
        for pid, _ in processes_mentioning(str(workdir), with_pids=True):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_an_interrupted_scale_benchmark_leaves_nothing_running(apiserver):
    """SIGTERM while the controller mode runs: its API server, etcd, controller and node processes all stop."""
    # 40 jobs made 4 a second: the controller mode is still making them (10 s) when the signal comes, with no
    # all-at-once modes of 300 jobs before it (the 77-96 s this test took) and no same-writes mode (some 28 s)
    process = subprocess.Popen([sys.executable, "-m", "benchmarks.controller_scale", "--sizes", "40", "--rate", "4",
                                "--qps", "unthrottled", "--controller-only"], cwd=REPO, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    workdir, deadline = None, time.monotonic() + 300
    while workdir is None:
        line = process.stderr.readline()
        assert line and time.monotonic() < deadline, "the benchmark never reached its controller mode"
        match = re.search(r"unthrottled: cluster in (\S+)", line)
        workdir = match and match[1]
    while not any("controller" in line for line in processes_mentioning(workdir)):
        assert time.monotonic() < deadline, "the controller never started"
        time.sleep(0.2)
    time.sleep(2)  # jobs being made, pods being created
    process.send_signal(signal.SIGTERM)
    process.wait(120)
    assert process.returncode != 0
    assert gone(workdir) == []
