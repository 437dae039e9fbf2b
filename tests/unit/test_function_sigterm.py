"""A function job's replica is its container's PID 1 when one process runs per replica: it must end on the
kubelet's SIGTERM (as PID 1, a process without a handler ignores it, and each delete waited out the grace period)."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import time

from trainctl.frameworks import by_kind
from trainctl.functions.shipping import RUNNER_FILE, place_locally, ship

MODULE = '''
import time


def naps(seconds):
    try:
        time.sleep(seconds)
    finally:
        print("finally ran", flush=True)
'''


def as_pid_1(argv: list[str], ready) -> subprocess.Popen:
    """``argv`` as PID 1 of a PID namespace of its own, as in a container; ``ready()`` says it has started."""
    root = [] if os.geteuid() == 0 else ["--map-root-user"]
    process = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", *root, *argv], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while not ready():
        assert time.monotonic() < deadline and process.poll() is None, "it never started"
        time.sleep(0.05)
    return process


def test_a_function_run_as_pid_1_ends_on_sigterm_after_its_finally_blocks(tmp_path, monkeypatch):
    (tmp_path / "napping_module.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("napping_module")
    directory = place_locally(ship(module.naps, {"seconds": 600}, by_kind("PyTorchJob")), tmp_path / "placed")
    started = tmp_path / "started"
    # the runner as PID 1 once the shell has written its pid (1) and exec'd it
    process = as_pid_1(["sh", "-c", f'echo $$ > {started}; exec "$0" "$1"', sys.executable,
                        str(directory / RUNNER_FILE)],
                       lambda: started.exists() and started.read_text().strip() == "1")
    try:
        children = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split()
        deadline = time.monotonic() + 30
        # SIGTERM until it ends: the first may land before the runner set its handler (then, as PID 1, ignored)
        while process.poll() is None and time.monotonic() < deadline:
            os.kill(int(children[0]), signal.SIGTERM)
            try:
                process.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        assert process.poll() is not None, "a SIGTERM'd runner that is PID 1 went on napping"
        output = process.stdout.read()
        assert process.returncode == 128 + signal.SIGTERM and "finally ran" in output, (process.returncode, output)
    finally:
        process.kill()


def test_elsewhere_sigterm_keeps_its_default():
    from trainctl.functions import runner

    before = signal.getsignal(signal.SIGTERM)
    runner.end_on_sigterm()  # this test process is no PID 1
    assert signal.getsignal(signal.SIGTERM) is before
