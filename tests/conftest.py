"""Shared fixtures: run the real CLI in a subprocess against a private local state directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest_plugins = ["tests.cluster.fixtures", "tests.tiers"]


def _signals_as_in_a_terminal() -> None:
    """Ctrl-C and a closed terminal reach the commands the tests start, as they reach a user's: a suite started in
    the background (``cmd &`` ignores SIGINT) or under ``nohup`` (SIGHUP) would otherwise hand the ignoring on to
    every process it starts, and the tests of what Ctrl-C and SIGHUP do would test nothing but that."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


_signals_as_in_a_terminal()

REPO = Path(__file__).resolve().parent.parent
UPSTREAM = REPO.parent / "shared" / "kubeflow-v1"


class OutputLines:
    """The lines a long-running command (``list -w``, ``logs -f``) prints, collected as they come."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.lines: list[str] = []
        threading.Thread(target=lambda: self.lines.extend(iter(process.stdout.readline, "")), daemon=True).start()

    def wait_for(self, text: str, timeout: float = 60) -> str:
        """The first line holding ``text``, once it is printed."""
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            assert time.monotonic() < deadline, self.lines
            time.sleep(0.2)
        return next(line for line in self.lines if text in line)


class CLI:
    """``trainctl`` as a user runs it: a new process, local backend, its own TRAINCTL_HOME."""

    def __init__(self, home: Path, cwd: Path) -> None:
        self.home, self.cwd = home, cwd
        bin_dir = str(Path(sys.executable).parent)
        self.env = {**os.environ, "TRAINCTL_HOME": str(home), "TRAINCTL_BACKEND": "local",
                    "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "COLUMNS": "200",
                    "PYTHONPATH": str(REPO)}
        self.env.pop("KUBECONFIG", None)

    def __call__(self, *args: str, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "trainctl", *args], cwd=self.cwd, env=self.env, input=input,
                              capture_output=True, text=True, timeout=timeout)

    def without_gpus(self) -> None:
        """Run as on a machine without GPUs: no $CUDA_VISIBLE_DEVICES and no nvidia-smi on PATH (the local
        backend's two ways of finding them)."""
        self.env.pop("CUDA_VISIBLE_DEVICES", None)
        self.env["PATH"] = os.pathsep.join(directory for directory in self.env["PATH"].split(os.pathsep)
                                           if not (Path(directory) / "nvidia-smi").exists())

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "trainctl", *args], cwd=self.cwd, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture
def cli(tmp_path: Path) -> CLI:
    return CLI(tmp_path / "home", tmp_path)


@pytest.fixture
def upstream() -> Path:
    if not UPSTREAM.is_dir():
        pytest.skip(f"the upstream reference data is not beside the clone ({UPSTREAM})")
    return UPSTREAM
