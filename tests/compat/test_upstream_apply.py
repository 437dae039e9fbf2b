"""The Training Operator's own example YAML, applied unchanged on the local backend as a user would.

Each example is applied for real (not a dry run) from a directory that holds, at the same relative
path, a small script of ours in place of the program its image would supply. Those that need no
more reach Succeeded; those that cannot run as processes on this machine are refused before
anything is created, with the one-line reason asserted here. docs/compatibility.md has the table.
"""

from __future__ import annotations

import time

import pytest

# A stand-in for an image's training script: proves the replica got its kind's env, then exits 0.
ENV_PROBE = """import os, sys
print("env", *(f"{name}={os.environ.get(name)}" for name in sys.argv[1:]), flush=True)
"""
RUNS = {  # example file -> (job name, its namespace, the script its image would supply, the env it shows)
    "jax__cpu-demo__demo.yaml": ("jaxjob-simple", "kubeflow", "train.py", "COORDINATOR_ADDRESS"),
    "pytorch__elastic__echo__echo.yaml": ("elastic-example-echo", "default", "echo.py", "WORLD_SIZE"),
}
ENTRYPOINT_MISSING = "relies on its image's entrypoint, which the local backend cannot run"
REFUSED = {  # example file -> what trainctl says (one line, exit 2, nothing created)
    "pytorch__simple.yaml": "no file /opt/pytorch-mnist/mnist.py on this machine: an image may hold it",
    "tensorflow__simple.yaml": "no file /var/tf_mnist/mnist_with_summaries.py on this machine",
    "tensorflow__distribution_strategy__multi_worker_tfjob.yaml": f"names no command and {ENTRYPOINT_MISSING}",
    "xgboost__lightgbm-dist__xgboostjob_v1_lightgbm_dist_training.yaml":
        f"names only args (--job_type=Train --boosting_type=gbdt ...) and {ENTRYPOINT_MISSING}",
    "mpi__tensorflow-mnist.yaml": "Open MPI 5.0.11, which reads -bind-to -map-by as the program to run",
}
PADDLE = "paddlepaddle__simple-cpu.yaml"  # runs; paddle's own run_check then fails on CPU (see below)


def examples(upstream):
    return sorted(path.name for path in (upstream / "examples").glob("*.yaml"))


def test_every_upstream_example_has_an_expected_outcome(upstream):
    assert set(examples(upstream)) == {*RUNS, *REFUSED, PADDLE}


def wait_state(cli, name: str, namespace: str, timeout: float = 120) -> str:
    result = cli("wait", name, "-n", namespace, "--timeout", f"{timeout:g}s", timeout=timeout + 30)
    return result.stderr


@pytest.mark.parametrize("example", sorted(RUNS))
def test_an_example_that_needs_only_its_script_succeeds(cli, upstream, example):
    name, namespace, script, variable = RUNS[example]
    (cli.cwd / script).write_text(ENV_PROBE.replace("sys.argv[1:]", repr([variable])))
    applied = cli("apply", "-f", str(upstream / "examples" / example))
    assert applied.returncode == 0, applied.stderr
    assert f"in namespace {namespace}" in applied.stdout
    if namespace != "default":  # the next command a user types finds it
        assert f"trainctl status {name} -n {namespace}" in applied.stdout
        lost = cli("status", name)
        assert lost.returncode == 2 and f'there is one in namespace "{namespace}": add -n {namespace}' in lost.stderr
    waited = wait_state(cli, name, namespace)
    assert f"{name}: Succeeded" in waited, waited
    logs = cli("logs", name, "-n", namespace).stdout
    assert f"env {variable}=" in logs and f"env {variable}=None" not in logs, logs


@pytest.mark.parametrize("example", sorted(REFUSED))
def test_an_example_that_cannot_run_as_local_processes_is_refused_in_one_line(cli, upstream, example):
    for dry_run in (["--dry-run"], []):  # the dry run makes the real apply's checks
        result = cli("apply", "-f", str(upstream / "examples" / example), *dry_run)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.count("\n") == 1 and REFUSED[example] in result.stderr, result.stderr
    listing = cli("list", "-A")
    assert "no jobs" in listing.stdout + listing.stderr


def test_apply_entrypoint_supplies_what_the_image_would_have_run(cli, upstream):
    """The XGBoost example's args follow the command --entrypoint gives, on every replica."""
    (cli.cwd / "dist_train.py").write_text("import sys; print('args', sys.argv[1], sys.argv[-1], flush=True)\n")
    example = upstream / "examples" / "xgboost__lightgbm-dist__xgboostjob_v1_lightgbm_dist_training.yaml"
    applied = cli("apply", "-f", str(example), "--entrypoint", "python dist_train.py")
    assert applied.returncode == 0, applied.stderr
    assert "lightgbm-dist-train-test: Succeeded" in wait_state(cli, "lightgbm-dist-train-test", "default")
    lines = cli("logs", "lightgbm-dist-train-test").stdout.splitlines()
    assert sorted(line.split(" |")[0].strip() for line in lines if "args --job_type=Train" in line) == \
        ["master-0", "worker-0", "worker-1"]


def test_paddles_run_check_example_gets_paddles_env_and_runs(cli, upstream):
    """Unchanged, it starts `python -m paddle.distributed.launch run_check`, whose collective initializes
    across both workers from the PADDLE_* env trainctl gives; paddle 3.3.1's own run_check then fails
    on a CPU-only machine (fleet.init's hybrid groups), so the job restarts, without a backoffLimit,
    for as long as it fails, which `wait` says once."""
    applied = cli("apply", "-f", str(upstream / "examples" / PADDLE))
    assert applied.returncode == 0, applied.stderr
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            logs = cli("logs", "paddle-simple-cpu", "-n", "kubeflow", "--previous").stdout
            if all(f"rank={rank}, size=2" in logs for rank in (0, 1)):
                break
            time.sleep(2)
        else:
            pytest.fail(f"paddle's collective never initialized on both workers:\n{logs[-3000:]}")
        waited = cli("wait", "paddle-simple-cpu", "-n", "kubeflow", "--timeout", "8s")
        assert "has no backoffLimit, so it restarts for as long as it fails" in waited.stderr, waited.stderr
    finally:
        cli("delete", "paddle-simple-cpu", "-n", "kubeflow")
