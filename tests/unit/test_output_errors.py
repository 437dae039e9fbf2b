"""A command whose own output cannot be written (``trainctl list > /dev/full``) says so in one line and exits 1:
no traceback, whichever path ran it (cli/fast.py's or Typer's)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

FULL = Path("/dev/full")


@pytest.mark.skipif(not FULL.exists(), reason="no /dev/full on this machine")
@pytest.mark.parametrize("command", [["list"], ["list", "-o", "json"], ["--help"], ["templates", "list"],
                                     ["submit", "pytorch", "--dry-run", "--", "python", "train.py"]],
                         ids=["list (fast path)", "list -o json", "help", "templates list", "submit --dry-run"])
def test_a_full_disk_under_the_output_is_one_line_and_exit_1(tmp_path, command):
    (tmp_path / "train.py").write_text("print('hello')\n")
    env = {**os.environ, "TRAINCTL_HOME": str(tmp_path / "home"), "TRAINCTL_BACKEND": "local",
           "PYTHONPATH": str(REPO)}
    env.pop("KUBECONFIG", None)
    with FULL.open("w") as full:
        result = subprocess.run([sys.executable, "-m", "trainctl", *command], cwd=tmp_path, env=env, stdout=full,
                                stderr=subprocess.PIPE, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines() == ["error: could not write the output: No space left on device (errno 28)"], \
        result.stderr
