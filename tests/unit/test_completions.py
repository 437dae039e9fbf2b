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
    env = {**os.environ, "_TRAINCTL_COMPLETE": "complete_bash", "COMP_WORDS": "trainctl submit pytorch --worke",
           "COMP_CWORD": "3"}
    result = subprocess.run([sys.executable, "-m", "trainctl"], env=env, capture_output=True, text=True)
    assert result.stdout.split() == ["--workers"]


def complete(cli, shell, line):
    """Ask the real completion protocol of ``shell`` what completes the end of ``line``."""
    env = {**cli.env, "_TRAINCTL_COMPLETE": f"complete_{shell}"}
    if shell == "bash":
        words = line.split()
        env.update(COMP_WORDS=line, COMP_CWORD=str(len(words) if line.endswith(" ") else len(words) - 1))
    else:
        env.update(_TYPER_COMPLETE_ARGS=line, _TYPER_COMPLETE_FISH_ACTION="get-args")
    result = subprocess.run([sys.executable, "-m", "trainctl"], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result.stdout


@pytest.fixture
def two_jobs(cli):
    script = ["--", "python", "-c", "import time; time.sleep(120)"]
    for args in (["pytorch", "--name", "alpha", "--workers", "3"], ["jax", "--name", "beta", "-n", "ns2"]):
        assert cli("submit", *args, *script).returncode == 0
    yield
    cli("delete", "alpha")
    cli("delete", "beta", "-n", "ns2")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_job_names_kinds_and_replicas_complete_in_every_shell(cli, two_jobs, shell):
    assert "alpha" in complete(cli, shell, "trainctl status ")
    assert "beta" not in complete(cli, shell, "trainctl logs ")  # another namespace
    assert "beta" in complete(cli, shell, "trainctl wait -n ns2 ")
    assert "alpha" in complete(cli, shell, "trainctl delete al")
    kinds = complete(cli, shell, "trainctl submit ")
    assert all(kind in kinds for kind in ("pytorch", "tensorflow", "xgboost", "mpi", "paddle", "jax"))
    replicas = complete(cli, shell, "trainctl logs alpha --replica ")
    assert all(replica in replicas for replica in ("master-0", "worker-0", "worker-1"))
    assert "master-0" not in complete(cli, shell, "trainctl logs alpha --replica w")


def test_an_unreachable_cluster_completes_nothing_quickly(cli, tmp_path):
    import time

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts: [{name: x, context: {cluster: x, "
                          "user: x}}]\nclusters: [{name: x, cluster: {server: 'https://10.255.255.1:6443'}}]\n"
                          "users: [{name: x, user: {token: t}}]\n")
    cli.env.pop("TRAINCTL_BACKEND")
    cli.env["KUBECONFIG"] = str(kubeconfig)
    started = time.monotonic()
    assert complete(cli, "bash", "trainctl status ").strip() == ""
    assert time.monotonic() - started < 20  # bounded by the completion deadline, not a TCP timeout
