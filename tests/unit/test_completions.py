"""completions/ holds what `trainctl completion SHELL` prints, and completion really completes."""

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_generated_script_is_current(shell):
    result = subprocess.run([sys.executable, "-m", "trainctl", "completion", shell], capture_output=True, text=True)
    assert result.returncode == 0
    committed = (REPO / "completions" / f"trainctl.{shell}").read_text()
    assert result.stdout == committed, f"regenerate: trainctl completion {shell} > completions/trainctl.{shell}"


def test_bash_completion_completes_commands_and_options():
    env = {**os.environ, "_TRAINCTL_COMPLETE": "complete_bash", "COMP_WORDS": "trainctl submit pytorch --wor",
           "COMP_CWORD": "3"}
    result = subprocess.run([sys.executable, "-m", "trainctl"], env=env, capture_output=True, text=True)
    assert result.stdout.split() == ["--workers"]
